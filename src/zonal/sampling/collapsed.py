r"""The implicit :math:`q(u)` of the collapsed SGPR, in whitened coordinates, from its sufficient
statistics.

SGPR (``zonal.models.sgpr``) keeps :math:`q(u)` at the Titsias optimum without storing it. Its
features have :math:`K_{uu} = \Lambda^{-1}` (:math:`\Lambda = \operatorname{diag}(\lambda_{n(m)})`),
so the :math:`K_{uu}` root is :math:`L = \Lambda^{-1/2}` and the whitened variables are
:math:`v = L^{-1} u = \Lambda^{1/2} u`. With the statistics :math:`A = \Phi_r^\top \Phi_r` and
:math:`c = \Phi_r^\top y` (:math:`K_{uf} = \Phi_r^\top` on the training inputs), the Titsias optimum
in whitened coordinates (``InterDomainVariationalStrategy.set_optimal_variational_distribution``)
is, with :math:`K = L^{-1} K_{uf} = \Lambda^{1/2} \Phi_r^\top`,

.. math::

    S_v &= (I + K K^\top / s^2)^{-1} = B^{-1}, \qquad
    B = I + \Lambda^{1/2} A \Lambda^{1/2} / s^2 = L_B L_B^\top, \\
    m_v &= S_v K y / s^2 = B^{-1} \Lambda^{1/2} c / s^2,

the same :math:`B` as SGPR's bound (its posterior mean :math:`\psi_\ast L_B^{-\top} w / s^2`,
:math:`w = L_B^{-1} \Lambda^{1/2} c`, is :math:`B_x^\top m_v` with :math:`B_x = L^{-1} K_{uf}(x)`).
A draw is :math:`v = m_v + L_B^{-\top} e`, :math:`e \sim \mathcal{N}(0, I)`, since
:math:`\operatorname{Cov}(L_B^{-\top} e) = (L_B L_B^\top)^{-1} = S_v`.
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
