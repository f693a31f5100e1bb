r"""The truncated Mercer / addition-theorem sum of a zonal kernel, in :math:`O(N M)` memory.

For a zonal kernel with eigenvalues :math:`\lambda_n` on :math:`\mathbb{S}^{d-1}` (seed 000 eq. 10,
seed 002 eq. 14),

.. math::

    k(x, x') = \sum_{n=0}^{L} \lambda_n Z_n(x \cdot x'), \qquad
    Z_n(t) = \frac{n + \alpha}{\alpha} C_n^\alpha(t).

Stacking :math:`Z_0, \dots, Z_L` for a Gram matrix costs :math:`N M (L + 1)` memory (13 GB for
:math:`4096 \times 4096` at :math:`L = 100`); here the sum runs along the three-term recurrence
(Clenshaw's algorithm, in cache-sized blocks), so it holds a few :math:`N \times M` tensors, and the
backward pass recomputes what it needs (the recurrences of ``zonal.harmonics.recurrence``):

.. math::

    \frac{d}{dt} \sum_n a_n C_n^\alpha(t)
    &= \sum_{n \ge 1} a_n\, 2 \alpha\, C_{n-1}^{\alpha+1}(t) \qquad \text{(a series again)}, \\
    \frac{d}{d a_n} \sum_m a_m C_m^\alpha(t) &= C_n^\alpha(t).

:math:`\alpha = 0` (the circle) uses the Chebyshev normalisation :math:`C_n^0 = (2 / n) T_n` of
``zonal.harmonics``, whose derivative is :math:`2 C_{n-1}^1`.
"""

from __future__ import annotations

import torch

from zonal._validation import check_ambient_dim
from zonal.harmonics import addition_factor, gegenbauer_alpha
from zonal.harmonics.recurrence import series_differentiable


def gegenbauer_series(t: torch.Tensor, coeffs: torch.Tensor, alpha: float) -> torch.Tensor:
    r""":math:`\sum_{n=0}^{L} \mathtt{coeffs}[\dots, n]\, C_n^\alpha(t)`: shape
    broadcast(t.shape, coeffs.shape[:-1]).

    ``coeffs`` [..., L + 1] must broadcast against ``t`` once its last dimension is dropped (give a
    Gram matrix :math:`t` [*b, N, M] coefficients [*b, 1, 1, L + 1]). Memory
    :math:`O(\mathtt{t.numel()})`, differentiable in ``t`` and ``coeffs`` (derivatives by the
    recurrences of the module docstring).
    """
    if coeffs.dim() == 0 or coeffs.shape[-1] == 0:
        raise ValueError("coeffs needs a last dimension of size L + 1 >= 1")
    return series_differentiable(t, coeffs, float(alpha))


def zonal_coefficients(eigenvalues: torch.Tensor, ambient_dim: int) -> torch.Tensor:
    """lambda_n (n + alpha) / alpha: the Gegenbauer coefficients of sum_n lambda_n Z_n, [..., L + 1]."""
    factors = torch.tensor(
        [addition_factor(n, ambient_dim) for n in range(eigenvalues.shape[-1])],
        dtype=eigenvalues.dtype,
        device=eigenvalues.device,
    )  # [L + 1]
    return eigenvalues * factors


def mercer_sum(t: torch.Tensor, eigenvalues: torch.Tensor, ambient_dim: int) -> torch.Tensor:
    r""":math:`k(t) = \sum_{n=0}^{L} \lambda_n Z_n(t)`,
    :math:`Z_n = \frac{n + \alpha}{\alpha} C_n^\alpha` (seed 000 eq. 10).

    Args:
        t: cosines :math:`x \cdot x'` in :math:`[-1, 1]`, any shape, e.g. [*b, N, M].
        eigenvalues: :math:`\lambda_0, \dots, \lambda_L`, shape [..., L + 1], broadcasting against
            ``t`` once the last dimension is dropped (for :math:`t` [*b, N, M] pass
            [*b, 1, 1, L + 1]).
        ambient_dim: :math:`d`, for :math:`\mathbb{S}^{d-1} \subset \mathbb{R}^d`.

    Returns:
        The truncated sum, shape broadcast(t.shape, eigenvalues.shape[:-1]).
    """
    d = check_ambient_dim(ambient_dim)
    return gegenbauer_series(t, zonal_coefficients(eigenvalues, d), gegenbauer_alpha(d))
