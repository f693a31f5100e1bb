"""Kernels defined by their spectrum: the learned-spectrum kernel and the continuous-depth kernel.

Oracle: the Mercer decomposition itself (seed 000 eq. 8), k(x, x') = sum_{n,j} lambda_n phi_nj(x)
phi_nj(x'), with the orthonormal harmonics phi of ``zonal.harmonics.SphericalHarmonics`` (built
from fundamental systems, not from the addition theorem the kernels use).
"""

import math

import pytest
import torch

from zonal.harmonics import SphericalHarmonics, num_harmonics
from zonal.kernels import PolynomialDecayKernel, SpectralZonalKernel


def random_sphere(num, ambient_dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def harmonic_gram(x1, x2, eigenvalues, ambient_dim):
    """Phi(x1) diag(lambda_level) Phi(x2)^T with explicit orthonormal harmonics."""
    max_degree = len(eigenvalues) - 1
    harmonics = SphericalHarmonics(ambient_dim, max_degree, progress=False)
    weights = eigenvalues[harmonics.levels]  # [M]
    return (harmonics(x1) * weights) @ harmonics(x2).T


@pytest.mark.parametrize("ambient_dim", [3, 4])
def test_spectral_kernel_equals_explicit_harmonic_expansion(ambient_dim):
    eigenvalues = torch.tensor([0.5, 0.3, 0.0, 0.1, 0.02, 0.01], dtype=torch.float64)
    kernel = SpectralZonalKernel(ambient_dim, eigenvalues, learn_eigenvalues=False)
    x1, x2 = random_sphere(5, ambient_dim, seed=1), random_sphere(4, ambient_dim, seed=2)
    with torch.no_grad():
        actual = kernel(x1, x2).to_dense()
    expected = harmonic_gram(x1, x2, eigenvalues, ambient_dim)
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("ambient_dim", [3, 4])
def test_polynomial_decay_equals_explicit_harmonic_expansion(ambient_dim):
    kernel = PolynomialDecayKernel(ambient_dim, max_degree=6, beta=2.5, variance=0.7)
    x1, x2 = random_sphere(5, ambient_dim, seed=3), random_sphere(4, ambient_dim, seed=4)
    with torch.no_grad():
        actual = kernel(x1, x2).to_dense()
    levels = torch.arange(7, dtype=torch.float64)
    eigenvalues = 0.7 * torch.cat([torch.ones(1, dtype=torch.float64), levels[1:] ** -2.5])
    expected = harmonic_gram(x1, x2, eigenvalues, ambient_dim)
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-12)


def test_polynomial_decay_constant_level_and_prior_variance():
    kernel = PolynomialDecayKernel(5, max_degree=10, beta=3.0, variance=2.0)
    eigenvalues = kernel.eigenvalues().detach()
    assert float(eigenvalues[0]) == pytest.approx(2.0)  # lambda_0 = sigma^2 = lambda_1
    assert float(eigenvalues[1]) == pytest.approx(2.0)
    assert float(eigenvalues[4]) == pytest.approx(2.0 * 4**-3.0)
    x = random_sphere(3, 5)
    expected_variance = 2.0 * (1 + sum(num_harmonics(5, n) * n**-3.0 for n in range(1, 11)))
    with torch.no_grad():
        torch.testing.assert_close(
            kernel(x, diag=True), torch.full((3,), expected_variance, dtype=torch.float64)
        )
    without = PolynomialDecayKernel(5, max_degree=10, beta=3.0, include_constant=False)
    assert float(without.eigenvalues()[0]) == 0.0
    assert PolynomialDecayKernel(7).beta.item() == pytest.approx(7.0)  # default beta = d


def test_bad_spectra_and_beta():
    with pytest.raises(ValueError, match=">= 0"):
        SpectralZonalKernel(3, [1.0, -0.1, 0.2])
    with pytest.raises(ValueError, match=">= 0"):
        SpectralZonalKernel(3, [1.0, -0.1], learn_eigenvalues=False)
    with pytest.raises(ValueError, match="> 0"):
        SpectralZonalKernel(3, [1.0, 0.0])  # learnable: softplus cannot hold 0
    with pytest.raises(ValueError, match="finite"):
        SpectralZonalKernel(3, [1.0, math.nan])
    with pytest.raises(ValueError, match="size"):
        SpectralZonalKernel(3, [])
    kernel = SpectralZonalKernel(3, [1.0, 0.5])
    with pytest.raises(ValueError, match=">= 0"):
        kernel.spectrum = [1.0, -2.0]
    with pytest.raises(ValueError, match="levels"):
        kernel.spectrum = [1.0, 0.5, 0.1]
    for beta in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="beta"):
            PolynomialDecayKernel(3, beta=beta)
    decay = PolynomialDecayKernel(3)
    with pytest.raises(ValueError, match="beta"):
        decay.beta = -0.5
    with pytest.raises(ValueError, match="variance"):
        decay.variance = 0.0


def test_spectral_kernel_learns_and_pads():
    kernel = SpectralZonalKernel(3, [1.0, 0.5, 0.25])
    torch.testing.assert_close(
        kernel.spectrum.detach(), torch.tensor([1.0, 0.5, 0.25], dtype=torch.float64)
    )
    padded = kernel.eigenvalues(5).detach()
    torch.testing.assert_close(padded[3:], torch.zeros(3, dtype=torch.float64))
    assert kernel.eigenvalues(1).shape == (2,)
    kernel.spectrum = [2.0, 1.0, 0.5]
    torch.testing.assert_close(
        kernel.spectrum.detach(), torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    )
    x = random_sphere(6, 3)
    loss = kernel(x).to_dense().sum()
    loss.backward()
    assert kernel.raw_spectrum.grad is not None and torch.isfinite(kernel.raw_spectrum.grad).all()
