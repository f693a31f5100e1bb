"""Main benchmark: zonal's sparse GPs on UCI regression beside a standard SVGP and seed 000 table 1.

On each dataset (quick: yacht and concrete, three random 90/10 splits; inputs and target
standardised with the training rows' statistics) three models are fitted and scored on the test
rows by the mean squared error and the test log likelihood (TLL, log N(y | mean, var + noise) per
point), both on the standardised scale as in seed 000 sec. 5.2, and by the training time:

- ``sgpr``: collapsed SGPR with spherical-harmonic features (one pass over the data, then L-BFGS;
  ``zonal.recipes``), the kernel (arc-cosine or polynomial decay) chosen by the larger bound. Its
  feature budget (512, the seed's M) is cheap because Kuu is diagonal and the bound does not touch
  the data again after the first pass.
- ``svgp-activated``: SVGP with activated Softplus features (N-tilde = 10) and the first-order
  arc-cosine kernel, trained by Adam: the single-layer model of the seed (ADGP-1).
- ``svgp-points``: GPyTorch's standard SVGP with learned inducing points and an RBF ARD kernel
  (``points_kernel="arccos"`` gives the seed's DGP-1 instead), trained the same way.

Seed 000 table 1 (5 splits, M = 512, Adam on minibatches of 1024 with the learning rate 0.01
reduced on plateaus) is printed beside. The quick preset gives the two SVGPs M = 128 and 1000 Adam
steps on minibatches of 256 (learning rate 0.05, then 0.01 and 0.002: ``zonal.recipes.scheduled_adam``),
enough for their test metrics to settle on these datasets, so that the whole run takes a few
minutes on one core; ``--full`` runs the seed's M, splits and batch size on the five datasets
available here. One tiny fit per model comes first so that the timings leave out one-off costs.
Every finished fit is checkpointed, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zonal.experiments.errors import ExperimentError
from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

MODELS = ("sgpr", "svgp-activated", "svgp-points")
MODEL_LABELS = {
    "sgpr": "SGPR harmonic features (1 pass + L-BFGS)",
    "svgp-activated": "SVGP activated Softplus (Adam)",
    "svgp-points": "SVGP inducing points (GPyTorch, Adam)",
}
QUICK: dict[str, Any] = {
    "seed": 0,
    "datasets": ["yacht", "concrete"],
    "num_splits": 3,
    "test_fraction": 0.1,
    "max_rows": 0,  # > 0: a random subset of this many rows of each dataset (for tests)
    "models": list(MODELS),
    "sgpr_budget": 512,
    "sgpr_kernel": "auto",
    "sgpr_max_iter": 200,
    "svgp_num_inducing": 128,
    "svgp_steps": 1000,
    "svgp_batch_size": 256,
    "svgp_learning_rate": 0.05,
    "truncation_level": 10,
    "points_kernel": "rbf",
}
FULL: dict[str, Any] = {
    "datasets": ["yacht", "boston", "concrete", "power", "protein"],
    "num_splits": 5,
    "svgp_num_inducing": 512,
    "svgp_steps": 5000,
    "svgp_batch_size": 1024,
}
#: seed 000 table 1: (MSE, std, TLL, std) over 5 splits, normalised scale
SEED_TABLE_1: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "yacht": {"ADGP-1": (0.035, 0.015, 0.289, 0.174), "DGP-1": (0.282, 0.092, -4.164, 1.680)},
    "boston": {"ADGP-1": (0.101, 0.022, -0.748, 0.027), "DGP-1": (0.148, 0.024, -0.475, 0.113)},
    "concrete": {"ADGP-1": (0.195, 0.009, -0.623, 0.019), "DGP-1": (0.248, 0.012, -2.524, 0.295)},
    "power": {"ADGP-1": (0.058, 0.003, -0.260, 0.070), "DGP-1": (0.058, 0.004, -0.069, 0.057)},
    "protein": {"ADGP-1": (0.630, 0.011, -1.239, 0.013), "DGP-1": (0.573, 0.011, -1.141, 0.010)},
}
SEED_SOURCE = "seed 000 table 1"
SEED_COUNTERPART = {"ADGP-1": "svgp_activated", "DGP-1": "svgp_points"}
SYNTHETIC = "synthetic"
RESULTS_FILE = "results.csv"
SUMMARY_FILE = "summary.csv"
TABLE_FILE = "summary.md"
FIGURE_FILE = "main_benchmark.png"
RESULT_COLUMNS = ("dataset", "split", "model", "kernel", "num_inducing", "num_train", "num_test",
                  "mse", "tll", "seconds", "objective")  # fmt: skip
SUMMARY_COLUMNS = ("dataset", "model", "source", "kernel", "num_inducing", "splits", "mse",
                   "mse_std", "tll", "tll_std", "seconds", "seconds_std")  # fmt: skip


def _paper_reference() -> dict[str, dict[str, float]]:
    """The seed's numbers under the metric names of their counterparts here."""
    reference: dict[str, dict[str, float]] = {}
    for name, counterpart in SEED_COUNTERPART.items():
        values = reference.setdefault(f"{SEED_SOURCE} {name}", {})
        for dataset, rows in SEED_TABLE_1.items():
            mse, _, tll, _ = rows[name]
            values[f"{dataset}.{counterpart}.mse"] = mse
            values[f"{dataset}.{counterpart}.tll"] = tll
    return reference


@register_experiment(
    "main-benchmark",
    summary="UCI regression (MSE, TLL, seconds): SGPR with harmonic features, SVGP with activated "
    "features (cf. ADGP-1) and GPyTorch's inducing-point SVGP (RBF; DGP-1 used arc-cosine) "
    "beside seed 000 table 1",
    quick=QUICK,
    full=FULL,
    paper=_paper_reference(),
    headline=("yacht.sgpr.mse", "yacht.sgpr.tll", "concrete.sgpr.mse", "concrete.sgpr.tll"),
)
def run_main_benchmark(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Fit every model on every split of every dataset; write the tables and the figure."""
    import torch

    _check_config(config)
    state = run_dir.load_checkpoint() or {}
    rows: list[dict[str, Any]] = list(state.get("rows", []))
    done = {(row["dataset"], row["split"], row["model"]) for row in rows}
    _warm_up(config)
    for dataset in config["datasets"]:
        x, y = _load(dataset, config)
        splits = _splits(len(x), config)
        for split, (train, test) in enumerate(splits):
            for model in config["models"]:
                if (dataset, split, model) in done:
                    continue
                row = fit_and_score(model, x[train], y[train], x[test], y[test], config, split)
                row = {"dataset": dataset, "split": split, **row}
                rows.append(row)
                run_dir.save_checkpoint({"rows": rows})
                print(
                    f"main-benchmark: {dataset} split {split + 1}/{len(splits)} {model}: "
                    f"MSE {row['mse']:.3f}, TLL {row['tll']:.3f}, {row['seconds']:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    summary = summarise(rows, config)
    run_dir.save_table(RESULTS_FILE, rows, RESULT_COLUMNS)
    run_dir.save_table(SUMMARY_FILE, summary, SUMMARY_COLUMNS)
    table = format_table(summary, threads=torch.get_num_threads(), splits=config["num_splits"])
    run_dir.save_text(TABLE_FILE, table)
    _plot(run_dir, summary, config, torch.get_num_threads())
    return _metrics(summary, torch.get_num_threads())


def _check_config(config: Mapping[str, Any]) -> None:
    unknown = [model for model in config["models"] if model not in MODELS]
    if unknown or not config["models"]:
        raise ExperimentError(
            f"models must be a non-empty list of {', '.join(MODELS)}; got {unknown}"
        )
    if not config["datasets"]:
        raise ExperimentError("datasets must name at least one dataset")
    from zonal.datasets import get_spec

    for name in config["datasets"]:
        if name == SYNTHETIC:
            continue
        try:
            spec = get_spec(name)
        except (KeyError, ValueError) as error:
            raise ExperimentError(f"{_first_line(error)} (or {SYNTHETIC!r})") from error
        if spec.task != "regression":
            raise ExperimentError(f"dataset {name!r} is not a regression dataset")
    from zonal.experiments._baselines import POINT_KERNELS

    if config["points_kernel"] not in POINT_KERNELS:
        raise ExperimentError(f"points_kernel must be one of {', '.join(POINT_KERNELS)}")


# ------------------------------------------------------------------------------------ data


def synthetic_regression(num_rows: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """x ~ N(0, I_3), y = sin(2 x_0) x_1 + 0.5 x_2 + 0.1 noise: a stand-in that needs no download."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_rows, 3))
    y = np.sin(2 * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] + 0.1 * rng.standard_normal(num_rows)
    return x, y


def _load(name: str, config: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(X [N, D], y [N]) of a registered regression dataset or ``"synthetic"``, maybe subsampled."""
    if name == SYNTHETIC:
        x, y = synthetic_regression(seed=config["seed"])
    else:
        from zonal.datasets import DatasetUnavailableError, load_dataset

        try:
            data = load_dataset(name)
        except DatasetUnavailableError as error:
            raise ExperimentError(
                f"dataset {name!r} is not available: {_first_line(error)}"
            ) from error
        if data.task != "regression" or data.y.ndim != 1:
            raise ExperimentError(f"dataset {name!r} is not a single-target regression dataset")
        x, y = data.X, data.y
    limit = config["max_rows"]
    if 0 < limit < len(x):
        rows = np.sort(np.random.default_rng([config["seed"], 1]).choice(len(x), limit, False))
        x, y = x[rows], y[rows]
    return x.astype(np.float64), y.astype(np.float64)


def _first_line(error: BaseException) -> str:
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    return (text.strip().splitlines() or [""])[0]


def _splits(num_rows: int, config: Mapping[str, Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    from zonal.datasets import random_splits

    return list(
        random_splits(num_rows, config["num_splits"], config["test_fraction"], seed=config["seed"])
    )


# ------------------------------------------------------------------------------------ models


def fit_and_score(
    model: str,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    config: Mapping[str, Any],
    split: int = 0,
) -> dict[str, Any]:
    """Standardise with the training rows, fit ``model``, and score it on the test rows."""
    import torch

    from zonal.datasets import Standardizer

    x_scaler, y_scaler = Standardizer.fit(x_train), Standardizer.fit(y_train)
    x = torch.from_numpy(x_scaler.transform(x_train))
    y = torch.from_numpy(y_scaler.transform(y_train))
    x_star = torch.from_numpy(x_scaler.transform(x_test))
    y_star = torch.from_numpy(y_scaler.transform(y_test))
    seed = config["seed"] + split
    fitted, kernel, seconds, objective = _fit(model, x, y, config, seed)
    mean, _ = fitted.predict(x_star)  # the model contract, as for every model
    features = getattr(fitted, "features", None)
    if features is not None:
        num_inducing = features.num_inducing
    else:
        num_inducing = fitted.variational_strategy.inducing_points.shape[-2]
    return {
        "model": model,
        "kernel": kernel,
        "num_inducing": int(num_inducing),
        "num_train": len(x),
        "num_test": len(x_star),
        "mse": float(torch.mean((mean - y_star) ** 2)),
        "tll": float(torch.mean(fitted.log_predictive_density(x_star, y_star))),
        "seconds": seconds,
        "objective": objective,
    }


def _fit(model: str, x, y, config: Mapping[str, Any], seed: int) -> tuple[Any, str, float, float]:
    """(model, kernel name, training seconds, final bound or ELBO per point)."""
    import torch

    from zonal.experiments._baselines import inducing_point_model
    from zonal.recipes import resolve_spec, scheduled_adam, train

    input_dim = x.shape[1]
    if model == "sgpr":
        spec = resolve_spec(input_dim, model="sgpr", kernel=config["sgpr_kernel"],
                            num_inducing=config["sgpr_budget"], steps=config["sgpr_max_iter"],
                            seed=seed)  # fmt: skip
    elif model == "svgp-activated":
        spec = resolve_spec(
            input_dim,
            model="svgp-activated",
            num_inducing=config["svgp_num_inducing"],
            steps=config["svgp_steps"],
            batch_size=config["svgp_batch_size"],
            learning_rate=config["svgp_learning_rate"],
            truncation_level=config["truncation_level"],
            seed=seed,
        )
    else:
        started = time.perf_counter()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            size = min(config["svgp_num_inducing"], len(x))
            points = x[torch.randperm(len(x))[:size]]
            baseline = inducing_point_model(config["points_kernel"], points)
            losses = scheduled_adam(baseline, x, y, steps=config["svgp_steps"],
                                    batch_size=config["svgp_batch_size"],
                                    learning_rate=config["svgp_learning_rate"], seed=seed)  # fmt: skip
        seconds = time.perf_counter() - started
        tail = losses[-max(1, len(losses) // 20) :]
        return baseline, config["points_kernel"], seconds, -float(np.mean(tail))
    fit, seconds = train(spec, x, y)
    return fit.model, fit.spec["kernel"], seconds, fit.objective


def _warm_up(config: Mapping[str, Any]) -> None:
    """A tiny fit of every model first, so that the timings leave out one-off costs (imports,
    TorchScript compilation, first-touch allocations)."""
    import torch

    x, y = synthetic_regression(40, seed=0)
    tiny = {**config, "sgpr_budget": 20, "sgpr_max_iter": 2, "svgp_num_inducing": 4,
            "svgp_steps": 3, "svgp_batch_size": 40}  # fmt: skip
    for model in config["models"]:
        _fit(model, torch.from_numpy(x), torch.from_numpy(y), tiny, seed=0)


# ------------------------------------------------------------------------------------ tables


def summarise(rows: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Mean and standard deviation over the splits per (dataset, model), then the seed's rows."""
    summary: list[dict[str, Any]] = []
    for dataset in config["datasets"]:
        for model in config["models"]:
            group = [row for row in rows if row["dataset"] == dataset and row["model"] == model]
            if not group:
                continue
            kernels = sorted({row["kernel"] for row in group})
            sizes = sorted({int(row["num_inducing"]) for row in group})
            entry: dict[str, Any] = {
                "dataset": dataset,
                "model": model,
                "source": "ours",
                "kernel": "/".join(kernels),
                "num_inducing": "/".join(map(str, sizes)),
                "splits": len(group),
            }
            for key in ("mse", "tll", "seconds"):
                values = np.array([row[key] for row in group], dtype=np.float64)
                entry[key] = float(values.mean())
                entry[f"{key}_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
            summary.append(entry)
        for name, (mse, mse_std, tll, tll_std) in SEED_TABLE_1.get(dataset, {}).items():
            summary.append({"dataset": dataset, "model": name, "source": SEED_SOURCE,
                            "kernel": "arccos", "num_inducing": "512", "splits": 5, "mse": mse,
                            "mse_std": mse_std, "tll": tll, "tll_std": tll_std, "seconds": None,
                            "seconds_std": None})  # fmt: skip
    return summary


def format_table(summary: Sequence[Mapping[str, Any]], *, threads: int, splits: int) -> str:
    """The summary as a markdown table (mean ± std), with a line on the protocol."""
    header = ["dataset", "model", "kernel", "M", "test MSE", "test TLL", "train seconds"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in summary:
        ours = row["source"] == "ours"
        label = MODEL_LABELS.get(row["model"], f"{SEED_SOURCE}: {row['model']}")
        seconds = _pm(row["seconds"], row["seconds_std"], 1) if ours else "—"
        cells = [row["dataset"], label, row["kernel"], str(row["num_inducing"]),
                 _pm(row["mse"], row["mse_std"], 3), _pm(row["tll"], row["tll_std"], 3), seconds]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    note = (
        f"\nMean ± std over {splits} random 90/10 split(s) (seed 000: 5 splits); MSE and TLL on the "
        f"standardised scale; {threads} thread(s). SGPR's time includes fitting both candidate "
        "kernels; M is the number of inducing features (harmonics, activations or points)."
    )
    return "\n".join(lines) + "\n" + note + "\n"


def _pm(value: float | None, spread: float | None, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f} ± {(spread or 0.0):.{digits}f}"


def _metrics(summary: Sequence[Mapping[str, Any]], threads: int) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for row in summary:
        if row["source"] != "ours":
            continue
        metrics.setdefault(row["dataset"], {})[row["model"].replace("-", "_")] = {
            key: row[key]
            for key in ("mse", "mse_std", "tll", "tll_std", "seconds", "kernel", "num_inducing")
        }
    metrics["threads"] = threads
    return metrics


def _plot(
    run_dir: RunDirectory,
    summary: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
    threads: int,
) -> None:
    """``main_benchmark.png``: test MSE (seed's ADGP-1 / DGP-1 as markers) and training seconds."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    datasets, models = list(config["datasets"]), list(config["models"])
    ours = {(row["dataset"], row["model"]): row for row in summary if row["source"] == "ours"}
    figure = Figure(figsize=(10, 3.6))
    mse_axes, time_axes = figure.subplots(1, 2)
    width = 0.8 / len(models)
    positions = np.arange(len(datasets))
    for index, model in enumerate(models):
        offset = positions - 0.4 + width * (index + 0.5)
        found = [ours.get((dataset, model)) for dataset in datasets]
        for axes, key in ((mse_axes, "mse"), (time_axes, "seconds")):
            values = [row[key] if row else np.nan for row in found]
            spread = [row[f"{key}_std"] if row else 0.0 for row in found]
            axes.bar(offset, values, width, yerr=spread, color=f"C{index}", capsize=2,
                     label=MODEL_LABELS[model])  # fmt: skip
    for name, marker in (("ADGP-1", "k_"), ("DGP-1", "kx")):
        values = [SEED_TABLE_1.get(dataset, {}).get(name, (np.nan,))[0] for dataset in datasets]
        mse_axes.plot(positions, values, marker, markersize=10, mew=2, label=f"seed 000 {name}")
    mse_axes.set_ylabel("test MSE (standardised)")
    time_axes.set_ylabel("training seconds")
    time_axes.set_yscale("log")
    for axes in (mse_axes, time_axes):
        axes.set_xticks(positions, datasets)
    handles, labels = mse_axes.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    figure.subplots_adjust(bottom=0.25)
    figure.suptitle(
        f"main-benchmark: mean ± std over {config['num_splits']} split(s), {threads} thread(s)",
        fontsize=10,
    )
    run_dir.save_figure(FIGURE_FILE, figure)
