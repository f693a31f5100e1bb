r"""Funk-Hecke coefficients of zonal functions on :math:`\mathbb{S}^{d-1}` (seed 000 eq. 9 / C.1,
seed 001 thm 2).

For a shape :math:`s: [-1, 1] \to \mathbb{R}`,

.. math::

    \lambda_n = \frac{\omega_d}{C_n^\alpha(1)}
    \int_{-1}^{1} s(t)\, C_n^\alpha(t)\, (1 - t^2)^{(d-3)/2}\, dt,

so that :math:`s(x \cdot x') = \sum_n \lambda_n Z_n(x \cdot x')` with
:math:`Z_n = \frac{n + \alpha}{\alpha} C_n^\alpha`, and :math:`\lambda_n` is the eigenvalue of the
integral operator with kernel :math:`s(x \cdot x')` on every harmonic of degree :math:`n`
(normalised measure). The integral is computed by Gauss-Jacobi quadrature with the weight
:math:`(1 - t^2)^{\alpha - 1/2}`; a shape with a kink at :math:`t = c` (ReLU: :math:`c = 0`) is
integrated piecewise on :math:`[-1, c]` and :math:`[c, 1]`, each with the endpoint weight it
carries, so that piecewise polynomials are integrated exactly.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
from scipy.special import roots_jacobi

from zonal._validation import check_ambient_dim, check_degree
from zonal.harmonics.counts import gegenbauer_alpha, gegenbauer_at_one, surface_ratio
from zonal.harmonics.gegenbauer import gegenbauer

ShapeFunction = Callable[[torch.Tensor], torch.Tensor]


@functools.lru_cache(maxsize=64)
def _jacobi_rule(num_nodes: int, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Jacobi nodes and weights for (1 - u)^a (1 + u)^b on [-1, 1]."""
    nodes, weights = roots_jacobi(num_nodes, a, b)
    return nodes, weights


def quadrature_rule(
    ambient_dim: int, num_nodes: int, kinks: Sequence[float] = ()
) -> tuple[np.ndarray, np.ndarray]:
    r"""Nodes :math:`t_i` and weights :math:`w_i` with
    :math:`\sum_i w_i f(t_i) \approx \int_{-1}^1 f(t) (1 - t^2)^{(d-3)/2}\, dt`.

    Without kinks this is Gauss-Jacobi with :math:`a = b = (d - 3) / 2`, exact for polynomials
    :math:`f` of degree :math:`< 2\, \mathtt{num\_nodes}`. With kinks :math:`c_1 < \dots < c_k` in
    :math:`(-1, 1)` the interval is split there; the outer pieces use Jacobi rules for their
    endpoint singularity and the inner pieces Gauss-Legendre with the (smooth) weight folded into
    the integrand. Every piece gets ``num_nodes`` nodes.
    """
    d = check_ambient_dim(ambient_dim)
    a = (d - 3) / 2
    cuts = sorted(float(c) for c in kinks)
    if any(not -1 < c < 1 for c in cuts):
        raise ValueError(f"kinks must lie strictly inside (-1, 1), got {list(kinks)}")
    if not cuts:
        return _jacobi_rule(num_nodes, a, a)
    edges = [-1.0, *cuts, 1.0]
    all_nodes, all_weights = [], []
    for left, right in itertools.pairwise(edges):
        half = (right - left) / 2
        at_minus_one, at_plus_one = left == -1.0, right == 1.0
        # (1 - u)^{a_u} (1 + u)^{b_u}: the singular factor of the piece goes into the rule.
        rule_a = a if at_plus_one else 0.0
        rule_b = a if at_minus_one else 0.0
        u, w = _jacobi_rule(num_nodes, rule_a, rule_b)
        t = left + half * (u + 1)
        weight = w * half
        if at_plus_one:  # (1 - t) = half (1 - u): the rule carries (1 - u)^a
            weight = weight * half**a * (1 + t) ** a
        elif at_minus_one:  # (1 + t) = half (1 + u)
            weight = weight * half**a * (1 - t) ** a
        else:
            weight = weight * (1 - t * t) ** a
        all_nodes.append(t)
        all_weights.append(weight)
    return np.concatenate(all_nodes), np.concatenate(all_weights)


def funk_hecke(
    shape_fn: ShapeFunction,
    ambient_dim: int,
    max_degree: int,
    *,
    kinks: Sequence[float] = (),
    num_nodes: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Funk-Hecke coefficients :math:`\lambda_0, \dots, \lambda_\text{max}` of ``shape_fn`` on
    :math:`\mathbb{S}^{d-1}`: tensor [max_degree+1].

    ``shape_fn`` maps a tensor of :math:`t \in [-1, 1]` to :math:`s(t)` elementwise and may carry
    parameters: the result is differentiable through it. ``kinks`` lists points where :math:`s` is
    not smooth (ReLU: (0.0,)); the quadrature then splits there and is exact for piecewise
    polynomials of degree :math:`< 2\, \mathtt{num\_nodes} - \mathtt{max\_degree}`. ``num_nodes``
    defaults to :math:`\max(2\, \mathtt{max\_degree}, 200)` per piece. Seed 000 eq. (9) and
    appendix C.
    """
    d = check_ambient_dim(ambient_dim)
    max_degree = check_degree(max_degree)
    if num_nodes is None:
        num_nodes = max(2 * max_degree, 200)
    num_nodes = check_degree(num_nodes, "num_nodes")
    if num_nodes < 1:
        raise ValueError("num_nodes must be >= 1")
    nodes, weights = quadrature_rule(d, num_nodes, kinks)
    t = torch.as_tensor(nodes, dtype=dtype, device=device)  # [Q]
    w = torch.as_tensor(weights, dtype=dtype, device=device)  # [Q]
    alpha = gegenbauer_alpha(d)
    shape_values = shape_fn(t)  # [Q]
    if shape_values.shape != t.shape:
        raise ValueError(
            f"shape_fn must map t of shape {tuple(t.shape)} to the same shape, "
            f"got {tuple(shape_values.shape)}"
        )
    if not torch.isfinite(shape_values).all():
        raise ValueError("shape_fn returned NaN or infinite values on [-1, 1]")
    polynomials = gegenbauer(t, max_degree, alpha)  # [Q, max_degree + 1]
    at_one = torch.tensor(
        [gegenbauer_at_one(n, alpha) for n in range(max_degree + 1)], dtype=dtype, device=device
    )  # [max_degree + 1]
    integrals = (w * shape_values) @ polynomials  # [max_degree + 1]
    return surface_ratio(d) * integrals / at_one


def relu_coefficients(
    ambient_dim: int, max_degree: int, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    r"""Closed-form Funk-Hecke coefficients :math:`\sigma_n` of the ReLU :math:`\max(0, t)` on
    :math:`\mathbb{S}^{d-1}` (eqs. C.19, C.20).

    .. math::

        \sigma_0 &= \frac{\Gamma(d/2)}{2 \sqrt{\pi}\, \Gamma((d+1)/2)}, \qquad
        \sigma_1 = \frac{1}{2 d}, \\
        \sigma_n &= \frac{\Gamma(d/2) (-1)^{n/2 - 1} \Gamma(n - 1)}
        {\sqrt{\pi}\, 2^n\, \Gamma(n/2)\, \Gamma(n/2 + (d+1)/2)}

    for even :math:`n \ge 2`, and 0 for odd :math:`n \ge 3`. Gammas are combined in log space, so
    any degree works. (C.20 prints :math:`\sigma_1` as a ratio of Gammas; it simplifies to
    :math:`1 / (2 d)`.)
    """
    d = check_ambient_dim(ambient_dim)
    max_degree = check_degree(max_degree)
    values = []
    for n in range(max_degree + 1):
        if n == 0:
            values.append(
                math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / (2 * math.sqrt(math.pi))
            )
        elif n == 1:
            values.append(1 / (2 * d))
        elif n % 2:
            values.append(0.0)
        else:
            log_magnitude = (
                math.lgamma(d / 2)
                + math.lgamma(n - 1)
                - 0.5 * math.log(math.pi)
                - n * math.log(2)
                - math.lgamma(n / 2)
                - math.lgamma(n / 2 + (d + 1) / 2)
            )
            values.append((-1) ** (n // 2 - 1) * math.exp(log_magnitude))
    return torch.tensor(values, dtype=dtype)


def arccos_eigenvalues(
    ambient_dim: int, max_degree: int, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    r"""Closed-form eigenvalues of the first-order arc-cosine shape (seed 000 eq. 7, table C.1).

    :math:`s(t) = \big(\sqrt{1 - t^2} + t (\pi - \arccos t)\big) / \pi`. Cho and Saul give
    :math:`s(x \cdot x') = 2\, \mathbb{E}_w[\mathrm{relu}(w \cdot x)\, \mathrm{relu}(w \cdot x')]`
    for :math:`w \sim \mathcal{N}(0, I_d)`; writing :math:`w = r u` with :math:`\mathbb{E}[r^2] = d`
    and :math:`u` uniform on :math:`\mathbb{S}^{d-1}`, and expanding
    :math:`\mathrm{relu}(u \cdot x) = \sum_n \sigma_n Z_n(u \cdot x)` (Funk-Hecke), the integral
    over :math:`u` leaves

    .. math::

        \lambda_n = 2 d \sigma_n^2,

    valid for every :math:`d` (the derivation of appendix C.1 covers odd :math:`d` only). Odd
    :math:`n \ge 3` give exactly 0.
    """
    d = check_ambient_dim(ambient_dim)
    return 2 * d * relu_coefficients(d, max_degree, dtype) ** 2
