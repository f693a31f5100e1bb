"""The joint log predictive density (zonal.sampling.metrics; seed 004 eqs. 3.6, 3.9-3.11): exact
for a single-layer model (against torch's own multivariate normal density of the model's noisy
posterior); the Monte Carlo average over drawn paths converges to it (tolerance from the draws'
own spread); for a deep model, at one test point it is the model's per-point density
(``log_predictive_density``, a mixture over marginal samples), and without hidden layers it is
exact."""

from __future__ import annotations

import math

import pytest
import torch
from gpytorch.kernels import ScaleKernel

from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import ArcCosineKernel
from zonal.models import DGP, SVGP, fit_dgp, inducing_point_dgp
from zonal.sampling import draw_posterior_paths
from zonal.sampling.metrics import joint_log_predictive_density
from zonal.tabular.recipes import gaussian_likelihood


def data(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(count, 2, generator=generator, dtype=torch.float64) * 2 - 1
    return x, torch.sin(3 * x[:, 0]) + 0.5 * torch.cos(2 * x[:, 1])


def svgp(num_outputs: int = 1) -> SVGP:
    x, y = data(60, seed=0)
    kernel = ScaleKernel(ArcCosineKernel(3, homogeneous=True)).double()
    model = SVGP(kernel, SphericalHarmonicFeatures(3, 6, kernel=kernel), 2, num_outputs=num_outputs)
    if num_outputs == 1:
        model.set_optimal_variational_distribution(x, y)
    return model


def test_single_layer_density_is_the_gaussian_density_of_the_noisy_posterior():
    model = svgp()
    x, y = data(8, seed=1)
    with torch.no_grad():
        posterior = model.posterior(x, observation_noise=True)
        reference = torch.distributions.MultivariateNormal(
            posterior.mean.squeeze(-1), posterior.distribution.covariance_matrix
        ).log_prob(y)
    torch.testing.assert_close(joint_log_predictive_density(model, x, y), reference)


def test_two_output_density_sums_the_independent_outputs():
    model = svgp(num_outputs=2)
    x, y = data(5, seed=1)
    targets = torch.stack([y, -y], -1)  # [N, 2]
    expected = sum(
        torch.distributions.MultivariateNormal(
            posterior.mean.squeeze(-1), posterior.distribution.covariance_matrix
        ).log_prob(targets[:, index])
        for index, posterior in (
            (i, model.posterior(x, output_indices=[i], observation_noise=True)) for i in range(2)
        )
    )
    torch.testing.assert_close(
        joint_log_predictive_density(model, x, targets), expected.detach(), atol=1e-9, rtol=0
    )


def test_the_average_over_drawn_paths_converges_to_the_exact_density():
    """log (1/S) sum_s prod_i N(y_i | f_s(x_i), s^2) against log N(y | m, C + s^2 I); the
    tolerance is 5 delta-method standard errors of the log of a mean, from the draws themselves."""
    torch.manual_seed(0)
    model = svgp()
    x, y = data(3, seed=2)
    noise = float(model.likelihood.noise.detach())
    paths = draw_posterior_paths(model, torch.Size([20000]))
    estimate = joint_log_predictive_density(paths, x, y, noise=noise)
    exact = joint_log_predictive_density(model, x, y)
    with torch.no_grad():
        values = paths(x)
    likelihoods = torch.distributions.Normal(values, math.sqrt(noise)).log_prob(y).sum(-1).exp()
    standard_error = likelihoods.std() / (likelihoods.mean() * math.sqrt(len(likelihoods)))
    assert abs(float(estimate - exact)) <= 5 * float(standard_error)


def deep_model(widths: list[int]) -> DGP:
    torch.manual_seed(0)
    x, y = data(60, seed=0)
    model = inducing_point_dgp(x, widths, gaussian_likelihood(0.05), num_inducing=8)
    fit_dgp(model, x, y, num_steps=10, lr=0.02, batch_size=len(x))
    return model


def assert_joint_matches_per_point(model, x, y, samples: int, repeats: int = 8) -> None:
    """``repeats`` pathwise estimates (eq. 3.11) and as many marginal-sample mixture estimates
    of the density at one point agree within five standard errors of the difference of their
    means (each group's own spread; a spread pooled over both groups would hold their gap too)."""
    estimates = torch.stack(
        [joint_log_predictive_density(model, x, y, num_samples=samples) for _ in range(repeats)]
    )  # [R]
    model.num_posterior_samples = samples
    references = []
    for seed in range(repeats):
        model.posterior_seed = seed
        references.append(model.log_predictive_density(x, y))
    references = torch.cat(references)  # [R]
    error = (estimates.var() / repeats + references.var() / repeats).sqrt()
    assert abs(float(estimates.mean() - references.mean())) <= 5 * float(error) + 1e-4


def test_deep_density_at_one_point_is_the_per_point_mixture_density():
    """With one test point, joint and per-point densities coincide: the pathwise estimate (eq.
    3.11) and the model's marginal-sample mixture estimate agree within their Monte Carlo error."""
    assert_joint_matches_per_point(deep_model([2, 2, 1]), *data(1, seed=3), samples=4000)


def test_deep_density_without_hidden_layers_is_exact():
    model = deep_model([2, 1])
    x, y = data(6, seed=4)
    layer = model.layers[0]
    with torch.no_grad():
        output = model.likelihood(layer(x, are_samples=True))
        reference = torch.distributions.MultivariateNormal(
            output.mean, output.covariance_matrix
        ).log_prob(y)
    torch.testing.assert_close(joint_log_predictive_density(model, x, y), reference)


def test_misuse_is_a_named_error():
    model = svgp()
    x, y = data(4, seed=5)
    paths = draw_posterior_paths(model, torch.Size([3]))
    with pytest.raises(ValueError, match="observation noise"):
        joint_log_predictive_density(paths, x, y)
    with pytest.raises(ValueError, match="for paths only"):
        joint_log_predictive_density(model, x, y, noise=0.1)
    with pytest.raises(ValueError, match="for targets"):
        joint_log_predictive_density(paths, x, y[:3], noise=0.1)


def residual_model(num_hidden: int):
    from zonal.models import residual_dgp

    x, y = data(40, seed=5)
    model = residual_dgp(
        2, num_hidden, 9, likelihood=gaussian_likelihood(0.05), hidden_variance=0.3
    )
    fit_dgp(model, x, y, num_steps=10, lr=0.02, batch_size=len(x))
    return model


def test_residual_dgp_density_at_one_point_is_its_per_point_mixture_density():
    """Hidden vector fields drawn as paths, moved by the exponential map: at one test point the
    joint estimate and the model's per-point mixture density agree within Monte Carlo error."""
    assert_joint_matches_per_point(residual_model(1), *data(1, seed=6), samples=3000)


def test_residual_dgp_density_without_fields_is_the_exact_gaussian_density():
    """No hidden field: every mixture component is the same Gaussian, and the density is exact."""
    model = residual_model(0)
    x, y = data(6, seed=7)
    with torch.no_grad():
        output = model.posterior(x, observation_noise=True).distribution  # batch [S], event [N]
        reference = torch.distributions.MultivariateNormal(
            output.mean[0], output.covariance_matrix[0]
        ).log_prob(y)
    torch.testing.assert_close(joint_log_predictive_density(model, x, y), reference)
