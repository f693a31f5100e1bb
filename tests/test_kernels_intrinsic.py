"""Intrinsic Matérn and heat kernels of the sphere (seed 004 eq. 2.24).

Oracles: on the circle S^1 (d = 2) both have closed forms by Fourier / Poisson summation,
    sum_{n in Z} e^{i n theta} / (n^2 + c^2) = (pi / c) cosh(c (pi - |theta|)) / sinh(pi c),
    sum_{n in Z} e^{-kappa^2 n^2 / 2} e^{i n theta}
        = (sqrt(2 pi) / kappa) sum_k e^{-(theta + 2 pi k)^2 / (2 kappa^2)},
and on S^2 and S^4 the optional peer library geometric-kernels (skipped when absent).
"""

import math

import pytest
import torch

from zonal.harmonics import num_harmonics
from zonal.kernels import IntrinsicHeatKernel, IntrinsicMaternKernel, laplace_beltrami_eigenvalues


def random_sphere(num, ambient_dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def circle(angles):
    angles = torch.as_tensor(angles, dtype=torch.float64)
    return torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)


@pytest.mark.parametrize("kappa", [0.5, 1.0, 3.0])
def test_matern_half_on_circle_matches_cosh_closed_form(kappa):
    truncation = 1000
    kernel = IntrinsicMaternKernel(2, nu=0.5, max_degree=truncation)
    kernel.lengthscale = kappa
    angles = torch.linspace(0, math.pi, 9, dtype=torch.float64)
    with torch.no_grad():
        actual = kernel(circle([0.0]), circle(angles)).to_dense()[0]
    c = 1 / kappa  # c^2 = 2 nu / kappa^2 with nu = 1/2
    expected = torch.cosh(c * (math.pi - angles)) / math.cosh(c * math.pi)
    total = math.pi / c / math.tanh(math.pi * c)  # sum over all n of 1 / (n^2 + c^2)
    tail_bound = 2 / truncation / total  # 2 sum_{n > L} 1 / n^2 < 2 / L, over the normaliser
    assert float((actual - expected).abs().max()) < tail_bound


@pytest.mark.parametrize("kappa", [0.3, 1.0, 2.0])
def test_heat_on_circle_matches_wrapped_gaussian(kappa):
    kernel = IntrinsicHeatKernel(2, max_degree=80)
    kernel.lengthscale = kappa
    angles = torch.linspace(-math.pi, math.pi, 13, dtype=torch.float64)
    with torch.no_grad():
        actual = kernel(circle([0.0]), circle(angles)).to_dense()[0]
    windings = torch.arange(-20, 21, dtype=torch.float64)

    def wrapped(theta):
        return torch.exp(-((theta + 2 * math.pi * windings) ** 2) / (2 * kappa**2)).sum()

    expected = torch.stack([wrapped(a) for a in angles]) / wrapped(torch.tensor(0.0))
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("ambient_dim", [2, 3, 6])
@pytest.mark.parametrize("kernel_class", [IntrinsicMaternKernel, IntrinsicHeatKernel])
def test_unit_prior_variance_and_spectrum(ambient_dim, kernel_class):
    kernel = kernel_class(ambient_dim, max_degree=15)
    kernel.lengthscale = 0.8
    x = random_sphere(5, ambient_dim)
    with torch.no_grad():
        torch.testing.assert_close(kernel(x, diag=True), torch.ones(5, dtype=torch.float64))
        torch.testing.assert_close(
            kernel(x).to_dense().diagonal(), torch.ones(5, dtype=torch.float64)
        )
        eigenvalues = kernel.eigenvalues()
    counts = torch.tensor([num_harmonics(ambient_dim, n) for n in range(16)], dtype=torch.float64)
    torch.testing.assert_close((eigenvalues * counts).sum(), torch.tensor(1.0, dtype=torch.float64))
    laplacian = torch.tensor([n * (n + ambient_dim - 2) for n in range(16)], dtype=torch.float64)
    torch.testing.assert_close(laplace_beltrami_eigenvalues(ambient_dim, 15), laplacian)
    if kernel_class is IntrinsicMaternKernel:  # nu = 1.5 by default
        phi = (2 * 1.5 / 0.8**2 + laplacian) ** (-1.5 - (ambient_dim - 1) / 2)
    else:
        phi = torch.exp(-(0.8**2) / 2 * laplacian)
    torch.testing.assert_close(eigenvalues, phi / (phi * counts).sum(), rtol=1e-12, atol=0)


@pytest.mark.optional
@pytest.mark.parametrize("ambient_dim", [3, 5])  # S^2 and S^4
@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, math.inf])
def test_matches_geometric_kernels(ambient_dim, nu):
    pytest.importorskip("geometric_kernels")
    pytest.importorskip("geometric_kernels.torch")
    from geometric_kernels.kernels import MaternKarhunenLoeveKernel
    from geometric_kernels.spaces import Hypersphere

    truncation, kappa = 12, 0.7
    peer = MaternKarhunenLoeveKernel(Hypersphere(dim=ambient_dim - 1), num_levels=truncation + 1)
    params = {
        "nu": torch.tensor([nu], dtype=torch.float64),
        "lengthscale": torch.tensor([kappa], dtype=torch.float64),
    }
    x1, x2 = random_sphere(6, ambient_dim, seed=1), random_sphere(4, ambient_dim, seed=2)
    if math.isinf(nu):
        ours = IntrinsicHeatKernel(ambient_dim, max_degree=truncation)
    else:
        ours = IntrinsicMaternKernel(ambient_dim, nu=nu, max_degree=truncation)
    ours.lengthscale = kappa
    with torch.no_grad():
        torch.testing.assert_close(
            ours(x1, x2).to_dense(), peer.K(params, x1, x2), rtol=1e-10, atol=1e-12
        )


def test_bad_nu():
    for nu in (0, -1.0, math.inf, "1.5", True):
        with pytest.raises(ValueError, match="nu"):
            IntrinsicMaternKernel(3, nu=nu)
    with pytest.raises(ValueError, match="closed form"):
        IntrinsicMaternKernel(3, evaluation="closed_form")
