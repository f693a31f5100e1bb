"""The issue-4 experiments through the frame: banana-elbo (seed 000 fig. 4) and variance-terms
(seed 000 fig. 7, app. D), in tiny configurations."""

from __future__ import annotations

import csv
import itertools
import json

import pytest
import torch

from zonal.experiments import banana_elbo, run_experiment
from zonal.experiments.run import create_run, execute_run, resume_experiment

BANANA_TINY = {
    "num_train": 120,
    "num_test": 100,
    "num_inducing": [2, 4, 8],
    "adam_steps": 30,
    "lbfgs_steps": 10,
    "plot_inducing": [2, 4, 8],
    "grid_size": 15,
}
VARIANCE_TINY = {"grid_size": 61}


def _read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def banana_available():
    from zonal.datasets import DatasetUnavailableError, load_dataset

    try:
        load_dataset("banana")
    except DatasetUnavailableError as error:
        pytest.skip(f"banana cannot be fetched here: {str(error).splitlines()[0]}")


class SimulatedCrashError(RuntimeError):
    """Stands for a run killed part way."""


def test_banana_elbo_is_monotone_under_nesting(tmp_path, banana_available):
    result = run_experiment("banana-elbo", overrides=BANANA_TINY, runs_root=tmp_path)
    files = {path.name for path in result.path.iterdir()}
    assert {"elbo_vs_m.csv", "banana_elbo.png", "metrics.json", "report.md"} <= files
    rows = _read_csv(result.path / "elbo_vs_m.csv")
    assert [int(row["M"]) for row in rows] == BANANA_TINY["num_inducing"]
    elbos = [float(row["elbo"]) for row in rows]
    assert all(later >= earlier - 1e-6 for earlier, later in itertools.pairwise(elbos))
    # The grown model starts exactly where the smaller one ended (q(f) is unchanged).
    for previous, row in itertools.pairwise(rows):
        assert abs(float(row["elbo_at_init"]) - float(previous["elbo"])) < 1e-6
    metrics = json.loads((result.path / "metrics.json").read_text())
    assert metrics["elbo_monotone_in_m"] is True
    assert metrics["elbo"] == {str(row["M"]): float(row["elbo"]) for row in rows}
    assert 0 <= metrics["test_accuracy_final"] <= 1
    assert "seed 000 figure 4" in (result.path / "report.md").read_text()


def test_banana_elbo_resumes_after_the_last_finished_m(tmp_path, monkeypatch, banana_available):
    uninterrupted = run_experiment("banana-elbo", overrides=BANANA_TINY, runs_root=tmp_path / "a")
    real_train = banana_elbo.train
    state = {"calls": 0, "crash": True}

    def crashing_train(*args, **kwargs):
        if state["crash"] and state["calls"] == 2:
            raise SimulatedCrashError("killed during the third M")
        state["calls"] += 1
        return real_train(*args, **kwargs)

    monkeypatch.setattr(banana_elbo, "train", crashing_train)
    run = create_run("banana-elbo", overrides=BANANA_TINY, runs_root=tmp_path / "b")
    with pytest.raises(SimulatedCrashError):
        execute_run(run)
    assert run.directory.load_checkpoint()["rows"][-1]["M"] == 4
    state.update(calls=0, crash=False)
    resumed = resume_experiment(run.directory.path)
    assert state["calls"] == 1  # only M = 8 is trained after resuming
    assert resumed.metrics["elbo"] == pytest.approx(uninterrupted.metrics["elbo"], abs=1e-9)


def test_variance_terms_sum_to_the_predictive_variance(tmp_path):
    result = run_experiment("variance-terms", overrides=VARIANCE_TINY, runs_root=tmp_path)
    files = {path.name for path in result.path.iterdir()}
    assert {"variance_terms.csv", "data.csv", "variance_terms.png", "exact_gp_fits.png"} <= files
    rows = _read_csv(result.path / "variance_terms.csv")
    assert len(rows) == VARIANCE_TINY["grid_size"]
    column = {
        key: torch.tensor([float(row[key]) for row in rows], dtype=torch.float64) for key in rows[0]
    }
    metrics = result.metrics
    for name in ("matern", "arccos"):
        total = column[f"{name}_nystrom_gap"] + column[f"{name}_inducing_uncertainty"]
        assert (total - column[f"{name}_variance"]).abs().max() < 1e-8
        assert metrics[name]["max_abs_term_sum_error"] < 1e-8
        # Both terms are variances: non-negative up to rounding.
        assert column[f"{name}_nystrom_gap"].min() > -1e-8
        assert column[f"{name}_inducing_uncertainty"].min() >= 0
        # The jittered rank-deficient Kuu gives the same q(f) as an exact reduced basis.
        assert metrics[name]["max_abs_variance_difference_vs_reduced_basis"] < 1e-6
        # The comparison with the exact GP is the one in the table.
        error = (column[f"{name}_variance"] - column["exact_variance"]).abs().max()
        assert metrics[name]["max_abs_variance_error_vs_exact"] == pytest.approx(float(error))
        # The ELBO is a lower bound on the log marginal likelihood of its own kernel.
        assert metrics[name]["elbo"] <= metrics[name]["exact_log_marginal_likelihood"] + 1e-9
    assert metrics["arccos"]["exact_log_marginal_likelihood"] == pytest.approx(
        metrics["exact_log_marginal_likelihood"]
    )
    # Exact posterior: between 0 and the prior variance k(x, x) = ||[x, 1]||^2 (unit variance).
    prior = column["x"] ** 2 + 1
    assert column["exact_variance"].min() >= 0
    assert (column["exact_variance"] <= prior + 1e-12).all()
    for claim in (
        "matern_overestimates_variance",
        "matern_variance_dominated_by_nystrom_gap",
        "arccos_variance_dominated_by_inducing_uncertainty",
    ):
        assert isinstance(metrics[claim], bool)
