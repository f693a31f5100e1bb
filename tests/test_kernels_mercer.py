"""The memory-light Mercer sum against the stacked addition-theorem terms of zonal.harmonics."""

import pytest
import torch

from zonal.harmonics import gegenbauer, zonal_harmonic
from zonal.harmonics.recurrence import BLOCK
from zonal.kernels import gegenbauer_series, mercer_sum


@pytest.mark.parametrize("ambient_dim", [2, 3, 4, 7])
def test_mercer_sum_equals_stacked_zonal_harmonics(ambient_dim):
    generator = torch.Generator().manual_seed(ambient_dim)
    t = torch.rand(6, 5, generator=generator, dtype=torch.float64) * 2 - 1
    t[0, 0], t[0, 1] = 1.0, -1.0
    eigenvalues = torch.rand(3, 1, 1, 13, generator=generator, dtype=torch.float64)
    expected = (zonal_harmonic(t, 12, ambient_dim) * eigenvalues).sum(-1)  # [3, 6, 5]
    actual = mercer_sum(t, eigenvalues, ambient_dim)
    assert actual.shape == (3, 6, 5)
    scale = expected.abs().max()
    torch.testing.assert_close(actual, expected, rtol=0, atol=1e-13 * scale)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 2.5])
def test_gegenbauer_series_equals_stacked_polynomials(alpha):
    t = torch.linspace(-1, 1, 41, dtype=torch.float64)
    coeffs = torch.linspace(1, 0.1, 9, dtype=torch.float64)
    expected = gegenbauer(t, 8, alpha) @ coeffs
    torch.testing.assert_close(
        gegenbauer_series(t, coeffs, alpha), expected, rtol=1e-13, atol=1e-13
    )


def test_blocked_path_matches_unblocked():
    t = torch.rand(BLOCK + 123, dtype=torch.float64) * 2 - 1
    coeffs = torch.rand(20, dtype=torch.float64)
    blocked = gegenbauer_series(t, coeffs, 1.5)  # one coefficient set: blocked
    batched = gegenbauer_series(t, coeffs.expand(2, 1, 20), 1.5)  # batch: unblocked
    torch.testing.assert_close(blocked, batched[0], rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("ambient_dim", [2, 3, 6])
def test_mercer_sum_gradients(ambient_dim):
    generator = torch.Generator().manual_seed(1)
    t = (torch.rand(4, 3, generator=generator, dtype=torch.float64) * 1.8 - 0.9).requires_grad_()
    eigenvalues = torch.rand(2, 1, 1, 7, generator=generator, dtype=torch.float64)
    eigenvalues.requires_grad_()

    def function(t, eigenvalues):
        return mercer_sum(t, eigenvalues, ambient_dim)

    assert torch.autograd.gradcheck(function, (t, eigenvalues))
    assert torch.autograd.gradgradcheck(function, (t, eigenvalues))


def test_mercer_sum_degree_zero_and_bad_coefficients():
    t = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
    value = mercer_sum(t, torch.tensor([2.0], dtype=torch.float64), 3)
    torch.testing.assert_close(value, torch.full((2,), 2.0, dtype=torch.float64))
    value.sum().backward()
    assert torch.equal(t.grad, torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="last dimension"):
        gegenbauer_series(t, torch.zeros(0, dtype=torch.float64), 0.5)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 4.5])
def test_gegenbauer_moments_are_the_weighted_sums_of_the_polynomials(alpha):
    """sum_i w_i C_n(t_i) over more than one block, t and w differing by axes of size 1."""
    from zonal.harmonics.recurrence import gegenbauer_moments

    generator = torch.Generator().manual_seed(3)
    t = torch.rand(BLOCK + 77, generator=generator, dtype=torch.float64) * 2 - 1
    weights = torch.randn(1, BLOCK + 77, generator=generator, dtype=torch.float64)
    expected = weights[0] @ gegenbauer(t, 15, alpha)  # [16]
    actual = gegenbauer_moments(t, weights, 15, alpha)
    torch.testing.assert_close(
        actual, expected, rtol=1e-12, atol=1e-12 * float(expected.abs().max())
    )
    with pytest.raises(ValueError, match="differ in size"):
        gegenbauer_moments(t, weights[:, :-1], 15, alpha)


def test_series_gradient_of_one_coefficient_set_matches_the_stacked_path():
    """The coefficient gradient of one coefficient set (by the moments) equals the stacked
    autograd path's (taken with create_graph), and passes gradcheck and gradgradcheck."""
    generator = torch.Generator().manual_seed(5)
    t = (torch.rand(300, 200, generator=generator, dtype=torch.float64) * 2 - 1).requires_grad_()
    coeffs = torch.rand(1, 1, 21, generator=generator, dtype=torch.float64).requires_grad_()
    weights = torch.randn(300, 200, generator=generator, dtype=torch.float64)
    fast = torch.autograd.grad((gegenbauer_series(t, coeffs, 1.5) * weights).sum(), (t, coeffs))
    stacked = torch.autograd.grad(
        (gegenbauer_series(t, coeffs, 1.5) * weights).sum(), (t, coeffs), create_graph=True
    )
    for a, b in zip(fast, stacked, strict=True):
        torch.testing.assert_close(a, b.detach(), rtol=1e-12, atol=1e-12 * float(b.abs().max()))
    small_t = t[:3, :4].detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda x, c: gegenbauer_series(x, c, 1.5), (small_t, coeffs))
    assert torch.autograd.gradgradcheck(
        lambda x, c: gegenbauer_series(x, c, 1.5), (small_t, coeffs)
    )
