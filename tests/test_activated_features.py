"""Activated features: truncated activations (seed 000 fig. 3), likelihoods, ELBO growth in M."""

import gpytorch
import pytest
import torch

from zonal.features import ActivatedFeatures, activation_coefficients
from zonal.features.activated import relu_activation, softplus_activation
from zonal.harmonics import quadrature_rule, zonal_harmonic
from zonal.kernels import ArcCosineKernel, PolynomialDecayKernel
from zonal.models import SVGP, check_targets, fit_svgp

ACTIVATIONS = {"relu": relu_activation, "softplus": softplus_activation}


@pytest.mark.parametrize("activation", ["relu", "softplus"])
@pytest.mark.parametrize("ambient_dim", [3, 5, 15])
@pytest.mark.parametrize("truncation_level", [10, 25])
def test_kuf_is_the_truncated_activation(activation, ambient_dim, truncation_level):
    # A kernel with every eigenvalue non-zero keeps every level: Kuf = sum_n sigma_n Z_n(w . x).
    kernel = PolynomialDecayKernel(ambient_dim, max_degree=truncation_level, beta=1.0)
    features = ActivatedFeatures(
        ambient_dim, 4, activation=activation, truncation_level=truncation_level
    )
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(30, ambient_dim, dtype=torch.float64, generator=generator)
    x = x / x.norm(dim=-1, keepdim=True)
    cosines = features.weights @ x.T  # [4, 30]
    stacked = zonal_harmonic(cosines, truncation_level, ambient_dim)  # [4, 30, N~ + 1]
    expected = stacked @ features.coefficients
    assert (features.kuf(kernel, x) - expected).abs().max() < 1e-10 * expected.abs().max()


@pytest.mark.parametrize("activation", ["relu", "softplus"])
@pytest.mark.parametrize("ambient_dim", [3, 5, 15])
def test_truncated_activation_converges_to_the_activation(activation, ambient_dim):
    """The L2(S^{d-1}) error sum_{n > N~} sigma_n^2 N_n^d decreases to 0 as N~ grows (and, in
    low dimension, the sup-norm error too; in high dimension the series converges only in L2)."""
    nodes, weights = quadrature_rule(ambient_dim, 400, kinks=(0.0,))
    t = torch.from_numpy(nodes)
    w = torch.from_numpy(weights)
    w = w / w.sum()
    errors = []
    for level in [10, 25, 50]:
        coefficients = activation_coefficients(activation, ambient_dim, level)
        approximation = zonal_harmonic(t, level, ambient_dim) @ coefficients
        errors.append(float((w * (approximation - ACTIVATIONS[activation](t)) ** 2).sum().sqrt()))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.05 * ACTIVATIONS[activation](t).abs().max()


def test_softplus_is_close_to_its_truncation_as_in_figure_3():
    t = torch.linspace(-1, 1, 501, dtype=torch.float64)
    for ambient_dim in [3, 5]:
        coefficients = activation_coefficients("softplus", ambient_dim, 10)
        approximation = zonal_harmonic(t, 10, ambient_dim) @ coefficients
        assert (approximation - softplus_activation(t)).abs().max() < 1e-3


def test_arccos_kernel_drops_odd_levels_from_the_activation():
    kernel = ArcCosineKernel(4)
    features = ActivatedFeatures(4, 3, activation="softplus", truncation_level=9)
    x = torch.nn.functional.normalize(torch.randn(5, 4, dtype=torch.float64), dim=-1)
    coefficients = features.coefficients.clone()
    coefficients[[3, 5, 7, 9]] = 0  # arc-cosine eigenvalues vanish there
    expected = zonal_harmonic(features.weights @ x.T, 9, 4) @ coefficients
    assert (features.kuf(kernel, x) - expected).abs().max() < 1e-10


def banana_like(num_points=120, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, 2, dtype=torch.float64, generator=generator)
    labels = (x[:, 1] > 0.5 * x[:, 0] ** 2 - 0.5).to(torch.float64)
    return x, labels


def test_nested_inducing_sets_give_the_same_elbo_and_training_raises_it():
    """Adding features with q(v_new) = N(0, I) (whitened) leaves q(f) and the ELBO unchanged
    (seed 000 fig. 4 monotonicity); optimising the larger model can only improve on it."""
    x, labels = banana_like()
    kernel = ArcCosineKernel(3, homogeneous=True)
    likelihood = gpytorch.likelihoods.BernoulliLikelihood()
    small = SVGP(kernel, ActivatedFeatures(3, 6, seed=1), 2, likelihood=likelihood)
    fit_svgp(small, x, labels, num_steps=60, lr=0.05)
    weights = torch.cat([small.features.weights.detach(), torch.randn(5, 3, dtype=torch.float64)])
    large = SVGP(kernel, ActivatedFeatures(3, 11, weights=weights), 2, likelihood=likelihood)
    small_q = small.variational_strategy._variational_distribution
    large_q = large.variational_strategy._variational_distribution
    with torch.no_grad():
        large_q.variational_mean.zero_()
        large_q.variational_mean[:6] = small_q.variational_mean
        large_q.chol_variational_covar.copy_(torch.eye(11, dtype=torch.float64))
        large_q.chol_variational_covar[:6, :6] = small_q.chol_variational_covar.tril()
    large.variational_strategy.variational_params_initialized.fill_(1)

    def elbo(model):
        objective = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(x))
        with torch.no_grad():
            return float(objective(model(x), labels))

    before = elbo(small)
    assert abs(elbo(large) - before) < 1e-8
    fit_svgp(large, x, labels, num_steps=40, lr=0.01)
    assert elbo(large) >= before - 1e-6


def test_categorical_likelihood_trains():
    x, labels = banana_like(90)
    classes = (labels + (x[:, 0] > 1).double()).long()  # three classes
    kernel = ArcCosineKernel(3, homogeneous=True)
    likelihood = gpytorch.likelihoods.SoftmaxLikelihood(num_features=3, num_classes=3).double()
    model = SVGP(kernel, ActivatedFeatures(3, 8), 2, num_outputs=3, likelihood=likelihood)
    losses = fit_svgp(model, x, classes, num_steps=30, lr=0.05)
    assert losses[-1] < losses[0]


def test_labels_are_checked_before_any_computation():
    bernoulli = gpytorch.likelihoods.BernoulliLikelihood()
    with pytest.raises(ValueError, match=r"\{0, 1\}"):
        check_targets(bernoulli, torch.tensor([0.0, 2.0]), 2)
    softmax = gpytorch.likelihoods.SoftmaxLikelihood(num_features=3, num_classes=3)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        check_targets(softmax, torch.tensor([0, 3]), 2)
    with pytest.raises(ValueError, match="integer"):
        check_targets(softmax, torch.tensor([0.5, 1.0]), 2)
    gaussian = gpytorch.likelihoods.GaussianLikelihood()
    with pytest.raises(ValueError, match="row 1"):
        check_targets(gaussian, torch.tensor([0.0, float("nan")]), 2)
    with pytest.raises(ValueError, match="3 rows"):
        check_targets(gaussian, torch.zeros(2), 3)
    with pytest.raises(ValueError, match="unknown activation"):
        ActivatedFeatures(3, 4, activation="tanhh")
    with pytest.raises(ValueError, match=r"\[4, 3\]"):
        ActivatedFeatures(3, 4, weights=torch.ones(4, 2))
