"""zonal.linalg: the jittered Cholesky's named error, and the Gaussian log density's closed-form
gradient against scipy's density and against autograd through the factor."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from zonal.linalg import NotPositiveDefiniteError, cholesky, gaussian_log_density


def spd(size: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    root = torch.randn(size, size, generator=generator, dtype=torch.float64)
    return root @ root.T / size + 0.1 * torch.eye(size, dtype=torch.float64)


def test_the_log_density_equals_scipys_multivariate_normal():
    matrix = spd(7)
    residual = torch.linspace(-1.0, 2.0, 7, dtype=torch.float64)
    expected = multivariate_normal(np.zeros(7), matrix.numpy()).logpdf(residual.numpy())
    assert float(gaussian_log_density(matrix, residual)) == pytest.approx(expected, abs=1e-10)


def through_the_factor(matrix: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """The same density differentiated by autograd through torch's Cholesky."""
    factor = torch.linalg.cholesky(matrix)
    weights = torch.linalg.solve_triangular(factor, residual.unsqueeze(-1), upper=False)
    return (
        -0.5 * weights.square().sum()
        - factor.diagonal().log().sum()
        - 0.5 * len(residual) * math.log(2 * math.pi)
    )


def test_the_closed_form_gradient_equals_autograd_through_the_factor():
    # K built from parameters, as a kernel matrix is: both paths see K_ij and K_ji separately
    root = torch.randn(6, 6, dtype=torch.float64, requires_grad=True)
    shift = torch.randn(6, dtype=torch.float64, requires_grad=True)
    residual = torch.randn(6, dtype=torch.float64)

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        matrix = root @ root.T + 0.5 * torch.eye(6, dtype=torch.float64)
        return matrix, residual - shift

    closed = torch.autograd.grad(gaussian_log_density(*inputs()), (root, shift))
    reference = torch.autograd.grad(through_the_factor(*inputs()), (root, shift))
    for ours, theirs in zip(closed, reference, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-9, atol=1e-11)


def test_gradcheck_in_float64():
    root = torch.randn(4, 4, dtype=torch.float64)
    matrix = (root @ root.T + torch.eye(4, dtype=torch.float64)).requires_grad_()
    residual = torch.randn(4, dtype=torch.float64, requires_grad=True)

    def symmetric_density(matrix: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return gaussian_log_density(0.5 * (matrix + matrix.T), residual)

    assert torch.autograd.gradcheck(symmetric_density, (matrix, residual))


def test_a_matrix_that_is_not_positive_definite_is_named():
    matrix = -torch.eye(3, dtype=torch.float64)
    with pytest.raises(NotPositiveDefiniteError, match="the test's matrix"):
        gaussian_log_density(matrix, torch.zeros(3, dtype=torch.float64), name="the test's matrix")
    with pytest.raises(NotPositiveDefiniteError, match="NaN"):
        cholesky(torch.full((2, 2), math.nan, dtype=torch.float64))


@pytest.mark.parametrize(
    "entry, value",
    [
        ((0, 0), math.nan),
        ((3, 1), math.nan),
        ((4, 4), math.inf),
        ((2, 0), math.inf),
        ((4, 3), -math.inf),
    ],
)
def test_a_non_finite_entry_of_the_lower_triangle_is_named(entry, value):
    # the factor is computed without scanning the matrix first: each such entry must still
    # surface as the named error, never as a factor holding NaN
    matrix = spd(5).unsqueeze(0).repeat(3, 1, 1)  # a batch, the bad entry in its second matrix
    matrix[1, entry[0], entry[1]] = value
    with pytest.raises(NotPositiveDefiniteError, match="the test's matrix contains NaN"):
        cholesky(matrix, name="the test's matrix")


def test_the_factor_of_a_finite_matrix_is_torchs():
    matrix = spd(6).unsqueeze(0).repeat(2, 1, 1)
    torch.testing.assert_close(cholesky(matrix), torch.linalg.cholesky(matrix), rtol=0, atol=0)
