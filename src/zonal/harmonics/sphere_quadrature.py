r"""Product Gauss quadrature on :math:`\mathbb{S}^{d-1}`, exact for polynomials up to a given
degree.

Write :math:`x = (\sqrt{1 - t^2}\, y, t)` with :math:`y \in \mathbb{S}^{d-2}`; the normalised
surface measure factorises as :math:`\omega_d (1 - t^2)^{(d-3)/2}\, dt` times the normalised measure
of :math:`y`. A polynomial of degree :math:`D` in :math:`x` becomes, after the :math:`y`-integral
(exact by recursion; odd powers of :math:`\sqrt{1 - t^2}` come with odd polynomials in :math:`y`
and vanish), a polynomial of degree :math:`\le D` in :math:`t`, integrated exactly by Gauss-Jacobi
with :math:`\lceil (D + 1) / 2 \rceil` nodes. The circle :math:`\mathbb{S}^1` uses :math:`D + 1`
equispaced angles. Seed 000 eq. (B.1).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import roots_jacobi

from zonal._validation import check_ambient_dim, check_degree
from zonal.harmonics.counts import surface_ratio


def sphere_quadrature(ambient_dim: int, exact_degree: int) -> tuple[np.ndarray, np.ndarray]:
    """Points [Q, d] on S^{d-1} and weights [Q] summing to 1 with sum_i w_i p(x_i) equal to the
    normalised-measure average of p for every polynomial p of degree <= ``exact_degree``.

    Q = (D + 1) * ceil((D + 1) / 2)^{d - 2}, so keep D modest in high dimension.
    """
    d = check_ambient_dim(ambient_dim)
    degree = check_degree(exact_degree, "exact_degree")
    angles = 2 * math.pi * np.arange(degree + 1) / (degree + 1)
    points = np.stack([np.cos(angles), np.sin(angles)], axis=1)  # [D + 1, 2]
    weights = np.full(degree + 1, 1 / (degree + 1))
    num_nodes = (degree + 2) // 2
    for dim in range(3, d + 1):
        a = (dim - 3) / 2
        t, w = roots_jacobi(num_nodes, a, a)  # weight (1 - t^2)^{(dim-3)/2}
        w = w * surface_ratio(dim)  # normalised: sums to 1
        radial = np.sqrt(1 - t**2)  # [T]
        lifted = radial[:, None, None] * points[None]  # [T, P, dim - 1]
        height = np.broadcast_to(t[:, None, None], (len(t), len(points), 1))
        points = np.concatenate([lifted, height], axis=2).reshape(-1, dim)
        weights = (w[:, None] * weights[None]).reshape(-1)
    return points, weights
