"""Development suite (issue 27): zonal fit's default against RBF-ARD GPs and gradient boosting.

``zonal fit`` against GPyTorch's RBF-ARD GPs and scikit-learn's gradient boosting on 20 regression
and 9 classification tables of the registry (``zonal.datasets.registry_suite``: SUITE_REGRESSION,
SUITE_CLASSIFICATION), 3 splits each.

Split s (s = 0, 1, 2) of a table holds out 10% of its rows as test rows (90/10): drawn from
``default_rng(s)``, stratified by class for classification (``zonal.fitting.validation_split``);
protein (CASP) is first subsampled to 10,000 rows with ``default_rng(0)``, the same rows for every
split. On each split, in one process and on the same threads, the methods are

* ``zonal``: ``zonal.tabular.fitting.fit_data`` / ``predict_data`` (the library path of ``zonal fit``)
  with the default ``model="auto"`` and the default budget (``"auto"``:
  ``zonal.tabular.options.default_budget``: by the task and the rows), the likelihood named
  (gaussian; bernoulli or softmax by the number of classes) and ``seed=s``; after the fit,
  outside its budget and its seconds, the models ``auto``'s rules left out are trained
  (``zonal.tabular.diagnostics``) and every model and stack is scored on the test rows (the unit's
  ``diagnostics``: what ``fit_rules.py`` checks the rules with, leaving one table out; for
  regression also every model's test moments and validation log densities, row by row, so that
  stacks of other weights can be scored without training again: ``suite_rows.model_rows``);
* ``svgp``: GPyTorch's SVGP with RBF-ARD, M = 256 inducing points, 1000 Adam steps
  (``gp_baselines``: Gaussian, probit or softmax likelihood);
* ``exact``: GPyTorch's exact GP with RBF-ARD, regression tables of at most 3,000 training rows;
* ``hgb``: scikit-learn's ``HistGradientBoostingRegressor`` / ``Classifier``, for context.

GPs see standardised inputs (training rows' statistics); regression scores are in units of the
training target standardised: test MSE of the predictive mean and mean test log likelihood (TLL)
of the Gaussian predictive with noise (none for ``hgb``). Classification: accuracy and TLL
(= -log loss). Per table the means over splits and ratios zonal / svgp (MSE, or log loss, and
seconds; < 1 favours zonal) with the ratio's paired bootstrap interval over the test rows (every
unit keeps its per-row figures, ``test_rows``: ``suite_rows``); per task the geometric mean of
those ratios, the worst table, the tables behind beyond the test rows' noise, the mean TLL
difference zonal - svgp and the time ratio.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fit_suite.py [--resume] [--tables ...]
        [--splits 0 1 2] [--methods zonal svgp exact hgb] [--quick] [--jobs 2]
        [--baselines benchmarks/results/fit_suite.json]

``--heldout``: the 8 regression and 6 two-class tables held out from development
(``zonal.datasets.registry_heldout``: chosen by criteria fixed before any was run), in place
of the suite; a check of the rules on tables they were not chosen on, never a place to tune them.

``--quick``: split 0 of servo and ionosphere, zonal budget 10 s, 200 SVGP steps, 50 exact-GP
steps (a smoke test). Results go to benchmarks/results/fit_suite.json (fit_suite_quick.json with
``--quick``), rewritten atomically after every (table, split) (all its methods); ``--resume`` skips
the units already there (same settings). ``--methods zonal --baselines EARLIER.json`` runs zonal
alone and compares it with the baselines of an earlier run (a change of zonal, before and after,
on the same baseline units). ``--jobs N`` runs N (table, split) units at once in
worker processes (every method of a unit in the same process, so each ratio compares methods run
under the same load); the full suite is about 8 CPU-hours (9 with the diagnostics' models).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gp_baselines import (
    class_scores,
    exact_gp_regression,
    gaussian_scores,
    hist_gradient_boosting,
    svgp_classifier,
    svgp_regression,
)
from suite_rows import (
    classification_rows,
    classifier_rows,
    compact,
    model_rows,
    regression_rows,
)
from suite_summary import print_task, table_means, task_summary
from zonal._files import to_jsonable, write_json_atomic
from zonal._workers import in_worker_processes
from zonal.cli.common import terminate_as_interrupt
from zonal.datasets import Standardizer, get_spec, load_dataset, random_splits
from zonal.datasets.registry_heldout import HELDOUT_CLASSIFICATION, HELDOUT_REGRESSION
from zonal.datasets.registry_suite import SUITE_CLASSIFICATION, SUITE_REGRESSION
from zonal.tabular.diagnostics import FitDiagnostics
from zonal.tabular.fitting import fit_data
from zonal.tabular.options import AUTO_BUDGET
from zonal.tabular.predict import predict_data
from zonal.tabular.split import validation_split
from zonal.tabular.targets import Target

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("zonal", "svgp", "exact", "hgb")
SPLITS = (0, 1, 2)
TEST_FRACTION = 0.1
#: the exact GP runs on regression tables of at most this many training rows
EXACT_MAX_TRAIN = 3000
#: tables subsampled before splitting: name -> rows (drawn once with ``SUBSAMPLE_SEED``)
SUBSAMPLE = {"protein": 10_000}
SUBSAMPLE_SEED = 0
QUICK_TABLES = ("servo", "ionosphere")
#: (full, quick) settings
SETTINGS = {
    "zonal_budget": (AUTO_BUDGET, 10.0),
    "svgp_inducing": (256, 256),
    "svgp_steps": (1000, 200),
    "svgp_batch_size": (1024, 1024),
    "svgp_learning_rate": (0.05, 0.05),
    "exact_steps": (200, 50),
    "exact_learning_rate": (0.1, 0.1),
}


@dataclass(frozen=True)
class SplitData:
    """One split of one table: raw rows, standardised tensors for the GPs, class count."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classify: bool
    num_classes: int
    y_scaler: Standardizer

    def standardised(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x_train, y_train, x_test): inputs standardised; a regression target too, classes
        as indices."""
        x_scaler = Standardizer.fit(self.x_train)
        y = self.y_train if self.classify else self.y_scaler.transform(self.y_train)
        return (torch.from_numpy(x_scaler.transform(self.x_train)), torch.from_numpy(y),
                torch.from_numpy(x_scaler.transform(self.x_test)))  # fmt: skip


def load_split(name: str, split: int) -> SplitData:
    """Split ``split`` of table ``name`` (module docstring)."""
    data = load_dataset(name)
    x, y = data.X, data.y
    if name in SUBSAMPLE:
        rows = np.sort(np.random.default_rng(SUBSAMPLE_SEED).permutation(len(y))[: SUBSAMPLE[name]])
        x, y = x[rows], y[rows]
    classify = data.task == "classification"
    num_classes = int(data.num_classes or 0)
    if classify:
        target = Target("softmax", tuple(str(c) for c in range(num_classes)))
        train, test = validation_split(y, target, TEST_FRACTION, split)
    else:
        train, test = next(random_splits(len(y), 1, TEST_FRACTION, seed=split))
    y_scaler = Standardizer.fit(np.asarray(y[train], dtype=np.float64))  # (regression only)
    return SplitData(x[train], y[train], x[test], y[test], classify, num_classes, y_scaler)


def run_zonal(data: SplitData, split: int, budget: float | str) -> dict[str, Any]:
    """``fit_data`` (model "auto") then ``predict_data``; moments standardised, or class
    probabilities [n, C] in class-index order. ``diagnostics``: the test scores of every model
    ``auto`` trained or its rules left out and of every stack of them (``FitDiagnostics``; test
    MSE and TLL in the suite's units, validation log likelihoods and the gap in the fit's), for
    ``fit_rules.py``; ``seconds`` is ``auto``'s own time, without the diagnostics'.
    """
    likelihood = "gaussian" if not data.classify else \
        "bernoulli" if data.num_classes == 2 else "softmax"  # fmt: skip
    columns = [f"x{index}" for index in range(data.x_train.shape[1])]
    diagnostics = FitDiagnostics()
    started = time.perf_counter()
    fitted = fit_data(data.x_train, data.y_train, feature_columns=columns, likelihood=likelihood,
                      budget=budget, seed=split, diagnostics=diagnostics)  # fmt: skip
    seconds = time.perf_counter() - started - diagnostics.overhead_seconds
    predictions = predict_data(fitted, data.x_test, seed=split)
    result: dict[str, Any] = {"seconds": seconds, "model": fitted.describe()}
    x_test = torch.from_numpy(fitted.x_scaler.transform(data.x_test))
    if data.classify:
        probabilities = np.zeros((len(data.x_test), data.num_classes))
        for label in fitted.target.classes:
            probabilities[:, int(float(label))] = predictions[f"prob_{label}"]
        result["probabilities"] = probabilities
        index = {float(label): code for code, label in enumerate(fitted.target.classes)}
        codes = torch.tensor([index[float(label)] for label in data.y_test])
        probabilities_of = diagnostics.test_probabilities(x_test, split)
        variants = diagnostics.test_scores(x_test, codes, seed=split, predictions=probabilities_of)
        # what a mixture of any weights predicts (``suite_rows``)
        models, targets = classifier_rows(diagnostics, probabilities_of), codes.tolist()
    else:
        result["mean"] = data.y_scaler.transform(predictions["mean"])
        result["variance"] = predictions["variance"] / float(data.y_scaler.std) ** 2
        y_test = torch.from_numpy(fitted.y_scaler.transform(data.y_test))
        moments = diagnostics.test_moments(x_test, split)
        variants = diagnostics.test_scores(x_test, y_test, seed=split, predictions=moments)
        ratio = float(fitted.y_scaler.std) / float(data.y_scaler.std)  # fit's units -> suite's
        for scores in variants.values():
            scores["mse"] *= ratio**2
            scores["tll"] -= math.log(ratio)
        models = model_rows(diagnostics, moments, fitted.y_scaler, data.y_scaler)
        targets = compact(data.y_scaler.transform(data.y_test))
    result["diagnostics"] = {
        "auto_models": diagnostics.auto_models,
        "gap": diagnostics.gap,
        "refinement_possible": diagnostics.refinement_possible,
        "seconds": diagnostics.seconds,
        "overhead_seconds": diagnostics.overhead_seconds,
        "variants": variants,
        "models": models,
        "test_targets": targets,
    }
    return result


def run_method(
    method: str, data: SplitData, split: int, settings: dict[str, Any]
) -> dict[str, Any]:
    """One method on one split: its scores (``mse`` or ``accuracy``, ``tll``, ``seconds``), or
    ``skipped`` with the reason."""
    if method == "exact" and (data.classify or len(data.y_train) > EXACT_MAX_TRAIN):
        return {"skipped": "classification" if data.classify else
                f"{len(data.y_train)} > {EXACT_MAX_TRAIN} training rows"}  # fmt: skip
    if method == "zonal":
        result = run_zonal(data, split, settings["zonal_budget"])
    elif method == "hgb":
        result = hist_gradient_boosting(data.x_train, data.y_train, data.x_test,
                                        classify=data.classify, num_classes=data.num_classes,
                                        seed=split)  # fmt: skip
        if not data.classify:
            result["mean"] = data.y_scaler.transform(result["mean"])
    elif method == "svgp" and data.classify:
        result = svgp_classifier(*data.standardised(), num_classes=data.num_classes,
                                 num_inducing=settings["svgp_inducing"],
                                 steps=settings["svgp_steps"],
                                 batch_size=settings["svgp_batch_size"],
                                 learning_rate=settings["svgp_learning_rate"], seed=split)  # fmt: skip
    elif method == "svgp":
        result = svgp_regression(*data.standardised(), num_inducing=settings["svgp_inducing"],
                                 steps=settings["svgp_steps"],
                                 batch_size=settings["svgp_batch_size"],
                                 learning_rate=settings["svgp_learning_rate"], seed=split)  # fmt: skip
    else:
        result = exact_gp_regression(*data.standardised(), steps=settings["exact_steps"],
                                     learning_rate=settings["exact_learning_rate"])  # fmt: skip
    scores: dict[str, Any] = {"seconds": result["seconds"]}
    for key in ("model", "diagnostics"):
        if key in result:
            scores[key] = result[key]
    if data.classify:
        scores["accuracy"], scores["tll"] = class_scores(result["probabilities"], data.y_test)
        scores["test_rows"] = classification_rows(result["probabilities"], data.y_test)
    else:
        y_test = data.y_scaler.transform(data.y_test)
        scores["mse"] = float(np.mean((result["mean"] - y_test) ** 2))
        if "variance" in result:
            scores["tll"] = gaussian_scores(result["mean"], result["variance"], y_test)[1]
        scores["test_rows"] = regression_rows(result["mean"], result.get("variance"), y_test)
    return scores


# ------------------------------------------------------------------------------------ running


def run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings a result file must share to be resumed."""
    index = 1 if args.quick else 0
    settings = {key: values[index] for key, values in SETTINGS.items()}
    settings.update(quick=args.quick, test_fraction=TEST_FRACTION, subsample=SUBSAMPLE,
                    exact_max_train=EXACT_MAX_TRAIN, threads=args.threads,
                    diagnostics=True)  # fmt: skip
    return settings


def previous_units(path: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The units of an earlier run at ``path`` with the same settings."""
    if not path.exists():
        return []
    earlier = json.loads(path.read_text())
    if earlier["settings"] != to_jsonable(settings):
        raise SystemExit(f"{path} holds a run with other settings: drop --resume or move it")
    print(f"resuming: {len(earlier['units'])} unit(s) from {path}")
    return earlier["units"]


#: the settings only the zonal method reads (a baseline run may differ in them)
ZONAL_SETTINGS = ("zonal_budget",)


def baseline_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` without ``ZONAL_SETTINGS``."""
    return {key: value for key, value in settings.items() if key not in ZONAL_SETTINGS}


def baseline_units(
    path: Path, settings: dict[str, Any], methods: list[str]
) -> list[dict[str, Any]]:
    """The units of an earlier run at ``path`` of the methods not in ``methods``: the baselines
    a run of zonal alone is compared with. Its settings must be this run's, except zonal's own
    budget (``ZONAL_SETTINGS``), which the baselines do not read."""
    if not path.exists():
        raise SystemExit(f"--baselines {path}: no such file")
    earlier = json.loads(path.read_text())
    if baseline_settings(earlier["settings"]) != baseline_settings(to_jsonable(settings)):
        raise SystemExit(f"--baselines {path} holds a run with other settings")
    found = [unit for unit in earlier["units"] if unit["method"] not in methods]
    print(f"baselines: {len(found)} unit(s) of {sorted({u['method'] for u in found})} from {path}")
    return found


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def write_results(
    path: Path,
    settings: dict[str, Any],
    units: list[dict[str, Any]],
    baselines: list[dict[str, Any]] | None = None,
    baselines_path: Path | None = None,
) -> None:
    """Settings, environment, per-table means, task summaries and every unit, atomically (the
    folder made if it is missing: the default ``benchmarks/results/`` is not in a fresh clone).
    ``baselines`` (units of other methods from ``baselines_path``) join the means and summaries;
    the file keeps only this run's units and names where the others came from."""
    entries = table_means([*units, *(baselines or [])])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {
        "settings": settings,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "versions": {name: _version(name) for name in ("torch", "gpytorch", "scikit-learn")}
        | {"python": platform.python_version()},
        "machine": platform.machine(),
        "tables": entries,
        "summary": {task: task_summary([e for e in entries if e["task"] == task])
                    for task in ("regression", "classification")},
        "baselines_from": None if baselines_path is None else str(baselines_path),
        "units": units,
    })  # fmt: skip


def parse_args() -> argparse.Namespace:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", help="default: the whole suite (--quick: a few)")
    parser.add_argument("--heldout", action="store_true",
                        help="the held-out tables (registry_heldout) instead of the suite: a "
                        "check, not for development")  # fmt: skip
    parser.add_argument("--splits", nargs="+", type=int, help="default 0 1 2 (--quick: 0)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--quick", action="store_true", help="smoke test: short budgets")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--output", type=Path, help="default benchmarks/results/fit_suite*.json")
    parser.add_argument("--resume", action="store_true", help="skip the units in --output")
    parser.add_argument("--baselines", type=Path,
                        help="an earlier run's results (same settings) whose units of the methods "
                        "not in --methods join this run's tables and summaries")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1,
                        help="(table, split) units run at once in worker processes; the zonal "
                        "budget is wall clock, so keep jobs x threads <= cores")  # fmt: skip
    args = parser.parse_args()
    suite = (
        (*HELDOUT_REGRESSION, *HELDOUT_CLASSIFICATION)
        if args.heldout
        else (*SUITE_REGRESSION, *SUITE_CLASSIFICATION)
    )
    args.tables = args.tables or list(QUICK_TABLES if args.quick and not args.heldout else suite)
    args.splits = args.splits or ([0] if args.quick else list(SPLITS))
    args.output = args.output or RESULTS / (
        "fit_suite_quick.json" if args.quick else
        "fit_suite_heldout.json" if args.heldout else "fit_suite.json"
    )  # fmt: skip
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    unknown = [name for name in args.tables if name not in suite]
    if unknown:
        kind = "held-out" if args.heldout else "suite"
        parser.error(f"{unknown} are not {kind} tables; choose from {list(suite)}")
    return args


def run_split(item: tuple[str, int, list[str], dict[str, Any], int]) -> list[dict[str, Any]]:
    """The units of the given methods on one (table, split), in one process and on ``threads``
    threads (module-level, so that ``--jobs`` workers can run it)."""
    name, split, methods, settings, threads = item
    torch.set_num_threads(threads)
    task = get_spec(name).task
    data = load_split(name, split)
    units = []
    for method in methods:
        scores = run_method(method, data, split, settings)
        units.append({"table": name, "task": task, "split": split, "method": method,
                      "num_train": len(data.y_train), "num_test": len(data.y_test),
                      "input_dim": data.x_train.shape[1], **scores})  # fmt: skip
    return units


def finished_splits(
    items: list[tuple[str, int, list[str], dict[str, Any], int]], jobs: int
) -> Iterator[list[dict[str, Any]]]:
    """``run_split`` of every item: in order here with one job, else as they finish in ``jobs``
    spawned processes (each with the item's threads: give jobs x threads <= cores)."""
    if jobs == 1:
        yield from map(run_split, items)
        return
    for _, units in in_worker_processes(run_split, items, jobs):  # stopped with the caller
        yield units


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    settings = run_settings(args)
    print(f"settings: {settings}; torch threads {torch.get_num_threads()} "
          f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}); {args.jobs} job(s)")  # fmt: skip
    units = previous_units(args.output, settings) if args.resume else []
    baselines = [] if args.baselines is None else \
        baseline_units(args.baselines, settings, args.methods)  # fmt: skip
    done = {(unit["table"], unit["split"], unit["method"]) for unit in units}
    items = [
        (name, split, todo, settings, args.threads)
        for name in args.tables
        for split in args.splits
        if (todo := [m for m in args.methods if (name, split, m) not in done])
    ]
    order = {name: index for index, name in enumerate(args.tables)}
    for found in finished_splits(items, args.jobs):
        units.extend(found)
        units.sort(key=lambda unit: (order.get(unit["table"], -1), unit["split"]))
        write_results(args.output, settings, units, baselines, args.baselines)
        for unit in found:
            hidden = ("table", "task", "split", "method", "diagnostics", "test_rows")
            shown = {k: round(v, 4) if isinstance(v, float) else v for k, v in unit.items()
                     if k not in hidden}  # fmt: skip
            print(f"  {unit['table']} split {unit['split']} {unit['method']}: {shown}", flush=True)
    if not items:  # nothing left to run: the file is written again with these baselines
        write_results(args.output, settings, units, baselines, args.baselines)
    entries = table_means([*units, *baselines])
    shown = list(dict.fromkeys([*args.methods, *(unit["method"] for unit in baselines)]))
    for task in ("regression", "classification"):
        if any(entry["task"] == task for entry in entries):
            print_task(task, entries, [m for m in METHODS if m in shown])
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    with terminate_as_interrupt():  # kill -TERM stops the workers as Ctrl-C does
        main()
