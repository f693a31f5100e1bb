"""The main-benchmark experiment in a tiny configuration: its tables, figure, report and resume."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from zonal.experiments import run_experiment
from zonal.experiments.main_benchmark import (
    FIGURE_FILE,
    MODELS,
    RESULT_COLUMNS,
    RESULTS_FILE,
    SEED_TABLE_1,
    SUMMARY_COLUMNS,
    SUMMARY_FILE,
    TABLE_FILE,
)

TINY = {
    "datasets": ["synthetic"],
    "num_splits": 2,
    "max_rows": 60,
    "sgpr_budget": 30,
    "sgpr_max_iter": 15,
    "svgp_num_inducing": 8,
    "svgp_steps": 10,
    "svgp_batch_size": 32,
}


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def test_tiny_run_writes_the_tables_figure_and_report(tmp_path):
    result = run_experiment("main-benchmark", overrides=TINY, runs_root=tmp_path)
    columns, rows = read_csv(result.path / RESULTS_FILE)
    assert tuple(columns) == RESULT_COLUMNS
    assert sorted((row["split"], row["model"]) for row in rows) == sorted(
        (str(split), model) for split in range(2) for model in MODELS
    )
    columns, summary = read_csv(result.path / SUMMARY_FILE)
    assert tuple(columns) == SUMMARY_COLUMNS
    assert [row["model"] for row in summary] == list(MODELS)
    assert all(row["splits"] == "2" and row["source"] == "ours" for row in summary)
    table = (result.path / TABLE_FILE).read_text(encoding="utf-8")
    assert "| dataset | model | kernel | M | test MSE | test TLL | train seconds |" in table
    assert (result.path / FIGURE_FILE).exists() or pytest.importorskip("matplotlib") is None
    metrics = json.loads((result.path / "metrics.json").read_text())
    assert set(metrics["synthetic"]) == {"sgpr", "svgp_activated", "svgp_points"}
    assert "seed 000 table 1 ADGP-1" in (result.path / "report.md").read_text()


def test_interrupted_run_resumes_without_refitting(tmp_path, monkeypatch):
    from zonal.experiments import create_run, execute_run, main_benchmark, resume_experiment

    whole = run_experiment("main-benchmark", overrides=TINY, runs_root=tmp_path / "whole")
    real_fit, calls = main_benchmark.fit_and_score, []

    def interrupted(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(main_benchmark, "fit_and_score", interrupted)
    run = create_run("main-benchmark", overrides=TINY, runs_root=tmp_path / "broken")
    with pytest.raises(KeyboardInterrupt):
        execute_run(run)
    calls.clear()
    resumed = resume_experiment(run.directory.path)
    assert len(calls) == 2 * len(MODELS) - 3  # the three finished fits are not redone
    _, expected = read_csv(whole.path / RESULTS_FILE)
    _, got = read_csv(resumed.path / RESULTS_FILE)
    for before, after in zip(expected, got, strict=True):
        for key in ("dataset", "split", "model", "kernel", "num_inducing"):
            assert before[key] == after[key]
        for key in ("mse", "tll"):
            assert float(after[key]) == pytest.approx(float(before[key]), rel=1e-9, abs=1e-12)


def test_real_subset_puts_the_seed_numbers_beside(tmp_path):
    from zonal.datasets import DatasetUnavailableError, load_dataset

    try:
        load_dataset("yacht", timeout=20.0)
    except DatasetUnavailableError as error:
        pytest.skip(f"yacht cannot be fetched here: {str(error).splitlines()[0]}")
    overrides = {**TINY, "datasets": ["yacht"], "num_splits": 1, "max_rows": 80,
                 "models": ["sgpr"]}  # fmt: skip
    result = run_experiment("main-benchmark", overrides=overrides, runs_root=tmp_path)
    _, summary = read_csv(result.path / SUMMARY_FILE)
    assert [(row["model"], row["source"]) for row in summary] == [
        ("sgpr", "ours"),
        ("ADGP-1", "seed 000 table 1"),
        ("DGP-1", "seed 000 table 1"),
    ]
    assert float(summary[1]["mse"]) == SEED_TABLE_1["yacht"]["ADGP-1"][0]


def test_bad_config_is_an_experiment_error(tmp_path):
    from zonal.experiments import ExperimentError

    with pytest.raises(ExperimentError, match="models must be"):
        run_experiment("main-benchmark", overrides={**TINY, "models": ["gp"]}, runs_root=tmp_path)
    with pytest.raises(ExperimentError, match=r"unknown dataset .nope.; known datasets"):
        run_experiment("main-benchmark", overrides={**TINY, "datasets": ["nope"]},
                       runs_root=tmp_path)  # fmt: skip
