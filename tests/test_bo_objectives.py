"""The test functions of zonal.bo.objectives: each attains its stated optimum at its stated
minimiser (closed form at x*; no point of a dense near-uniform design or of shells around x*
goes below it, none 1e-3 away or more reaches it); Ackley's normal coordinates are the
logarithm map's (zonal.geometry.log_map, an independent formula); the singular function's
difference quotient at x* blows up like t^{-1/2}; the smooth function is stationary at x* with a
positive-definite Riemannian Hessian."""

from __future__ import annotations

import math

import pytest
import torch

from zonal.bo import OBJECTIVES, singular_objective, singular_sphere, sobol_sphere, sphere_objective
from zonal.bo.objectives import _singular_centres, ackley, normal_coordinates, tangent_basis_at
from zonal.geometry import exp_map, geodesic_distance, log_map, project_to_tangent


def shells(centre: torch.Tensor, radii: list[float], per_shell: int, seed: int) -> torch.Tensor:
    """Points at geodesic distance r from ``centre`` in random directions, for each r."""
    generator = torch.Generator().manual_seed(seed)
    points = []
    for radius in radii:
        noise = torch.randn(per_shell, len(centre), generator=generator, dtype=torch.float64)
        direction = project_to_tangent(centre.expand_as(noise), noise)
        direction = direction / direction.norm(dim=-1, keepdim=True)
        points.append(exp_map(centre.expand_as(noise), radius * direction))
    return torch.cat(points)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_the_stated_optimum_is_attained_at_the_minimiser_and_nowhere_lower(name):
    function = sphere_objective(name)
    minimiser = function.minimiser_tensor()
    assert float(minimiser.norm()) == pytest.approx(1.0, abs=1e-15)
    value = float(function(minimiser.unsqueeze(0)))
    assert value == pytest.approx(function.optimum_value, abs=1e-12)
    design = sobol_sphere(1 << 13, function.ambient_dim, seed=3)
    tiny = shells(minimiser, [1e-8, 1e-6, 1e-4], 100, seed=4)  # values within rounding of it
    near = shells(minimiser, [1e-3, 1e-2, 0.1, 0.5, 1.5, 3.0], 200, seed=5)
    assert float(function(tiny).min()) >= function.optimum_value
    assert float(function(torch.cat([design, near])).min()) > function.optimum_value


def test_the_singular_function_is_minus_cos_half_at_its_tip():
    """The basin's centre m lies 0.5 rad from the tip x*, so f(x*) = (1 - cos 0.5) - 1 exactly:
    the function evaluated (not the stored constant) against the closed form."""
    function = sphere_objective("singular-s2")
    tip = function.minimiser_tensor()
    _, centre = _singular_centres(tip)
    assert float(geodesic_distance(tip, centre)) == pytest.approx(0.5, abs=1e-14)
    assert float(function(tip.unsqueeze(0))) == pytest.approx(-math.cos(0.5), abs=1e-14)


def test_ackley_coordinates_are_those_of_the_logarithm_map():
    base = sphere_objective("ackley-s3").minimiser_tensor()
    x = sobol_sphere(64, 4, seed=1)
    coordinates = normal_coordinates(x, base)  # [64, 3]
    expected = log_map(base.expand_as(x), x) @ tangent_basis_at(base)
    torch.testing.assert_close(coordinates, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(
        coordinates.norm(dim=-1), geodesic_distance(base.expand_as(x), x), atol=1e-12, rtol=0
    )
    assert float(ackley(torch.zeros(3, dtype=torch.float64))) == pytest.approx(0, abs=1e-12)
    function = sphere_objective("ackley-s3")
    torch.testing.assert_close(function(x), ackley(expected), atol=1e-12, rtol=0)


def test_the_singular_function_has_a_derivative_that_blows_up_at_its_minimiser():
    """(f(exp_{x*}(t u)) - f(x*)) / t grows by 10 per factor 100 in t (the t^{-1/2} of the well)."""
    function = sphere_objective("singular-s2")
    tip = function.minimiser_tensor()
    direction = tangent_basis_at(tip)[:, 1]
    quotients = []
    for step in (1e-6, 1e-8, 1e-10):
        moved = exp_map(tip, step * direction)
        quotients.append(float(function(moved) - function.optimum_value) / step)
    assert quotients[1] / quotients[0] == pytest.approx(10, rel=0.02)
    assert quotients[2] / quotients[1] == pytest.approx(10, rel=0.02)


def test_the_smooth_function_is_stationary_with_a_positive_definite_hessian_at_its_minimiser():
    function = sphere_objective("smooth-s2")
    tip = function.minimiser_tensor()
    basis = tangent_basis_at(tip)  # [3, 2]

    def in_chart(coordinates: torch.Tensor) -> torch.Tensor:
        """f in the chart c -> (x* + B c) / ||x* + B c|| (at a critical point the Hessian in any
        chart is the Riemannian one)."""
        point = tip + basis @ coordinates
        return function(point / point.norm())

    origin = torch.zeros(2, dtype=torch.float64)
    gradient = torch.autograd.functional.jacobian(in_chart, origin)
    hessian = torch.autograd.functional.hessian(in_chart, origin)
    assert float(gradient.abs().max()) < 1e-12
    assert float(torch.linalg.eigvalsh(hessian).min()) > 0.1


def test_unknown_names_and_points_off_the_sphere_are_refused():
    with pytest.raises(ValueError, match="unknown objective"):
        sphere_objective("rosenbrock")
    with pytest.raises(ValueError, match="unit vectors"):
        sphere_objective("smooth-s2")(torch.ones(2, 3, dtype=torch.float64))


@pytest.mark.parametrize("radius", [0.01, 0.2, 1.0])
def test_a_singular_function_of_another_well_radius_keeps_its_minimiser_and_minimum(radius):
    """singular_objective(r): f(x*) = -cos 0.5 for every r in (0, 1]; no point of a dense design or
    of shells around x* goes below it."""
    function = singular_objective(radius)
    tip = function.minimiser_tensor()
    assert float(function(tip.unsqueeze(0))) == pytest.approx(-math.cos(0.5), abs=1e-14)
    design = sobol_sphere(1 << 13, 3, seed=3)
    near = shells(tip, [1e-6, 1e-3, 1e-2, 0.1, 0.5, 1.5, 3.0], 200, seed=5)
    assert float(function(torch.cat([design, near])).min()) > function.optimum_value


def test_the_well_radius_sets_where_the_well_is_one_e_deep():
    """exp(-sqrt(s / r)) = 1/e at chord distance s = r: the well term read back from f minus the
    basin (1 - m . x), at a point r from the tip, for two radii; r = 0.05 is singular_sphere."""
    for radius in (0.05, 0.2):
        function = singular_objective(radius)
        tip = function.minimiser_tensor()
        _, centre = _singular_centres(tip)
        direction = tangent_basis_at(tip)[:, 1]
        angle = 2 * math.asin(radius / 2)  # geodesic angle of chord length r
        point = exp_map(tip, angle * direction)
        well = float(function(point.unsqueeze(0))) - float(1 - point @ centre)
        assert well == pytest.approx(-math.exp(-1), abs=1e-12)
    x = sobol_sphere(64, 3, seed=2)
    torch.testing.assert_close(singular_objective()(x), singular_sphere(x), atol=0, rtol=0)


@pytest.mark.parametrize("radius", [0.0, -0.1, 1.5, math.inf, math.nan, True, "0.2"])
def test_a_well_radius_outside_zero_to_one_is_refused(radius):
    with pytest.raises(ValueError, match="well_radius must lie in"):
        singular_objective(radius)
