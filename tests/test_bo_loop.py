"""The Bayesian optimisation loop (zonal.bo.loop, zonal.bo.state): the regret trace is
|cummin(y) - y_opt| computed independently from the evaluations; every evaluated point is on
the sphere; a run resumed from its state file makes no evaluation twice and ends where an
uninterrupted run ends; a switch run repeats the shallow run's choices until its switch and then
uses the deep model; the adaptive rule switches exactly when the deep model's held-out density is
higher, and the shallow held-out density is the Gaussian predictive density of the exact GP;
an objective returning NaN, points off the sphere and a budget below the initial design are named
errors that keep (and save) the state so far."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from zonal.bo import (
    BOState,
    BudgetError,
    LoopSettings,
    ObjectiveNaNError,
    OffSphereError,
    exact_sphere_gp,
    fit_exact_gp,
    optimize,
    smooth_sphere,
)
from zonal.bo import loop as loop_module
from zonal.bo.loop import standardise

FAST = LoopSettings(
    num_restarts=2,
    raw_samples=16,
    mc_samples=16,
    num_inducing=8,
    deep_steps=5,
    deep_warm_steps=2,
    posterior_samples=4,
    holdout=2,
    adaptive_min_points=6,
    ascent_options={"max_iterations": 10},
)


class Counting:
    """The smooth test function, counting the points it is asked about."""

    def __init__(self) -> None:
        self.points = 0

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        self.points += len(X)
        return smooth_sphere(X)


def run(budget: int, **kwargs) -> BOState:
    kwargs.setdefault("model", "shallow")
    return optimize(
        kwargs.pop("objective", smooth_sphere),
        3,
        budget,
        optimum_value=smooth_sphere.optimum_value,
        settings=kwargs.pop("settings", FAST),
        progress=False,
        **kwargs,
    )


def test_the_regret_trace_is_the_distance_of_the_running_minimum_to_the_optimum():
    state = run(7, seed=1)
    assert state.num_evaluations == 7 and state.sources[:5] == ["initial"] * 5
    assert state.sources[5:] == ["shallow"] * 2
    assert float((state.X.norm(dim=-1) - 1).abs().max()) <= 1e-12
    torch.testing.assert_close(state.Y, smooth_sphere(state.X), atol=0, rtol=0)
    running = torch.tensor([min(state.Y[: i + 1].tolist()) for i in range(7)], dtype=torch.float64)
    torch.testing.assert_close(state.regret(), (running - smooth_sphere.optimum_value).abs())
    assert bool((state.regret()[1:] <= state.regret()[:-1]).all())
    assert state.best_value == float(state.Y.min())


def test_a_resumed_run_evaluates_nothing_twice_and_ends_like_an_uninterrupted_one(tmp_path):
    """Cold fits (``warm_start=False``): a resumed process has no previous model to start from,
    so only then are the two runs the same computation."""
    path = tmp_path / "state.pt"
    counter = Counting()
    cold = replace(FAST, warm_start=False)
    run(6, seed=2, state_path=path, objective=counter, settings=cold)
    assert counter.points == 6
    resumed = run(7, seed=2, state_path=path, objective=counter, settings=cold)
    assert counter.points == 7  # one more evaluation, nothing repeated
    uninterrupted = run(7, seed=2, settings=cold)
    torch.testing.assert_close(resumed.X, uninterrupted.X, atol=0, rtol=0)
    torch.testing.assert_close(resumed.Y, uninterrupted.Y, atol=0, rtol=0)
    assert resumed.sources[5:] == ["shallow"] * 2
    assert BOState.load(path).num_evaluations == 7
    with pytest.raises(ValueError, match="belongs to another run"):
        run(9, seed=3, state_path=path)


def test_a_switch_run_follows_the_shallow_run_then_uses_the_deep_model():
    shallow = run(7, seed=4)
    switch = run(7, seed=4, model="switch", switch_after=1)
    assert switch.sources[5:] == ["shallow", "deep"]
    assert switch.switched_at == 1
    torch.testing.assert_close(switch.X[:6], shallow.X[:6], atol=0, rtol=0)
    assert not torch.equal(switch.X[6], shallow.X[6])
    assert float((switch.X.norm(dim=-1) - 1).abs().max()) <= 1e-12


def test_the_adaptive_rule_switches_when_the_deep_density_is_higher(monkeypatch):
    scores = {"shallow": -1.0, "deep": -2.0}
    monkeypatch.setattr(loop_module, "held_out_log_density", lambda kind, *args: scores[kind])
    state = BOState(3, "adaptive", 0, 5, True)
    state.X = torch.eye(3, dtype=torch.float64).repeat(2, 1)  # 6 points
    state.Y = torch.zeros(6, dtype=torch.float64)
    assert loop_module.choose_model(state, FAST, 1, 0) == "shallow"
    scores["deep"] = -0.5
    assert loop_module.choose_model(state, FAST, 2, 0) == "deep"
    assert state.switched_at == 2
    assert [check["deep"] for check in state.adaptive_checks] == [-2.0, -0.5]
    scores["deep"] = -9.0
    assert loop_module.choose_model(state, FAST, 3, 0) == "deep"  # a switch is for good


def test_the_shallow_held_out_density_is_the_exact_gps_gaussian_predictive_density():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(12, 3, generator=generator, dtype=torch.float64)
    x = torch.nn.functional.normalize(x, dim=-1)
    y = smooth_sphere(x)
    score = loop_module.held_out_log_density("shallow", x, y, FAST, 0)
    train, test = y[:-2], y[-2:]
    mean, scale = train.mean(), train.std()
    model = fit_exact_gp(exact_sphere_gp(x[:-2], ((train - mean) / scale).unsqueeze(-1)))
    with torch.no_grad():
        predictive = model.likelihood(model(x[-2:]))  # includes the noise
        expected = torch.distributions.Normal(predictive.mean, predictive.variance.sqrt())
        expected = expected.log_prob((test - mean) / scale).sum()
    assert score == pytest.approx(float(expected), abs=1e-8)


def test_the_deep_surrogate_takes_the_dtype_of_the_points():
    """The residual DGP is built in the dtype (and on the device) of the points it is fitted to:
    float32 points give float32 parameters and a float32 predictive mean."""
    x = torch.nn.functional.normalize(torch.randn(8, 3, generator=torch.Generator().manual_seed(1)))
    targets = standardise(smooth_sphere(x.double()), minimize=True).float()
    model = loop_module.fit_surrogate("deep", x, targets, FAST, seed=0)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert model.predict(x)[0].dtype == torch.float32


def test_an_objective_returning_nan_is_a_named_error_that_keeps_the_state(tmp_path):
    path = tmp_path / "state.pt"
    calls = {"count": 0}

    def failing(X):
        calls["count"] += 1
        values = smooth_sphere(X)
        return values if calls["count"] < 3 else values * float("nan")

    with pytest.raises(ObjectiveNaNError, match="returned nan") as error:
        run(9, seed=5, state_path=path, objective=failing)
    assert error.value.state.num_evaluations == 6  # 5 initial + 1 step, not the NaN point
    assert BOState.load(path).num_evaluations == 6
    torch.testing.assert_close(BOState.load(path).X, error.value.state.X, atol=0, rtol=0)


def test_points_off_the_sphere_and_a_short_budget_are_named_errors():
    off = torch.ones(5, 3, dtype=torch.float64)
    with pytest.raises(OffSphereError, match="unit sphere") as error:
        run(7, initial_points=off)
    assert error.value.state.num_evaluations == 0
    with pytest.raises(BudgetError, match="smaller than the initial design"):
        run(4)
    with pytest.raises(ValueError, match="switch_after"):
        run(7, model="switch")
