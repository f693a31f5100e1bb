"""The development suite's summaries (``fit_suite.py``): per-table means over splits, the ratios
zonal / RBF-ARD SVGP with their paired bootstrap intervals over the test rows (``suite_rows``),
per-task geometric means, the worst table, and the printed tables.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from suite_rows import ratio_interval


def geometric_mean(values: list[float]) -> float:
    """exp(mean(log v)) of positive values (nan for none)."""
    return float(math.exp(np.mean(np.log(values)))) if values else math.nan


def table_means(units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per table: means over splits of each method's scores (``<method>_<score>``), the splits
    counted, and the ratios zonal / svgp (``ratio``: MSE for regression, log loss for
    classification; ``time_ratio``) where both ran on the same splits, with the ratio's paired
    bootstrap interval over the test rows (``ratio_interval``, ``suite_rows``) where the units
    keep their rows."""
    entries = []
    for name in dict.fromkeys(unit["table"] for unit in units):
        group = [unit for unit in units if unit["table"] == name and "skipped" not in unit]
        entry: dict[str, Any] = {"table": name, "task": group[0]["task"] if group else ""}
        for method in dict.fromkeys(unit["method"] for unit in group):
            runs = [unit for unit in group if unit["method"] == method]
            entry[f"{method}_splits"] = sorted(unit["split"] for unit in runs)
            for key in ("mse", "accuracy", "tll", "seconds"):
                if all(key in unit for unit in runs):
                    entry[f"{method}_{key}"] = float(np.mean([unit[key] for unit in runs]))
        if entry.get("zonal_splits") and entry.get("zonal_splits") == entry.get("svgp_splits"):
            metric = "mse" if entry["task"] == "regression" else "tll"
            zonal, svgp = entry[f"zonal_{metric}"], entry[f"svgp_{metric}"]
            entry["ratio"] = zonal / svgp if metric == "mse" else (-zonal) / (-svgp)
            interval = ratio_interval(
                [unit for unit in group if unit["method"] == "zonal"],
                [unit for unit in group if unit["method"] == "svgp"],
            )
            if interval is not None:
                entry["ratio_interval"] = list(interval)
            entry["time_ratio"] = entry["zonal_seconds"] / entry["svgp_seconds"]
            entry["tll_difference"] = entry["zonal_tll"] - entry["svgp_tll"]
            if "zonal_accuracy" in entry:
                entry["accuracy_difference"] = entry["zonal_accuracy"] - entry["svgp_accuracy"]
        entries.append(entry)
    return entries


def task_summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the tables with a ratio: their number, the geometric mean of the ratios, the worst
    table (largest ratio), the mean TLL difference zonal - svgp, the geometric mean of the time
    ratios and the ratio of total seconds, the tables whose ratio's bootstrap interval lies
    above 1 (``losses_beyond_noise``: zonal behind beyond what other test rows could change);
    for classification the tables where zonal's accuracy and log loss are both at least as
    good."""
    compared = [entry for entry in entries if "ratio" in entry]
    if not compared:
        return {"tables": 0}
    worst = max(compared, key=lambda entry: entry["ratio"])
    summary = {
        "tables": len(compared),
        "geometric_mean_ratio": geometric_mean([entry["ratio"] for entry in compared]),
        "worst_table": worst["table"],
        "worst_ratio": worst["ratio"],
        "mean_tll_difference": float(np.mean([entry["tll_difference"] for entry in compared])),
        "geometric_mean_time_ratio": geometric_mean([entry["time_ratio"] for entry in compared]),
        "total_time_ratio": sum(entry["zonal_seconds"] for entry in compared)
        / sum(entry["svgp_seconds"] for entry in compared),
        "losses_beyond_noise": [  # the ratio's whole interval above 1
            entry["table"] for entry in compared if entry.get("ratio_interval", [0.0])[0] > 1
        ],
    }
    if all("accuracy_difference" in entry for entry in compared):
        summary["tables_at_least_as_good"] = sum(
            entry["accuracy_difference"] >= 0 and entry["ratio"] <= 1 for entry in compared
        )
    return summary


def _cell(entry: dict[str, Any], key: str, digits: int, width: int = 10) -> str:
    value = entry.get(key)
    return f"{value:>{width}.{digits}f}" if isinstance(value, float) else f"{'-':>{width}}"


def print_task(task: str, entries: list[dict[str, Any]], methods: list[str]) -> None:
    """The per-table table and the summary of one task."""
    metric = "mse" if task == "regression" else "accuracy"
    print(f"\n{task}: means over splits; ratio = zonal / svgp "
          f"({'MSE' if metric == 'mse' else 'log loss'}; < 1 favours zonal)")  # fmt: skip
    header = f"{'table':<22}" + "".join(
        f"{m + ' ' + k:>10}" for m in methods for k in (metric[:3], "TLL", "s")
    ) + f"{'ratio':>8}{'90% interval':>16}{'t ratio':>8}"  # fmt: skip
    print(header)
    for entry in (entry for entry in entries if entry["task"] == task):
        cells = "".join(
            _cell(entry, f"{m}_{key}", digits)
            for m in methods for key, digits in ((metric, 4), ("tll", 3), ("seconds", 1))
        )  # fmt: skip
        interval = entry.get("ratio_interval")
        shown = f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "-"
        print(f"{entry['table']:<22}{cells}{_cell(entry, 'ratio', 3, 8)}{shown:>16}"
              f"{_cell(entry, 'time_ratio', 2, 8)}")  # fmt: skip
    summary = task_summary([entry for entry in entries if entry["task"] == task])
    if summary["tables"]:
        line = (f"  {summary['tables']} tables: geometric mean ratio "
                f"{summary['geometric_mean_ratio']:.3f}, worst {summary['worst_table']} "
                f"{summary['worst_ratio']:.3f}, mean TLL difference zonal - svgp "
                f"{summary['mean_tll_difference']:+.3f}, time ratio (geometric mean) "
                f"{summary['geometric_mean_time_ratio']:.2f}, total "
                f"{summary['total_time_ratio']:.2f}")  # fmt: skip
        if summary["losses_beyond_noise"]:
            line += f"; behind beyond the test rows' noise on {summary['losses_beyond_noise']}"
        if "tables_at_least_as_good" in summary:
            line += (
                f"; accuracy and log loss at least as good on {summary['tables_at_least_as_good']}"
            )
        print(line)
