"""The inducing variables of a prior path (zonal.sampling.inducing_functionals): for f = psi(.) w and
u = T w, Cov(u) = T T^T must be Kuu and Cov(u, f(x)) = T psi(x)^T must be Kuf, with Kuu and Kuf
from zonal.features (the RKHS convention, computed there by Gegenbauer sums, not by harmonics).
Checked exactly through the algebra and, for one case, by Monte Carlo."""

from __future__ import annotations

import pytest
import torch
from gpytorch.kernels import ScaleKernel

from zonal.features import (
    ActivatedFeatures,
    InducingPoints,
    SparseSphericalHarmonicFeatures,
    SphericalHarmonicFeatures,
)
from zonal.kernels import ArcCosineKernel, ChordalMaternKernel, PolynomialDecayKernel
from zonal.sampling import (
    HarmonicTruncation,
    PriorSettings,
    choose_truncation,
    inducing_functional,
    prior_feature_map,
    required_levels,
)
from zonal.sampling.harmonic_features import HarmonicFeatureMap


def points(count: int, seed: int, homogeneous: bool) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 3, generator=generator, dtype=torch.float64)
    return x * 1.5 if homogeneous else x / x.norm(dim=-1, keepdim=True)


def arccos(homogeneous: bool = True):
    kernel = ScaleKernel(ArcCosineKernel(3, homogeneous=homogeneous)).double()
    kernel.outputscale = 1.7
    return kernel


def matern():
    kernel = ChordalMaternKernel(3)
    kernel.lengthscale = torch.tensor(0.8, dtype=torch.float64)
    return kernel


CASES = {
    "harmonic features, arc-cosine": lambda: (arccos(), "harmonic"),
    "harmonic features, Matérn on the sphere": lambda: (matern(), "harmonic"),
    "phase-truncated harmonic features": lambda: (arccos(), "sparse"),
    "activated ReLU features": lambda: (arccos(), "relu"),
    "activated Softplus features, Matérn": lambda: (matern(), "softplus"),
}


def make_features(kind: str, kernel):
    if kind == "harmonic":
        return SphericalHarmonicFeatures(3, 5, kernel=kernel)
    if kind == "sparse":
        return SparseSphericalHarmonicFeatures(3, 7, 4, kernel=kernel, seed=3)
    return ActivatedFeatures(3, 15, activation=kind, truncation_level=7, kernel=kernel, seed=2)


def dense(matrix) -> torch.Tensor:
    return matrix.to_dense() if hasattr(matrix, "to_dense") else matrix


@pytest.mark.parametrize("name", list(CASES))
def test_inducing_variables_of_a_prior_path_have_covariances_kuu_and_kuf(name):
    kernel, kind = CASES[name]()
    features = make_features(kind, kernel)
    homogeneous = getattr(kernel, "base_kernel", kernel).homogeneous
    x = points(25, seed=1, homogeneous=homogeneous)
    with torch.no_grad():
        feature_map = prior_feature_map(
            kernel, PriorSettings(tolerance=1e-2), required_levels=required_levels(features, kernel)
        )
        transform = inducing_functional(features, kernel, feature_map)  # T [M, F]
        kuu = dense(features.kuu(kernel))
        kuf = features.kuf(kernel, x)
        cross = transform @ feature_map(x).T  # T psi(x)^T
    scale = kuu.abs().max()
    torch.testing.assert_close(transform @ transform.T / scale, kuu / scale, atol=1e-11, rtol=0)
    torch.testing.assert_close(cross, kuf, atol=1e-11 * kuf.abs().max(), rtol=0)


def test_inducing_points_read_the_path_at_z_up_to_the_missing_variance():
    kernel = arccos()
    z = points(12, seed=4, homogeneous=True)
    features = InducingPoints(z)
    x = points(10, seed=5, homogeneous=True)
    with torch.no_grad():
        feature_map = prior_feature_map(kernel)
        transform = inducing_functional(features, kernel, feature_map)
        kuu, kuf = features.kuu(kernel), features.kuf(kernel, x)
        torch.testing.assert_close(transform, feature_map(z))  # u = f(Z)
        cross = transform @ feature_map(x).T
    missing = float(feature_map.truncation.missing_variance)
    radius_z, radius_x = z.norm(dim=-1), x.norm(dim=-1)
    assert (
        (transform @ transform.T - kuu).abs() <= missing * torch.outer(radius_z, radius_z) + 1e-12
    ).all()
    assert ((cross - kuf).abs() <= missing * torch.outer(radius_z, radius_x) + 1e-12).all()


def test_monte_carlo_draws_of_u_and_f_have_covariances_kuu_and_kuf():
    """S joint draws of (u, f(x)) from w ~ N(0, I): every entry within 5 standard errors."""
    kernel = arccos()
    features = make_features("softplus", kernel)
    x = points(3, seed=6, homogeneous=True)
    count = 20000
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        feature_map = prior_feature_map(kernel, required_levels=required_levels(features, kernel))
        transform = inducing_functional(features, kernel, feature_map)  # [M, F]
        weights = torch.randn(
            count, feature_map.num_outputs, generator=generator, dtype=torch.float64
        )
        draws = torch.cat([weights @ transform.T, weights @ feature_map(x).T], -1)  # [S, M + N]
        kuu = dense(features.kuu(kernel))
        kuf = features.kuf(kernel, x)
    moment = draws.T @ draws / count  # E[(u, f) (u, f)^T], zero mean
    expected = torch.cat([torch.cat([kuu, kuf], 1), torch.cat([kuf.T, kernel(x).to_dense()], 1)], 0)
    variance = expected.diagonal()
    standard_error = ((torch.outer(variance, variance) + expected**2) / count).sqrt()
    assert ((moment - expected).abs() <= 5 * standard_error).all()


def test_a_prior_that_leaves_out_a_feature_level_is_refused():
    kernel = PolynomialDecayKernel(3, max_degree=8)
    features = SphericalHarmonicFeatures(3, 6, kernel=kernel)
    full = choose_truncation(kernel, tolerance=0.0)
    short = HarmonicTruncation(
        ambient_dim=3,
        max_degree=4,
        levels=(0, 1, 2, 3, 4),
        num_features=25,
        total_variance=full.total_variance,
        missing_variance=full.missing_variance,
    )
    with pytest.raises(ValueError, match=r"degree\(s\) \[5, 6\]"):
        inducing_functional(features, kernel, HarmonicFeatureMap(kernel, short))
