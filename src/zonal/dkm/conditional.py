r"""Predicted Gram blocks and predictive moments by the GP conditional (seed 003 eqs. 10, 86-87).

Given the kernel blocks :math:`K_{ii}`, :math:`K_{ti}`, :math:`K_{tt}` of a layer and the learned
inducing block :math:`G_{ii}`, the features of the test/train points are, channel by channel,
:math:`f_t \mid f_i \sim \mathcal{N}(K_{ti} K_{ii}^{-1} f_i, K_{tt} - K_{ti} K_{ii}^{-1} K_{it})`.
Averaging over infinitely many channels whose inducing values have second moment :math:`G_{ii}`
(:math:`G = F F^\top / N`, seed 003 eq. 1) gives, by the law of total variance (the algebra of
eq. 87 with :math:`A = G_{ii}`, :math:`\mu = 0`),

.. math::

    G_{ti} &= K_{ti} K_{ii}^{-1} G_{ii}, \\
    G_{tt} &= K_{tt} - K_{ti} K_{ii}^{-1} K_{it} + K_{ti} K_{ii}^{-1} G_{ii} K_{ii}^{-1} K_{it},

and at the output layer, with :math:`q(f_i) = \mathcal{N}(\mu, A)`, the predictive mean and
covariance (eqs. 86-87)

.. math::

    \mathbb{E}[f_t] = K_{ti} K_{ii}^{-1} \mu, \qquad
    \operatorname{Var}[f_t] = K_{tt} - K_{ti} K_{ii}^{-1} K_{it}
    + K_{ti} K_{ii}^{-1} A K_{ii}^{-1} K_{it}.

With :math:`L L^\top = K_{ii}`, :math:`G_{ii}` (or :math:`A`) :math:`= V V^\top`,
:math:`W = K_{ti} L^{-\top}` and :math:`U = L^{-1} V`: :math:`G_{ti} = (W U) V^\top` and
:math:`G_{tt} = K_{tt} - W W^\top + (W U)(W U)^\top`. Only the diagonal of :math:`G_{tt}` is formed
when :math:`K_{tt}` is given as its diagonal [n] (all a minibatch objective needs, seed 003
appendix E.2); a full :math:`K_{tt}` [n, n] gives the full block (joint predictions).
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class ConditionalBlocks(NamedTuple):
    """:math:`G_{ti}` [*b, n, M], :math:`G_{tt}` ([*b, n] diagonal or [*b, n, n]) and the mean
    [*b, n, C] (or None)."""

    cross: torch.Tensor
    tt: torch.Tensor
    mean: torch.Tensor | None


def conditional_blocks(
    chol_ii: torch.Tensor,
    kernel_ti: torch.Tensor,
    kernel_tt: torch.Tensor,
    root_ii: torch.Tensor,
    mean_i: torch.Tensor | None = None,
) -> ConditionalBlocks:
    r"""The conditional blocks of the module docstring.

    Args:
        chol_ii: :math:`L` [*b, M, M], the Cholesky factor of :math:`K_{ii}`.
        kernel_ti: :math:`K_{ti}` [*b, n, M].
        kernel_tt: :math:`K_{tt}` as its diagonal [*b, n] or in full [*b, n, n].
        root_ii: :math:`V` [*b, M, M] with :math:`G_{ii}` (or :math:`A`) :math:`= V V^\top`.
        mean_i: :math:`\mu` [*b, M, C] of the inducing outputs (the output layer), or None.
    """
    whitened = torch.linalg.solve_triangular(chol_ii, kernel_ti.mT, upper=False).mT  # W [*b, n, M]
    projected = whitened @ torch.linalg.solve_triangular(chol_ii, root_ii, upper=False)  # WU
    cross = projected @ root_ii.mT  # [*b, n, M]
    if kernel_tt.dim() == kernel_ti.dim() - 1:  # diagonal only
        residual = (kernel_tt - whitened.square().sum(-1)).clamp_min(0)  # [*b, n]
        tt = residual + projected.square().sum(-1)  # [*b, n]
    else:
        tt = kernel_tt - whitened @ whitened.mT + projected @ projected.mT  # [*b, n, n]
    mean = None
    if mean_i is not None:
        mean = whitened @ torch.linalg.solve_triangular(chol_ii, mean_i, upper=False)  # [*b, n, C]
    return ConditionalBlocks(cross, tt, mean)
