"""Residual deep GPs on the sphere (seed 004 eq. 3.3) and the eq. 3.5 baseline: a hidden layer of
zero variance leaves the shallow GP (predictions and ELBO), an embedded model without hidden layers
is the homogeneous SVGP, hidden points stay on the sphere, the posterior is the Monte Carlo mixture
of the model contract, bad inputs raise named errors, and k-means does what it says."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from botorch.posteriors.fully_bayesian import GaussianMixturePosterior

from zonal.features import InducingPoints, SphericalHarmonicFeatures
from zonal.geometry import OnSphere, SphereEmbedding
from zonal.models import SVGP, fit_dgp
from zonal.models.dgp import DGPLayer
from zonal.models.kmeans import kmeans, within_cluster_sum_of_squares
from zonal.models.residual_dgp import ResidualDGP, hybrid_dgp, residual_dgp
from zonal.models.vector_field import ProjectedVectorField, sphere_kernel


def unit_vectors(count: int, ambient_dim: int = 3, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def target(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(3 * x[..., 0]) + x[..., 1] ** 2


def random_q(strategy, seed: int) -> None:
    """A random whitened q(u) = N(m, R R^T) (one per batch member)."""
    generator = torch.Generator().manual_seed(seed)
    batch = strategy._variational_distribution.batch_shape
    size = strategy.features.num_inducing
    mean = torch.randn(*batch, size, generator=generator, dtype=torch.float64)
    root = 0.3 * torch.randn(*batch, size, size, generator=generator, dtype=torch.float64)
    covariance = root @ root.mT + 0.1 * torch.eye(size, dtype=torch.float64)
    strategy.set_variational(mean, covariance, whitened=True)


def gaussian_likelihood(noise: float = 0.05):
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = noise
    return likelihood


def test_a_hidden_layer_of_zero_variance_leaves_the_shallow_gp():
    """A vector field with kernel variance 1e-30 and q(u) at the prior (so v = 0 to 1e-15 and
    KL = 0) composed with exp is the identity: the residual DGP's predictions and ELBO are those
    of the shallow SVGP on the sphere with the same output layer (1e-8). (GPyTorch floors
    variances at ``min_variance``, 1e-10 by default, lowered here so that 1e-30 is kept.)"""
    with gpytorch.settings.min_variance(double_value=1e-60):
        compare_with_the_shallow_gp()


def compare_with_the_shallow_gp() -> None:
    points = unit_vectors(15, seed=3)
    kernel = sphere_kernel(3, 2.5, lengthscale=0.8)
    features = InducingPoints(points, learn_points=False)
    field = ProjectedVectorField(
        3, InducingPoints(points, learn_points=False), sphere_kernel(3, outputscale=1e-30)
    )
    field.variational_strategy.set_variational_scale(1.0, zero_mean=True)
    output = DGPLayer(kernel, features, 3, None, input_map=OnSphere())
    likelihood = gaussian_likelihood()
    model = ResidualDGP([field], output, likelihood, input_map=OnSphere())
    shallow = SVGP(kernel, features, 3, likelihood=likelihood, input_map=OnSphere())
    random_q(output.variational_strategy, seed=4)
    random_q(shallow.variational_strategy, seed=4)

    x = unit_vectors(30, seed=1)
    y = target(x)
    deep_elbo = gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(y))
    )
    shallow_elbo = gpytorch.mlls.VariationalELBO(likelihood, shallow, num_data=len(y))
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(3):
        assert float(field.variational_strategy.kl_divergence().sum()) == pytest.approx(
            0, abs=1e-10
        )
        assert abs(float(deep_elbo(model(x), y)) - float(shallow_elbo(shallow(x), y))) < 1e-8
    mean, variance = model.predict(x)
    shallow.eval()
    with torch.no_grad():
        reference = shallow(x)
    assert (mean - reference.mean).abs().max() < 1e-8
    assert (variance - reference.variance).abs().max() < 1e-8
    density = model.log_predictive_density(x, y)
    assert (density - shallow.log_predictive_density(x, y)).abs().max() < 1e-8


@pytest.mark.parametrize("harmonic", [False, True])
def test_an_embedded_model_without_hidden_layers_is_the_homogeneous_svgp(harmonic):
    """With ``SphereEmbedding`` the output N(m, C) of g on the sphere is carried to the data as
    N(r m, diag(r) C diag(r)): the model is zonal's SVGP with the 1-homogeneous kernel."""
    if harmonic:
        features = SphericalHarmonicFeatures(3, 3)
    else:
        features = InducingPoints(unit_vectors(12, seed=2), learn_points=False)
    sphere = sphere_kernel(3, 1.5, lengthscale=0.6, outputscale=1.7)
    homogeneous = sphere_kernel(3, 1.5, lengthscale=0.6, outputscale=1.7, homogeneous=True)
    output = DGPLayer(sphere, features, 3, None, input_map=OnSphere())
    model = ResidualDGP([], output, gaussian_likelihood(), input_map=SphereEmbedding(0.8))
    svgp = SVGP(homogeneous, features, 2, input_map=SphereEmbedding(0.8))
    random_q(output.variational_strategy, seed=5)
    random_q(svgp.variational_strategy, seed=5)
    x = 2 * torch.randn(9, 2, dtype=torch.float64)
    with torch.no_grad():
        mixture = model.posterior(x).distribution  # batch [S], identical components
        svgp.eval()
        reference = svgp(x)
    assert (mixture.mean - reference.mean).abs().max() < 1e-10
    assert (mixture.covariance_matrix - reference.covariance_matrix).abs().max() < 1e-10


def test_every_output_of_an_embedded_multi_output_model_is_scaled_by_the_radius():
    """With ``SphereEmbedding(b)``, each output of a two-output g is carried to the data as
    (r m, r^2 v): the embedded model's mixture moments at x are r (and r^2) times those of the
    same layers, on the sphere, at z = [x, b] / r (the same posterior draws)."""
    field = ProjectedVectorField(
        3,
        InducingPoints(unit_vectors(8, seed=3), learn_points=False),
        sphere_kernel(3, outputscale=0.3),
    )
    features = InducingPoints(unit_vectors(10, seed=2), learn_points=False)
    output = DGPLayer(sphere_kernel(3), features, 3, 2, input_map=OnSphere())
    random_q(field.variational_strategy, seed=6)
    random_q(output.variational_strategy, seed=7)
    likelihood = gpytorch.likelihoods.MultitaskGaussianLikelihood(num_tasks=2).double()
    embedded = ResidualDGP([field], output, likelihood, input_map=SphereEmbedding(0.7))
    on_sphere = ResidualDGP([field], output, likelihood, input_map=OnSphere())
    x = 2 * torch.randn(6, 2, dtype=torch.float64)
    z, radius = SphereEmbedding(0.7)(x)
    mean, variance = embedded.predict(x)  # [6, 2]
    sphere_mean, sphere_variance = on_sphere.predict(z)
    assert mean.shape == (6, 2)
    assert (mean - radius.unsqueeze(-1) * sphere_mean).abs().max() < 1e-12
    assert (variance - radius.unsqueeze(-1) ** 2 * sphere_variance).abs().max() < 1e-12
    with torch.no_grad():
        composed = embedded.posterior_mean(x)
        assert (composed - radius.unsqueeze(-1) * on_sphere.posterior_mean(z)).abs().max() < 1e-12
    y = torch.randn(6, 2, dtype=torch.float64)
    assert embedded.log_predictive_density(x, y).shape == (6,)


@pytest.mark.parametrize("construction", ["projected", "frame"])
def test_hidden_points_stay_on_the_sphere(construction):
    """Points moved through three random vector fields by exp lie on the sphere to 1e-12."""
    model = residual_dgp(
        3,
        3,
        unit_vectors(10, seed=6),
        input_map=OnSphere(),
        construction=construction,
        hidden_variance=3.0,
    )
    for index, field in enumerate(model.fields):
        random_q(field.variational_strategy, seed=10 + index)
    z = unit_vectors(50, seed=7).expand(4, 50, 3)
    with torch.no_grad():
        h = model.hidden_points(z, lambda shape: torch.randn(shape, dtype=torch.float64))
    assert (h - z).norm(dim=-1).max() > 0.1  # the fields moved the points
    assert (h.norm(dim=-1) - 1).abs().max() < 1e-12


def fitted_model() -> tuple[ResidualDGP, torch.Tensor, torch.Tensor]:
    x = unit_vectors(60, seed=8)
    y = target(x)
    model = residual_dgp(3, 2, unit_vectors(12, seed=9), input_map=OnSphere())
    model.likelihood.noise = 0.05
    for index, field in enumerate(model.fields):
        random_q(field.variational_strategy, seed=20 + index)
    losses = fit_dgp(model, x, y, num_steps=25, lr=0.03, batch_size=60, num_samples=2)
    assert losses[-1] < losses[0]
    model.num_posterior_samples = 8
    return model, x, y


def test_the_posterior_is_the_mixture_of_the_model_contract():
    """``posterior`` is a Gaussian mixture over S samples [*b, S, q]; ``predict`` gives the mixture
    moments (mean of means; mean of v_s + mu_s^2 less the squared mean) and
    ``log_predictive_density`` the log-mean-exp of N(y | mu_s, v_s + noise); a t-batch gives the
    posterior of each batch member alone."""
    model, x, y = fitted_model()
    posterior = model.posterior(x[:5])
    assert isinstance(posterior, GaussianMixturePosterior)
    assert posterior.distribution.mean.shape == (8, 5)
    with torch.no_grad():
        components = model.latent_distribution(x)  # batch [S], event [N]
    means, variances = components.mean, components.variance  # [S, N]
    assert means.std(0).max() > 1e-4  # the hidden fields really spread the components
    mean, variance = model.predict(x)
    assert (mean - means.mean(0)).abs().max() < 1e-12
    expected_variance = (variances + means**2).mean(0) - means.mean(0) ** 2
    assert (variance - expected_variance).abs().max() < 1e-12
    total = variances + float(model.likelihood.noise.detach())
    per_sample = -0.5 * (torch.log(2 * math.pi * total) + (y - means) ** 2 / total)
    expected_density = torch.logsumexp(per_sample, 0) - math.log(8)
    assert (model.log_predictive_density(x, y) - expected_density).abs().max() < 1e-10
    batched = model.posterior(x[:6].reshape(2, 3, 3)).distribution.mean  # [2, S, 3]
    for index in range(2):
        alone = model.posterior(x[3 * index : 3 * index + 3]).distribution.mean  # [S, 3]
        assert (batched[index] - alone).abs().max() < 1e-12


def test_bad_inputs_raise_named_errors():
    """Points off the sphere, a wrong ambient dimension, a hidden layer that is not a vector
    field and an output layer not on the sphere are refused with a message naming them."""
    model = residual_dgp(3, 1, unit_vectors(8), input_map=OnSphere())
    with pytest.raises(ValueError, match="unit vectors"):
        model.predict(2 * unit_vectors(4))
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        model.predict(unit_vectors(4, ambient_dim=4))
    embedded = residual_dgp(2, 1, 9)
    with pytest.raises(ValueError, match=r"\[N, 2\]"):
        embedded.predict(torch.zeros(4, 3, dtype=torch.float64))
    output = model.output_layer
    field_on_s3 = ProjectedVectorField(4, InducingPoints(unit_vectors(5, 4), learn_points=False))
    with pytest.raises(ValueError, match="outputs 4 dimensions but layer 1 expects 3"):
        ResidualDGP([field_on_s3], output)
    with pytest.raises(ValueError, match="GaussianVectorField"):
        ResidualDGP([output], output)
    euclidean = DGPLayer(
        sphere_kernel(3, homogeneous=True), SphericalHarmonicFeatures(3, 2), 2, None
    )
    with pytest.raises(ValueError, match="OnSphere"):
        ResidualDGP([], euclidean)


def test_kmeans_recovers_separated_clusters_exactly_in_one_dimension():
    """Two clumps {0, 1, 2} and {10, 11, 12}: the centres are their means, 1 and 11."""
    x = torch.tensor([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0]], dtype=torch.float64)
    centres = kmeans(x, 2, generator=torch.Generator().manual_seed(3))
    assert sorted(centres.squeeze(-1).tolist()) == [1.0, 11.0]


def test_kmeans_lowers_the_within_cluster_sum_of_squares_and_is_a_lloyd_fixed_point():
    """The centres beat K random data points on the within-cluster sum of squares, and each is
    the mean of the points nearest to it (a fixed point of Lloyd's step)."""
    x = unit_vectors(300, seed=12)
    generator = torch.Generator().manual_seed(1)
    centres = kmeans(x, 20, generator=generator)
    random_points = x[torch.randperm(300, generator=torch.Generator().manual_seed(2))[:20]]
    assert within_cluster_sum_of_squares(x, centres) < within_cluster_sum_of_squares(
        x, random_points
    )
    assignment = torch.cdist(x, centres).argmin(-1)
    for k in range(20):
        assert (x[assignment == k].mean(0) - centres[k]).abs().max() < 1e-12
    with pytest.raises(ValueError, match="num_clusters"):
        kmeans(x[:5], 6)


def test_the_baseline_starts_at_kmeans_centres_and_trains():
    """The eq. 3.5 baseline: a GP on the sphere (inducing points at the k-means centres projected
    onto the sphere) and Euclidean layers (at the centres themselves); fit_dgp lowers its loss."""
    x = unit_vectors(80, seed=13)
    y = target(x)
    model = hybrid_dgp(x, 2, num_inducing=10, generator=torch.Generator().manual_seed(4))
    assert len(model.layers) == 3
    centres = kmeans(x, 10, generator=torch.Generator().manual_seed(4))
    first = model.layers[0].features.points.detach()
    assert (first - centres / centres.norm(dim=-1, keepdim=True)).abs().max() < 1e-15
    assert (model.layers[1].features.points.detach() - centres).abs().max() < 1e-15
    losses = fit_dgp(model, x, y, num_steps=20, lr=0.03, batch_size=80, num_samples=2)
    assert losses[-1] < losses[0]
    with pytest.raises(ValueError, match="unit vectors"):
        hybrid_dgp(2 * x, 2, num_inducing=10)


def test_the_baseline_can_keep_its_inducing_locations_fixed():
    """learn_inducing=False: training moves the learned baseline's inducing locations but leaves
    every layer's at its k-means start (they are buffers, not parameters)."""
    x = unit_vectors(80, seed=13)
    y = target(x)
    learned, fixed = (
        hybrid_dgp(
            x, 2, num_inducing=10, generator=torch.Generator().manual_seed(4), learn_inducing=learn
        )
        for learn in (True, False)
    )
    starts = [layer.features.points.detach().clone() for layer in fixed.layers]
    assert not any(name.endswith("features.points") for name, _ in fixed.named_parameters())
    for model in (learned, fixed):
        fit_dgp(model, x, y, num_steps=20, lr=0.03, batch_size=80, num_samples=2)
    for layer, start in zip(fixed.layers, starts, strict=True):
        assert torch.equal(layer.features.points, start)
    assert (learned.layers[1].features.points.detach() - starts[1]).abs().max() > 1e-4
