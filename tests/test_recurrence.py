"""Every form of the Gegenbauer recurrence (zonal.harmonics.recurrence) against the plain one,
and the plain one against scipy: in place, Clenshaw, blocked, by harmonic level, one degree."""

import numpy as np
import pytest
import torch
from scipy.special import eval_chebyt, eval_gegenbauer

from zonal.harmonics import num_harmonics, zonal_harmonic
from zonal.harmonics.recurrence import (
    BLOCK,
    clenshaw_series,
    gegenbauer_iter,
    gegenbauer_stack,
    series_no_grad,
    zonal_by_level,
    zonal_of_degree,
)

ALPHAS = [0.0, 0.5, 1.5, 3.0]


def grid(num=301):
    return torch.linspace(-1, 1, num, dtype=torch.float64)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_plain_recurrence_matches_scipy(alpha):
    t = grid()
    values = gegenbauer_stack(t, 60, alpha).numpy()  # [T, 61]
    degrees = np.arange(61)
    if alpha == 0:  # the Chebyshev normalisation (2 / n) T_n, C_0 = 1
        expected = eval_chebyt(degrees[None, :], t.numpy()[:, None]) * 2.0 / np.maximum(degrees, 1)
        expected[:, 0] = 1.0
    else:
        expected = eval_gegenbauer(degrees[None, :], alpha, t.numpy()[:, None])
    envelope = np.abs(expected).max(axis=0)  # sup norm of each degree
    assert (np.abs(values - expected).max(axis=0) / envelope).max() < 1e-12


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("max_degree", [0, 1, 2, 5, 80])
def test_clenshaw_equals_the_stacked_sum(alpha, max_degree):
    generator = torch.Generator().manual_seed(max_degree)
    t = grid()
    coeffs = torch.randn(max_degree + 1, generator=generator, dtype=torch.float64)
    stacked = gegenbauer_stack(t, max_degree, alpha)  # [T, L + 1]
    scale = (stacked.abs() * coeffs.abs()).sum(-1).max()  # the size of the terms summed
    torch.testing.assert_close(
        clenshaw_series(t, coeffs, alpha), stacked @ coeffs, rtol=0, atol=1e-13 * float(scale)
    )


def test_clenshaw_broadcasts_batched_coefficients():
    t = grid(12).view(3, 4)
    coeffs = torch.rand(2, 1, 1, 7, dtype=torch.float64)
    expected = (gegenbauer_stack(t, 6, 1.5) * coeffs).sum(-1)  # [2, 3, 4]
    torch.testing.assert_close(clenshaw_series(t, coeffs, 1.5), expected, rtol=1e-13, atol=1e-13)
    t32 = t.to(torch.float32)
    assert clenshaw_series(t32, coeffs, 1.5).dtype == torch.float64  # promoted, not truncated


def test_blocked_series_equals_one_pass():
    t = torch.rand(3 * BLOCK + 17, dtype=torch.float64) * 2 - 1
    coeffs = torch.rand(15, dtype=torch.float64)
    torch.testing.assert_close(
        series_no_grad(t, coeffs, 2.0), clenshaw_series(t, coeffs, 2.0), rtol=0, atol=0
    )


@pytest.mark.parametrize("ambient_dim", [2, 3, 5])
def test_zonal_of_degree_is_one_column_of_the_stack(ambient_dim):
    t = grid()
    stacked = zonal_harmonic(t, 25, ambient_dim)  # [T, 26]
    alpha = (ambient_dim - 2) / 2
    for degree in (0, 1, 2, 7, 25):
        actual = zonal_of_degree(t, degree, alpha)
        torch.testing.assert_close(actual, stacked[:, degree], rtol=1e-12, atol=1e-10)
    assert torch.equal(t, grid())  # read only
    one = zonal_of_degree(torch.ones(1, dtype=torch.float64), 9, alpha)
    assert float(one) == pytest.approx(num_harmonics(ambient_dim, 9), rel=1e-12)  # Z_n(1) = N_n


@pytest.mark.parametrize("ambient_dim", [2, 4])
def test_zonal_by_level_in_place_and_differentiable_agree(ambient_dim):
    sizes = [1, 0, 3, 2, 4]  # column blocks of degrees 0..4 (degree 1 has no column)
    generator = torch.Generator().manual_seed(0)
    t = torch.rand(6, sum(sizes), generator=generator, dtype=torch.float64) * 2 - 1
    degrees = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))  # [M]
    stacked = zonal_harmonic(t, len(sizes) - 1, ambient_dim)  # [6, M, 5]
    expected = stacked.gather(-1, degrees.expand(6, -1).unsqueeze(-1)).squeeze(-1)  # [6, M]
    with torch.no_grad():
        in_place = zonal_by_level(t, sizes, ambient_dim)
    differentiable = zonal_by_level(t.clone().requires_grad_(), sizes, ambient_dim)
    assert differentiable.requires_grad
    torch.testing.assert_close(in_place, expected, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(differentiable.detach(), expected, rtol=1e-13, atol=1e-13)


def _by_level_reference(t, sizes, ambient_dim):
    """Z_{n(m)}(t_m) by the plain out-of-place recurrence (autograd differentiates it)."""
    degrees = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))  # [M]
    stacked = zonal_harmonic(t, len(sizes) - 1, ambient_dim)  # [..., M, L + 1]
    return stacked.gather(-1, degrees.expand(*t.shape[:-1], -1).unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("ambient_dim", [2, 3, 4, 7])
@pytest.mark.parametrize("sizes", [[1, 0, 3, 2, 4], [2, 3], [0, 2, 0, 0, 3, 1], [1]])
def test_zonal_by_level_gradients_are_the_plain_recurrences(ambient_dim, sizes):
    """The closed-form derivative (``_ZonalByLevel``: the recurrence one dimension up) gives the
    gradient and the second derivative that autograd takes through the plain recurrence."""
    generator = torch.Generator().manual_seed(1)
    t = torch.rand(5, sum(sizes), generator=generator, dtype=torch.float64) * 2 - 1
    weights = torch.randn(5, sum(sizes), generator=generator, dtype=torch.float64)
    derivatives = []
    for evaluate in (zonal_by_level, _by_level_reference):
        leaf = t.clone().requires_grad_()
        value = (weights * evaluate(leaf, sizes, ambient_dim)).sum() + 0 * leaf.sum()
        (gradient,) = torch.autograd.grad(value, leaf, create_graph=True)
        (second,) = torch.autograd.grad((gradient * weights).sum() + 0 * leaf.sum(), leaf)
        derivatives.append((gradient.detach(), second))
    torch.testing.assert_close(derivatives[0][0], derivatives[1][0], rtol=1e-11, atol=1e-11)
    torch.testing.assert_close(derivatives[0][1], derivatives[1][1], rtol=1e-10, atol=1e-10)


def test_zonal_by_level_gradcheck():
    """Against central finite differences (torch.autograd.gradcheck and gradgradcheck)."""
    generator = torch.Generator().manual_seed(2)
    t = (torch.rand(3, 8, generator=generator, dtype=torch.float64) * 1.8 - 0.9).requires_grad_()
    sizes = [1, 2, 0, 3, 2]
    assert torch.autograd.gradcheck(lambda u: zonal_by_level(u, sizes, 5), (t,))
    assert torch.autograd.gradgradcheck(lambda u: zonal_by_level(u, sizes, 5), (t,))


def test_iterator_yields_the_stack():
    t = grid(9)
    for alpha in ALPHAS:
        columns = list(gegenbauer_iter(t, 6, alpha))
        assert len(columns) == 7
        torch.testing.assert_close(torch.stack(columns, -1), gegenbauer_stack(t, 6, alpha))
