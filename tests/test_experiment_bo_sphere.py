"""The bo-sphere experiment (seed 004 fig. 4.2) in a tiny configuration: it writes the regret of
every run and step, the summary's medians and quartiles are those of the rows' log10 regrets,
the switch run repeats the shallow run until its switch and the deep model takes the steps after,
and a run killed part way resumes with the results of an uninterrupted one."""

from __future__ import annotations

import csv
import math
import statistics

import pytest

from zonal.experiments import bo_sphere as bo_module
from zonal.experiments import create_run, execute_run, resume_experiment, run_experiment

TINY = {
    "functions": ["smooth-s2"],
    "repeats": 2,
    "steps": 2,
    "switch_after": 1,
    "num_restarts": 1,
    "raw_samples": 8,
    "mc_samples": 8,
    "num_inducing": 8,
    "deep_steps": 3,
    "deep_warm_steps": 1,
    "posterior_samples": 2,
    "holdout": 2,
    "check_every": 1,
    "adaptive_min_points": 7,
}


class SimulatedCrashError(RuntimeError):
    """Stands for a run killed part way."""


def _read_csv(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return run_experiment("bo-sphere", overrides=TINY, runs_root=tmp_path_factory.mktemp("bo"))


def test_the_experiment_writes_every_regret_and_their_quartiles(reference):
    rows = _read_csv(reference.path / "results.csv")
    assert len(rows) == 3 * 2 * (2 + 1)  # strategies x repeats x (steps + the initial design)
    summary = _read_csv(reference.path / "summary.csv")
    for entry in summary:
        values = [
            math.log10(max(float(r["regret"]), 1e-16))
            for r in rows
            if (r["strategy"], r["step"]) == (entry["strategy"], entry["step"])
        ]
        assert float(entry["log10_regret_median"]) == pytest.approx(statistics.median(values))
        low, _, high = statistics.quantiles(values, n=4, method="inclusive")
        assert float(entry["log10_regret_q1"]) == pytest.approx(low)
        assert float(entry["log10_regret_q3"]) == pytest.approx(high)
    metrics = reference.metrics["smooth-s2"]
    assert set(metrics) >= {"shallow", "switch", "adaptive", "shallow_seconds_per_step"}
    final = next(r for r in summary if r["strategy"] == "shallow" and r["step"] == "2")
    assert metrics["shallow"]["final_median"] == pytest.approx(float(final["log10_regret_median"]))
    assert "seed 004 fig. 4.2" in (reference.path / "report.md").read_text()
    pytest.importorskip("matplotlib")
    assert (reference.path / "figure_4_2.png").exists()


def test_the_switch_run_repeats_the_shallow_run_until_its_switch(reference):
    rows = _read_csv(reference.path / "results.csv")

    def trace(strategy, repeat):
        return [r for r in rows if (r["strategy"], r["repeat"]) == (strategy, str(repeat))]

    for repeat in range(2):
        shallow, switch = trace("shallow", repeat), trace("switch", repeat)
        assert [r["regret"] for r in switch[:2]] == [r["regret"] for r in shallow[:2]]
        assert [r["model"] for r in switch] == ["initial", "shallow", "deep"]


def test_a_killed_run_resumes_with_the_results_of_an_uninterrupted_one(
    reference, tmp_path, monkeypatch
):
    real = bo_module.run_strategy
    calls = {"count": 0}

    def crashing(*args, **kwargs):
        if calls["count"] == 4:
            raise SimulatedCrashError("killed after 4 BO runs")
        calls["count"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(bo_module, "run_strategy", crashing)
    run = create_run("bo-sphere", overrides=TINY, runs_root=tmp_path)
    with pytest.raises(SimulatedCrashError):
        execute_run(run)
    calls["count"] = -100
    resumed = resume_experiment(run.directory.path)
    assert calls["count"] == -100 + 6  # the finished runs return at once from their states
    ours = _read_csv(resumed.path / "results.csv")
    assert ours == _read_csv(reference.path / "results.csv")


def test_two_worker_processes_give_the_regrets_of_one(reference, tmp_path):
    """--jobs 2 runs the (function, repeat) units in two spawned processes; every BO run seeds
    itself and the rows are gathered in the units' order, so results.csv is the one-process one."""
    run = create_run("bo-sphere", overrides=TINY, runs_root=tmp_path, jobs=2)
    parallel = execute_run(run)
    assert _read_csv(parallel.path / "results.csv") == _read_csv(reference.path / "results.csv")
    assert parallel.metrics["smooth-s2"]["switch"] == reference.metrics["smooth-s2"]["switch"]


def test_the_well_radius_setting_reaches_the_singular_function_and_a_bad_one_is_refused(tmp_path):
    from zonal.bo import singular_objective, sobol_sphere, sphere_objective

    x = sobol_sphere(32, 3, seed=0)
    wide = bo_module.objective_of({"well_radius": 0.2}, "singular-s2")
    assert bool((wide(x) == singular_objective(0.2)(x)).all())
    assert not bool((wide(x) == sphere_objective("singular-s2")(x)).all())
    smooth = bo_module.objective_of({"well_radius": 0.2}, "smooth-s2")
    assert smooth is sphere_objective("smooth-s2")
    with pytest.raises(ValueError, match="well_radius must lie in"):
        run_experiment("bo-sphere", overrides={**TINY, "well_radius": 2.0}, runs_root=tmp_path)
