r"""Riemannian gradient ascent on products of spheres :math:`(\mathbb{S}^{d-1})^{R \times q}`, one
ascent per restart.

For a function :math:`a` of :math:`X` [R, q, d] (values [R], restart :math:`r`'s value depending on
:math:`X[r]` only, as a t-batched acquisition function is), the Riemannian gradient at :math:`x` is
the tangent projection of the Euclidean one,
:math:`\operatorname{grad} a(x) = P_x \nabla a(x) = \nabla a - (x \cdot \nabla a)\, x`, point by
point (the sphere carries the metric of :math:`\mathbb{R}^d`). Steepest ascent moves each restart
along the geodesic,

.. math::

    x \leftarrow \exp_x(t \operatorname{grad} a(x)),

with a step :math:`t` chosen by Armijo backtracking,
:math:`a(\exp_x(t g)) \ge a(x) + c\, t \|g\|^2` (:math:`c = 10^{-4}`), from a Barzilai-Borwein
trial step :math:`t = \langle s, s \rangle / \lvert \langle s, y \rangle \rvert` (:math:`s` the
last move, :math:`y` the change of the gradient, both carried to the new point by tangent
projection; at most ``max_step`` radians of movement), halved up to ``max_backtracks`` times: every
accepted step increases :math:`a`, so each restart's value is non-decreasing. A restart stops when
:math:`\|\operatorname{grad}\| <` ``gradient_tolerance``, when a step gains less than
``value_tolerance`` :math:`(1 + \lvert a \rvert)`, or when no step is accepted.
This is the Riemannian steepest-descent method of seed 004 app. A.2 (run there through Pymanopt),
written here for t-batches of restarts. The points returned lie on the sphere to rounding
(``exp_map`` renormalises).

``geoopt_ascent`` runs the same problem through geoopt's ``Sphere`` manifold and ``RiemannianAdam``
(the optional extra ``zonal[bo]``), keeping each restart's best point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch

from zonal.bo.errors import MissingOptionalDependencyError
from zonal.geometry import exp_map, project_to_tangent

Function = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class AscentOptions:
    """Settings of ``riemannian_ascent`` (``max_iterations``, ``max_step`` in radians, Armijo's
    constant, backtracking and stopping) and of ``geoopt_ascent`` (``learning_rate``)."""

    max_iterations: int = 100
    max_step: float = 0.5
    armijo: float = 1e-4
    max_backtracks: int = 12
    gradient_tolerance: float = 1e-9
    value_tolerance: float = 1e-10
    learning_rate: float = 0.02

    @classmethod
    def from_dict(cls, options: dict | None) -> AscentOptions:
        """Options from a dict (BoTorch's ``options``; ``maxiter`` is read as ``max_iterations``);
        unknown keys are a ``ValueError`` naming them."""
        options = dict(options or {})
        if "maxiter" in options:
            options["max_iterations"] = options.pop("maxiter")
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"unknown optimiser options {unknown}; known: {sorted(cls.__dataclass_fields__)}"
            )
        return cls(**options)


def value_and_riemannian_gradient(
    function: Function, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(a(x) [R], P_x nabla a(x) [R, q, d]) at points x [R, q, d] on the sphere."""
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        value = function(x)  # [R]
        (gradient,) = torch.autograd.grad(value.sum(), x)
    return value.detach(), project_to_tangent(x.detach(), gradient)


def riemannian_ascent(
    function: Function, start: torch.Tensor, options: AscentOptions | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Steepest ascent with Armijo backtracking from ``start`` [R, q, d] (module docstring):
    (points [R, q, d], values [R])."""
    options = options or AscentOptions()
    x = start.detach()
    value, gradient = value_and_riemannian_gradient(function, x)
    norm = _restart_norm(gradient)  # [R]
    first_step = options.max_step / norm.clamp(min=torch.finfo(x.dtype).tiny)
    trial_step = torch.minimum(first_step, torch.ones_like(first_step))  # [R]
    active = norm > options.gradient_tolerance  # [R]
    for _ in range(options.max_iterations):
        if not active.any():
            break
        trial_step = torch.minimum(trial_step, options.max_step / norm.clamp(min=1e-300))
        accepted = torch.zeros_like(active)
        new_x, new_value, step = x.clone(), value.clone(), torch.zeros_like(value)
        for _ in range(options.max_backtracks):
            pending = active & ~accepted
            if not pending.any():
                break
            candidate = exp_map(x, trial_step[:, None, None] * gradient)  # [R, q, d]
            with torch.no_grad():
                candidate_value = function(candidate)  # [R]
            good = pending & (candidate_value >= value + options.armijo * trial_step * norm**2)
            new_x[good], new_value[good] = candidate[good], candidate_value[good]
            step = torch.where(good, trial_step, step)
            accepted |= good
            trial_step = torch.where(pending & ~good, trial_step / 2, trial_step)
        active &= accepted
        if not accepted.any():
            break
        improvement = new_value - value
        moved = step[:, None, None] * gradient  # [R, q, d], tangent at the old points
        x, old_gradient = new_x, gradient
        value, gradient = value_and_riemannian_gradient(function, x)
        norm = _restart_norm(gradient)
        active &= (norm > options.gradient_tolerance) & (
            improvement > options.value_tolerance * (1 + value.abs())
        )
        trial_step = _barzilai_borwein(x, moved, gradient, old_gradient, options.max_step / norm)
    return x, value


def _restart_norm(tangent: torch.Tensor) -> torch.Tensor:
    """The norm of each restart's tangent vector [R, q, d] on the product of spheres: [R]."""
    return tangent.flatten(1).norm(dim=-1)


def _barzilai_borwein(
    x: torch.Tensor,
    moved: torch.Tensor,
    gradient: torch.Tensor,
    old_gradient: torch.Tensor,
    largest: torch.Tensor,
) -> torch.Tensor:
    """The next trial step [R]: <s, s> / |<s, y>| with the last move s and the change of gradient
    y, both carried to the new points by tangent projection (vector transport); ``largest`` where
    <s, y> vanishes."""
    s = project_to_tangent(x, moved)
    y = gradient - project_to_tangent(x, old_gradient)
    curvature = (s * y).flatten(1).sum(-1).abs()  # [R]
    length = (s * s).flatten(1).sum(-1)  # [R]
    step = length / curvature.clamp(min=1e-300)
    return torch.where(curvature > 0, torch.minimum(step, largest), largest)


def import_geoopt() -> ModuleType:
    """geoopt, or a ``MissingOptionalDependencyError`` saying how to install it."""
    try:
        import geoopt
    except ImportError as error:
        raise MissingOptionalDependencyError(
            "optimizer='geoopt' needs geoopt, the optional extra of zonal.bo: "
            "pip install 'zonal[bo]' (or pip install geoopt)"
        ) from error
    return geoopt


def geoopt_ascent(
    function: Function, start: torch.Tensor, options: AscentOptions | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Riemannian Adam (geoopt) on the sphere from ``start`` [R, q, d], ``max_iterations`` steps
    at ``learning_rate``: (each restart's best points [R, q, d], their values [R])."""
    options = options or AscentOptions()
    geoopt = import_geoopt()
    point = geoopt.ManifoldParameter(start.detach().clone(), manifold=geoopt.Sphere())
    optimiser = geoopt.optim.RiemannianAdam([point], lr=options.learning_rate)
    best_x = start.detach().clone()
    with torch.no_grad():
        best_value = function(best_x)  # [R]
    for _ in range(options.max_iterations):
        optimiser.zero_grad()
        value = function(point)  # [R], at the point before this step
        (-value.sum()).backward()
        with torch.no_grad():
            better = _improves(value.detach(), best_value)
            best_x[better], best_value[better] = point.detach()[better], value.detach()[better]
        optimiser.step()
    with torch.no_grad():
        final = point.detach()
        value = function(final)
        better = _improves(value, best_value)
        best_x[better], best_value[better] = final[better], value[better]
    return best_x, best_value


def _improves(value: torch.Tensor, best: torch.Tensor) -> torch.Tensor:
    """[R]: value > best, or a number where the best so far is NaN (NaN > x is False, so a
    restart starting at a NaN would otherwise never record a finite value)."""
    return (value > best) | (torch.isnan(best) & ~torch.isnan(value))


__all__ = [
    "AscentOptions",
    "geoopt_ascent",
    "import_geoopt",
    "riemannian_ascent",
    "value_and_riemannian_gradient",
]
