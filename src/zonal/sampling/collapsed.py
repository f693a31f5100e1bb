"""The implicit q(u) of the collapsed SGPR, in whitened coordinates, from its sufficient statistics.

SGPR (``zonal.models.sgpr``) keeps q(u) at the Titsias optimum without storing it. Its features
have Kuu = Lambda^{-1} (Lambda = diag(lambda_{n(m)})), so the Kuu root is L = Lambda^{-1/2} and the
whitened variables are v = L^{-1} u = Lambda^{1/2} u. With the statistics A = Phi_r^T Phi_r and
c = Phi_r^T y (Kuf = Phi_r^T on the training inputs), the Titsias optimum in whitened coordinates
(``InterDomainVariationalStrategy.set_optimal_variational_distribution``) is, with
K = L^{-1} Kuf = Lambda^{1/2} Phi_r^T,

    S_v = (I + K K^T / s^2)^{-1} = B^{-1},        B = I + Lambda^{1/2} A Lambda^{1/2} / s^2 = L_B L_B^T,
    m_v = S_v K y / s^2 = B^{-1} Lambda^{1/2} c / s^2,

the same B as SGPR's bound (its posterior mean psi* L_B^{-T} w / s^2, w = L_B^{-1} Lambda^{1/2} c,
is B_x^T m_v with B_x = L^{-1} Kuf(x)). A draw is v = m_v + L_B^{-T} e, e ~ N(0, I), since
Cov(L_B^{-T} e) = (L_B L_B^T)^{-1} = S_v.
"""

from __future__ import annotations

import torch
from linear_operator.operators import DiagLinearOperator
from torch import Size

from zonal.models import SGPR


def collapsed_posterior(model: SGPR) -> tuple[torch.Tensor, torch.Tensor, DiagLinearOperator]:
    """(m_v [M], L_B [M, M], the Kuu root Lambda^{-1/2}) of a fitted SGPR (module docstring)."""
    if model.stat_count == 0:
        raise ValueError("call fit_statistics first: the SGPR has no data")
    mean, factor = model.whitened_posterior()  # m_v [M], L_B [M, M]
    kuu_root = model.features.kuu(model.kernel).diagonal().sqrt()  # Lambda^{-1/2} [M]
    return mean, factor, DiagLinearOperator(kuu_root)


def collapsed_whitened_samples(
    mean: torch.Tensor, factor: torch.Tensor, sample_shape: Size
) -> torch.Tensor:
    """v = m_v + L_B^{-T} e with e ~ N(0, I): [*S, M]."""
    noise = torch.randn(*sample_shape, len(mean), 1, dtype=mean.dtype, device=mean.device)
    spread = torch.linalg.solve_triangular(factor.mT, noise, upper=True).squeeze(-1)  # [*S, M]
    return mean + spread
