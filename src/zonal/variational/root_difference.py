r"""The posterior covariance correction :math:`A^\top S A - B^\top B` as a lazy operator with a
cheap diagonal.

The conditional of an inter-domain SVGP (``InterDomainVariationalStrategy``) is

.. math::

    \operatorname{cov} = K_{ff} + P^\top P - Q^\top Q, \qquad P = R^\top A \quad (S = R R^\top),
    \qquad Q = B = L^{-1} K_{uf} \quad (Q_{ff} = Q^\top Q),

and training and Monte Carlo prediction of (deep) GPs only ever read its diagonal,
:math:`\sum_k P[k, i]^2 - \sum_m Q[m, i]^2`: :math:`O(M N)` once :math:`P` and :math:`Q` are known.
``RootDifferenceLinearOperator`` keeps the two roots instead of forming :math:`N \times N`
matrices, and computes the column norms on the roots as given: a deep GP layer shares :math:`Q`
between its outputs (one [*, 1, M, N] root for :math:`P` outputs), and an elementwise product over
a stride-0 expansion would be repeated, and slow, for each of them.
"""

from __future__ import annotations

import torch
from linear_operator.operators import LinearOperator


def compact(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` [*b, R, C] with every batch dimension of stride 0 (an ``expand``) narrowed to
    size 1; it broadcasts back to the same values."""
    for dim in range(tensor.dim() - 2):
        if tensor.stride(dim) == 0 and tensor.shape[dim] > 1:
            tensor = tensor.narrow(dim, 0, 1)
    return tensor


class RootDifferenceLinearOperator(LinearOperator):
    """plus^T plus - minus^T minus [*b, N, N] for roots plus [*b1, K, N] and minus [*b2, M, N]
    whose batch shapes broadcast to *b (or to ``batch_shape``).

    The roots are kept as given for the diagonal; the operator's arguments (what GPyTorch's
    generic batch operations see) are their expansions.
    """

    def __init__(
        self, plus: torch.Tensor, minus: torch.Tensor, batch_shape: torch.Size | None = None
    ) -> None:
        if plus.shape[-1] != minus.shape[-1]:
            raise ValueError(
                f"roots [*b, K, N] and [*b, M, N] must share N, got {tuple(plus.shape)} and "
                f"{tuple(minus.shape)}"
            )
        shapes = [plus.shape[:-2], minus.shape[:-2], *([batch_shape] if batch_shape else [])]
        batch = torch.broadcast_shapes(*shapes)
        super().__init__(
            plus.expand(*batch, *plus.shape[-2:]), minus.expand(*batch, *minus.shape[-2:])
        )
        self.plus, self.minus = self._args
        self._roots = (plus, minus)

    def _size(self) -> torch.Size:
        size = self.plus.shape[-1]
        return torch.Size([*self.plus.shape[:-2], size, size])

    def _transpose_nonbatch(self) -> RootDifferenceLinearOperator:
        return self  # symmetric

    def _matmul(self, rhs: torch.Tensor) -> torch.Tensor:
        return self.plus.mT @ (self.plus @ rhs) - self.minus.mT @ (self.minus @ rhs)

    def _diagonal(self) -> torch.Tensor:
        plus, minus = self._roots
        difference = plus.pow(2).sum(-2) - minus.pow(2).sum(-2)  # [*b', N]
        return difference.expand(*self.batch_shape, difference.shape[-1])  # [*b, N]

    def _expand_batch(self, batch_shape: torch.Size) -> RootDifferenceLinearOperator:
        return self.__class__(*self._roots, batch_shape=torch.Size(batch_shape))

    def to_dense(self) -> torch.Tensor:
        return self.plus.mT @ self.plus - self.minus.mT @ self.minus


__all__ = ["RootDifferenceLinearOperator", "compact"]
