"""Chordal Matérn and squared-exponential kernels: GPyTorch's Euclidean kernels as the oracle.

On the sphere ||x - x'|| = sqrt(2 (1 - x.x')), so the restriction of GPyTorch's MaternKernel and
RBFKernel to unit vectors must equal the zonal shape exactly. The squared exponential's eigenvalues
have a closed form, exp(-1/rho^2) Gamma(d/2) (2 rho^2)^alpha I_{n+alpha}(1/rho^2), from
e^{kappa t} = sum_n Gamma(alpha + 1) (2/kappa)^alpha I_{n+alpha}(kappa) Z_n(t) (DLMF 10.23.E8 with the
addition theorem), checked against Funk-Hecke quadrature with scipy's Bessel function.
"""

import math

import gpytorch
import pytest
import torch
from scipy.special import ive

from zonal.kernels import ChordalMaternKernel, ChordalRBFKernel, chordal_distance


def random_sphere(num, ambient_dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
@pytest.mark.parametrize("lengthscale", [0.3, 1.0, 2.5])
def test_chordal_matern_equals_gpytorch_matern_on_the_sphere(nu, lengthscale):
    x1, x2 = random_sphere(6, 4, seed=1), random_sphere(5, 4, seed=2)
    reference = gpytorch.kernels.MaternKernel(nu=nu).to(torch.float64)
    reference.lengthscale = torch.tensor(lengthscale, dtype=torch.float64)
    ours = ChordalMaternKernel(4, nu=nu)
    ours.lengthscale = lengthscale
    with torch.no_grad():
        torch.testing.assert_close(
            ours(x1, x2).to_dense(), reference(x1, x2).to_dense(), rtol=1e-10, atol=1e-12
        )


@pytest.mark.parametrize("lengthscale", [0.3, 1.0, 2.5])
def test_chordal_rbf_equals_gpytorch_rbf_on_the_sphere(lengthscale):
    x1, x2 = random_sphere(6, 3, seed=3), random_sphere(5, 3, seed=4)
    reference = gpytorch.kernels.RBFKernel().to(torch.float64)
    reference.lengthscale = torch.tensor(lengthscale, dtype=torch.float64)
    ours = ChordalRBFKernel(3)
    ours.lengthscale = lengthscale
    with torch.no_grad():
        torch.testing.assert_close(
            ours(x1, x2).to_dense(), reference(x1, x2).to_dense(), rtol=1e-10, atol=1e-12
        )


@pytest.mark.parametrize("ambient_dim", [2, 3, 5, 10])
@pytest.mark.parametrize("lengthscale", [0.5, 1.0, 2.0])
def test_rbf_funk_hecke_eigenvalues_match_bessel_closed_form(ambient_dim, lengthscale):
    kernel = ChordalRBFKernel(ambient_dim)
    kernel.lengthscale = lengthscale
    with torch.no_grad():
        eigenvalues = kernel.eigenvalues(20)
    alpha = (ambient_dim - 2) / 2
    kappa = 1 / lengthscale**2
    expected = torch.tensor(
        [
            math.gamma(ambient_dim / 2) * (2 / kappa) ** alpha * ive(n + alpha, kappa)
            for n in range(21)
        ],
        dtype=torch.float64,
    )
    # quadrature noise floor ~1e-14 absolute (d = 3), relative 1e-9 above it
    torch.testing.assert_close(eigenvalues, expected, rtol=1e-9, atol=5e-14)


# Mercer sum with Funk-Hecke eigenvalues against the closed form, grid of t in [-1, 1]:
# (nu or None for the SE, truncation L, bound). Matérn-nu decays as n^{-(d-1)-2 nu}, so the
# error at t = 1 falls as L^{-2 nu}: 1/L for nu = 1/2 (bound checked at L = 400).
CASES = [(None, 40, 1e-9), (2.5, 100, 1e-6), (1.5, 200, 3e-5), (0.5, 400, 2e-2)]


@pytest.mark.parametrize(("nu", "truncation", "bound"), CASES)
@pytest.mark.parametrize("ambient_dim", [3, 5, 8])
def test_mercer_sum_converges_to_closed_form(nu, truncation, bound, ambient_dim):
    kernel = ChordalRBFKernel(ambient_dim) if nu is None else ChordalMaternKernel(ambient_dim, nu)
    kernel.lengthscale = 1.0
    t = torch.linspace(-1, 1, 1001, dtype=torch.float64).view(1, -1)
    with torch.no_grad():
        error = float((kernel.mercer(t, truncation) - kernel.shape(t)).abs().max())
    assert error < bound


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
def test_gradients_finite_at_coincident_points(nu):
    x = random_sphere(4, 3, seed=5)
    x = torch.cat([x, x[:1], -x[1:2]]).requires_grad_()
    kernel = ChordalMaternKernel(3, nu=nu)
    value = kernel(x).to_dense().sum() + kernel(x, x.detach().clone()).to_dense().sum()
    grads = torch.autograd.grad(value, [x, kernel.raw_lengthscale])
    assert all(torch.isfinite(g).all() for g in grads)
    t = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    (slope,) = torch.autograd.grad(chordal_distance(t).sum(), t)
    assert torch.isfinite(slope).all()


def test_bad_nu():
    for nu in (1.0, 3.5, 0, "2.5", True):
        with pytest.raises(ValueError, match="nu"):
            ChordalMaternKernel(3, nu=nu)
