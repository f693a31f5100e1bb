"""Benchmark: ``zonal fit``'s default against GPyTorch's SVGP with an RBF-ARD kernel, on regression
tables zonal was never developed on (``zonal.datasets.loaders_regression.UNSEEN_REGRESSION``).

For every table and seed: a 90/10 split (``random_splits``), then in one process, on the same rows
and the same threads,

* ``zonal fit`` (default): ``zonal.tabular.fitting.fit_table`` (the function behind the CLI) with the
  options ``zonal fit DATA --target y --likelihood gaussian`` gives (read from the CLI's own
  parser, so the benchmark measures whatever the default is when it runs: model choice, budget,
  validation split; ``--likelihood gaussian`` because the CLI reads a target of few integer
  values, such as the wines' quality scores 3..9, as classes); its time is the wall-clock of the
  ``fit_table`` call (standardisation, validation and model choice included);
* the peer: GPyTorch's SVGP (``gp_baselines.svgp_regression``, shared with ``fit_suite.py``;
  ``zonal.experiments._baselines.InducingPointSVGP``: whitened full
  q(u) at M = 256 learned inducing points started at random training rows, constant mean,
  ``ScaleKernel(RBFKernel(ard_num_dims=D))``), trained by ``zonal.tabular.recipes.scheduled_adam`` on the
  standardised rows (Adam, lr 0.05 for 60% of the steps, then 1/5 and 1/25; batch 1024);
* for reference (``--no-ard`` drops it), zonal's SGPR with input scales (ARD): arc-cosine kernel,
  the recipe's 512 harmonic features, ``SphereEmbedding(input_scales=1)``, trained by the
  alternating scheme of ``zonal.models.sgpr`` (scales on 2048 rows, one pass, then L-BFGS) on the
  same standardised rows, no validation split: what ARD adds to the one-pass model.

Both are scored on the test rows in the units of the training target standardised (mean 0,
variance 1 on the training rows): test MSE of the predictive mean and the mean test log
likelihood of the Gaussian predictive with noise. The table gives means over seeds and the ratios
zonal / peer (MSE and seconds; < 1 favours zonal).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fit_default.py [--quick] [--tables airfoil ...]

``--quick``: 3 seeds (the default preset is 5). ``--zonal-budget SECONDS`` replaces the CLI's
default ``--budget`` (to see what another default would give; the table then measures that, not
the default). Results go to benchmarks/results/fit_default.json, rewritten after every split;
``--resume`` keeps the splits already there (same settings).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gp_baselines import gaussian_scores, svgp_regression
from zonal._files import to_jsonable, write_json_atomic
from zonal.cli import build_parser
from zonal.datasets import Standardizer, load_dataset, random_splits
from zonal.datasets.loaders_regression import UNSEEN_REGRESSION
from zonal.geometry import SphereEmbedding
from zonal.models import SGPR
from zonal.tabular.fitting import fit_table
from zonal.tabular.predict import predict_table
from zonal.tabular.recipes import build_kernel, harmonic_features
from zonal.tabular.tables import Table

RESULTS = Path(__file__).resolve().parent / "results" / "fit_default.json"
TARGET = "y"
PEER = "GPyTorch SVGP RBF-ARD"
#: the ARD SGPR's feature budget, subsample for the scales, and L-BFGS iterations
ARD_BUDGET, ARD_SUBSAMPLE, ARD_SCALE_ITERATIONS, ARD_ITERATIONS = 512, 2048, 50, 200
#: the options of ``zonal fit`` that ``fit_table`` takes under the same name
CLI_OPTIONS = ("model", "budget", "validation_fraction", "kernel", "batch_size", "likelihood")


def cli_defaults() -> dict[str, Any]:
    """The options ``zonal fit DATA --target y --likelihood gaussian`` passes to ``fit_table``
    (its parser's defaults)."""
    argv = ["fit", "data.csv", "--target", TARGET, "--likelihood", "gaussian"]
    namespace = vars(build_parser().parse_args(argv))
    return {name: namespace[name] for name in CLI_OPTIONS if name in namespace}


def zonal_options(args: argparse.Namespace) -> dict[str, Any]:
    """``cli_defaults()``, with the budget of ``--zonal-budget`` if given."""
    options = cli_defaults()
    if args.zonal_budget is not None:
        options["budget"] = args.zonal_budget
    return options


def in_memory_table(name: str, x: np.ndarray, y: np.ndarray | None = None) -> Table:
    """A ``Table`` of numeric columns x0..x{D-1} and the target if given (as ``zonal fit`` reads
    an NPZ)."""
    cells = {f"x{index}": x[:, index] for index in range(x.shape[1])}
    if y is not None:
        cells[TARGET] = y
    return Table(Path(f"{name}.npz"), tuple(cells), cells, len(x), is_csv=False)


def run_zonal(
    name: str, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, seed: int,
    options: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """``fit_table`` with ``options`` (the CLI's defaults), then ``predict_table``; moments in
    target units."""
    started = time.perf_counter()
    fitted = fit_table(in_memory_table(name, x_train, y_train), TARGET, seed=seed, **options)
    seconds = time.perf_counter() - started
    predictions = predict_table(fitted, in_memory_table(name, x_test))
    return {
        "mean": predictions["mean"],
        "variance": predictions["variance"],
        "seconds": seconds,
        "model": fitted.describe(),
    }


def run_peer(
    x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, args: argparse.Namespace,
    seed: int,
) -> dict[str, Any]:  # fmt: skip
    """GPyTorch's SVGP with RBF-ARD on standardised rows (``gp_baselines.svgp_regression``);
    moments in standardised units."""
    return svgp_regression(x_train, y_train, x_test, num_inducing=args.num_inducing,
                           steps=args.peer_steps, batch_size=args.batch_size,
                           learning_rate=args.peer_learning_rate, seed=seed)  # fmt: skip


def run_ard_sgpr(
    x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, seed: int
) -> dict[str, Any]:
    """zonal's SGPR with learned input scales (the alternating scheme) on standardised rows."""
    started = time.perf_counter()
    input_dim = x_train.shape[1]
    kernel = build_kernel("arccos", input_dim + 1, ARD_BUDGET)
    features = harmonic_features(kernel, input_dim + 1, ARD_BUDGET)
    embedding = SphereEmbedding(1.0, input_scales=1.0, input_dim=input_dim)
    model = SGPR(kernel, features, input_dim, input_map=embedding)
    model.fit_input_scales(x_train, y_train, subsample_size=ARD_SUBSAMPLE,
                           max_iter=ARD_SCALE_ITERATIONS, seed=seed)  # fmt: skip
    model.fit_statistics(x_train, y_train)
    model.fit(max_iter=ARD_ITERATIONS)
    seconds = time.perf_counter() - started
    with torch.no_grad():
        mean, variance = model.predict(x_test, include_noise=True)
        scales = embedding.input_scales.tolist()
    return {"mean": mean.numpy(), "variance": variance.numpy(), "seconds": seconds,
            "scales": scales}  # fmt: skip


def run_split(name: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Both models on split ``seed`` of table ``name``; scores in standardised target units."""
    data = load_dataset(name)
    train, test = next(random_splits(len(data.y), 1, 0.1, seed=seed))
    x_train, y_train, x_test, y_test = data.X[train], data.y[train], data.X[test], data.y[test]
    y_scaler = Standardizer.fit(y_train)
    y_test_std = y_scaler.transform(y_test)
    zonal = run_zonal(name, x_train, y_train, x_test, seed, zonal_options(args))
    zonal_mean = y_scaler.transform(zonal["mean"])
    zonal_variance = zonal["variance"] / float(y_scaler.std) ** 2
    x_scaler = Standardizer.fit(x_train)
    standardised = (torch.from_numpy(x_scaler.transform(x_train)),
                    torch.from_numpy(y_scaler.transform(y_train)),
                    torch.from_numpy(x_scaler.transform(x_test)))  # fmt: skip
    peer = run_peer(*standardised, args, seed)
    row: dict[str, Any] = {"table": name, "seed": seed, "num_train": len(train),
                           "num_test": len(test), "input_dim": data.X.shape[1],
                           "zonal_model": zonal["model"]}  # fmt: skip
    runs = [("zonal", zonal_mean, zonal_variance, zonal["seconds"]),
            ("peer", peer["mean"], peer["variance"], peer["seconds"])]  # fmt: skip
    if args.ard:
        ard = run_ard_sgpr(*standardised, seed)
        runs.append(("ard", ard["mean"], ard["variance"], ard["seconds"]))
        row["ard_scales"] = ard["scales"]
    for label, mean, variance, seconds in runs:
        mse, tll = gaussian_scores(mean, variance, y_test_std)
        row.update({f"{label}_mse": mse, f"{label}_tll": tll, f"{label}_seconds": seconds})
    return row


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per table: means over seeds of each score, and the ratios zonal / peer of the means."""
    summary = []
    for name in dict.fromkeys(row["table"] for row in rows):
        group = [row for row in rows if row["table"] == name]
        entry: dict[str, Any] = {"table": name, "seeds": len(group),
                                 "input_dim": group[0]["input_dim"],
                                 "num_train": group[0]["num_train"],
                                 "zonal_models": sorted({row["zonal_model"] for row in group})}  # fmt: skip
        for key in ("mse", "tll", "seconds"):
            for label in ("zonal", "peer", "ard"):
                if f"{label}_{key}" not in group[0]:
                    continue
                values = np.array([row[f"{label}_{key}"] for row in group])
                entry[f"{label}_{key}"] = float(values.mean())
                entry[f"{label}_{key}_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        entry["mse_ratio"] = entry["zonal_mse"] / entry["peer_mse"]
        entry["time_ratio"] = entry["zonal_seconds"] / entry["peer_seconds"]
        entry["target_met"] = entry["mse_ratio"] <= 1.0 and entry["time_ratio"] <= 1.0
        if "ard_mse" in entry:
            entry["ard_mse_ratio"] = entry["ard_mse"] / entry["peer_mse"]
            entry["ard_time_ratio"] = entry["ard_seconds"] / entry["peer_seconds"]
        summary.append(entry)
    return summary


def print_table(summary: list[dict[str, Any]]) -> None:
    print(f"\nzonal fit (default) against {PEER} (M = 256); test scores in standardised units, "
          "means over seeds; ratios zonal / peer (< 1 favours zonal)")  # fmt: skip
    header = (f"{'table':<15}{'N':>6}{'D':>4}  {'MSE zonal':>9} {'MSE peer':>9} {'ratio':>6}  "
              f"{'TLL zonal':>9} {'TLL peer':>9}  {'s zonal':>8} {'s peer':>8} {'ratio':>6}  "
              "target  zonal model")  # fmt: skip
    print(header)
    for entry in summary:
        print(
            f"{entry['table']:<15}{entry['num_train']:>6}{entry['input_dim']:>4}  "
            f"{entry['zonal_mse']:>9.4f} {entry['peer_mse']:>9.4f} {entry['mse_ratio']:>6.2f}  "
            f"{entry['zonal_tll']:>9.3f} {entry['peer_tll']:>9.3f}  "
            f"{entry['zonal_seconds']:>8.1f} {entry['peer_seconds']:>8.1f} "
            f"{entry['time_ratio']:>6.2f}  {'met' if entry['target_met'] else 'MISSED':<6}  "
            f"{'; '.join(entry['zonal_models'])}"
        )
    if any("ard_mse" in entry for entry in summary):
        print("\nzonal SGPR with input scales (ARD, alternating scheme), same rows; ratios / peer")
        print(f"{'table':<15}  {'MSE':>9} {'ratio':>6}  {'TLL':>9}  {'s':>8} {'ratio':>6}")
        for entry in summary:
            print(
                f"{entry['table']:<15}  {entry['ard_mse']:>9.4f} {entry['ard_mse_ratio']:>6.2f}  "
                f"{entry['ard_tll']:>9.3f}  {entry['ard_seconds']:>8.1f} "
                f"{entry['ard_time_ratio']:>6.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds (default 5)")
    parser.add_argument("--tables", nargs="+", default=list(UNSEEN_REGRESSION))
    parser.add_argument("--seeds", type=int, default=None, help="splits per table")
    parser.add_argument("--num-inducing", type=int, default=256, help="the peer's M")
    parser.add_argument("--peer-steps", type=int, default=1000, help="the peer's Adam steps")
    parser.add_argument("--no-ard", dest="ard", action="store_false", help="skip the ARD SGPR")
    parser.add_argument("--peer-learning-rate", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=1024, help="the peer's minibatch")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--zonal-budget", type=float, default=None, metavar="SECONDS",
                        help="zonal fit's --budget (default: the CLI's default)")  # fmt: skip
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--resume", action="store_true", help="keep the splits in --output")
    args = parser.parse_args()
    args.seeds = args.seeds or (3 if args.quick else 5)
    unknown = [name for name in args.tables if name not in UNSEEN_REGRESSION]
    if unknown:
        parser.error(f"{unknown} are not unseen tables; choose from {list(UNSEEN_REGRESSION)}")
    torch.set_num_threads(args.threads)
    print(f"zonal fit options: {zonal_options(args)}; torch threads {torch.get_num_threads()} "
          f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')})")  # fmt: skip
    settings = {key: value for key, value in vars(args).items() if key not in ("resume", "output")}
    settings["zonal_fit_options"] = zonal_options(args)
    rows = previous_rows(args.output, settings) if args.resume else []
    done = {(row["table"], row["seed"]) for row in rows}
    for name in args.tables:
        for seed in range(args.seeds):
            if (name, seed) in done:
                continue
            row = run_split(name, seed, args)
            rows.append(row)
            write_results(args.output, settings, rows)
            ard = (f", ARD SGPR MSE {row['ard_mse']:.4f} in {row['ard_seconds']:.1f} s"
                   if args.ard else "")  # fmt: skip
            print(f"  {name} seed {seed}: zonal MSE {row['zonal_mse']:.4f} in "
                  f"{row['zonal_seconds']:.1f} s ({row['zonal_model']}), peer MSE "
                  f"{row['peer_mse']:.4f} in {row['peer_seconds']:.1f} s{ard}", flush=True)  # fmt: skip
    print_table(summarise(rows))
    write_results(args.output, settings, rows)
    print(f"\nwrote {args.output}")


def previous_rows(path: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The splits of an earlier run at ``path`` with the same settings (tables and seeds aside)."""
    if not path.exists():
        return []
    earlier = json.loads(path.read_text())
    ignored = ("tables", "seeds", "quick")
    same = {k: v for k, v in earlier["settings"].items() if k not in ignored} == {
        k: v for k, v in to_jsonable(settings).items() if k not in ignored
    }
    if not same:
        raise SystemExit(f"{path} holds a run with other settings: drop --resume or move it")
    print(f"resuming: {len(earlier['runs'])} split(s) from {path}")
    return earlier["runs"]


def write_results(path: Path, settings: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """The settings, the environment, the per-table summary and every split, atomically."""
    write_json_atomic(path, {
        "settings": settings,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "versions": {"torch": torch.__version__, "gpytorch": metadata.version("gpytorch"),
                     "python": platform.python_version()},
        "machine": platform.machine(),
        "summary": summarise(rows),
        "runs": rows,
    })  # fmt: skip


if __name__ == "__main__":
    main()
