"""Arc-cosine kernels of orders 0, 1, 2 against independent references.

References: a slow Python loop over Cho and Saul's J_n (Cho and Saul 2009, eq. 6), a Monte Carlo
estimate of 2 E_w[sigma(w.x) sigma(w.x')], the closed-form eigenvalues and printed values of seed
000 appendix C (table C.1), and the Mercer sum's convergence to the closed form.
"""

import math

import pytest
import torch

from zonal.harmonics import arccos_eigenvalues, funk_hecke
from zonal.kernels import ArcCosineKernel, arccos_kernel_eigenvalues, arccos_shape


def random_sphere(num, ambient_dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def cho_saul_j(order, theta):
    """J_n(theta) of Cho and Saul (2009), eq. (6), written out for n = 0, 1, 2."""
    if order == 0:
        return math.pi - theta
    if order == 1:
        return math.sin(theta) + (math.pi - theta) * math.cos(theta)
    return 3 * math.sin(theta) * math.cos(theta) + (math.pi - theta) * (
        1 + 2 * math.cos(theta) ** 2
    )


def loop_reference(x1, x2, order, homogeneous=False):
    """k_n(x, y) = (1/pi) ||x||^n ||y||^n J_n(theta), normalised by J_n(0) / pi, pair by pair."""
    out = torch.empty(len(x1), len(x2), dtype=torch.float64)
    for i, a in enumerate(x1.tolist()):
        for j, b in enumerate(x2.tolist()):
            norm_a = math.sqrt(sum(v * v for v in a))
            norm_b = math.sqrt(sum(v * v for v in b))
            cosine = sum(u * v for u, v in zip(a, b, strict=True)) / (norm_a * norm_b)
            theta = math.acos(max(-1.0, min(1.0, cosine)))
            value = cho_saul_j(order, theta) / cho_saul_j(order, 0.0)
            out[i, j] = value * (norm_a * norm_b if homogeneous else 1.0)
    return out


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("ambient_dim", [2, 3, 6])
def test_closed_form_matches_loop_reference(order, ambient_dim):
    x1 = random_sphere(7, ambient_dim, seed=1)
    x2 = torch.cat([random_sphere(5, ambient_dim, seed=2), x1[:1], -x1[1:2]])  # t = 1 and -1
    kernel = ArcCosineKernel(ambient_dim, order=order)
    with torch.no_grad():
        actual = kernel(x1, x2).to_dense()
    torch.testing.assert_close(actual, loop_reference(x1, x2, order), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("order", [0, 1, 2])
def test_homogeneous_option_is_cho_saul_radial_extension(order):
    generator = torch.Generator().manual_seed(3)
    x1 = torch.randn(5, 4, generator=generator, dtype=torch.float64) * 3
    x2 = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    kernel = ArcCosineKernel(4, order=order, homogeneous=True)
    with torch.no_grad():
        actual = kernel(x1, x2).to_dense()
        diagonal = kernel(x1, diag=True)
    expected = loop_reference(x1, x2, order, homogeneous=True)
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(diagonal, x1.norm(dim=-1) ** 2, rtol=1e-13, atol=0)


@pytest.mark.parametrize("order", [0, 1, 2])
def test_closed_form_matches_monte_carlo(order):
    """s_n(x.x') = 2 E[relu(w.x)^n relu(w.x')^n] / (J_n(0)/pi), w ~ N(0, I): within 5 std errors."""
    ambient_dim, num_samples = 3, 200_000
    points = random_sphere(4, ambient_dim, seed=4)
    generator = torch.Generator().manual_seed(5)
    w = torch.randn(num_samples, ambient_dim, generator=generator, dtype=torch.float64)
    projections = w @ points.T  # [S, 4]
    activations = (projections > 0).double() * projections.clamp_min(0) ** order  # [S, 4]
    normaliser = cho_saul_j(order, 0.0) / math.pi
    kernel = ArcCosineKernel(ambient_dim, order=order)
    with torch.no_grad():
        closed = kernel(points).to_dense()
    for i in range(4):
        for j in range(4):
            samples = 2 * activations[:, i] * activations[:, j] / normaliser  # [S]
            estimate = samples.mean()
            standard_error = samples.std() / math.sqrt(num_samples)
            assert abs(float(estimate - closed[i, j])) < 5 * float(standard_error) + 1e-12


# Seed 000 table C.1, "analytical" columns (three significant figures), levels 0..8.
TABLE_C1 = {
    3: [0.375, 0.167, 0.0234, 0.0, 0.000651, 0.0, 9.16e-05, 0.0, 2.29e-05],
    5: [0.352, 0.1, 0.00977, 0.0, 0.000153, 0.0, 1.37e-05, 0.0, 2.38e-06],
    7: [0.342, 0.0714, 0.00534, 0.0, 5.34e-05, 0.0, 3.34e-06, 0.0, 4.26e-07],
}


@pytest.mark.parametrize("ambient_dim", sorted(TABLE_C1))
def test_order_one_eigenvalues_match_seed_table_c1(ambient_dim):
    kernel = ArcCosineKernel(ambient_dim, order=1)
    eigenvalues = kernel.eigenvalues(8)
    expected = torch.tensor(TABLE_C1[ambient_dim], dtype=torch.float64)
    # three significant figures: relative 5e-3 (absolute 1e-12 for the exact zeros)
    torch.testing.assert_close(eigenvalues, expected, rtol=5e-3, atol=1e-12)


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("ambient_dim", [3, 4, 5, 8])
def test_exact_eigenvalues_match_funk_hecke_of_the_shape(order, ambient_dim):
    """The product formula (activation coefficients squared) against quadrature of s_n itself."""
    exact = arccos_kernel_eigenvalues(ambient_dim, 30, order)
    quadrature = funk_hecke(
        lambda t: arccos_shape(t, order), ambient_dim, 30, num_nodes=600
    )  # integrates the shape directly (no kink splitting)
    # s_0 behaves as 1 - sqrt(2 (1 - t)) / pi at t = 1: plain Gauss-Jacobi reaches ~1e-9 there
    assert float((exact - quadrature).abs().max()) < (1e-9 if order == 0 else 1e-10)
    odd, even = exact[3::2], exact[order + 2 :: 2]  # levels 3, 5, ... and order+2, order+4, ...
    tiny = 1e-15 * float(exact[0])
    if order == 1:
        torch.testing.assert_close(exact, arccos_eigenvalues(ambient_dim, 30), rtol=0, atol=0)
        # relu(t) = t/2 + |t|/2: no odd level above 1 (Bach 2017, seed 000 sec. 4.2)
        assert float(odd.abs().max()) < tiny
    else:
        # step(t) = 1/2 + (odd), relu(t)^2 = t^2/2 + (odd): every odd level, no even level above
        # the order
        assert bool((odd > 0).all())
        assert float(even.abs().max()) < tiny


# Mercer sum with the exact eigenvalues against the closed form on a fine grid of t in [-1, 1]:
# (order, truncation L, bound on the max error). Orders 1 and 2 converge as L^-3 and L^-5; order 0
# (a cone at t = 1) only as 1/L, so its bound is checked at two truncations.
MERCER_CASES = [(1, 200, 1e-6), (2, 100, 1e-8), (0, 400, 2e-3)]


@pytest.mark.parametrize(("order", "truncation", "bound"), MERCER_CASES)
@pytest.mark.parametrize("ambient_dim", [3, 5, 8])
def test_mercer_sum_converges_to_closed_form(order, truncation, bound, ambient_dim):
    kernel = ArcCosineKernel(ambient_dim, order=order)
    t = torch.linspace(-1, 1, 2001, dtype=torch.float64).view(1, -1)
    with torch.no_grad():
        exact = kernel.shape(t)
        error = float((kernel.mercer(t, truncation) - exact).abs().max())
        coarse = float((kernel.mercer(t, truncation // 2) - exact).abs().max())
    assert error < bound
    assert coarse > 1.9 * error  # still converging: halving L at least doubles the error


@pytest.mark.parametrize("order", [0, 1, 2])
def test_gradients_finite_at_coincident_and_antipodal_points(order):
    x = random_sphere(5, 3, seed=6)
    x = torch.cat([x, x[:2], -x[2:3]]).requires_grad_()  # duplicates (t = 1) and antipodes (t = -1)
    kernel = ArcCosineKernel(3, order=order)
    value = kernel(x).to_dense().sum() + kernel(x, x.detach().clone()).to_dense().sum()
    (grad,) = torch.autograd.grad(value, x)
    assert torch.isfinite(grad).all()
    t = torch.tensor([-1.0, 1.0, -1.0 + 1e-15, 1.0 - 1e-15], dtype=torch.float64)
    t.requires_grad_()
    (slope,) = torch.autograd.grad(arccos_shape(t, order).sum(), t)
    assert torch.isfinite(slope).all()
    if order == 1:  # ds_1/dt = s_0: 0 at t = -1 and 1 at t = 1
        torch.testing.assert_close(slope[:2], torch.tensor([0.0, 1.0], dtype=torch.float64))


@pytest.mark.parametrize("order", [0, 1, 2])
def test_input_gradients_gradcheck(order):
    x1 = random_sphere(4, 3, seed=7).requires_grad_()
    x2 = random_sphere(3, 3, seed=8)
    kernel = ArcCosineKernel(3, order=order, homogeneous=True)
    assert torch.autograd.gradcheck(lambda a: kernel(a, x2).to_dense(), (x1,))


def test_bad_orders_and_inputs():
    for order in (3, -1, 1.0, True, "1"):
        with pytest.raises(ValueError, match="order"):
            ArcCosineKernel(3, order=order)
    kernel = ArcCosineKernel(3)
    with pytest.raises(ValueError, match="unit vectors"):
        kernel(torch.ones(4, 3, dtype=torch.float64)).to_dense()
    with pytest.raises(ValueError, match="last dimension"):
        kernel(random_sphere(4, 4)).to_dense()
    with pytest.raises(ValueError, match="non-zero"):
        ArcCosineKernel(3, homogeneous=True)(torch.zeros(2, 3, dtype=torch.float64)).to_dense()
    with pytest.raises(ValueError, match="evaluation"):
        ArcCosineKernel(3, evaluation="fast")


def test_rounding_outside_the_interval_is_clamped():
    t = torch.tensor([1 + 1e-15, -1 - 1e-15], dtype=torch.float64, requires_grad=True)
    for order in (0, 1, 2):
        value = arccos_shape(t, order)
        torch.testing.assert_close(value.detach(), arccos_shape(t.detach().clamp(-1, 1), order))
        (grad,) = torch.autograd.grad(value.sum(), t)
        assert torch.isfinite(grad).all()
