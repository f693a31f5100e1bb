"""Tiny tables: ``zonal fit``'s default on 10, 20 and 40 rows of the suite's regression tables,
with and without the exact GP's hyperpriors, against BoTorch's ``SingleTaskGP``.

A user with a table of a few dozen rows gets ``auto``'s exact GP (the one-pass SGPR and the
activated DGP are candidates too, scored on the few validation rows). Type-II maximum likelihood
overfits there (``zonal.models.hyperpriors``); this benchmark measures what a user's intervals
are worth on real tables zonal was not tuned on: for each regression table of the development
suite (``zonal.datasets.registry_suite.SUITE_REGRESSION``; protein subsampled as in
``fit_suite.py``), n in {10, 20, 40} and seed s in {0, 1, 2}, n training rows are drawn with
``default_rng(s)`` and up to 1,000 of the other rows are the test rows. On each unit, in one
process and on one thread:

* ``zonal``: ``fit_data`` / ``predict_data`` with the defaults (``model="auto"``, budget
  ``"auto"``, ``seed=s``): the exact GP fitted by type-II MAP under ``Hyperpriors.default``;
* ``zonal-ml``: the same with ``hyperpriors=False`` (type-II maximum likelihood, as before
  session 39);
* ``botorch``: BoTorch's ``SingleTaskGP`` (its default RBF-ARD kernel, lengthscale and noise
  priors, ``Standardize`` outcome transform) on the inputs standardised with the training rows,
  fitted by ``fit_gpytorch_mll``: the peer a BoTorch user knows.

Scores in units of the training rows' standardised target: test MSE, mean test log likelihood
(TLL) of the Gaussian predictive with noise, and the share of test rows inside the central 95%
interval (coverage; 0.95 when calibrated). Per n and method: means over tables and seeds.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/tiny_tables.py [--tables ...] [--rows 10 20 40]
        [--seeds 0 1 2] [--output benchmarks/results/tiny_tables.json] [--resume]

Results are rewritten atomically after every unit; ``--resume`` skips the units already there.
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

from zonal._files import write_json_atomic
from zonal.datasets import Standardizer, load_dataset
from zonal.datasets.registry_suite import SUITE_REGRESSION
from zonal.tabular.fitting import fit_data
from zonal.tabular.predict import predict_data

METHODS = ("zonal", "zonal-ml", "botorch")
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
    fitted = fit_data(x, y, feature_columns=columns, seed=seed, budget="auto", **options)
    predictions = predict_data(fitted, x_test)
    return predictions["mean"], predictions["variance"], fitted.describe()


def run_botorch(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, seed: int):
    """(mean [T], variance [T], description) of BoTorch's SingleTaskGP (module docstring)."""
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Standardize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    torch.manual_seed(seed)
    scaler = Standardizer.fit(x)
    train_x = torch.as_tensor(scaler.transform(x), dtype=torch.float64)
    train_y = torch.as_tensor(y, dtype=torch.float64).unsqueeze(-1)  # [n, 1]
    model = SingleTaskGP(train_x, train_y, outcome_transform=Standardize(m=1))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    with torch.no_grad():
        test_x = torch.as_tensor(scaler.transform(x_test), dtype=torch.float64)
        posterior = model.posterior(test_x, observation_noise=True)
        mean = posterior.mean.squeeze(-1).numpy()  # [T]
        variance = posterior.variance.squeeze(-1).numpy()  # [T]
    return mean, variance, "SingleTaskGP (RBF-ARD, BoTorch's priors)"


def run_unit(name: str, x: np.ndarray, y: np.ndarray, rows: int, seed: int) -> dict[str, Any]:
    """Every method on ``rows`` training rows of table ``name`` drawn with seed ``seed``."""
    order = np.random.default_rng(seed).permutation(len(y))
    train, test = order[:rows], order[rows : rows + MAX_TEST_ROWS]
    target = Standardizer.fit(np.asarray(y[train], dtype=np.float64))
    y_test = target.transform(np.asarray(y[test], dtype=np.float64))
    unit: dict[str, Any] = {"table": name, "rows": rows, "seed": seed, "num_test": len(test)}
    runners = {
        "zonal": lambda: run_zonal(x[train], y[train], x[test], seed),
        "zonal-ml": lambda: run_zonal(x[train], y[train], x[test], seed, hyperpriors=False),
        "botorch": lambda: run_botorch(x[train], y[train], x[test], seed),
    }
    for method, runner in runners.items():
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
    """Per n and method: mean TLL, MSE, coverage and seconds over the units."""
    print(f"{'rows':>4} {'method':<9} {'units':>5} {'TLL':>8} {'MSE':>7} {'cover95':>8} {'s':>6}")
    for rows in sorted({unit["rows"] for unit in units}):
        chosen = [unit for unit in units if unit["rows"] == rows]
        for method in METHODS:
            values = {key: np.mean([unit[method][key] for unit in chosen])
                      for key in ("tll", "mse", "coverage", "seconds")}  # fmt: skip
            print(f"{rows:>4} {method:<9} {len(chosen):>5} {values['tll']:>8.3f} "
                  f"{values['mse']:>7.3f} {values['coverage']:>8.3f} {values['seconds']:>6.1f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="+", default=list(SUITE_REGRESSION))
    parser.add_argument("--rows", nargs="+", type=int, default=[10, 20, 40])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/tiny_tables.json"))
    parser.add_argument("--resume", action="store_true", help="skip the units in --output")
    args = parser.parse_args()
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
                unit = run_unit(name, x, y, rows, seed)
                units.append(unit)
                write_json_atomic(args.output, {"units": units})
                print(f"{name} n={rows} seed={seed}: " + ", ".join(
                    f"{method} TLL {unit[method]['tll']:.3f} cover {unit[method]['coverage']:.2f}"
                    for method in METHODS), flush=True)  # fmt: skip
    summary(units)


if __name__ == "__main__":
    main()
