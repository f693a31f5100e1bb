"""The inter-domain conditional's lazy pieces: the root-difference operator against dense algebra,
the projection shared by a DGP layer's outputs, and the q(u) covariances without a Cholesky root."""

import gpytorch
import pytest
import torch
from linear_operator.operators import DenseLinearOperator, DiagLinearOperator, SumLinearOperator

from zonal.features import InducingPoints
from zonal.kernels import ArcCosineKernel
from zonal.models.dgp import DGPLayer
from zonal.variational.root_difference import RootDifferenceLinearOperator, compact


def random(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64)


def test_root_difference_equals_the_dense_matrix_with_broadcast_roots():
    plus = random(2, 3, 4, 6, seed=1)  # [*b, K, N]
    minus = random(2, 1, 5, 6, seed=2)  # shared along the second batch dimension
    operator = RootDifferenceLinearOperator(plus, minus)
    dense = plus.mT @ plus - minus.mT @ minus  # [2, 3, 6, 6]
    assert operator.shape == dense.shape
    assert torch.allclose(operator.to_dense(), dense, atol=1e-12)
    assert torch.allclose(operator.diagonal(), dense.diagonal(dim1=-2, dim2=-1), atol=1e-12)
    rhs = random(2, 3, 6, 2, seed=3)
    assert torch.allclose(operator @ rhs, dense @ rhs, atol=1e-12)
    expanded = operator._expand_batch(torch.Size([4, 2, 3]))
    assert torch.allclose(expanded.diagonal(), dense.diagonal(dim1=-2, dim2=-1).expand(4, 2, 3, 6))
    summed = SumLinearOperator(DenseLinearOperator(torch.eye(6, dtype=torch.float64)), operator)
    assert torch.allclose(summed.diagonal(), 1 + dense.diagonal(dim1=-2, dim2=-1), atol=1e-12)


def test_root_difference_diagonal_gradient_matches_dense():
    plus = random(3, 4, 6, seed=4).requires_grad_()
    minus = random(1, 5, 6, seed=5).requires_grad_()
    RootDifferenceLinearOperator(plus, minus).diagonal().sin().sum().backward()
    fast = plus.grad.clone(), minus.grad.clone()
    plus.grad = minus.grad = None
    dense = plus.mT @ plus - minus.mT @ minus
    dense.diagonal(dim1=-2, dim2=-1).sin().sum().backward()
    assert torch.allclose(fast[0], plus.grad, atol=1e-12)
    assert torch.allclose(fast[1], minus.grad, atol=1e-12)


def test_bad_roots_are_named():
    with pytest.raises(ValueError, match="share N"):
        RootDifferenceLinearOperator(random(2, 5), random(2, 4))


def test_compact_narrows_only_expanded_batch_dimensions():
    base = random(2, 1, 3, 4)
    assert compact(base.expand(2, 5, 3, 4)).shape == (2, 1, 3, 4)
    assert compact(base.expand(2, 5, 3, 4).contiguous()).shape == (2, 5, 3, 4)


def hidden_layer(num_outputs=3, input_dims=2, num_inducing=6):
    kernel = gpytorch.kernels.ScaleKernel(ArcCosineKernel(input_dims + 1, homogeneous=True))
    points = random(num_inducing, input_dims + 1, seed=6)
    layer = DGPLayer(
        kernel.double(), InducingPoints(points), input_dims, num_outputs, mean="linear"
    )
    distribution = layer.variational_strategy._variational_distribution
    with torch.no_grad():
        distribution.variational_mean.copy_(random(*distribution.variational_mean.shape, seed=7))
        noise = 0.3 * random(*distribution.chol_variational_covar.shape, seed=8)
        distribution.chol_variational_covar.copy_(noise.tril(-1) + torch.eye(num_inducing))
    layer.variational_strategy.variational_params_initialized.fill_(1)
    return layer


def test_a_layers_outputs_share_the_projection_exactly():
    """GPyTorch repeats a hidden layer's input for each output (a stride-0 expand); the strategy
    computes L^{-1} Kuf once. It must equal the per-output computation on a real copy."""
    layer = hidden_layer()
    samples = random(4, 7, 2, seed=9)  # [S, N, D]
    lifted = layer.input_map.lift(samples).unsqueeze(-3).expand(4, 3, 7, 3)  # [S, P, N, D + 1]
    strategy = layer.variational_strategy
    shared = strategy(lifted, prior=False)
    separate = strategy(lifted.contiguous(), prior=False)
    assert shared.mean.shape == (4, 3, 7)
    assert torch.allclose(shared.mean, separate.mean, atol=1e-12)
    assert torch.allclose(shared.variance, separate.variance, atol=1e-12)
    assert torch.allclose(shared.covariance_matrix, separate.covariance_matrix, atol=1e-12)


@pytest.mark.parametrize("kind", ["diagonal", "dense"])
def test_covariances_without_a_cholesky_root_give_the_same_conditional(kind):
    """q(u) covariances stored as a diagonal (mean field) or as a dense matrix (no root: the
    A^T (S A) fallback) against the dense formula Kff - Qff + A^T S A."""
    layer = hidden_layer(num_outputs=None)
    strategy = layer.variational_strategy
    x = layer.input_map.lift(random(9, 2, seed=10))  # [N, D + 1]
    values = random(6, seed=11)
    if kind == "diagonal":
        diagonal = random(6, seed=12).abs() + 0.1
        covariance, dense_s = DiagLinearOperator(diagonal), torch.diag(diagonal)
    else:
        root = random(6, 6, seed=13)
        dense_s = root @ root.T + 0.1 * torch.eye(6, dtype=torch.float64)
        covariance = DenseLinearOperator(dense_s)
    output = strategy.forward(x, None, values, covariance)
    kernel = layer.covar_module
    factor = torch.linalg.cholesky(kernel(strategy.features.points).to_dense())
    projection = torch.linalg.solve_triangular(
        factor, kernel(strategy.features.points, x).to_dense(), upper=False
    )
    expected = (
        kernel(x).to_dense() - projection.T @ projection + projection.T @ dense_s @ projection
    )
    assert torch.allclose(output.covariance_matrix, expected, atol=1e-10)
    assert torch.allclose(output.variance, expected.diagonal(), atol=1e-10)
