"""Acquisition optimisation on spheres (zonal.bo.riemannian, acquisition_optimization,
ambient_baseline, design): Riemannian steepest ascent finds the known maximisers of linear and
quadratic functions (the pole, the top eigenvector: closed forms), never decreases a restart's
value, keeps points on the sphere to 1e-12, and so does geoopt's Riemannian Adam; the Sobol design
has the moments of the uniform distribution; perturbations stay within their geodesic radii;
on a GP's log EI the sphere optimiser does at least as well as optimize_acqf on the normalised
parametrisation; bad input is refused by name."""

from __future__ import annotations

import sys

import pytest
import torch
from botorch.acquisition import (
    AcquisitionFunction,
    LogExpectedImprovement,
    qLogExpectedImprovement,
)
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from torch import nn

from zonal.bo import (
    AscentOptions,
    KnowledgeGradient,
    MissingOptionalDependencyError,
    exact_sphere_gp,
    fit_exact_gp,
    geoopt_ascent,
    optimize_acqf_normalised,
    optimize_acqf_sphere,
    riemannian_ascent,
    sobol_sphere,
    sphere_objective,
)
from zonal.bo.acquisition_optimization import acquisition_device, acquisition_dtype, perturb
from zonal.geometry import geodesic_distance


class Quadratic(AcquisitionFunction):
    """a(X) = sum_j x_j^T A x_j for q-batches X [b, q, d]: on the sphere its maximum is q times
    the top eigenvalue of A, at its top eigenvector (up to sign) in every slot."""

    def __init__(self, matrix: torch.Tensor) -> None:
        nn.Module.__init__(self)
        self.matrix = matrix

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return torch.einsum("...qi,ij,...qj->...", X, self.matrix, X)


def quadratic(ambient_dim: int = 5) -> tuple[Quadratic, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    root = torch.randn(ambient_dim, ambient_dim, generator=generator, dtype=torch.float64)
    matrix = root @ root.T
    eigenvalues, eigenvectors = torch.linalg.eigh(matrix)
    return Quadratic(matrix), eigenvalues[-1], eigenvectors[:, -1]


def test_steepest_ascent_finds_the_top_eigenvector_and_never_decreases():
    function, top_value, top_vector = quadratic()
    start = sobol_sphere(12, 5, seed=1).reshape(6, 2, 5)  # 6 restarts, q = 2
    accepted = []  # the values at the points the ascent moved to (where it takes gradients)

    def recorded(X):
        values = function(X)
        if X.requires_grad:
            accepted.append(values.detach())
        return values

    points, values = riemannian_ascent(recorded, start, AscentOptions(max_iterations=300))
    assert float((points.norm(dim=-1) - 1).abs().max()) <= 1e-12
    torch.testing.assert_close(
        values, torch.full_like(values, 2 * float(top_value)), rtol=1e-9, atol=0
    )
    alignment = (points @ top_vector).abs()  # [6, 2]
    torch.testing.assert_close(alignment, torch.ones_like(alignment), atol=1e-6, rtol=0)
    torch.testing.assert_close(function(points), values, atol=1e-12, rtol=0)
    path = torch.stack(accepted)  # [iterations, 6]
    assert len(path) > 2
    torch.testing.assert_close(path[0], function(start), atol=1e-12, rtol=0)
    assert bool((path[1:] >= path[:-1]).all())  # Armijo: every accepted step increases a


def test_steepest_ascent_reaches_the_pole_of_a_linear_function():
    pole = torch.nn.functional.normalize(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64), dim=0)
    start = sobol_sphere(4, 3, seed=2).unsqueeze(-2)  # [4, 1, 3]
    points, values = riemannian_ascent(lambda X: (X @ pole).sum(-1), start)
    torch.testing.assert_close(points.squeeze(-2), pole.expand(4, 3), atol=1e-7, rtol=0)
    torch.testing.assert_close(values, torch.ones(4, dtype=torch.float64), atol=1e-12, rtol=0)


def test_geoopt_riemannian_adam_finds_the_same_maximiser():
    pytest.importorskip("geoopt")  # the bo extra's optional dependency
    function, top_value, top_vector = quadratic(4)
    start = sobol_sphere(3, 4, seed=3).unsqueeze(-2)
    points, values = geoopt_ascent(
        function, start, AscentOptions(max_iterations=400, learning_rate=0.05)
    )
    assert float((points.norm(dim=-1) - 1).abs().max()) <= 1e-12
    torch.testing.assert_close(values, torch.full_like(values, float(top_value)), rtol=1e-6, atol=0)
    alignment = (points.squeeze(-2) @ top_vector).abs()
    torch.testing.assert_close(alignment, torch.ones_like(alignment), atol=1e-3, rtol=0)


def test_a_missing_geoopt_is_a_named_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "geoopt", None)  # import geoopt now raises ImportError
    function, _, _ = quadratic(3)
    with pytest.raises(MissingOptionalDependencyError, match=r"zonal\[bo\]"):
        optimize_acqf_sphere(function, 3, q=1, num_restarts=2, raw_samples=4, optimizer="geoopt")


def test_the_sobol_design_has_the_moments_of_the_uniform_distribution():
    """E[x] = 0 and E[x x^T] = I / d on S^{d-1}; a 4096-point quasi-random design is within 5e-3
    (far tighter than the ~1/sqrt(4096) = 0.016 of independent draws)."""
    for ambient_dim in (3, 4):
        points = sobol_sphere(4096, ambient_dim, seed=0)
        assert float((points.norm(dim=-1) - 1).abs().max()) <= 1e-14
        assert float(points.mean(0).abs().max()) < 5e-3
        second = points.T @ points / len(points)
        identity = torch.eye(ambient_dim, dtype=torch.float64) / ambient_dim
        assert float((second - identity).abs().max()) < 5e-3


def test_perturbations_stay_within_their_geodesic_radii():
    anchors = sobol_sphere(3, 3, seed=4)
    points = perturb(anchors, 300, (1e-3, 0.3), torch.Generator().manual_seed(0))
    distance = geodesic_distance(anchors[torch.arange(300) % 3], points)
    assert float(distance.min()) >= 1e-3 * (1 - 1e-9)
    assert float(distance.max()) <= 0.3 * (1 + 1e-9)
    assert float((points.norm(dim=-1) - 1).abs().max()) <= 1e-12


def test_the_sphere_optimiser_does_at_least_as_well_as_optimize_acqf_on_the_normalised_box():
    function = sphere_objective("singular-s2")
    x = sobol_sphere(20, 3, seed=5)
    targets = -function(x)
    targets = (targets - targets.mean()) / targets.std()
    model = fit_exact_gp(exact_sphere_gp(x, targets.unsqueeze(-1)))
    acquisition = qLogExpectedImprovement(
        model, best_f=targets.max(), sampler=SobolQMCNormalSampler(torch.Size([64]), seed=0)
    )
    best = x[targets.argsort(descending=True)[:3]]
    candidate, value = optimize_acqf_sphere(
        acquisition, 3, q=1, num_restarts=4, raw_samples=64, anchors=best
    )
    ambient, ambient_value = optimize_acqf_normalised(
        acquisition, 3, q=1, num_restarts=4, raw_samples=64
    )
    assert float((candidate.norm(dim=-1) - 1).abs().max()) <= 1e-12
    assert float((ambient.norm(dim=-1) - 1).abs().max()) <= 1e-12
    assert float(value) >= float(ambient_value) - 1e-6


def test_the_acquisitions_device_is_where_its_parameters_are():
    """Without ``device`` the candidates follow the acquisition's parameters (its model's), as
    BoTorch's ``optimize_acqf`` follows its bounds (``acquisition_device``): an acquisition
    without tensors is on the CPU, where its candidates are made; a parameter on the meta device
    moves the default there (a GPU's case, which needs a GPU to optimise on)."""
    function, _, _ = quadratic(3)
    assert acquisition_device(function) == torch.device("cpu")
    candidate, _ = optimize_acqf_sphere(function, 3, q=1, num_restarts=2, raw_samples=4)
    assert candidate.device == acquisition_device(function)
    function.register_parameter("scale", nn.Parameter(torch.ones(1, device="meta")))
    assert acquisition_device(function) == torch.device("meta")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_candidates_dtype_is_the_acquisitions(dtype):
    """Without ``dtype`` the candidates take the acquisition's (its model's) dtype, as its
    device: a float32 GP's log EI is optimised in float32 (it failed on a float64 design); the
    box-parametrised baseline does the same; an acquisition without tensors gets float64."""
    generator = torch.Generator().manual_seed(3)
    x = torch.nn.functional.normalize(torch.randn(12, 3, generator=generator), dim=-1).to(dtype)
    gp = fit_exact_gp(exact_sphere_gp(x, x[:, :1].sin()))
    acquisition = LogExpectedImprovement(gp, x[:, :1].sin().max())
    assert acquisition_dtype(acquisition) == dtype
    candidate, value = optimize_acqf_sphere(acquisition, 3, q=1, num_restarts=2, raw_samples=16)
    assert candidate.dtype == value.dtype == dtype
    assert float((candidate.double().norm(dim=-1) - 1).abs().max()) <= 10 * torch.finfo(dtype).eps
    ambient, _ = optimize_acqf_normalised(acquisition, 3, q=1, num_restarts=2, raw_samples=16)
    assert ambient.dtype == dtype
    function, _, _ = quadratic(3)
    assert acquisition_dtype(function) == torch.float64


class NaNBelowEquator(AcquisitionFunction):
    """a(X) = x_1 on the upper half-sphere x_1 > 0, NaN below (a broken model's acquisition)."""

    def __init__(self) -> None:
        nn.Module.__init__(self)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        first = X[..., 0].sum(-1)  # [b]
        return torch.where(first > 0, first, torch.full_like(first, float("nan")))


def test_restarts_with_nan_values_are_never_the_best_and_all_nan_is_a_named_error():
    """torch's argmax ranks NaN highest; the optimiser must return a finite restart (here the
    one started nearest the pole e_1, which reaches it) and refuse an all-NaN result by name."""
    start = torch.tensor([[[0.6, 0.8, 0.0]], [[-0.6, 0.8, 0.0]], [[0.0, -0.6, -0.8]]])
    start = start.double()
    candidate, value = optimize_acqf_sphere(
        NaNBelowEquator(), 3, q=1, num_restarts=3, batch_initial_conditions=start
    )
    assert float(value) == pytest.approx(1.0, abs=1e-9)
    torch.testing.assert_close(
        candidate, torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64), atol=1e-5, rtol=0
    )
    pytest.importorskip("geoopt")
    candidate, value = optimize_acqf_sphere(
        NaNBelowEquator(), 3, q=1, num_restarts=3, batch_initial_conditions=start,
        optimizer="geoopt", options={"max_iterations": 5},
    )  # fmt: skip
    assert float(value) == pytest.approx(float(NaNBelowEquator()(candidate.unsqueeze(0))))
    assert float(value) >= 0.6

    # geoopt's Adam from a NaN start whose gradient (of x_1, the where's other input) leads
    # out of the NaN region: the first finite value is recorded as that restart's best
    def nan_then_finite(X):
        return X[..., 0].sum(-1) + torch.where(X[..., 0].sum(-1) > 0, 0.0, float("nan"))

    inside = torch.nn.functional.normalize(torch.tensor([[[-0.05, 1.0, 0.0]]]).double(), dim=-1)
    points, values = geoopt_ascent(
        nan_then_finite, inside, AscentOptions(max_iterations=30, learning_rate=0.1)
    )
    assert float(values[0]) > 0
    assert float(values[0]) == pytest.approx(float(nan_then_finite(points)[0]), abs=1e-12)
    with pytest.raises(ValueError, match="NaN at all 2 restarts"):
        optimize_acqf_sphere(
            NaNBelowEquator(), 3, q=1, num_restarts=2, batch_initial_conditions=start[1:]
        )


def test_the_return_follows_botorchs_optimize_acqf():
    """As ``optimize_acqf``: all restarts ([R, q, d], [R]) without ``return_best_only``, else the
    best restart ([q, d], []); the values are the acquisition at the returned points."""
    function, _, _ = quadratic(3)
    start = sobol_sphere(8, 3, seed=6).reshape(4, 2, 3)  # R = 4 restarts, q = 2
    ones = torch.ones(3, dtype=torch.float64)
    theirs, their_values = optimize_acqf(
        function, torch.stack([-ones, ones]), q=2, num_restarts=4,
        batch_initial_conditions=start, return_best_only=False, options={"maxiter": 3},
    )  # fmt: skip
    everything, values = optimize_acqf_sphere(
        function, 3, q=2, num_restarts=4, batch_initial_conditions=start, return_best_only=False
    )
    assert everything.shape == theirs.shape == (4, 2, 3)
    assert values.shape == their_values.shape == (4,)
    torch.testing.assert_close(values, function(everything), atol=1e-12, rtol=0)
    best, best_value = optimize_acqf_sphere(
        function, 3, q=2, num_restarts=4, batch_initial_conditions=start
    )
    assert best.shape == (2, 3) and best_value.shape == ()
    torch.testing.assert_close(best, everything[values.argmax()], atol=0, rtol=0)
    torch.testing.assert_close(best_value, values.max(), atol=0, rtol=0)


def test_a_one_shot_acquisition_is_optimised_over_its_augmented_batch_and_gives_q_points():
    """As ``optimize_acqf`` does for ``qKnowledgeGradient``: the q candidates and the F fantasy
    points are optimised together on the sphere, the q candidates come back ([q, d], or
    [R, q, d] for all restarts) and the value is the acquisition's at the whole batch."""
    x = sobol_sphere(12, 3, seed=2)
    model = exact_sphere_gp(x, (x[:, :1] * x[:, 1:2]).sin())
    fantasies = 3
    acquisition = KnowledgeGradient(
        model, num_fantasies=fantasies, sampler=SobolQMCNormalSampler(torch.Size([fantasies]))
    )
    everything, values = optimize_acqf_sphere(acquisition, 3, q=1, num_restarts=2, raw_samples=8,
                                              options={"maxiter": 3}, return_best_only=False)  # fmt: skip
    assert everything.shape == (2, 1, 3) and values.shape == (2,)
    torch.testing.assert_close(everything.norm(dim=-1), torch.ones(2, 1, dtype=torch.float64))
    start = sobol_sphere(2 * (1 + fantasies), 3, seed=4).reshape(2, 1 + fantasies, 3)
    best, value = optimize_acqf_sphere(
        acquisition, 3, q=1, num_restarts=2, batch_initial_conditions=start, options={"maxiter": 0}
    )
    assert best.shape == (1, 3)
    with torch.no_grad():  # no ascent step: the value is the acquisition's at a starting batch
        at_start = acquisition(start)
    torch.testing.assert_close(value, at_start.max(), atol=1e-12, rtol=0)
    torch.testing.assert_close(best, start[at_start.argmax(), :1], atol=0, rtol=0)


def test_bad_input_is_refused_by_name():
    function, _, _ = quadratic(3)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        optimize_acqf_sphere(function, 3, q=1, num_restarts=2, raw_samples=4, optimizer="sgd")
    with pytest.raises(ValueError, match="raw_samples"):
        optimize_acqf_sphere(function, 3, q=1, num_restarts=4, raw_samples=2)
    with pytest.raises(ValueError, match="unit vectors"):
        optimize_acqf_sphere(
            function, 3, q=1, num_restarts=1, batch_initial_conditions=torch.ones(1, 1, 3)
        )
    with pytest.raises(ValueError, match="unknown optimiser options"):
        optimize_acqf_sphere(function, 3, q=1, num_restarts=1, raw_samples=4, options={"lr": 1})
