"""How far a classifier stack of ``zonal fit --model auto`` is from what its candidates allow,
from a development-suite run (``benchmarks/fit_suite.py`` with ``--methods zonal svgp``; the zonal
units carry each candidate's test probabilities and scoring-row log densities, ``diagnostics``).

Per classification table, the mean over splits of the test log likelihood per row of:

* ``auto``: the stack as ``auto`` weighs it (posterior-mean weights on the scoring rows,
  ``zonal.tabular.stacking.validation_weights`` with ``CLASSIFIER_CONCENTRATION``);
* ``+half``: the same weights computed on the scoring rows plus a random half of the test rows,
  scored on the other half (each half in turn): what twice as many genuine scoring rows would
  give, at the cost of none of the training rows (an oracle: those rows are the test's);
* each candidate alone, and ``optimum``: the stack under the weights that maximise the test rows'
  own log likelihood (``stacking_weights`` fitted to them, in sample: a ceiling no weighting rule
  can pass);
* ``baseline``: GPyTorch's RBF-ARD SVGP (the suite's ``svgp`` method) on the same rows.

A target that even ``optimum`` misses needs better candidates, not a better weighting; one that
``+half`` misses is not met by a larger validation share.

    .venv/bin/python benchmarks/stack_ceiling.py benchmarks/results/fit_suite.json [...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zonal.tabular.stacking import (
    CLASSIFIER_CONCENTRATION,
    stacking_weights,
    validation_weights,
)

#: the seed of the test rows' random halves (split s uses HALVES_SEED + s)
HALVES_SEED = 1000


def split_scores(zonal: dict[str, Any], svgp: dict[str, Any]) -> dict[str, float]:
    """The module docstring's test log likelihoods per row for one split's units."""
    diagnostics = zonal["diagnostics"]
    targets = np.asarray(diagnostics["test_targets"])  # [T]
    names = [name for name, rows in diagnostics["models"].items()
             if "validation_log_density" in rows]  # fmt: skip
    rows = np.arange(len(targets))
    chosen = np.stack(
        [np.asarray(diagnostics["models"][name]["probabilities"])[rows, targets] for name in names],
        1,
    )  # [T, K]: each candidate's probability of the true class
    scoring = np.stack(
        [np.asarray(diagnostics["models"][name]["validation_log_density"]) for name in names], 1
    )  # [n_scoring, K]
    baseline = np.asarray(svgp["test_rows"]["log_density"])  # [T]

    def weights(log_densities: np.ndarray) -> np.ndarray:
        found = validation_weights(torch.from_numpy(log_densities), seed=zonal["split"],
                                   concentration=CLASSIFIER_CONCENTRATION)  # fmt: skip
        assert found is not None
        return found.numpy()

    order = np.random.default_rng(HALVES_SEED + zonal["split"]).permutation(len(targets))
    halves = (order[: len(order) // 2], order[len(order) // 2 :])
    scores: dict[str, list[float]] = {"auto": [], "+half": [], "baseline": []}
    for added, scored in (halves, halves[::-1]):
        more = weights(np.concatenate([scoring, np.log(chosen[added])]))  # [K]
        scores["+half"].append(float(np.log(chosen[scored] @ more).mean()))
        scores["auto"].append(float(np.log(chosen[scored] @ weights(scoring)).mean()))
        scores["baseline"].append(float(baseline[scored].mean()))
    found = {key: float(np.mean(values)) for key, values in scores.items()}
    for index, name in enumerate(names):
        found[f"{name} alone"] = float(np.log(chosen[:, index]).mean())
    optimum = stacking_weights(torch.from_numpy(np.log(chosen))).numpy()  # [K], in sample
    found["optimum"] = float(np.log(chosen @ optimum).mean())
    return found


def table_scores(units: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per classification table with zonal and svgp units of the same splits, the means over its
    splits of ``split_scores``."""
    zonal = {(u["table"], u["split"]): u for u in units
             if u["method"] == "zonal" and u["task"] != "regression" and "diagnostics" in u}  # fmt: skip
    svgp = {(u["table"], u["split"]): u for u in units if u["method"] == "svgp"}
    by_table: dict[str, list[dict[str, float]]] = {}
    for key, unit in sorted(zonal.items()):
        if key in svgp and "test_rows" in svgp[key]:
            by_table.setdefault(key[0], []).append(split_scores(unit, svgp[key]))
    return {
        table: {name: float(np.mean([split[name] for split in splits])) for name in splits[0]}
        | {"splits": float(len(splits))}
        for table, splits in by_table.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="fit_suite.py result files")
    args = parser.parse_args()
    units = [unit for path in args.results for unit in json.loads(path.read_text())["units"]]
    found = table_scores(units)
    if not found:
        raise SystemExit("no classification table with zonal diagnostics and svgp test rows")
    for table, scores in found.items():
        splits = int(scores.pop("splits"))
        print(f"{table} ({splits} splits): test log likelihood per row")
        for name, value in scores.items():
            print(f"  {name:<18} {value:8.4f}")


if __name__ == "__main__":
    main()
