"""Before and after: two ``fit_suite.py`` runs of ``zonal fit``'s default on the same tables and
splits, compared by the adoption rules of docs/fit_evidence.md, with each table left out in turn.

Per table (means over the splits both runs have): test MSE (regression) or accuracy
(classification), test log likelihood per row (TLL) and seconds, before and after. Per task:

* regression: the geometric mean over the tables of after / before MSE, and the mean TLL of each;
  the rule holds when that geometric mean is below 1 and the mean TLL after is not lower than
  before's by more than ``--tll-tolerance`` (0.005 nats);
* classification: the mean accuracy and TLL of each; the rule holds when the mean TLL after is
  higher and its mean accuracy not lower by more than ``--accuracy-tolerance`` (0.002).

Leave one table out: the rule is decided again without each table; the tables whose absence
flips the decision are listed (none: no single table decides it).

    .venv/bin/python benchmarks/compare_runs.py BEFORE.json AFTER.json [--svgp BASELINES.json]

``--svgp`` adds the RBF-ARD SVGP's figures of another run on the same splits, for context.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from suite_summary import geometric_mean, table_means

Units = list[dict[str, Any]]


def load_units(path: Path, method: str = "zonal") -> Units:
    """The units of ``method`` in a ``fit_suite.py`` results file, skipped ones left out."""
    units = json.loads(path.read_text())["units"]
    return [unit for unit in units if unit["method"] == method and "skipped" not in unit]


def paired_tables(before: Units, after: Units) -> list[dict[str, Any]]:
    """Per table, in the order of ``before``: its task, the splits both runs have, and the mean
    over those splits of each run's mse / accuracy, tll and seconds (``before_tll``, ...)."""
    rows = []
    for table in dict.fromkeys(unit["table"] for unit in before):
        runs = {
            name: {unit["split"]: unit for unit in units if unit["table"] == table}
            for name, units in (("before", before), ("after", after))
        }
        splits = sorted(set(runs["before"]) & set(runs["after"]))
        if not splits:
            continue
        row: dict[str, Any] = {"table": table, "splits": splits,
                               "task": runs["before"][splits[0]]["task"]}  # fmt: skip
        for name, by_split in runs.items():
            for key in ("mse", "accuracy", "tll", "seconds"):
                if all(key in by_split[split] for split in splits):
                    row[f"{name}_{key}"] = float(np.mean([by_split[s][key] for s in splits]))
        rows.append(row)
    return rows


def rule_holds(rows: list[dict[str, Any]], tll_tolerance: float, accuracy_tolerance: float) -> bool:
    """The task's adoption rule (module docstring) on the tables ``rows`` (one task)."""
    if not rows:
        return False
    tll_gain = float(np.mean([row["after_tll"] - row["before_tll"] for row in rows]))
    if rows[0]["task"] == "regression":
        ratio = geometric_mean([row["after_mse"] / row["before_mse"] for row in rows])
        return ratio < 1 and tll_gain >= -tll_tolerance
    accuracy_gain = float(np.mean([row["after_accuracy"] - row["before_accuracy"] for row in rows]))
    return tll_gain > 0 and accuracy_gain >= -accuracy_tolerance


def flips(rows: list[dict[str, Any]], tll_tolerance: float, accuracy_tolerance: float) -> list[str]:
    """The tables without which the rule decides otherwise."""
    decision = rule_holds(rows, tll_tolerance, accuracy_tolerance)
    return [
        row["table"]
        for index, row in enumerate(rows)
        if rule_holds(rows[:index] + rows[index + 1 :], tll_tolerance, accuracy_tolerance)
        != decision
    ]


def print_task(rows: list[dict[str, Any]], svgp: dict[str, dict[str, float]], args: Any) -> None:
    """The table of a task's tables, its summary line and the leave-one-table-out check."""
    regression = rows[0]["task"] == "regression"
    score = "mse" if regression else "accuracy"
    print(f"\n{rows[0]['task']}: {len(rows)} tables")
    print(f"{'table':<24}{'before':>18}{'after':>18}{'ratio':>8}{'s before':>10}{'s after':>9}"
          f"{'svgp':>18}")  # fmt: skip
    for row in rows:
        ratio = f"{row['after_mse'] / row['before_mse']:.3f}" if regression else "-"
        base = svgp.get(row["table"], {})
        context = f"{base[score]:.4f} / {base['tll']:+.3f}" if base else ""
        print(f"{row['table']:<24}{row[f'before_{score}']:>9.4f} / {row['before_tll']:+.3f}"
              f"{row[f'after_{score}']:>9.4f} / {row['after_tll']:+.3f}{ratio:>8}"
              f"{row['before_seconds']:>10.1f}{row['after_seconds']:>9.1f}{context:>18}")  # fmt: skip
    means = {key: float(np.mean([row[key] for row in rows]))
             for key in ("before_tll", "after_tll", "before_seconds", "after_seconds")}  # fmt: skip
    if regression:
        mean_ratio = geometric_mean([row["after_mse"] / row["before_mse"] for row in rows])
        print(f"geometric mean after / before MSE {mean_ratio:.4f}; ", end="")
    else:
        for name in ("before", "after"):
            accuracy = float(np.mean([row[f"{name}_accuracy"] for row in rows]))
            print(f"mean accuracy {name} {accuracy:.4f}; ", end="")
    print(f"mean TLL {means['before_tll']:+.4f} -> {means['after_tll']:+.4f}; mean seconds "
          f"{means['before_seconds']:.1f} -> {means['after_seconds']:.1f}")  # fmt: skip
    holds = rule_holds(rows, args.tll_tolerance, args.accuracy_tolerance)
    flipped = flips(rows, args.tll_tolerance, args.accuracy_tolerance)
    print(f"rule: {'holds (adopt)' if holds else 'fails (keep before)'}; leave one table out: "
          f"{'flipped by ' + ', '.join(flipped) if flipped else 'no table flips it'}")  # fmt: skip


def svgp_means(path: Path | None) -> dict[str, dict[str, float]]:
    """Per table, the SVGP's mean mse / accuracy and tll over its splits in ``path``
    (``suite_summary.table_means``)."""
    if path is None:
        return {}
    entries = table_means(load_units(path, "svgp"))
    return {entry["table"]: {key: entry[f"svgp_{key}"] for key in ("mse", "accuracy", "tll")
                             if f"svgp_{key}" in entry} for entry in entries}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--svgp", type=Path, help="a run with the SVGP's units, for context")
    parser.add_argument("--tll-tolerance", type=float, default=0.005)
    parser.add_argument("--accuracy-tolerance", type=float, default=0.002)
    args = parser.parse_args()
    rows = paired_tables(load_units(args.before), load_units(args.after))
    if not rows:
        raise SystemExit(f"{args.before} and {args.after} share no (table, split) of zonal")
    svgp = svgp_means(args.svgp)
    for task in dict.fromkeys(row["task"] for row in rows):
        print_task([row for row in rows if row["task"] == task], svgp, args)


if __name__ == "__main__":
    main()
