"""The main-benchmark experiment in tiny configurations: its tables and figure, that its summary,
metrics and markdown table are the mean and spread over splits of its per-split results, that the
report puts each seed 000 table 1 number beside our number for the same dataset, model and metric,
resuming, and config errors."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from zonal.experiments import get_experiment, run_experiment
from zonal.experiments.main_benchmark import (
    FIGURE_FILE,
    MODEL_LABELS,
    MODELS,
    RESULT_COLUMNS,
    RESULTS_FILE,
    SEED_TABLE_1,
    SUMMARY_COLUMNS,
    SUMMARY_FILE,
    TABLE_FILE,
)
from zonal.experiments.report import flatten_metrics, format_value

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
SEED_MODEL = {"svgp-activated": "ADGP-1", "svgp-points": "DGP-1"}
"""The seed's single-layer models that ours stand for: activated Softplus features (ADGP-1) and
inducing points (DGP-1)."""
SEED_COLUMN = {"mse": 0, "tll": 2}
"""Where each metric sits in a row (MSE, std, TLL, std) of seed 000 table 1."""


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def markdown_rows(text: str) -> list[list[str]]:
    """The cells of every row of the markdown tables in ``text``, headers included, rules left out."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    return [line.strip("| ").split(" | ") for line in lines if not set(line) <= set("|- ")]


def report_tables(text: str) -> dict[str, dict[str, list[str]]]:
    """The report's ``### source`` tables: {source: {quantity: [the other cells]}}."""
    tables: dict[str, dict[str, list[str]]] = {}
    for section in text.split("\n### ")[1:]:
        title, _, body = section.partition("\n")
        rows = markdown_rows(body.split("\n## ")[0])
        tables[title.strip()] = {row[0]: row[1:] for row in rows[1:]}  # after the header
    return tables


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    return run_experiment("main-benchmark", overrides=TINY, runs_root=tmp_path_factory.mktemp("mb"))


def test_tiny_run_writes_the_tables_figure_and_report(tiny_run):
    """results.csv has one row per (split, model), summary.csv one per model, with their columns;
    the markdown table, the figure and the report are written."""
    columns, rows = read_csv(tiny_run.path / RESULTS_FILE)
    assert tuple(columns) == RESULT_COLUMNS
    assert sorted((row["split"], row["model"]) for row in rows) == sorted(
        (str(split), model) for split in range(2) for model in MODELS
    )
    columns, summary = read_csv(tiny_run.path / SUMMARY_FILE)
    assert tuple(columns) == SUMMARY_COLUMNS
    assert [row["model"] for row in summary] == list(MODELS)
    assert all(row["splits"] == "2" and row["source"] == "ours" for row in summary)
    table = (tiny_run.path / TABLE_FILE).read_text(encoding="utf-8")
    assert "| dataset | model | kernel | M | test MSE | test TLL | train seconds |" in table
    assert (tiny_run.path / FIGURE_FILE).exists() or pytest.importorskip("matplotlib") is None
    assert "seed 000 table 1 ADGP-1" in (tiny_run.path / "report.md").read_text()


def test_summary_metrics_and_table_are_mean_and_std_over_the_splits(tiny_run):
    """For every model, summary.csv, metrics.json and the markdown table hold the mean and the
    sample standard deviation over the splits of the per-split MSE and TLL of results.csv (the
    table to its 3 decimals), and the report shows the metrics.json values."""
    _, results = read_csv(tiny_run.path / RESULTS_FILE)
    _, summary = read_csv(tiny_run.path / SUMMARY_FILE)
    metrics = json.loads((tiny_run.path / "metrics.json").read_text())
    table = {row[1]: row for row in markdown_rows((tiny_run.path / TABLE_FILE).read_text())}
    by_model = {row["model"]: row for row in summary}
    for model in MODELS:
        ours = metrics["synthetic"][model.replace("-", "_")]
        for metric, cell in (("mse", 4), ("tll", 5)):
            values = [float(row[metric]) for row in results if row["model"] == model]
            mean, spread = statistics.mean(values), statistics.stdev(values)
            assert float(by_model[model][metric]) == pytest.approx(mean, rel=1e-12)
            assert float(by_model[model][f"{metric}_std"]) == pytest.approx(spread, rel=1e-12)
            assert ours[metric] == pytest.approx(mean, rel=1e-12)
            assert ours[f"{metric}_std"] == pytest.approx(spread, rel=1e-12)
            assert table[MODEL_LABELS[model]][cell] == f"{mean:.3f} ± {spread:.3f}"
    other = report_tables((tiny_run.path / "report.md").read_text())["Other metrics"]
    for quantity, value in flatten_metrics(metrics).items():
        assert other[quantity] == [format_value(value)]


def test_report_puts_each_seed_number_beside_ours_for_the_same_quantity(tmp_path):
    """On yacht (a dataset of seed 000 table 1): in the report's table for each seed model, the row
    of every (dataset, metric) of the seed table holds the seed's number for that dataset, model and
    metric (as the registry records it) beside our counterpart model's value from metrics.json
    ("—" for the datasets this run did not fit); summary.csv's seed rows are the seed's table."""
    from zonal.datasets import DatasetUnavailableError, load_dataset

    try:
        load_dataset("yacht", timeout=20.0)
    except DatasetUnavailableError as error:
        pytest.skip(f"yacht cannot be fetched here: {str(error).splitlines()[0]}")
    overrides = {**TINY, "datasets": ["yacht"], "max_rows": 80, "models": list(SEED_MODEL)}
    result = run_experiment("main-benchmark", overrides=overrides, runs_root=tmp_path)
    flat = flatten_metrics(json.loads((result.path / "metrics.json").read_text()))
    tables = report_tables((result.path / "report.md").read_text())
    registry = get_experiment("main-benchmark").paper
    for model, seed_model in SEED_MODEL.items():
        source = f"seed 000 table 1 {seed_model}"
        expected = {}
        for dataset, row in SEED_TABLE_1.items():
            for metric, column in SEED_COLUMN.items():
                quantity = f"{dataset}.{model.replace('-', '_')}.{metric}"
                assert registry[source][quantity] == row[seed_model][column]
                ours = format_value(flat[quantity]) if dataset == "yacht" else "—"
                expected[quantity] = [ours, format_value(row[seed_model][column])]
        assert tables[source] == expected
    _, summary = read_csv(result.path / SUMMARY_FILE)
    seed_rows = [row for row in summary if row["source"] == "seed 000 table 1"]
    assert [row["model"] for row in seed_rows] == ["ADGP-1", "DGP-1"]
    for row in seed_rows:
        seed = SEED_TABLE_1["yacht"][row["model"]]
        assert tuple(float(row[key]) for key in ("mse", "mse_std", "tll", "tll_std")) == seed


def test_interrupted_run_resumes_without_refitting(tiny_run, tmp_path, monkeypatch):
    """A run interrupted in its fourth fit resumes with only the fits left, and its results equal
    those of an uninterrupted run."""
    from zonal.experiments import create_run, execute_run, main_benchmark, resume_experiment

    real_fit, calls = main_benchmark.fit_and_score, []

    def interrupted(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(main_benchmark, "fit_and_score", interrupted)
    run = create_run("main-benchmark", overrides=TINY, runs_root=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        execute_run(run)
    calls.clear()
    resumed = resume_experiment(run.directory.path)
    assert len(calls) == 2 * len(MODELS) - 3  # the three finished fits are not redone
    _, expected = read_csv(tiny_run.path / RESULTS_FILE)
    _, got = read_csv(resumed.path / RESULTS_FILE)
    for before, after in zip(expected, got, strict=True):
        for key in ("dataset", "split", "model", "kernel", "num_inducing"):
            assert before[key] == after[key]
        for key in ("mse", "tll"):
            assert float(after[key]) == pytest.approx(float(before[key]), rel=1e-9, abs=1e-12)


def test_bad_config_is_an_experiment_error(tmp_path):
    """An unknown model or dataset is an ``ExperimentError`` naming the choices."""
    from zonal.experiments import ExperimentError

    with pytest.raises(ExperimentError, match="models must be"):
        run_experiment("main-benchmark", overrides={**TINY, "models": ["gp"]}, runs_root=tmp_path)
    with pytest.raises(ExperimentError, match=r"unknown dataset .nope.; known datasets"):
        run_experiment("main-benchmark", overrides={**TINY, "datasets": ["nope"]},
                       runs_root=tmp_path)  # fmt: skip
