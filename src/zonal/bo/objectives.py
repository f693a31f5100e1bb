r"""Test functions on spheres for Bayesian optimisation (seed 004 sec. 4.2), all to be minimised.

Seed 004 names its functions (the Ackley function projected on :math:`\mathbb{S}^3`, a function with
a singularity near the optimum on :math:`\mathbb{S}^2`) but its appendix does not define them; these
are zonal's definitions. Each is a ``SphereObjective``: call it on unit vectors :math:`x` [..., d]
to get values [...]; it carries its minimiser and optimum value.

* ``ackley_sphere`` (:math:`\mathbb{S}^3`): Ackley's function read in normal coordinates at the
  minimiser :math:`x^\ast`, :math:`f(x) = A(\log_{x^\ast}(x))` with the logarithm map's coordinates
  in an orthonormal basis :math:`B` of :math:`T_{x^\ast}\mathbb{S}^3`
  (:math:`z = \theta B^\top x / \sin(\theta)`, :math:`\theta = d(x^\ast, x)`, so
  :math:`\|z\| = \theta \le \pi`), and

  .. math::

      A(z) = -a \exp\Big(-b \sqrt{\operatorname{mean}_i z_i^2}\Big)
      - \exp\big(\operatorname{mean}_i \cos(c z_i)\big) + a + e, \qquad
      a, b, c = 20, 0.2, 2 \pi.

  This is how seed 004 ch. 4 says its reference projects Euclidean benchmarks onto the manifold (a
  Euclidean function of the tangent coordinates at the optimum). Minimum :math:`f(x^\ast) = 0`.
  Around :math:`x^\ast` it is a smooth bowl with a mild cone at the tip (the sqrt of the mean
  square), under a lattice of cosine ripples of period 1 radian in each coordinate.
* ``singular_sphere`` (:math:`\mathbb{S}^2`): a smooth basin plus a narrow well whose slope blows up
  at its tip,

  .. math::

      f(x) = (1 - m \cdot x) - h \exp\Big(-\sqrt{\|x - x^\ast\| / r}\Big), \qquad
      h = 1, \quad r = 0.05,

  (``singular_objective(r)`` gives the same function with another well radius
  :math:`r \in (0, 1]`; the bound below then holds for :math:`s < r / (0.5 + r)^2`, and farther
  away :math:`f \ge -\exp(-1 / (0.5 + r)) \ge -\exp(-2/3) > -\cos(0.5)`, so :math:`x^\ast` stays
  the global minimiser)

  with the basin's centre :math:`m` at 0.5 rad from the well's tip :math:`x^\ast`. The slope of the
  well blows up at its tip
  (:math:`\frac{d}{ds} \exp(-\sqrt{s / r}) = -\exp(-\sqrt{s / r}) / (2 \sqrt{s r}) \to -\infty` as
  :math:`s \to 0`). The global minimum is
  :math:`f(x^\ast) = 1 - \cos(0.5) - 1 = -\cos(0.5) \approx -0.878`: with
  :math:`s = \|x - x^\ast\|`, the basin is 1-Lipschitz in :math:`s` and
  :math:`-\exp(-t) \ge -1 + t - t^2 / 2`, so
  :math:`f(x) - f(x^\ast) \ge 0.93 \sqrt{s / r} - s > 0` for :math:`s < 10^{-3}`; farther away
  :math:`f \ge -\exp(-\sqrt{s / r}) > -\cos(0.5)`. The basin's floor is shallow:
  :math:`f(m) = -\exp(-\sqrt{2 \sin(0.25) / r}) \approx -0.043`.
* ``smooth_sphere`` (any :math:`\mathbb{S}^{d-1}`): analytic, one minimum,

  .. math::

      f(x) = 1 - \exp(k (x^\ast \cdot x - 1)) + w (a \cdot x)^2 (1 - x^\ast \cdot x), \qquad
      k = 4, \quad w = 0.25, \quad a \perp x^\ast,

  a sum of two non-negative terms that vanish only at :math:`x = x^\ast` (the first only there), so
  the minimum is :math:`f(x^\ast) = 0`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from zonal._validation import check_unit_vectors

ACKLEY = (20.0, 0.2, 2 * math.pi)  # a, b, c
WELL_DEPTH, WELL_RADIUS, WELL_OFFSET = 1.0, 0.05, 0.5
SMOOTH_CONCENTRATION, SMOOTH_WEIGHT = 4.0, 0.25


@dataclass(frozen=True)
class SphereObjective:
    r""":math:`f: \mathbb{S}^{d-1} \to \mathbb{R}` to minimise, with its minimiser :math:`x^\ast`
    [d] and optimum value :math:`f(x^\ast)`."""

    name: str
    ambient_dim: int
    formula: Callable[[torch.Tensor], torch.Tensor]
    minimiser: tuple[float, ...]
    optimum_value: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`f(x)` [...] at unit vectors :math:`x` [..., d] (``ValueError`` off the sphere)."""
        check_unit_vectors(x, self.ambient_dim, f"points of {self.name}")
        return self.formula(x)

    def minimiser_tensor(self, like: torch.Tensor | None = None) -> torch.Tensor:
        r""":math:`x^\ast` [d] with the dtype and device of ``like`` (float64 on the CPU by
        default)."""
        if like is None:
            return torch.tensor(self.minimiser, dtype=torch.float64)
        return torch.tensor(self.minimiser, dtype=like.dtype, device=like.device)


def _unit(*values: float) -> tuple[float, ...]:
    norm = math.sqrt(sum(v * v for v in values))
    return tuple(v / norm for v in values)


ACKLEY_MINIMISER = _unit(0.3, -0.5, 0.6, 0.55)
SINGULAR_MINIMISER = _unit(0.2, 0.4, 0.9)
SMOOTH_MINIMISER = _unit(-0.6, 0.3, 0.74)


def tangent_basis_at(point: torch.Tensor) -> torch.Tensor:
    """An orthonormal basis [d, d - 1] of the tangent space at the unit vector ``point`` [d]: the
    last d - 1 columns of Q in the QR factorisation of [point, I] (Q's first column is +-point)."""
    d = point.shape[-1]
    stacked = torch.cat(
        [point.unsqueeze(-1), torch.eye(d, dtype=point.dtype, device=point.device)], dim=-1
    )  # [d, d + 1]
    q, _ = torch.linalg.qr(stacked)  # [d, d]
    return q[:, 1:]


def normal_coordinates(x: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    """Coordinates z [..., d - 1] of log_base(x) in ``tangent_basis_at(base)``: z = theta u with
    u = B^T x / ||B^T x||, theta = atan2(||B^T x||, base . x) (so ||z|| = d(base, x)); at the
    antipode, where every direction is a geodesic, u is B's first column."""
    basis = tangent_basis_at(base)  # [d, d - 1]
    sideways = x @ basis  # [..., d - 1], norm sin(theta)
    sine = sideways.norm(dim=-1, keepdim=True)  # [..., 1]
    angle = torch.atan2(sine, (x * base).sum(-1, keepdim=True))  # [..., 1]
    tiny = sine <= 1e-300
    first = torch.zeros_like(sideways)
    first[..., 0] = 1
    direction = torch.where(tiny, first, sideways / torch.where(tiny, 1.0, sine))
    # at x = base the angle is 0 and so is z; elsewhere theta u
    return angle * direction


def ackley(z: torch.Tensor) -> torch.Tensor:
    """Ackley's function A(z) [...] of z [..., k] (module docstring); A(0) = 0."""
    a, b, c = ACKLEY
    root_mean_square = (z.pow(2).mean(-1) + 1e-300).sqrt()
    ripples = torch.cos(c * z).mean(-1)
    return -a * torch.exp(-b * root_mean_square) - torch.exp(ripples) + a + math.e


def _ackley_formula(x: torch.Tensor) -> torch.Tensor:
    base = torch.tensor(ACKLEY_MINIMISER, dtype=x.dtype, device=x.device)
    return ackley(normal_coordinates(x, base))


def _singular_centres(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x* [3], the basin's centre m [3] at WELL_OFFSET rad from x*)."""
    tip = torch.tensor(SINGULAR_MINIMISER, dtype=x.dtype, device=x.device)
    direction = tangent_basis_at(tip)[:, 0]
    centre = math.cos(WELL_OFFSET) * tip + math.sin(WELL_OFFSET) * direction
    return tip, centre


def _singular_formula(x: torch.Tensor, well_radius: float = WELL_RADIUS) -> torch.Tensor:
    tip, centre = _singular_centres(x)
    distance = (x - tip).norm(dim=-1)  # [...]
    return (1 - x @ centre) - WELL_DEPTH * torch.exp(-(distance / well_radius).sqrt())


def _smooth_formula(x: torch.Tensor) -> torch.Tensor:
    tip = torch.tensor(SMOOTH_MINIMISER, dtype=x.dtype, device=x.device)
    across = tangent_basis_at(tip)[:, 0]
    cosine = x @ tip  # [...]
    return (
        1
        - torch.exp(SMOOTH_CONCENTRATION * (cosine - 1))
        + SMOOTH_WEIGHT * (x @ across).pow(2) * (1 - cosine)
    )


#: Ackley's function on S^3 in normal coordinates at its minimiser (module docstring)
ackley_sphere = SphereObjective("ackley-s3", 4, _ackley_formula, ACKLEY_MINIMISER, 0.0)


def singular_objective(well_radius: float = WELL_RADIUS) -> SphereObjective:
    r"""The singular function on :math:`\mathbb{S}^2` (module docstring) with its well's radius
    :math:`r \in (0, 1]`: the well's depth exceeds :math:`h / e` within :math:`r` of its tip; its
    minimiser and minimum do not depend on :math:`r`."""
    if isinstance(well_radius, bool) or not (
        isinstance(well_radius, int | float) and 0 < well_radius <= 1
    ):
        raise ValueError(f"well_radius must lie in (0, 1], got {well_radius!r}")
    radius = float(well_radius)
    return SphereObjective(
        "singular-s2",
        3,
        partial(_singular_formula, well_radius=radius),
        SINGULAR_MINIMISER,
        1 - math.cos(WELL_OFFSET) - WELL_DEPTH,
    )


#: the singular function on S^2 at the default well radius (``singular_objective``)
singular_sphere = singular_objective()
#: a smooth function on S^2 with a known minimiser (module docstring)
smooth_sphere = SphereObjective("smooth-s2", 3, _smooth_formula, SMOOTH_MINIMISER, 0.0)

#: the test functions by name (``zonal experiment run bo-sphere`` reads them)
OBJECTIVES = {f.name: f for f in (ackley_sphere, singular_sphere, smooth_sphere)}


def sphere_objective(name: str) -> SphereObjective:
    """The test function called ``name`` (one of ``OBJECTIVES``)."""
    if name not in OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; choose from {sorted(OBJECTIVES)}")
    return OBJECTIVES[name]


__all__ = [
    "OBJECTIVES",
    "SphereObjective",
    "ackley",
    "ackley_sphere",
    "normal_coordinates",
    "singular_objective",
    "singular_sphere",
    "smooth_sphere",
    "sphere_objective",
    "tangent_basis_at",
]
