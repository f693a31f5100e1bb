"""Gegenbauer polynomials against scipy and mpmath, and their closed-form derivative."""

import mpmath
import numpy as np
import pytest
import torch
from scipy.special import eval_chebyt, eval_gegenbauer

from zonal.harmonics import gegenbauer, zonal_harmonic

GRID = torch.linspace(-1, 1, 4001, dtype=torch.float64)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.5, 4.0, 9.0])
def test_matches_scipy_to_degree_100(alpha):
    ours = gegenbauer(GRID, 100, alpha).numpy()  # [T, 101]
    degrees = np.arange(101)
    reference = eval_gegenbauer(degrees[None, :], alpha, GRID.numpy()[:, None])
    # Relative error in the sup norm of each degree over the grid: pointwise relative error is
    # meaningless at the roots, where both sides are rounding noise.
    envelope = np.abs(reference).max(axis=0)
    assert (np.abs(ours - reference).max(axis=0) / envelope).max() < 1e-12
    # Pointwise relative error wherever the polynomial is not near a root.
    away = np.abs(reference) > 1e-2 * envelope
    assert (np.abs(ours - reference)[away] / np.abs(reference)[away]).max() < 1e-11


@pytest.mark.parametrize("alpha", [0.5, 4.0])
def test_degree_100_against_mpmath(alpha):
    points = GRID[::250]
    ours = gegenbauer(points, 100, alpha)[:, 100].numpy()
    exact = np.array([float(mpmath.gegenbauer(100, alpha, mpmath.mpf(float(t)))) for t in points])
    assert np.abs(ours - exact).max() / np.abs(exact).max() < 1e-14


def test_alpha_zero_is_the_chebyshev_limit():
    values = gegenbauer(GRID, 20, 0.0).numpy()
    degrees = np.arange(1, 21)
    expected = 2.0 / degrees * eval_chebyt(degrees[None, :], GRID.numpy()[:, None])
    np.testing.assert_allclose(values[:, 1:], expected, atol=1e-13)
    np.testing.assert_array_equal(values[:, 0], 1.0)
    # the limit itself: C_n^alpha / alpha as alpha -> 0
    small = 1e-7
    limit = eval_gegenbauer(degrees[None, :], small, GRID.numpy()[:, None]) / small
    np.testing.assert_allclose(values[:, 1:], limit, atol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.5, 9.0])
def test_derivative_closed_form_autograd_and_finite_differences(alpha):
    t = torch.linspace(-0.99, 0.99, 41, dtype=torch.float64, requires_grad=True)
    values = gegenbauer(t, 12, alpha)
    weights = torch.linspace(1, 2, 13, dtype=torch.float64)
    (gradient,) = torch.autograd.grad((values * weights).sum(), t)
    step = 1e-6
    plus = gegenbauer(t.detach() + step, 12, alpha)
    minus = gegenbauer(t.detach() - step, 12, alpha)
    finite = ((plus - minus) / (2 * step) * weights).sum(-1)
    np.testing.assert_allclose(gradient, finite, rtol=1e-6, atol=1e-6 * finite.abs().max())
    # autograd through the plain recurrence (no custom backward) is an independent derivative
    from zonal.harmonics.recurrence import gegenbauer_stack

    t2 = t.detach().clone().requires_grad_(True)
    (plain,) = torch.autograd.grad((gegenbauer_stack(t2, 12, alpha) * weights).sum(), t2)
    np.testing.assert_allclose(gradient, plain, rtol=1e-12, atol=1e-10)


def test_gradcheck_and_second_derivative():
    t = torch.linspace(-0.9, 0.9, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: gegenbauer(x, 8, 1.5), (t,))
    assert torch.autograd.gradgradcheck(lambda x: gegenbauer(x, 8, 1.5), (t,))


def test_zonal_harmonic_at_one_counts_harmonics():
    from zonal.harmonics import num_harmonics

    for ambient_dim in [2, 3, 4, 7]:
        values = zonal_harmonic(torch.ones(1, dtype=torch.float64), 15, ambient_dim)[0]
        expected = [num_harmonics(ambient_dim, n) for n in range(16)]
        np.testing.assert_allclose(values.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("degree", "alpha", "message"),
    [(-1, 1.0, "non-negative"), (2.5, 1.0, "integer"), (3.0, 1.0, "int"), (3, -0.5, "alpha")],
)
def test_bad_arguments(degree, alpha, message):
    with pytest.raises(ValueError, match=message):
        gegenbauer(GRID, degree, alpha)


def test_nan_input_is_rejected():
    with pytest.raises(ValueError, match="NaN"):
        gegenbauer(torch.tensor([0.1, float("nan")], dtype=torch.float64), 3, 1.0)
