"""Predicted Gram blocks and predictive moments by the GP conditional (seed 003 eqs. 10, 86-87).

Given the kernel blocks K_ii, K_ti, K_tt of a layer and the learned inducing block G_ii, the
features of the test/train points are, channel by channel, f_t | f_i ~ N(K_ti K_ii^{-1} f_i,
K_tt - K_ti K_ii^{-1} K_it). Averaging over infinitely many channels whose inducing values have
second moment G_ii (G = F F^T / N, seed 003 eq. 1) gives, by the law of total variance (the
algebra of eq. 87 with A = G_ii, mu = 0),

    G_ti = K_ti K_ii^{-1} G_ii,
    G_tt = K_tt - K_ti K_ii^{-1} K_it + K_ti K_ii^{-1} G_ii K_ii^{-1} K_it,

and at the output layer, with q(f_i) = N(mu, A), the predictive mean and covariance (eqs. 86-87)

    E[f_t] = K_ti K_ii^{-1} mu,   Var[f_t] = K_tt - K_ti K_ii^{-1} K_it + K_ti K_ii^{-1} A K_ii^{-1} K_it.

With L L^T = K_ii, G_ii (or A) = V V^T, W = K_ti L^{-T} and U = L^{-1} V: G_ti = (W U) V^T and
G_tt = K_tt - W W^T + (W U)(W U)^T. Only the diagonal of G_tt is formed when K_tt is given as its
diagonal [n] (all a minibatch objective needs, seed 003 appendix E.2); a full K_tt [n, n] gives the
full block (joint predictions).
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class ConditionalBlocks(NamedTuple):
    """G_ti [*b, n, M], G_tt ([*b, n] diagonal or [*b, n, n]) and the mean [*b, n, C] (or None)."""

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
    """The conditional blocks of the module docstring.

    Args:
        chol_ii: L [*b, M, M], the Cholesky factor of K_ii.
        kernel_ti: K_ti [*b, n, M].
        kernel_tt: K_tt as its diagonal [*b, n] or in full [*b, n, n].
        root_ii: V [*b, M, M] with G_ii (or A) = V V^T.
        mean_i: mu [*b, M, C] of the inducing outputs (the output layer), or None.
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
