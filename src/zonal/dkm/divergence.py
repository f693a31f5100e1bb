r"""KL divergences between Gaussians whose covariances are Gram matrices (seed 003 eqs. 5, 38,
75).

For :math:`P`-dimensional Gaussians with covariances :math:`A = R R^\top` and :math:`B = L L^\top`
(:math:`R`, :math:`L` lower triangular),

.. math::

    \operatorname{KL}(\mathcal{N}(m, A) \,\|\, \mathcal{N}(0, B))
    &= \tfrac{1}{2} \big[\operatorname{tr}(B^{-1} A) + m^\top B^{-1} m - P
    + \log \lvert B \rvert - \log \lvert A \rvert\big] \\
    &= \tfrac{1}{2} \big[\|L^{-1} R\|_F^2 + \|L^{-1} m\|^2 - P
    + 2 \sum \log \lvert L_{kk} \rvert - 2 \sum \log \lvert R_{kk} \rvert\big].

With :math:`C` mean columns :math:`m_1, \dots, m_C` sharing one covariance (the output channels of
seed 003 eq. 74 with the same :math:`A` for every channel, appendix D.1) the sum over the channels
is returned. Roots are
lower-triangular (Cholesky factors); everything is computed by triangular solves, no inverse.
"""

from __future__ import annotations

import torch

from zonal.linalg import cholesky


def gaussian_kl_from_roots(
    root_p: torch.Tensor, chol_q: torch.Tensor, mean_p: torch.Tensor | None = None
) -> torch.Tensor:
    r""":math:`\operatorname{KL}(\mathcal{N}(m, R R^\top) \,\|\, \mathcal{N}(0, L L^\top))` [*b]
    from lower-triangular :math:`R`, :math:`L` [*b, P, P].

    ``mean_p`` [*b, P, C] gives :math:`C` channels with the same covariance; the result is their
    sum.
    Without it the means are zero (one channel).
    """
    size = root_p.shape[-1]
    whitened = torch.linalg.solve_triangular(chol_q, root_p, upper=False)  # [*b, P, P]
    log_det_q = 2 * chol_q.diagonal(dim1=-2, dim2=-1).abs().log().sum(-1)  # [*b]
    log_det_p = 2 * root_p.diagonal(dim1=-2, dim2=-1).abs().log().sum(-1)  # [*b]
    per_channel = whitened.square().sum((-2, -1)) - size + log_det_q - log_det_p  # [*b]
    if mean_p is None:
        return per_channel / 2
    channels = mean_p.shape[-1]
    mean_term = torch.linalg.solve_triangular(chol_q, mean_p, upper=False).square().sum((-2, -1))
    return (channels * per_channel + mean_term) / 2


def gaussian_kl(
    cov_p: torch.Tensor, cov_q: torch.Tensor, mean_p: torch.Tensor | None = None
) -> torch.Tensor:
    r""":math:`\mathrm{KL}(\mathcal{N}(m, \mathtt{cov\_p}) \,\|\, \mathcal{N}(0, \mathtt{cov\_q}))`
    [*b] of covariances [*b, P, P] (module docstring).

    Raises ``zonal.linalg.NotPositiveDefiniteError`` if either covariance is not positive definite.
    """
    return gaussian_kl_from_roots(
        cholesky(cov_p, name="the first covariance of the KL"),
        cholesky(cov_q, name="the second covariance of the KL"),
        mean_p,
    )
