"""Tiny tables: ``zonal fit``'s default on 10 to 80 rows of the suite's regression tables,
against BoTorch's ``SingleTaskGP``.

What a user's predictions and intervals are worth on a table of a few dozen rows, on real tables:
for each regression table of the development suite
(``zonal.datasets.registry_suite.SUITE_REGRESSION``; protein subsampled as in ``fit_suite.py``),
n in {10, 20, 40, 80} and seed s in {0, 1, 2}, n training rows are drawn with ``default_rng(s)``
and up to 1,000 of the other rows are the test rows. On each unit, in one process and on one
thread:

* ``zonal``: ``fit_data`` / ``predict_data`` with the defaults (``model="auto"``, budget
  ``"auto"``, ``seed=s``), regression named (``likelihood="gaussian"``: on 80 rows, plastic's
  integer pressures would otherwise be read as classes), of the zonal on the path (run it with
  another checkout's ``PYTHONPATH=.../src`` for a before and after);
* ``zonal-exact``: the same with ``model="exact"`` (a named exact GP: its kernel families stacked
  by their leave-one-out densities, without input scales, by maximum likelihood);
* ``botorch``: BoTorch's ``SingleTaskGP`` as its documentation sets it up (its default RBF-ARD
  kernel, lengthscale and noise priors, which assume inputs in the unit cube: ``Normalize`` to
  the training rows' range, ``Standardize`` outcome transform), fitted by ``fit_gpytorch_mll``:
  the peer a BoTorch user knows.

Scores in units of the training rows' standardised target: test MSE, mean test log likelihood
(TLL) of the Gaussian predictive with noise, and the share of test rows inside the central 95%
interval (coverage; 0.95 when calibrated). Per n and method: means over tables and seeds (and
the median TLL: a few overconfident units dominate the mean).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/tiny_tables.py [--tables ...]
        [--rows 10 20 40 80] [--seeds 0 1 2] [--methods zonal zonal-exact botorch]
        [--output benchmarks/results/tiny_tables.json] [--resume]
    .venv/bin/python benchmarks/tiny_tables.py --compare BEFORE.json AFTER.json [--tables ...]

Results are rewritten atomically after every unit; ``--resume`` skips the units already there.
``--compare`` reads two runs' ``zonal`` units on the same (table, n, seed) and prints, per n, the
mean and median TLL before and after, the geometric mean over tables of the after / before test
MSE (each table's mean over its units), the coverage, and the tables whose absence would flip the
sign of the mean TLL difference at some n (leave one table out).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from suite_summary import geometric_mean
from zonal._files import write_json_atomic
from zonal.datasets import Standardizer, load_dataset
from zonal.datasets.registry_suite import SUITE_REGRESSION
from zonal.tabular.fitting import fit_data
from zonal.tabular.predict import predict_data

METHODS = ("zonal", "zonal-exact", "botorch")
#: the most test rows of a unit
MAX_TEST_ROWS = 1000
#: tables subsampled before the draw, as in fit_suite.py
SUBSAMPLE = {"protein": 10_000}
#: the z-value of the central 95% interval
Z95 = 1.959963984540054


def scores(mean: np.ndarray, variance: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Test MSE, TLL and 95% coverage of Gaussian predictions (mean [N], variance [N]) of y [N]."""
    error = y - mean
    tll = -0.5 * (np.log(2 * math.pi * variance) + error**2 / variance)
    return {
        "mse": float(np.mean(error**2)),
        "tll": float(np.mean(tll)),
        "coverage": float(np.mean(np.abs(error) <= Z95 * np.sqrt(variance))),
    }


def run_zonal(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, seed: int, **options: Any):
    """(mean [T], variance [T], model description) of ``zonal fit``'s default."""
    columns = [f"x{index}" for index in range(x.shape[1])]
    fitted = fit_data(x, y, feature_columns=columns, likelihood="gaussian", seed=seed,
                      budget="auto", **options)  # fmt: skip
    predictions = predict_data(fitted, x_test)
    return predictions["mean"], predictions["variance"], fitted.describe()


def run_botorch(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, seed: int):
    """(mean [T], variance [T], description) of BoTorch's SingleTaskGP (module docstring)."""
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    torch.manual_seed(seed)
    train_x = torch.as_tensor(x, dtype=torch.float64)  # [n, D]
    train_y = torch.as_tensor(y, dtype=torch.float64).unsqueeze(-1)  # [n, 1]
    model = SingleTaskGP(train_x, train_y, input_transform=Normalize(d=x.shape[1]),
                         outcome_transform=Standardize(m=1))  # fmt: skip
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    with torch.no_grad():
        test_x = torch.as_tensor(x_test, dtype=torch.float64)
        posterior = model.posterior(test_x, observation_noise=True)
        mean = posterior.mean.squeeze(-1).numpy()  # [T]
        variance = posterior.variance.squeeze(-1).numpy()  # [T]
    return mean, variance, "SingleTaskGP (RBF-ARD, BoTorch's priors)"


def run_unit(
    name: str, x: np.ndarray, y: np.ndarray, rows: int, seed: int, methods: list[str]
) -> dict[str, Any]:
    """``methods`` on ``rows`` training rows of table ``name`` drawn with seed ``seed``."""
    order = np.random.default_rng(seed).permutation(len(y))
    train, test = order[:rows], order[rows : rows + MAX_TEST_ROWS]
    target = Standardizer.fit(np.asarray(y[train], dtype=np.float64))
    y_test = target.transform(np.asarray(y[test], dtype=np.float64))
    unit: dict[str, Any] = {"table": name, "rows": rows, "seed": seed, "num_test": len(test)}
    runners = {
        "zonal": lambda: run_zonal(x[train], y[train], x[test], seed),
        "zonal-exact": lambda: run_zonal(x[train], y[train], x[test], seed, model="exact"),
        "botorch": lambda: run_botorch(x[train], y[train], x[test], seed),
    }
    for method in methods:
        runner = runners[method]
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mean, variance, model = runner()
        seconds = time.perf_counter() - started
        mean = target.transform(np.asarray(mean, dtype=np.float64))
        variance = np.asarray(variance, dtype=np.float64) / float(target.std) ** 2
        unit[method] = {**scores(mean, variance, y_test), "seconds": seconds, "model": model}
    return unit


def summary(units: list[dict[str, Any]]) -> None:
    """Per n and method: mean and median TLL, mean MSE, coverage and seconds over the units."""
    print(f"{'rows':>4} {'method':<9} {'units':>5} {'TLL':>9} {'median':>7} {'MSE':>7} "
          f"{'cover95':>8} {'s':>6}")  # fmt: skip
    for rows in sorted({unit["rows"] for unit in units}):
        chosen = [unit for unit in units if unit["rows"] == rows]
        for method in [name for name in METHODS if name in chosen[0]]:
            values = {key: np.mean([unit[method][key] for unit in chosen])
                      for key in ("tll", "mse", "coverage", "seconds")}  # fmt: skip
            median = np.median([unit[method]["tll"] for unit in chosen])
            print(f"{rows:>4} {method:<9} {len(chosen):>5} {values['tll']:>9.3f} {median:>7.3f} "
                  f"{values['mse']:>7.3f} {values['coverage']:>8.3f} {values['seconds']:>6.1f}")  # fmt: skip


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]], tables: list[str]) -> None:
    """The ``--compare`` report (module docstring) of the ``zonal`` units of two runs."""
    earlier = {(unit["table"], unit["rows"], unit["seed"]): unit["zonal"] for unit in before
               if unit["table"] in tables}  # fmt: skip
    print(f"{'rows':>4} {'units':>5} {'TLL before':>10} {'after':>9} {'median before':>13} "
          f"{'after':>7} {'MSE ratio':>9} {'cover before':>12} {'after':>6}  flipped by")  # fmt: skip
    for rows in sorted({unit["rows"] for unit in after}):
        by_table: dict[str, list[tuple[dict, dict]]] = {}  # table -> [(before, after)]
        for unit in after:
            old = earlier.get((unit["table"], rows, unit["seed"]))
            if unit["rows"] == rows and old is not None:
                by_table.setdefault(unit["table"], []).append((old, unit["zonal"]))
        pairs = [pair for table_pairs in by_table.values() for pair in table_pairs]
        if not pairs:
            continue
        difference = {table: sum(new["tll"] - old["tll"] for old, new in table_pairs)
                      for table, table_pairs in by_table.items()}  # fmt: skip
        total = sum(difference.values())
        flipped = [table for table, part in sorted(difference.items())
                   if len(by_table) > 1 and (total - part) * total < 0]  # fmt: skip
        ratio = geometric_mean([np.mean([new["mse"] for _, new in table_pairs])
                                / np.mean([old["mse"] for old, _ in table_pairs])
                                for table_pairs in by_table.values()])  # fmt: skip
        olds, news = [old["tll"] for old, _ in pairs], [new["tll"] for _, new in pairs]
        print(f"{rows:>4} {len(pairs):>5} {np.mean(olds):>10.3f} {np.mean(news):>9.3f} "
              f"{np.median(olds):>13.3f} {np.median(news):>7.3f} {ratio:>9.3f} "
              f"{np.mean([old['coverage'] for old, _ in pairs]):>12.3f} "
              f"{np.mean([new['coverage'] for _, new in pairs]):>6.3f}  "
              f"{', '.join(flipped) or 'none'}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="+", default=list(SUITE_REGRESSION))
    parser.add_argument("--rows", nargs="+", type=int, default=[10, 20, 40, 80])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["zonal", "botorch"])
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("BEFORE", "AFTER"),
        help="compare two runs' zonal units (no fitting)",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/tiny_tables.json"))
    parser.add_argument("--resume", action="store_true", help="skip the units in --output")
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(path.read_text())["units"] for path in args.compare)
        compare(before, after, args.tables)
        return
    torch.set_num_threads(1)
    units: list[dict[str, Any]] = []
    if args.resume and args.output.exists():
        units = json.loads(args.output.read_text())["units"]
    elif args.output.exists():
        parser.error(f"{args.output} exists: give --resume to continue it, or another --output")
    done = {(unit["table"], unit["rows"], unit["seed"]) for unit in units}
    for name in args.tables:
        data = load_dataset(name)
        x, y = np.asarray(data.X, dtype=np.float64), np.asarray(data.y, dtype=np.float64)
        if name in SUBSAMPLE:
            keep = np.sort(np.random.default_rng(0).permutation(len(y))[: SUBSAMPLE[name]])
            x, y = x[keep], y[keep]
        for rows in args.rows:
            for seed in args.seeds:
                if (name, rows, seed) in done:
                    continue
                unit = run_unit(name, x, y, rows, seed, args.methods)
                units.append(unit)
                write_json_atomic(args.output, {"units": units})
                print(f"{name} n={rows} seed={seed}: " + ", ".join(
                    f"{method} TLL {unit[method]['tll']:.3f} cover {unit[method]['coverage']:.2f}"
                    for method in args.methods), flush=True)  # fmt: skip
    summary(units)


if __name__ == "__main__":
    main()
