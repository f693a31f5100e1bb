"""Exact prior draws of zonal GPs (zonal.sampling.harmonic_features, truncation; seed 004 sec.
2.2.2). The references are the kernels' own Gram matrices (closed forms or Mercer sums evaluated by
Clenshaw's recurrence, not by the harmonics), the eigenvalue tail of the truncation rule's
definition, and BoTorch's random Fourier features for kernels that are not zonal."""

from __future__ import annotations

import pytest
import torch
from botorch.sampling.pathwise.features import KernelFeatureMap
from gpytorch.kernels import RBFKernel, ScaleKernel

from zonal.harmonics import num_harmonics
from zonal.kernels import (
    ArcCosineKernel,
    ChordalMaternKernel,
    IntrinsicMaternKernel,
    PolynomialDecayKernel,
)
from zonal.sampling import (
    HarmonicFeatureMap,
    PriorSettings,
    choose_truncation,
    draw_prior_paths,
    prior_feature_map,
)

ROUND_OFF = 1e-12


def unit_vectors(count: int, ambient_dim: int = 3, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def scaled(kernel):
    wrapped = ScaleKernel(kernel).double()
    wrapped.outputscale = 2.5
    return wrapped


KERNELS = {
    "chordal Matérn-5/2 (closed form)": lambda: ChordalMaternKernel(3),
    "arc-cosine order 1 (zero odd levels)": lambda: ArcCosineKernel(3, order=1),
    "arc-cosine order 0 (slow decay, budget-capped)": lambda: ArcCosineKernel(3, order=0),
    "polynomial decay (Mercer sum)": lambda: PolynomialDecayKernel(3, max_degree=9),
    "intrinsic Matérn (Mercer sum, normalised)": lambda: IntrinsicMaternKernel(3, max_degree=12),
    "scaled chordal Matérn-3/2": lambda: scaled(ChordalMaternKernel(3, nu=1.5)),
    "chordal Matérn on S^3": lambda: ChordalMaternKernel(4),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_features_reproduce_the_kernel_within_the_missing_variance(name):
    kernel = KERNELS[name]()
    ambient_dim = getattr(kernel, "base_kernel", kernel).ambient_dim
    x = unit_vectors(40, ambient_dim)
    feature_map = HarmonicFeatureMap(kernel, choose_truncation(kernel, tolerance=1e-4))
    with torch.no_grad():
        features = feature_map(x)  # [N, F]
        gram = kernel(x).to_dense()  # [N, N], the kernel's own evaluation
    missing = float(feature_map.truncation.missing_variance)
    error = features @ features.T - gram
    assert error.abs().max() <= missing + ROUND_OFF, name
    # on the diagonal the error is exactly the missing variance: k(1) - sum_{n <= L} lambda_n N_n
    torch.testing.assert_close(
        -error.diagonal(), torch.full((len(x),), missing, dtype=x.dtype), atol=1e-12, rtol=0
    )


def test_homogeneous_features_scale_with_both_radii():
    kernel = ArcCosineKernel(3, order=1, homogeneous=True)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(30, 3, generator=generator, dtype=torch.float64) * 2  # off the sphere
    feature_map = prior_feature_map(kernel)
    with torch.no_grad():
        features = feature_map(x)
        gram = kernel(x).to_dense()
    radius = x.norm(dim=-1)
    bound = float(feature_map.truncation.missing_variance) * torch.outer(radius, radius)
    assert ((features @ features.T - gram).abs() <= bound + ROUND_OFF).all()


def test_batched_kernel_gives_one_feature_scale_per_member():
    kernel = ChordalMaternKernel(3, batch_shape=torch.Size([2]))
    kernel.lengthscale = torch.tensor([[[0.5]], [[1.5]]], dtype=torch.float64)
    x = unit_vectors(20)
    feature_map = prior_feature_map(kernel)
    with torch.no_grad():
        features = feature_map(x)  # [2, N, F]
        gram = kernel(x).to_dense()  # [2, N, N]
    missing = feature_map.truncation.missing_variance  # [2]
    assert features.shape[0] == 2 and missing.shape == (2,)
    error = (features @ features.mT - gram).abs().amax((-2, -1))
    assert (error <= missing + ROUND_OFF).all()
    assert draw_prior_paths(kernel, torch.Size([3]))(x).shape == (3, 20, 2)  # outputs last


def test_the_rule_takes_the_smallest_degree_within_the_tolerance():
    kernel = ChordalMaternKernel(3, nu=1.5)
    tolerance = 1e-3
    truncation = choose_truncation(kernel, tolerance=tolerance)
    eigenvalues = kernel.eigenvalues(40).detach()  # Funk-Hecke, lambda_0..lambda_40
    masses = torch.stack([eigenvalues[n] * num_harmonics(3, n) for n in range(41)])
    variance = kernel(unit_vectors(1)).to_dense().reshape(())  # k(1) from the closed form
    relative = (variance - masses.cumsum(0)) / variance  # missing fraction after each level
    expected = int(torch.nonzero(relative <= tolerance)[0])
    assert truncation.max_degree == expected
    assert truncation.relative_missing_variance <= tolerance < relative[expected - 1]


def test_a_mercer_sum_is_exact_at_its_own_truncation():
    kernel = PolynomialDecayKernel(3, max_degree=7, beta=1.0)  # slow decay: nothing is negligible
    truncation = choose_truncation(kernel, tolerance=0.0)
    assert truncation.max_degree == 7 and truncation.levels == tuple(range(8))
    assert float(truncation.missing_variance) <= ROUND_OFF


def test_the_budget_caps_the_features_and_the_error_is_reported():
    kernel = ArcCosineKernel(3, order=0)  # lambda_n N_n ~ n^-2: the tail decays like 1 / L
    truncation = choose_truncation(kernel, tolerance=1e-6, max_features=100)
    assert truncation.num_features <= 100
    assert truncation.relative_missing_variance > 1e-6  # the budget, not the tolerance, binds


def test_required_levels_are_kept_beyond_the_rule():
    kernel = ChordalMaternKernel(3)
    kernel.lengthscale = 2.0  # a smooth kernel: the rule alone stops early
    truncation = choose_truncation(kernel, tolerance=1e-2, required_levels=(9,))
    assert truncation.max_degree == 9 and 9 in truncation.levels


def test_prior_paths_have_the_kernel_as_covariance():
    kernel = scaled(ChordalMaternKernel(3))
    x = unit_vectors(4, seed=2)
    count = 20000
    paths = draw_prior_paths(kernel, torch.Size([count]))
    with torch.no_grad():
        values = paths(x)  # [S, N]
        gram = kernel(x).to_dense()
    variance = gram.diagonal()
    standard_error = ((torch.outer(variance, variance) + gram**2) / count).sqrt()
    assert ((torch.cov(values.T) - gram).abs() <= 5 * standard_error).all()
    assert (values.mean(0).abs() <= 5 * (variance / count).sqrt()).all()


def test_a_drawn_path_does_not_depend_on_how_the_points_are_batched():
    paths = draw_prior_paths(ChordalMaternKernel(3), torch.Size([7]))
    x = unit_vectors(50, seed=3)
    whole = paths(x)  # [S, N]
    parts = torch.cat([paths(x[:13]), paths(x[13:31]), paths(x[31:])], dim=-1)
    paths.chunk_size = 6
    chunked = paths(x)
    torch.testing.assert_close(parts, whole, atol=1e-13, rtol=0)
    torch.testing.assert_close(chunked, whole, atol=1e-13, rtol=0)
    torch.testing.assert_close(paths(x[5:6]), whole[:, 5:6], atol=1e-13, rtol=0)


def test_kernels_that_are_not_zonal_get_botorch_random_features():
    kernel = ScaleKernel(RBFKernel()).double()
    with pytest.raises(ValueError, match="num_inputs"):
        prior_feature_map(kernel)
    feature_map = prior_feature_map(kernel, PriorSettings(num_random_features=64), num_inputs=2)
    assert isinstance(feature_map, KernelFeatureMap) and feature_map.num_outputs == 64


def test_points_off_the_sphere_or_of_the_wrong_dimension_are_named_errors():
    feature_map = prior_feature_map(ChordalMaternKernel(3))
    with pytest.raises(ValueError, match="unit vectors"):
        feature_map(torch.ones(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="ambient_dim=3"):
        feature_map(unit_vectors(2, ambient_dim=4))
    homogeneous = prior_feature_map(ArcCosineKernel(3, homogeneous=True))
    with pytest.raises(ValueError, match="non-zero"):
        homogeneous(torch.zeros(1, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="ambient_dim=3"):
        homogeneous(torch.ones(1, 2, dtype=torch.float64))
