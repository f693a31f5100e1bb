"""The summary maths of ``benchmarks/fit_suite.py`` on made-up units: per-table means and ratios
zonal / svgp, the geometric mean of the ratios, the worst table, the TLL difference, time ratios."""

from __future__ import annotations

import math

import pytest


@pytest.fixture(scope="module")
def fit_suite(benchmark_module):
    return benchmark_module("fit_suite")


def unit(table: str, task: str, split: int, method: str, **scores: float) -> dict:
    return {"table": table, "task": task, "split": split, "method": method, **scores}


UNITS = [
    # table a: zonal MSE 0.5 and 0.7 (mean 0.6) against svgp 1.0 and 1.4 (mean 1.2): ratio 0.5
    unit("a", "regression", 0, "zonal", mse=0.5, tll=-1.0, seconds=10.0),
    unit("a", "regression", 1, "zonal", mse=0.7, tll=-1.2, seconds=30.0),
    unit("a", "regression", 0, "svgp", mse=1.0, tll=-1.5, seconds=20.0),
    unit("a", "regression", 1, "svgp", mse=1.4, tll=-1.7, seconds=20.0),
    unit("a", "regression", 0, "exact", skipped="3100 > 3000 training rows"),
    # table b: ratio 2.0, TLL difference -0.5, time ratio 1.0
    unit("b", "regression", 0, "zonal", mse=0.4, tll=-2.0, seconds=5.0),
    unit("b", "regression", 0, "svgp", mse=0.2, tll=-1.5, seconds=5.0),
    unit("b", "regression", 0, "hgb", mse=0.3, seconds=1.0),
    # table c: zonal only, no ratio
    unit("c", "regression", 0, "zonal", mse=0.1, tll=0.0, seconds=1.0),
    # classification: log loss 0.2 against 0.4 (ratio 0.5), accuracy 0.9 against 0.8
    unit("k", "classification", 0, "zonal", accuracy=0.9, tll=-0.2, seconds=4.0),
    unit("k", "classification", 0, "svgp", accuracy=0.8, tll=-0.4, seconds=8.0),
]


def test_table_means_average_splits_and_skip_skipped_units(fit_suite) -> None:
    entries = {entry["table"]: entry for entry in fit_suite.table_means(UNITS)}
    a = entries["a"]
    assert a["zonal_mse"] == pytest.approx(0.6) and a["svgp_mse"] == pytest.approx(1.2)
    assert a["ratio"] == pytest.approx(0.5) and a["time_ratio"] == pytest.approx(1.0)
    assert a["tll_difference"] == pytest.approx(-1.1 + 1.6)
    assert "exact_mse" not in a and a["zonal_splits"] == [0, 1]
    assert entries["b"]["hgb_mse"] == 0.3 and "hgb_tll" not in entries["b"]
    assert "ratio" not in entries["c"]
    k = entries["k"]
    assert k["ratio"] == pytest.approx(0.5) and k["accuracy_difference"] == pytest.approx(0.1)


def test_task_summary_geometric_mean_and_worst_table(fit_suite) -> None:
    entries = fit_suite.table_means(UNITS)
    regression = fit_suite.task_summary([e for e in entries if e["task"] == "regression"])
    assert regression["tables"] == 2
    assert regression["geometric_mean_ratio"] == pytest.approx(1.0)  # sqrt(0.5 * 2.0)
    assert regression["worst_table"] == "b" and regression["worst_ratio"] == pytest.approx(2.0)
    assert regression["mean_tll_difference"] == pytest.approx((0.5 - 0.5) / 2)
    assert regression["geometric_mean_time_ratio"] == pytest.approx(1.0)
    assert regression["total_time_ratio"] == pytest.approx(25.0 / 25.0)
    assert "tables_at_least_as_good" not in regression
    classification = fit_suite.task_summary([e for e in entries if e["task"] == "classification"])
    assert classification["geometric_mean_ratio"] == pytest.approx(0.5)
    assert classification["total_time_ratio"] == pytest.approx(0.5)
    assert classification["tables_at_least_as_good"] == 1
    assert fit_suite.task_summary([]) == {"tables": 0}


def test_geometric_mean(fit_suite) -> None:
    assert fit_suite.geometric_mean([0.25, 4.0, 1.0]) == pytest.approx(1.0)
    assert fit_suite.geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert math.isnan(fit_suite.geometric_mean([]))


def test_results_are_written_into_a_folder_that_does_not_exist_yet(fit_suite, tmp_path) -> None:
    """The first finished unit is saved even where the output's folder is missing (a fresh clone
    has no benchmarks/results/): before, the run died there and lost that unit's work."""
    import json

    path = tmp_path / "results" / "fit_suite.json"
    fit_suite.write_results(path, {"quick": True}, UNITS)
    written = json.loads(path.read_text())
    assert written["units"] == UNITS and written["settings"] == {"quick": True}


def test_a_zonal_only_run_is_compared_with_an_earlier_runs_baselines(fit_suite, tmp_path) -> None:
    """--methods zonal --baselines EARLIER: the earlier run's units of the other methods join the
    tables and summary; the new file keeps its own units only and names the earlier file."""
    import json

    settings = {"quick": True}
    earlier = tmp_path / "before.json"
    fit_suite.write_results(earlier, settings, UNITS)
    baselines = fit_suite.baseline_units(earlier, settings, ["zonal"])
    assert {u["method"] for u in baselines} == {"svgp", "exact", "hgb"}
    # zonal again on table a, now twice as good: ratio 0.25 against the same svgp units
    mine = [unit("a", "regression", 0, "zonal", mse=0.25, tll=-1.0, seconds=10.0),
            unit("a", "regression", 1, "zonal", mse=0.35, tll=-1.2, seconds=30.0)]  # fmt: skip
    path = tmp_path / "after.json"
    fit_suite.write_results(path, settings, mine, baselines, earlier)
    written = json.loads(path.read_text())
    assert written["units"] == mine and written["baselines_from"] == str(earlier)
    a = next(entry for entry in written["tables"] if entry["table"] == "a")
    assert a["ratio"] == pytest.approx(0.25)
    with pytest.raises(SystemExit, match="other settings"):
        fit_suite.baseline_units(earlier, {"quick": False}, ["zonal"])
