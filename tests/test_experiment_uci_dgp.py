"""The uci-dgp experiment (seed 000 table 1, figure 6) in a tiny synthetic configuration: the files
and columns it writes, resuming after an interruption, and the trace evaluations its figure relies
on leaving training untouched."""

from __future__ import annotations

import csv
import itertools
import json

import gpytorch
import pytest
import torch

from zonal.experiments import (
    _dgp_common,
    create_run,
    execute_run,
    resume_experiment,
    run_experiment,
)
from zonal.experiments import uci_dgp as uci_module

TINY_UCI = {
    "datasets": ["synthetic"],
    "models": ["ADGP-1", "ADGP-3", "DGP-3"],
    "num_splits": 2,
    "num_inducing": 6,
    "network_steps": 20,
    "elbo_steps": 4,
    "dgp_steps": 4,
    "eval_samples": 4,
    "trace_every": 2,
    "trace_samples": 2,
}


class SimulatedCrashError(RuntimeError):
    """Stands for a run killed part way."""


def _read_csv(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


def _without_times(value):
    """Metrics or rows with wall-clock entries removed (they differ between any two runs)."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if "seconds" not in k}
    if isinstance(value, list):
        return [_without_times(item) for item in value]
    return value


@pytest.fixture(scope="module")
def uci_reference(tmp_path_factory):
    return run_experiment("uci-dgp", overrides=TINY_UCI, runs_root=tmp_path_factory.mktemp("uci"))


def test_uci_dgp_writes_tables_traces_and_the_paper_beside_ours(uci_reference):
    """One result row per (split, model), a summary per model with the paper's columns, MSE traces
    for the stages that have them, and a report with seed 000 table 1 beside our numbers."""
    path = uci_reference.path
    files = {p.name for p in path.iterdir()}
    expected = {
        "results.csv",
        "summary.csv",
        "table1.md",
        "traces.csv",
        "report.md",
        "metrics.json",
    }
    assert expected <= files
    pytest.importorskip("matplotlib")
    assert "traces.png" in files

    results = _read_csv(path / "results.csv")
    assert len(results) == 2 * len(TINY_UCI["models"])  # splits x models
    assert {"dataset", "split", "model", "mse", "tll", "network_mse", "train_seconds"} <= set(
        results[0]
    )
    summary = _read_csv(path / "summary.csv")
    assert [row["model"] for row in summary] == TINY_UCI["models"]
    for column in ("mse", "mse_std", "tll", "tll_std", "paper_mse", "paper_tll_std"):
        assert column in summary[0]
    traces = _read_csv(path / "traces.csv")
    stages = {(row["model"], row["stage"]) for row in traces}
    assert stages == {("ADGP-3", "network"), ("ADGP-3", "elbo"), ("DGP-3", "elbo")}

    metrics = json.loads((path / "metrics.json").read_text())
    assert set(metrics["synthetic"]) == set(TINY_UCI["models"])
    report = (path / "report.md").read_text()
    assert "| quantity | ours, quick (reduced) | paper (seed 000 table 1) |" in report
    assert "| concrete.ADGP-3.mse | — | 0.135 |" in report  # a dataset this run did not fit


def test_uci_dgp_resumes_after_an_interruption_with_the_same_metrics(
    uci_reference, tmp_path, monkeypatch
):
    """A run killed after 4 of its 6 fits resumes with the 2 fits left and ends with the metrics,
    results and traces of an uninterrupted run (times aside)."""
    real_fit = uci_module.fit_model
    calls = {"count": 0}

    def crashing_fit(*args, **kwargs):
        if calls["count"] == 4:
            raise SimulatedCrashError("killed after 4 fits")
        calls["count"] += 1
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(uci_module, "fit_model", crashing_fit)
    run = create_run("uci-dgp", overrides=TINY_UCI, runs_root=tmp_path)
    with pytest.raises(SimulatedCrashError):
        execute_run(run)
    assert run.directory.checkpoint_path.exists()
    assert not (run.directory.path / "metrics.json").exists()

    calls["count"] = -100  # no more crashes; count the fits of the resumed run
    resumed = resume_experiment(run.directory.path)
    assert calls["count"] == -100 + 2  # only the 2 fits that were left
    assert _without_times(resumed.metrics) == _without_times(uci_reference.metrics)
    for name in ("results.csv", "traces.csv"):
        ours = _without_times(_read_csv(resumed.path / name))
        reference = _without_times(_read_csv(uci_reference.path / name))
        assert ours == reference


def test_evaluating_during_training_changes_neither_the_losses_nor_the_clock_order():
    """The trace evaluations (figure 6) draw from a forked random stream: the losses are those of
    training without them, they happen at steps 0, every, 2 every, ... and the last, and their
    clock readings increase."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(40, 2, generator=generator, dtype=torch.float64)
    y = torch.sin(x[:, 0])

    def train(with_trace: bool) -> tuple[list[float], list[tuple[int, float]]]:
        torch.manual_seed(0)
        likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
        model = _dgp_common.build_inducing_point_dgp(
            x, 2, likelihood, num_inducing=5, hidden_width=2, mean="constant", seed=0
        )
        points: list[tuple[int, float]] = []
        extra = {}
        if with_trace:
            extra = {
                "evaluate": lambda: _dgp_common.predictive_mse(model, x, y, 3),
                "every": 3,
                "on_evaluate": lambda step, seconds, value: points.append((step, seconds)),
            }
        schedule = _dgp_common.Schedule(batch_size=16)
        losses = _dgp_common.train_elbo(
            model, x, y, 8, schedule, torch.Generator().manual_seed(0), **extra
        )
        return losses, points

    plain, _ = train(False)
    traced, points = train(True)
    assert plain == traced  # evaluations use a forked RNG stream
    assert [step for step, _ in points] == [0, 3, 6, 8]
    assert all(b >= a for (_, a), (_, b) in itertools.pairwise(points))


def test_time_to_common_target_is_the_first_trace_point_at_the_worse_final_mse():
    """Per split the target is the larger of the traced models' last MSEs (the accuracy both
    reach); each model is credited with its first evaluation at or below it."""
    from zonal.experiments.uci_dgp import time_to_common_target

    def trace(model, points, split=0):
        return [
            {"dataset": "d", "split": split, "model": model, "seconds": s, "test_mse": m}
            for s, m in points
        ]

    traces = [
        *trace("ADGP-3", [(1.0, 0.5), (2.0, 0.09), (3.0, 0.05)]),
        *trace("DGP-3", [(5.0, 0.4), (10.0, 0.2), (20.0, 0.1)]),
        *trace("ADGP-3", [(1.0, 0.3)], split=1),  # no DGP-3 trace on split 1: left out
    ]
    rows = {row["model"]: row for row in time_to_common_target(traces)}
    assert set(rows) == {"ADGP-3", "DGP-3"}
    assert rows["ADGP-3"]["target_mse"] == rows["DGP-3"]["target_mse"] == 0.1
    assert rows["ADGP-3"]["seconds_to_target"] == 2.0
    assert rows["DGP-3"]["seconds_to_target"] == 20.0
    assert rows["DGP-3"]["trained_seconds"] == 20.0
