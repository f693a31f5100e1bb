"""Every GPyTorch variational family the strategy supports (zonal.variational.families) holds the
same q(u) and gives the same predictions and KL; unsupported families are refused by name."""

from __future__ import annotations

import gpytorch
import pytest
import torch

from zonal.features import ActivatedFeatures, SphericalHarmonicFeatures
from zonal.kernels import ArcCosineKernel
from zonal.models import SVGP
from zonal.variational import InterDomainVariationalStrategy
from zonal.variational.families import UnsupportedFamilyError

INPUT_DIM = 2


def data(count=40, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, INPUT_DIM, generator=generator, dtype=torch.float64)
    return x, torch.sin(2 * x[:, 0]) + 0.3 * x[:, 1]


def features_for(kind, kernel):
    if kind == "harmonic":
        return SphericalHarmonicFeatures(INPUT_DIM + 1, 4, kernel=kernel)
    return ActivatedFeatures(INPUT_DIM + 1, 10, kernel=kernel, truncation_level=6)


@pytest.mark.parametrize("feature_kind", ["harmonic", "activated"])
@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("family", ["natural", "tril-natural"])
def test_natural_families_hold_the_titsias_optimum(family, whiten, feature_kind):
    x, y = data()
    kernel = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
    features = features_for(feature_kind, kernel)
    reference = SVGP(kernel, features, INPUT_DIM, whiten=whiten)
    model = SVGP(kernel, features, INPUT_DIM, whiten=whiten, variational_family=family)
    for svgp in (reference, model):
        svgp.set_optimal_variational_distribution(x, y, 0.05)
    test_x, _ = data(9, seed=1)
    for expected, found in zip(reference.predict(test_x), model.predict(test_x), strict=True):
        torch.testing.assert_close(found, expected, atol=1e-7, rtol=1e-6)
    kl_reference = reference.inducing_strategy.kl_divergence()
    torch.testing.assert_close(
        model.inducing_strategy.kl_divergence(), kl_reference, rtol=1e-6, atol=1e-8
    )


def test_meanfield_refuses_a_correlated_q_and_takes_a_diagonal_one():
    kernel = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
    model = SVGP(
        kernel, features_for("harmonic", kernel), INPUT_DIM, variational_family="meanfield"
    )
    size = model.features.num_inducing
    with pytest.raises(UnsupportedFamilyError, match="diagonal"):
        model.inducing_strategy.set_variational(
            torch.zeros(size, dtype=torch.float64),
            torch.ones(size, size, dtype=torch.float64) * 0.1
            + torch.eye(size, dtype=torch.float64),
            whitened=True,
        )
    model.inducing_strategy.set_variational_scale(0.3)
    stddev = model.inducing_strategy._variational_distribution._variational_stddev
    torch.testing.assert_close(stddev, torch.full_like(stddev, 0.3))


def test_delta_q_is_a_point_mass_with_the_prior_log_density_as_kl():
    x, y = data()
    kernel = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
    features = features_for("activated", kernel)
    model = SVGP(kernel, features, INPUT_DIM, whiten=False, variational_family="delta")
    size = features.num_inducing
    mean = torch.linspace(-1, 1, size, dtype=torch.float64)
    model.inducing_strategy.set_variational(mean, None, whitened=False)
    kuu = features.kuu(kernel)
    prior = torch.distributions.MultivariateNormal(torch.zeros(size, dtype=torch.float64), kuu)
    torch.testing.assert_close(
        model.inducing_strategy.kl_divergence(), -prior.log_prob(mean), rtol=1e-6, atol=1e-6
    )
    # no covariance in q: the latent variance is Kff - Qff, the Nystrom gap
    test_x, _ = data(5, seed=2)
    _, variance = model.predict(test_x)
    lifted = model.lift(test_x)
    kuf = features.kuf(kernel, lifted)
    gap = kernel(lifted, diag=True) - (kuf * torch.linalg.solve(kuu, kuf)).sum(0)
    torch.testing.assert_close(variance, gap.clamp(min=0), atol=1e-8, rtol=1e-6)
    objective = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(y))
    model.train()
    assert torch.isfinite(objective(model(x), y))


def test_unsupported_family_is_refused_by_name():
    class Custom(gpytorch.variational.CholeskyVariationalDistribution.__mro__[1]):
        def __init__(self):
            super().__init__(3)
            self.register_parameter("anything", torch.nn.Parameter(torch.zeros(3)))

        def forward(self):
            raise NotImplementedError

        def initialize_variational_distribution(self, prior_dist):
            raise NotImplementedError

    kernel = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, 1, kernel=kernel)
    with pytest.raises(UnsupportedFamilyError, match="Custom is not supported"):
        InterDomainVariationalStrategy(object(), features, Custom())


def test_q_given_in_either_coordinates_gives_the_same_model_and_is_read_fresh():
    """set_variational takes q over u or over v = L^{-1} u whatever the strategy stores (the two
    agree through L), and a q written after the model was used in eval mode is the one used."""
    x, _ = data(8, seed=3)
    kernel = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
    features = features_for("activated", kernel)
    size = features.num_inducing
    generator = torch.Generator().manual_seed(4)
    mean = torch.randn(size, generator=generator, dtype=torch.float64)
    half = torch.randn(size, size, generator=generator, dtype=torch.float64)
    covariance = half @ half.T / size + 0.1 * torch.eye(size, dtype=torch.float64)
    predictions = []
    for whiten in (True, False):
        model = SVGP(kernel, features, INPUT_DIM, whiten=whiten)
        model.predict(x)  # populate GPyTorch's memoised q in eval mode
        strategy = model.inducing_strategy
        strategy.set_variational(mean, covariance, whitened=True)
        predictions.append(model.predict(x))
        u_mean, u_covariance = strategy.to_unwhitened(mean, covariance)
        strategy.set_variational(u_mean, u_covariance, whitened=False)
        for expected, found in zip(predictions[-1], model.predict(x), strict=True):
            torch.testing.assert_close(found, expected, atol=1e-9, rtol=1e-9)
    for expected, found in zip(*predictions, strict=True):
        torch.testing.assert_close(found, expected, atol=1e-9, rtol=1e-9)
