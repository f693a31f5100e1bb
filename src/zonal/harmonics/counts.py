r"""Counts and constants of harmonic analysis on :math:`\mathbb{S}^{d-1}` (seed 000 appendix B).

``ambient_dim`` is :math:`d`, the dimension of the space the sphere :math:`\mathbb{S}^{d-1}` sits
in; :math:`\alpha = (d - 2) / 2`.
"""

from __future__ import annotations

import math

from zonal._validation import check_ambient_dim, check_degree


def gegenbauer_alpha(ambient_dim: int) -> float:
    r"""The Gegenbauer index :math:`\alpha = (d - 2) / 2` that belongs to
    :math:`\mathbb{S}^{d-1}`."""
    return (check_ambient_dim(ambient_dim) - 2) / 2


def num_harmonics(ambient_dim: int, degree: int) -> int:
    r""":math:`N_n^d`, the dimension of the space of spherical harmonics of degree :math:`n` on
    :math:`\mathbb{S}^{d-1}`.

    Seed 000 eq. (B.3) prints the binomial as :math:`\binom{n + d - 3}{d - 1}`; the correct one (it
    gives :math:`2n + 1` on :math:`\mathbb{S}^2`) is :math:`\binom{n + d - 3}{n - 1}`:
    :math:`N_n^d = \frac{2n + d - 2}{n} \binom{n + d - 3}{n - 1}` for :math:`n \ge 1` and
    :math:`N_0^d = 1`. For :math:`d = 2` this is 2 for every :math:`n \ge 1` (:math:`\cos n\theta`,
    :math:`\sin n\theta`).
    """
    d = check_ambient_dim(ambient_dim)
    n = check_degree(degree, "degree")
    if n == 0:
        return 1
    return (2 * n + d - 2) * math.comb(n + d - 3, n - 1) // n


def total_harmonics(ambient_dim: int, max_degree: int) -> int:
    r"""Number of spherical harmonics of all degrees 0..max_degree on :math:`\mathbb{S}^{d-1}`."""
    return sum(num_harmonics(ambient_dim, n) for n in range(check_degree(max_degree) + 1))


def sphere_area(ambient_dim: int) -> float:
    r""":math:`\Omega_{d-1} = 2 \pi^{d/2} / \Gamma(d/2)`, the surface area of
    :math:`\mathbb{S}^{d-1}` (seed 000 eq. B.2)."""
    d = check_ambient_dim(ambient_dim)
    return 2 * math.pi ** (d / 2) / math.gamma(d / 2)


def surface_ratio(ambient_dim: int) -> float:
    r""":math:`\omega_d = \Omega_{d-2} / \Omega_{d-1} = \Gamma(d/2) / (\Gamma((d-1)/2) \sqrt{\pi})`
    (seed 000 B.11).

    It normalises the weight :math:`(1 - t^2)^{(d-3)/2}` on :math:`[-1, 1]` to a probability
    density: the law of :math:`t = x \cdot e` for :math:`x` uniform on :math:`\mathbb{S}^{d-1}`.
    """
    d = check_ambient_dim(ambient_dim)
    return math.exp(math.lgamma(d / 2) - math.lgamma((d - 1) / 2)) / math.sqrt(math.pi)


def gegenbauer_at_one(degree: int, alpha: float) -> float:
    r""":math:`C_n^\alpha(1) = \Gamma(2 \alpha + n) / (\Gamma(2 \alpha)\, n!)`, and :math:`2/n` for
    :math:`\alpha = 0` (:math:`n \ge 1`).

    For :math:`\alpha = 0` zonal uses the Chebyshev normalisation :math:`C_n^0 = (2 / n) T_n` (see
    ``gegenbauer``).
    """
    n = check_degree(degree, "degree")
    if n == 0:
        return 1.0
    if alpha == 0:
        return 2.0 / n
    return math.exp(math.lgamma(2 * alpha + n) - math.lgamma(2 * alpha) - math.lgamma(n + 1))


def addition_factor(degree: int, ambient_dim: int) -> float:
    r""":math:`(n + \alpha) / \alpha`, the factor of the addition theorem; its :math:`d = 2` limit
    is :math:`n` (1 for :math:`n = 0`).

    With it, :math:`Z_n(t) = \frac{n + \alpha}{\alpha} C_n^\alpha(t)` is the reproducing kernel of
    the harmonics of degree :math:`n`, and :math:`Z_n(1) = N_n^d`.
    """
    alpha = gegenbauer_alpha(ambient_dim)
    n = check_degree(degree, "degree")
    if alpha == 0:
        return float(max(n, 1))
    return (n + alpha) / alpha
