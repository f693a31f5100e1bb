r"""Gegenbauer polynomials :math:`C_n^\alpha` and zonal harmonics :math:`Z_n`, all degrees in one
pass.

The values come from the three-term recurrence of ``zonal.harmonics.recurrence`` (DLMF 18.9.1),
which is stable on :math:`[-1, 1]`; evaluating from monomial coefficients (seed 000 eq. B.6) is not
and loses all accuracy above degree ~30 in float64.

:math:`\alpha = 0` (the circle :math:`\mathbb{S}^1`, :math:`d = 2`): :math:`C_n^0` vanishes
identically for :math:`n \ge 1`, so zonal uses the Chebyshev limit
:math:`C_n^0 := \lim_{\alpha \to 0} C_n^\alpha / \alpha = (2 / n) T_n` (:math:`n \ge 1`),
:math:`C_0^0 = 1`. With it the derivative rule
:math:`\frac{d}{dt} C_n^\alpha = 2 \alpha C_{n-1}^{\alpha+1}` reads
:math:`\frac{d}{dt} C_n^0 = 2 C_{n-1}^1` and the addition theorem factor
:math:`(n + \alpha) / \alpha` becomes :math:`n` (see ``counts.addition_factor``). Note that scipy's
``eval_gegenbauer(n, 0, t)`` returns the literal value 0 instead.
"""

from __future__ import annotations

import torch

from zonal._validation import check_degree
from zonal.harmonics.counts import addition_factor, gegenbauer_alpha
from zonal.harmonics.recurrence import gegenbauer_differentiable


def _check_alpha(alpha: float) -> float:
    if not isinstance(alpha, int | float) or isinstance(alpha, bool):
        raise ValueError(f"alpha must be a real number > -1/2, got {alpha!r}")
    if not alpha > -0.5:
        raise ValueError(f"alpha must be > -1/2 for Gegenbauer polynomials, got {alpha}")
    return float(alpha)


def gegenbauer(t: torch.Tensor, max_degree: int, alpha: float) -> torch.Tensor:
    r"""Gegenbauer polynomials :math:`C_n^\alpha(t)` for :math:`n = 0, \dots, \mathtt{max\_degree}`,
    shape [..., max_degree + 1].

    Computed by the three-term recurrence in one pass (float64 inputs give ~1e-15 relative error up
    to degree 100 and beyond). Differentiable in ``t`` to any order with the closed-form derivative
    :math:`\frac{d}{dt} C_n^\alpha = 2 \alpha C_{n-1}^{\alpha+1}`. ``alpha = 0`` is the Chebyshev
    limit :math:`(2 / n) T_n` described in the module docstring. Seed 000 appendix B.1.
    """
    max_degree = check_degree(max_degree)
    alpha = _check_alpha(alpha)
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t, dtype=torch.float64)
    if torch.isnan(t).any():
        raise ValueError("gegenbauer: t contains NaN")
    return gegenbauer_differentiable(t, max_degree, alpha)


def zonal_harmonic(t: torch.Tensor, max_degree: int, ambient_dim: int) -> torch.Tensor:
    r""":math:`Z_n(t) = \frac{n + \alpha}{\alpha} C_n^\alpha(t)`,
    :math:`n = 0, \dots, \mathtt{max\_degree}`, shape [..., max_degree + 1].

    :math:`Z_n(x \cdot x') = \sum_j \phi_{n,j}(x) \phi_{n,j}(x')` is the reproducing kernel of the
    degree-:math:`n` harmonics in :math:`L^2` of the normalised surface measure (addition theorem,
    seed 000 eq. B.9), with :math:`Z_n(1) = N_n^d`. For :math:`d = 2` it is :math:`2 T_n`
    (:math:`n \ge 1`) and 1 (:math:`n = 0`).
    """
    max_degree = check_degree(max_degree)
    alpha = gegenbauer_alpha(ambient_dim)
    factors = torch.tensor(
        [addition_factor(n, ambient_dim) for n in range(max_degree + 1)],
        dtype=t.dtype if isinstance(t, torch.Tensor) else torch.float64,
        device=t.device if isinstance(t, torch.Tensor) else None,
    )  # [max_degree + 1]
    return gegenbauer(t, max_degree, alpha) * factors
