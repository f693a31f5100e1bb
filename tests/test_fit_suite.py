"""The summary maths of ``benchmarks/fit_suite.py`` (``suite_summary``, ``suite_rows``) on made-up
units: per-table means and ratios zonal / svgp, the geometric mean of the ratios, the worst table,
the TLL difference, time ratios, and the ratio's paired bootstrap interval over test rows."""

from __future__ import annotations

import math

import numpy as np
import pytest


@pytest.fixture(scope="module")
def fit_suite(benchmark_module):
    return benchmark_module("fit_suite")


@pytest.fixture(scope="module")
def summary(benchmark_module):
    return benchmark_module("suite_summary")


@pytest.fixture(scope="module")
def suite_rows(benchmark_module):
    return benchmark_module("suite_rows")


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


def test_geometric_mean(summary) -> None:
    assert summary.geometric_mean([0.25, 4.0, 1.0]) == pytest.approx(1.0)
    assert summary.geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert math.isnan(summary.geometric_mean([]))


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
    # zonal's own budget is not a baseline's setting: a run under another default still compares
    other_budget = {"quick": True, "zonal_budget": "auto"}
    assert fit_suite.baseline_units(earlier, other_budget, ["zonal"]) == baselines


# ------------------------------------------------------------------------------- per-row records


def rows_unit(split: int, method: str, squared_errors, task: str = "regression") -> dict:
    errors = np.asarray(squared_errors, dtype=float)
    if task == "regression":
        rows = {"squared_error": errors.tolist()}
        return unit("t", task, split, method, mse=float(errors.mean()), tll=-1.0, seconds=1.0,
                    test_rows=rows)  # fmt: skip
    rows = {"correct": [1.0] * len(errors), "log_density": (-errors).tolist()}
    return unit("t", task, split, method, accuracy=1.0, tll=float(-errors.mean()), seconds=1.0,
                test_rows=rows)  # fmt: skip


def test_regression_rows_hold_squared_errors_and_gaussian_log_densities(suite_rows) -> None:
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    mean, y = rng.standard_normal(50), rng.standard_normal(50)
    variance = rng.uniform(0.1, 2.0, 50)
    rows = suite_rows.regression_rows(mean, variance, y)
    np.testing.assert_allclose(rows["squared_error"], (mean - y) ** 2, rtol=1e-5)
    np.testing.assert_allclose(rows["log_density"], norm.logpdf(y, mean, np.sqrt(variance)),
                               rtol=1e-5)  # fmt: skip
    assert "log_density" not in suite_rows.regression_rows(mean, None, y)
    probabilities = np.array([[0.7, 0.3], [0.2, 0.8], [1.0, 0.0]])
    labels = np.array([0, 0, 1])
    found = suite_rows.classification_rows(probabilities, labels)
    assert found["correct"] == [1.0, 0.0, 0.0]
    np.testing.assert_allclose(found["log_density"][:2], np.log([0.7, 0.2]), rtol=1e-5)
    assert found["log_density"][2] == pytest.approx(np.log(np.finfo(np.float64).tiny), rel=1e-5)


def test_a_ratio_that_holds_row_by_row_has_a_point_interval(suite_rows) -> None:
    """zonal's squared error is 0.8 of the SVGP's on every row of both splits: every bootstrap
    draw gives 0.8, whichever rows it picks (the pairing keeps each row's two errors together)."""
    rng = np.random.default_rng(1)
    theirs = [rng.exponential(size=20), rng.exponential(size=30)]
    zonal = [rows_unit(s, "zonal", 0.8 * errors) for s, errors in enumerate(theirs)]
    svgp = [rows_unit(s, "svgp", errors) for s, errors in enumerate(theirs)]
    low, high = suite_rows.ratio_interval(zonal, svgp)
    assert low == pytest.approx(0.8, rel=1e-9) and high == pytest.approx(0.8, rel=1e-9)


def test_the_interval_covers_the_ratio_and_narrows_with_more_rows(suite_rows) -> None:
    """Independent errors with expected ratio 1.2: at 20 rows the 90% interval is wide and holds
    the observed ratio; at 2,000 rows it is about 10 times narrower (1 / sqrt(n)) and holds 1.2."""
    rng = np.random.default_rng(2)
    widths = {}
    for count in (20, 2000):
        theirs = rng.exponential(size=count)
        ours = 1.2 * rng.exponential(size=count)
        low, high = suite_rows.ratio_interval([rows_unit(0, "zonal", ours)],
                                              [rows_unit(0, "svgp", theirs)])  # fmt: skip
        assert low < ours.mean() / theirs.mean() < high
        widths[count] = high - low
    assert 5 < widths[20] / widths[2000] < 20
    assert low < 1.2 < high


def test_no_interval_without_rows_or_on_other_splits(suite_rows) -> None:
    errors = np.ones(5)
    assert suite_rows.ratio_interval([unit("t", "regression", 0, "zonal", mse=1.0)],
                                     [rows_unit(0, "svgp", errors)]) is None  # fmt: skip
    assert suite_rows.ratio_interval([rows_unit(0, "zonal", errors)],
                                     [rows_unit(1, "svgp", errors)]) is None  # fmt: skip
    assert suite_rows.ratio_interval([rows_unit(0, "zonal", errors)],
                                     [rows_unit(0, "svgp", np.ones(4))]) is None  # fmt: skip


def test_tables_behind_beyond_the_rows_noise_are_named(summary) -> None:
    """A table whose zonal errors are twice the SVGP's on every row is behind beyond noise (its
    whole interval above 1); one with a ratio near 1 on few rows is not. Classification compares
    log losses, row by row."""
    rng = np.random.default_rng(3)
    theirs = rng.exponential(size=40)
    units = [rows_unit(0, "zonal", 2 * theirs), rows_unit(0, "svgp", theirs)]
    noisy = rng.exponential(size=10)
    units += [{**u, "table": "n"} for u in (rows_unit(0, "zonal", noisy * rng.uniform(0.5, 1.6, 10)),
                                            rows_unit(0, "svgp", noisy))]  # fmt: skip
    entries = {entry["table"]: entry for entry in summary.table_means(units)}
    assert entries["t"]["ratio_interval"] == pytest.approx([2.0, 2.0])
    low, high = entries["n"]["ratio_interval"]
    assert low < 1 < high
    assert summary.task_summary(list(entries.values()))["losses_beyond_noise"] == ["t"]
    losses = rng.uniform(0.1, 0.5, size=30)
    classified = [rows_unit(0, "zonal", 1.5 * losses, "classification"),
                  rows_unit(0, "svgp", losses, "classification")]  # fmt: skip
    (entry,) = summary.table_means(classified)
    assert entry["ratio"] == pytest.approx(1.5) and entry["ratio_interval"] == pytest.approx(
        [1.5, 1.5]
    )


def test_heldout_runs_the_heldout_tables_into_their_own_file(fit_suite, monkeypatch) -> None:
    from zonal.datasets.registry_heldout import HELDOUT_CLASSIFICATION, HELDOUT_REGRESSION

    monkeypatch.setattr("sys.argv", ["fit_suite.py", "--heldout"])
    args = fit_suite.parse_args()
    assert args.tables == [*HELDOUT_REGRESSION, *HELDOUT_CLASSIFICATION]
    assert args.output.name == "fit_suite_heldout.json"
    monkeypatch.setattr("sys.argv", ["fit_suite.py", "--heldout", "--tables", "servo"])
    with pytest.raises(SystemExit):  # a suite table is not a held-out one
        fit_suite.parse_args()
    monkeypatch.setattr("sys.argv", ["fit_suite.py", "--tables", "pima"])
    with pytest.raises(SystemExit):  # nor a held-out table a suite one
        fit_suite.parse_args()


def test_the_few_relevant_inputs_rows_and_their_noise_floor(benchmark_module) -> None:
    """The rows as the docstring defines them, drawn again here: y = sin 2x_0 + x_1^2 / 2 - 1/2
    + 0.1 e standardised on the training rows, and the noise floor 0.01 / var(raw training y)."""
    module = benchmark_module("few_relevant_inputs")
    x, y, x_test, y_test, floor = module.synthetic_rows(3)
    rng = np.random.default_rng(3)
    inputs = rng.standard_normal((5000, 32))
    raw = np.sin(2 * inputs[:, 0]) + 0.5 * inputs[:, 1] ** 2 - 0.5 + 0.1 * rng.standard_normal(5000)
    mean, sd = raw[:4000].mean(), raw[:4000].std()
    np.testing.assert_array_equal(x, inputs[:4000])
    np.testing.assert_array_equal(x_test, inputs[4000:])
    np.testing.assert_allclose(np.concatenate([y, y_test]), (raw - mean) / sd, rtol=0, atol=1e-12)
    assert floor == pytest.approx(0.01 / sd**2, rel=1e-12)


@pytest.fixture(scope="module")
def compare_runs(benchmark_module):
    return benchmark_module("compare_runs")


def test_before_and_after_are_paired_on_their_common_splits(compare_runs):
    """Table a has splits 0, 1 before and 0 after: only split 0 is compared; table c, absent
    after, is left out."""
    before = [unit("a", "regression", 0, "zonal", mse=1.0, tll=-1.0, seconds=10.0),
              unit("a", "regression", 1, "zonal", mse=9.0, tll=-9.0, seconds=10.0),
              unit("c", "regression", 0, "zonal", mse=1.0, tll=-1.0, seconds=10.0)]  # fmt: skip
    after = [unit("a", "regression", 0, "zonal", mse=0.5, tll=-0.5, seconds=12.0)]
    (row,) = compare_runs.paired_tables(before, after)
    assert row["table"] == "a" and row["splits"] == [0]
    assert (row["before_mse"], row["after_mse"], row["after_seconds"]) == (1.0, 0.5, 12.0)


def test_the_regression_rule_and_the_table_that_decides_it(compare_runs):
    """After / before MSE 0.5, 1.5 and 1.5: geometric mean (1.125)^(1/3) = 1.04 > 1, the rule
    fails; without table a it fails too (1.5), without b or c it holds (0.866): b and c flip it.
    A TLL drop of 0.01 > 0.005 fails a rule whose MSE ratio holds."""

    def row(table, ratio, tll_gain=0.0):
        return {"table": table, "task": "regression", "before_mse": 1.0, "after_mse": ratio,
                "before_tll": 0.0, "after_tll": tll_gain}  # fmt: skip

    rows = [row("a", 0.5), row("b", 1.5), row("c", 1.5)]
    assert not compare_runs.rule_holds(rows, 0.005, 0.002)
    assert compare_runs.flips(rows, 0.005, 0.002) == ["b", "c"]
    assert compare_runs.rule_holds([row("a", 0.5)], 0.005, 0.002)
    assert not compare_runs.rule_holds([row("a", 0.5, -0.01)], 0.005, 0.002)


def test_the_classification_rule_needs_tll_up_and_accuracy_not_down(compare_runs):
    def row(tll_gain, accuracy_gain):
        return {"table": "t", "task": "classification", "before_tll": -0.3,
                "after_tll": -0.3 + tll_gain, "before_accuracy": 0.9,
                "after_accuracy": 0.9 + accuracy_gain}  # fmt: skip

    assert compare_runs.rule_holds([row(0.01, -0.001)], 0.005, 0.002)
    assert not compare_runs.rule_holds([row(0.01, -0.003)], 0.005, 0.002)
    assert not compare_runs.rule_holds([row(0.0, 0.01)], 0.005, 0.002)
