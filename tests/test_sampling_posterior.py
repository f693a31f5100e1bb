"""Pathwise posterior draws (Matheron's rule, seed 004 eqs. 2.18-2.19; zonal.sampling.paths): the
empirical mean and covariance of S draws at a few points match the model's own posterior q(f)
(``model.posterior``, computed by the variational strategy or SGPR's statistics, not by paths)
within 5 Monte Carlo standard errors, plus the bound on the prior truncation (missing variance
times r_i r_j). A draw is a function: its value at a point does not depend on the batch."""

from __future__ import annotations

import math

import pytest
import torch
from gpytorch.kernels import ScaleKernel
from gpytorch.means import ConstantMean

from zonal.features import (
    ActivatedFeatures,
    InducingPoints,
    SparseSphericalHarmonicFeatures,
    SphericalHarmonicFeatures,
)
from zonal.geometry import OnSphere
from zonal.kernels import ArcCosineKernel, ChordalMaternKernel
from zonal.models import SGPR, SVGP, ExactZonalGP, fit_dgp, fit_svgp, inducing_point_dgp
from zonal.sampling import DeepPaths, DrawnPaths, PriorSettings, draw_posterior_paths
from zonal.tabular.recipes import gaussian_likelihood

INPUT_DIM = 2
DRAWS = 3000
SETTINGS = PriorSettings(tolerance=1e-9)  # as exact as the default budget allows


def data(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(count, INPUT_DIM, generator=generator, dtype=torch.float64) * 2 - 1
    return x, torch.sin(3 * x[..., 0]) + 0.5 * torch.cos(2 * x[..., 1])


def sphere_data(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 3, generator=generator, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    return x, x[:, 0] * x[:, 1] + torch.sin(2 * x[:, 2])


def arccos():
    return ScaleKernel(ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)).double()


def random_q(model: SVGP, seed: int) -> SVGP:
    """A q(u) that is no optimum: a random mean and a random full covariance (whitened)."""
    strategy = model.inducing_strategy
    size = strategy.features.num_inducing
    batch = strategy.variational_distribution.batch_shape
    generator = torch.Generator().manual_seed(seed)
    mean = torch.randn(*batch, size, generator=generator, dtype=torch.float64)
    root = torch.randn(*batch, size, size, generator=generator, dtype=torch.float64) / size**0.5
    strategy.set_variational(mean, root @ root.mT + 0.1 * torch.eye(size), whitened=True)
    return model


def svgp(features_for, *, whiten: bool = True, num_outputs: int = 1, optimal: bool = True):
    x, y = data(60, seed=0)
    kernel = arccos()
    model = SVGP(kernel, features_for(kernel), INPUT_DIM, whiten=whiten, num_outputs=num_outputs)
    if optimal:
        model.set_optimal_variational_distribution(x, y)
        return model
    return random_q(model, seed=1)


def sgpr():
    x, y = data(60, seed=0)
    kernel = arccos()
    model = SGPR(kernel, SphericalHarmonicFeatures(INPUT_DIM + 1, 6, kernel=kernel), INPUT_DIM)
    model.fit_statistics(x, y)
    model.fit(max_iter=15)
    return model


def on_sphere():
    x, y = sphere_data(50, seed=0)
    kernel = ScaleKernel(ChordalMaternKernel(3)).double()
    model = SVGP(
        kernel,
        SphericalHarmonicFeatures(3, 5, kernel=kernel),
        3,
        input_map=OnSphere(),
        mean_module=ConstantMean().double(),
    )
    model.mean_module.constant.data.fill_(0.3)
    model.set_optimal_variational_distribution(x, y)
    return model


def exact():
    x, y = data(40, seed=0)
    model = ExactZonalGP(arccos(), x, y, noise=0.05)
    model.constant.data.fill_(3.0)
    return model


def exact_on_sphere():
    x, y = sphere_data(40, seed=0)
    model = ExactZonalGP(ScaleKernel(ChordalMaternKernel(3)).double(), x, y, input_map=OnSphere())
    model.constant.data.fill_(-2.0)
    return model


def lifted_points(count: int) -> torch.Tensor:
    x, _ = data(count, seed=2)
    return torch.cat([x, torch.ones(count, 1, dtype=x.dtype)], -1)


MODELS = {
    "SVGP, harmonic features, optimal q": lambda: svgp(
        lambda k: SphericalHarmonicFeatures(3, 6, kernel=k)
    ),
    "SVGP, harmonic features, random q": lambda: svgp(
        lambda k: SphericalHarmonicFeatures(3, 4, kernel=k), optimal=False
    ),
    "SVGP, unwhitened": lambda: svgp(
        lambda k: SphericalHarmonicFeatures(3, 4, kernel=k), whiten=False
    ),
    "SVGP, phase-truncated harmonics": lambda: svgp(
        lambda k: SparseSphericalHarmonicFeatures(3, 8, 4, kernel=k), optimal=False
    ),
    "SVGP, activated features": lambda: svgp(
        lambda k: ActivatedFeatures(3, 20, activation="softplus", truncation_level=8),
        optimal=False,
    ),
    "SVGP, inducing points": lambda: svgp(lambda k: InducingPoints(lifted_points(10))),
    "SVGP, two outputs": lambda: svgp(
        lambda k: SphericalHarmonicFeatures(3, 4, kernel=k), num_outputs=2, optimal=False
    ),
    "SVGP on the sphere, constant mean": on_sphere,
    "SGPR": sgpr,
    "exact GP": exact,
    "exact GP on the sphere, constant mean": exact_on_sphere,
}


def evaluation_points(model) -> torch.Tensor:
    if isinstance(model.input_map, OnSphere):
        return sphere_data(4, seed=5)[0]
    return data(4, seed=5)[0]


def truncation_bias(paths: DrawnPaths, lifted: torch.Tensor, exact=None, x=None) -> torch.Tensor:
    """The bound on the draws' covariance error from the prior's truncation [N, N]: missing
    variance times r_i r_j (r the radii of the ``lifted`` points); for an ``exact`` GP, whose
    update reads the prior at its training rows X, r_i + |a_i|^T r_X in place of r_i, with
    a_i = K_y^{-1} K(X, x_i) (``zonal.sampling.exact_paths``)."""
    truncation = paths.path["prior_paths"].feature_map.truncation
    radius = lifted.norm(dim=-1)  # [N]
    if exact is not None:
        weights = torch.linalg.solve(exact._training_gram(), exact._covariance(exact.train_x, x))
        radius = radius + weights.abs().T @ exact.lift(exact.train_x).norm(dim=-1)  # [N]
    return float(truncation.missing_variance) * torch.outer(radius, radius)


def assert_moments_match(draws, mean, covariance, bias):
    """Empirical moments of draws [S, N] against N(mean [N], covariance [N, N]) within 5 standard
    errors (Gaussian: Var of a sample covariance entry is (C_ii C_jj + C_ij^2) / S), plus bias."""
    count = len(draws)
    variance = covariance.diagonal()
    mean_error = (draws.mean(0) - mean).abs()
    assert (mean_error <= 5 * (variance / count).sqrt() + 1e-12).all(), mean_error
    standard_error = ((torch.outer(variance, variance) + covariance**2) / count).sqrt()
    covariance_error = (torch.cov(draws.T) - covariance).abs()
    assert (covariance_error <= 5 * standard_error + bias + 1e-12).all(), covariance_error


@pytest.mark.parametrize("name", list(MODELS))
def test_draws_have_the_moments_of_the_model_posterior(name):
    torch.manual_seed(0)
    model = MODELS[name]()
    x = evaluation_points(model)
    paths = draw_posterior_paths(model, torch.Size([DRAWS]), settings=SETTINGS)
    with torch.no_grad():
        draws = paths(x)  # [S, N] or [S, N, P]
        exact = model if isinstance(model, ExactZonalGP) else None
        bias = truncation_bias(paths, model.input_map.lift(x), exact, x)
        if model.num_outputs == 1:
            posterior = model.posterior(x)
            assert_moments_match(
                draws, posterior.mean.squeeze(-1), posterior.distribution.covariance_matrix, bias
            )
            return
        for output in range(model.num_outputs):
            posterior = model.posterior(x, output_indices=[output])
            assert_moments_match(
                draws[..., output],
                posterior.mean.squeeze(-1),
                posterior.distribution.covariance_matrix,
                bias,
            )
        cross = (draws[..., 0] - draws[..., 0].mean(0)).T @ (draws[..., 1] - draws[..., 1].mean(0))
        variance = draws.var(0)  # [N, P]: independent outputs, so Cov(f_0, f_1) = 0
        limit = 5 * torch.outer(variance[:, 0], variance[:, 1]).sqrt() / math.sqrt(DRAWS)
        assert (cross.abs() / (DRAWS - 1) <= limit).all()


def test_multi_output_layer_draws_have_the_layer_moments():
    torch.manual_seed(0)
    x, y = data(60, seed=0)
    model = inducing_point_dgp(x, [INPUT_DIM, 3, 1], gaussian_likelihood(0.05), num_inducing=10)
    fit_dgp(model, x, y, num_steps=10, lr=0.02, batch_size=len(x))  # left in training mode
    layer = model.layers[0]
    x_test = data(4, seed=5)[0]
    paths = draw_posterior_paths(layer, torch.Size([DRAWS]), settings=SETTINGS)
    with torch.no_grad():
        draws = paths(x_test)  # [S, N, 3]
        output = layer(x_test, are_samples=True)  # q(f(x)) of the layer: [N, 3]
        blocks = output.lazy_covariance_matrix.base_linear_op.to_dense()  # [3, N, N]
        bias = truncation_bias(paths, layer.input_map.lift(x_test))
    assert draws.shape == (DRAWS, 4, 3)
    for index in range(3):
        assert_moments_match(draws[..., index], output.mean[:, index], blocks[index], bias)


def test_deep_draws_chain_the_layers_and_match_the_mixture_at_a_point():
    """At one point the composed draws' marginal is the DGP's (the mixture over its hidden-layer
    samples): mean and variance within 5 standard errors of both Monte Carlo estimates."""
    torch.manual_seed(0)
    x, y = data(60, seed=0)
    model = inducing_point_dgp(x, [INPUT_DIM, 2, 1], gaussian_likelihood(0.05), num_inducing=8)
    fit_dgp(model, x, y, num_steps=10, lr=0.02, batch_size=len(x))
    model.num_posterior_samples = 4000
    point = data(1, seed=7)[0]
    paths = draw_posterior_paths(model, torch.Size([DRAWS]))
    assert isinstance(paths, DeepPaths)
    draws = paths(point).reshape(-1)  # [S]
    mean, variance = model.predict(point)
    mean_error = (draws.mean() - mean).abs()
    assert mean_error <= 5 * (variance * (1 / DRAWS + 1 / 4000)).sqrt()
    variance_error = (draws.var() - variance).abs()
    assert variance_error <= 5 * variance * math.sqrt(2 / DRAWS + 3 / 4000)


def test_draws_made_during_training_use_the_current_q():
    """GPyTorch memoises q(u) in training mode; a draw after an optimiser step must not see the
    q of the step before (the posterior, in eval mode, always sees the current one)."""
    torch.manual_seed(0)
    x, y = data(60, seed=0)
    kernel = arccos()
    model = SVGP(kernel, SphericalHarmonicFeatures(3, 4, kernel=kernel), INPUT_DIM)
    fit_svgp(model, x, y, num_steps=3, lr=0.3, batch_size=len(x))
    assert model.training
    x_test = data(4, seed=5)[0]
    paths = draw_posterior_paths(model, torch.Size([DRAWS]), settings=SETTINGS)
    with torch.no_grad():
        draws = paths(x_test)
        posterior = model.posterior(x_test)
    bias = truncation_bias(paths, model.lift(x_test))
    assert_moments_match(
        draws, posterior.mean.squeeze(-1), posterior.distribution.covariance_matrix, bias
    )


def test_a_posterior_draw_does_not_depend_on_how_the_points_are_batched():
    model = MODELS["SVGP, two outputs"]()
    paths = draw_posterior_paths(model, torch.Size([5]))
    x = data(40, seed=8)[0]
    whole = paths(x)  # [S, N, P]
    parts = torch.cat([paths(x[:7]), paths(x[7:25]), paths(x[25:])], dim=-2)
    torch.testing.assert_close(parts, whole, atol=1e-12, rtol=0)
    paths.chunk_size = 3
    torch.testing.assert_close(paths(x), whole, atol=1e-12, rtol=0)
    per_draw = paths(x.expand(5, *x.shape))  # draw s at x[s] = x: the same values
    torch.testing.assert_close(per_draw, whole, atol=1e-12, rtol=0)


def test_bad_inputs_are_named_errors():
    model = on_sphere()
    paths = draw_posterior_paths(model, torch.Size([2]))
    with pytest.raises(ValueError, match="unit vectors"):
        paths(torch.ones(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="input dimension is 3"):
        paths(torch.ones(3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"inputs \[N, D\]"):
        paths(torch.ones(3, dtype=torch.float64))
    x, _ = data(30, seed=0)
    dgp = inducing_point_dgp(x, [INPUT_DIM, 2, 1], gaussian_likelihood(0.05), num_inducing=5)
    layer_paths = draw_posterior_paths(dgp.layers[0], torch.Size([2]))
    with pytest.raises(ValueError, match=r"expects inputs \[..., N, 2\]"):
        layer_paths(torch.ones(3, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match="InterDomainVariationalStrategy"):
        draw_posterior_paths(torch.nn.Linear(2, 1), torch.Size([2]))
