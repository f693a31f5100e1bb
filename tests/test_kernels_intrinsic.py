"""Intrinsic Matérn and heat kernels of the sphere (seed 004 eq. 2.24).

Oracles independent of the implementation's spectrum formula: the kernels' defining equations,
checked with the Laplace-Beltrami operator applied by automatic differentiation (the heat equation,
the Matérn resolvent (c - Delta)), the heat semigroup by exact quadrature, k(x, x) = 1; on the
circle S^1 (d = 2) both have closed forms by Fourier / Poisson summation,
    sum_{n in Z} e^{i n theta} / (n^2 + c^2) = (pi / c) cosh(c (pi - |theta|)) / sinh(pi c),
    sum_{n in Z} e^{-kappa^2 n^2 / 2} e^{i n theta}
        = (sqrt(2 pi) / kappa) sum_k e^{-(theta + 2 pi k)^2 / (2 kappa^2)},
and on S^2 and S^4 the optional peer library geometric-kernels (skipped when absent).
"""

import math

import pytest
import torch

from zonal.harmonics import num_harmonics, zonal_harmonic
from zonal.harmonics.sphere_quadrature import sphere_quadrature
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
def test_unit_prior_variance(ambient_dim, kernel_class):
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


def laplace_beltrami(values, t, ambient_dim):
    """Delta f(x . y) = (1 - t^2) f''(t) - (d - 1) t f'(t), the Laplace-Beltrami operator of
    S^{d-1} in x applied to a zonal function, by automatic differentiation in t."""
    (first,) = torch.autograd.grad(values.sum(), t, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), t, create_graph=True)
    return (1 - t**2) * second - (ambient_dim - 1) * t * first


def assert_proportional(actual, reference, rtol):
    """actual = c * reference for one constant c, up to rtol in the 2-norm."""
    scale = (actual * reference).sum() / (reference * reference).sum()
    residual = (actual - scale * reference).norm() / actual.norm()
    assert float(residual) < rtol


@pytest.mark.parametrize("ambient_dim", [2, 3, 5])
def test_laplace_beltrami_spectrum_from_the_operator(ambient_dim):
    """Z_n is an eigenfunction of the Laplace-Beltrami operator with eigenvalue -n (n + d - 2)."""
    t = torch.linspace(-0.95, 0.95, 23, dtype=torch.float64, requires_grad=True)
    zonal = zonal_harmonic(t, 10, ambient_dim)  # [T, 11]
    spectrum = laplace_beltrami_eigenvalues(ambient_dim, 10)  # [11]
    for n in range(11):
        delta = laplace_beltrami(zonal[:, n], t, ambient_dim)
        torch.testing.assert_close(delta, -spectrum[n] * zonal[:, n], rtol=1e-10, atol=1e-9)


def _value_and_tau_derivative(kernel, t):
    """k(t) [T] and dk/dtau [T] with tau = kappa^2 / 2 the heat time, by autograd."""
    values = kernel.mercer(t.view(1, -1)).view(-1)  # [T]
    kappa = kernel.lengthscale.view(())
    (dkappa_draw,) = torch.autograd.grad(kappa, kernel.raw_lengthscale, retain_graph=True)
    dtau_draw = kappa.detach() * dkappa_draw.view(())
    rows = [
        torch.autograd.grad(value, kernel.raw_lengthscale, retain_graph=True)[0].view(())
        for value in values
    ]
    return values, torch.stack(rows) / dtau_draw


@pytest.mark.parametrize("ambient_dim", [3, 4])
def test_heat_kernel_solves_the_heat_equation(ambient_dim):
    """K_tau = sum_n e^{-tau n (n + d - 2)} Z_n solves dK/dtau = Delta K (tau = kappa^2 / 2), so the
    normalised k = K / C(tau) solves dk/dtau - Delta k = -(C'/C) k: a multiple of k itself."""
    kernel = IntrinsicHeatKernel(ambient_dim, max_degree=14)
    kernel.lengthscale = 0.7
    t = torch.linspace(-0.97, 0.97, 31, dtype=torch.float64, requires_grad=True)
    values, time_derivative = _value_and_tau_derivative(kernel, t)
    delta = laplace_beltrami(values, t, ambient_dim)
    assert_proportional((time_derivative - delta).detach(), values.detach(), rtol=1e-10)
    assert float((time_derivative - delta).detach().norm()) > 1e-3  # C'/C != 0: not vacuous


@pytest.mark.parametrize("ambient_dim", [3, 4])
def test_matern_resolvent_lowers_the_exponent(ambient_dim):
    """k_nu is proportional to (c - Delta)^{-nu - (d-1)/2} with c = 2 nu / kappa^2 (seed 004 eq.
    2.24), so (c - Delta) k_nu is proportional to k_{nu - 1} with the same c, i.e. with
    kappa'^2 = 2 (nu - 1) / c."""
    nu, kappa = 2.5, 0.9
    c = 2 * nu / kappa**2
    kernel = IntrinsicMaternKernel(ambient_dim, nu=nu, max_degree=14)
    kernel.lengthscale = kappa
    lower = IntrinsicMaternKernel(ambient_dim, nu=nu - 1, max_degree=14)
    lower.lengthscale = math.sqrt(2 * (nu - 1) / c)
    t = torch.linspace(-0.97, 0.97, 31, dtype=torch.float64, requires_grad=True)
    values = kernel.mercer(t.view(1, -1)).view(-1)
    resolvent = c * values - laplace_beltrami(values, t, ambient_dim)
    with torch.no_grad():
        expected = lower.mercer(t.detach().view(1, -1)).view(-1)
    assert_proportional(resolvent.detach(), expected, rtol=1e-10)


@pytest.mark.parametrize("ambient_dim", [3, 4])
def test_heat_semigroup_by_exact_quadrature(ambient_dim):
    """int k_s(x, z) k_u(z, y) dz is proportional to k_{s+u}(x, y) (heat times s = kappa_1^2 / 2,
    u = kappa_2^2 / 2). The integrand is a polynomial of degree 2L in z, so a product Gauss rule of
    that degree integrates it exactly."""
    truncation = 10
    kernels = [IntrinsicHeatKernel(ambient_dim, max_degree=truncation) for _ in range(3)]
    kernels[0].lengthscale, kernels[1].lengthscale = 0.6, 0.8
    kernels[2].lengthscale = math.sqrt(0.6**2 + 0.8**2)
    nodes, weights = sphere_quadrature(ambient_dim, 2 * truncation)
    z, w = torch.from_numpy(nodes), torch.from_numpy(weights)  # [Q, d], [Q]
    x, y = random_sphere(6, ambient_dim, seed=1), random_sphere(5, ambient_dim, seed=2)
    with torch.no_grad():
        convolution = (kernels[0](x, z).to_dense() * w) @ kernels[1](z, y).to_dense()  # [6, 5]
        expected = kernels[2](x, y).to_dense()
    assert_proportional(convolution.reshape(-1), expected.reshape(-1), rtol=1e-12)


@pytest.mark.parametrize("ambient_dim", [3, 5])
@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
def test_matern_decay_matches_the_chordal_matern(ambient_dim, nu):
    """Intrinsic and chordal Matern-nu kernels on S^{d-1} have the same Sobolev smoothness
    nu + (d - 1)/2, so their eigenvalues decay at the same rate n^{-2 nu - (d - 1)}; the chordal
    ones come from Funk-Hecke quadrature of the closed form. Their ratio settles to a constant
    (an exponent off by 1/2 would change it by a factor 2 between n and 2n)."""
    from zonal.kernels import ChordalMaternKernel

    intrinsic = IntrinsicMaternKernel(ambient_dim, nu=nu, max_degree=80)
    chordal = ChordalMaternKernel(ambient_dim, nu=nu, evaluation="mercer", max_degree=80)
    chordal.num_nodes = 2000
    intrinsic.lengthscale = chordal.lengthscale = 1.0
    with torch.no_grad():
        ratio = intrinsic.eigenvalues() / chordal.eigenvalues()  # [81]
    assert abs(float(ratio[40] / ratio[80]) - 1) < 0.03


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


@pytest.mark.parametrize("kernel_class", [IntrinsicMaternKernel, IntrinsicHeatKernel])
def test_eigenvalues_do_not_depend_on_how_many_levels_are_asked_for(kernel_class):
    """The kernel is its truncated sum to max_degree: lambda_n for n <= 5 is the same whether 6,
    31 or 41 levels are requested (it was renormalised over the levels asked for), and the levels
    above the truncation are zero."""
    kernel = kernel_class(3, max_degree=30).double()
    full = kernel.eigenvalues(30).detach()
    torch.testing.assert_close(kernel.eigenvalues(5).detach(), full[..., :6], rtol=1e-13, atol=0)
    longer = kernel.eigenvalues(40).detach()
    torch.testing.assert_close(longer[..., :31], full, rtol=1e-13, atol=0)
    assert longer[..., 31:].abs().max() == 0
