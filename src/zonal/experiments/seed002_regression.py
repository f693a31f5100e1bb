"""Seed 002 figure 2 on stand-ins: large regressions with sparse against complete spherical-harmonic
features under the polynomial-decay kernel.

Seed 002 sec. 6.2 fits song, buzz and houseelectric (not obtainable here) with a random 20% test
set, 3 splits, and compares sparse harmonic features (15 frequencies x at most 100 phases, ~1,500
features) with complete harmonics of 5 frequencies (~1,400-1,700 features), both under the
polynomial-decay (continuous-depth) kernel, by test RMSE and negative log likelihood. The stand-ins
are the registry's ``protein`` (45,730 x 9) and ``flights`` (the NYC 2013 airline-delay set,
273,853 x 8; ``zonal.datasets.loaders_scale``). The figure prints no numbers: ours stand alone.

Protocol. Splits from ``zonal.datasets.random_splits`` (``test_fraction`` 0.2, ``num_splits``),
inputs and target standardised with the training rows' statistics. Both models are Gaussian SVGPs
(whitened, full-covariance q(u)) with the homogeneous polynomial-decay kernel (seed 002 eq. 15,
truncated at ``kernel_degree``, beta from ``initial_beta`` (default d, the ReLU NTK's decay;
``seed002_common.continuous_depth_kernel``), learned with the output scale and the noise), on the
sphere embedding [x, 1] / ||[x, 1]||. Sparse: degrees 0..14 with at most 100 learned phases (d = 10
for protein: 1 + 10 + 54 + 12 x 100 = 1,265 features; d = 9 for flights: 1 + 9 + 44 + 12 x 100 =
1,254); complete: every harmonic of degrees 0..4 (935 and 660). q(u) starts at the Titsias optimum
for the initial hyperparameters computed on ``init_rows`` training rows, then Adam
(``learning_rate``, minibatches of ``batch_size``) for ``steps`` steps. Test RMSE and NLL (mean of
-log N(y | mu, var + noise)) are in the target's own units (minutes of arrival delay for flights,
RMSD in angstrom for protein). Each row also gives the learned decay ``beta`` and ``prior_share``, the
share of the kernel's prior variance the features hold at it (``seed002_common.prior_variance_share``).

The quick config runs protein alone, one split, smaller budgets (15 frequencies x 40 phases
against 4 frequencies complete) and a few hundred steps: a check of the machinery and of the
ordering, not the converged numbers.

Outputs: ``results.csv`` (one row per dataset, split and model), ``summary.csv`` (mean and std over
splits), ``figure_2.png`` (RMSE and NLL per dataset, the two feature sets side by side); a
checkpoint after every fit, and a resumed run skips the fits it has.
"""

from __future__ import annotations

import itertools
import math
import statistics
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

if TYPE_CHECKING:
    from zonal.models import SVGP

MODELS = ("sparse", "complete")
QUICK: dict[str, Any] = {
    "seed": 0,
    "datasets": ["protein"],  # or "synthetic" (a small made-up problem, for tests)
    "num_splits": 1,
    "test_fraction": 0.2,
    "sparse_frequencies": 15,
    "max_phases": 40,
    "complete_frequencies": 4,
    "kernel_degree": 18,
    "initial_beta": None,  # None: d, the ReLU NTK's decay
    "initial_noise": 0.1,
    "init_rows": 5000,
    "steps": 200,
    "batch_size": 1024,
    "learning_rate": 0.01,
}
# Protein only (flights is the full protocol's), 3 splits, the seed's features (15 frequencies x 100
# phases against 5 complete frequencies), 2000 steps (about 50 epochs): estimated 3-4 CPU-hours,
# run across sessions with --resume.
CONVERGED: dict[str, Any] = {
    "num_splits": 3,
    "max_phases": 100,
    "complete_frequencies": 5,
    "init_rows": 20000,
    "steps": 2000,
}
FULL: dict[str, Any] = {
    "datasets": ["protein", "flights"],
    "num_splits": 3,
    "max_phases": 100,
    "complete_frequencies": 5,
    "init_rows": 20000,
    "steps": 5000,
}
PAPER: dict[str, dict[str, Any]] = {"seed 002 fig. 2 (song, buzz, houseelectric; no numbers)": {}}


def load_table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X [N, D], y [N]) of a registry dataset, or of ``"synthetic"`` (600 rows, 4 inputs)."""
    if name == "synthetic":
        generator = np.random.default_rng(0)
        x = generator.standard_normal((600, 4))
        y = np.sin(2 * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] + 0.1 * generator.standard_normal(600)
        return x, y
    from zonal.datasets import load_dataset

    data = load_dataset(name)
    return data.X, data.y


def build_model(kind: str, input_dim: int, config: dict[str, Any], seed: int) -> SVGP:
    """The Gaussian SVGP with ``kind`` features and the polynomial-decay kernel."""
    from zonal.experiments.seed002_common import continuous_depth_kernel, harmonic_features
    from zonal.models import SVGP
    from zonal.tabular.recipes import gaussian_likelihood

    ambient_dim = input_dim + 1
    kernel = continuous_depth_kernel(ambient_dim, config["kernel_degree"], config["initial_beta"])
    frequencies = config[f"{kind}_frequencies"]
    features = harmonic_features(kind, ambient_dim, frequencies, config["max_phases"], seed)
    likelihood = gaussian_likelihood(config["initial_noise"])
    return SVGP(kernel, features, input_dim, likelihood=likelihood)


def fit_one(
    kind: str, arrays: tuple[np.ndarray, ...], config: dict[str, Any], seed: int
) -> dict[str, Any]:
    """Standardise, train one model on one split, and its test RMSE and NLL in original units."""
    import time

    from zonal.datasets import Standardizer
    from zonal.experiments._convergence import curve_summary
    from zonal.experiments.seed002_common import prior_variance_share
    from zonal.models import fit_svgp

    x_train, y_train, x_test, y_test = arrays
    x_scaler, y_scaler = Standardizer.fit(x_train), Standardizer.fit(y_train)
    x = torch.as_tensor(x_scaler.transform(x_train))
    y = torch.as_tensor(y_scaler.transform(y_train))
    torch.manual_seed(seed)
    model = build_model(kind, x.shape[1], config, seed)
    started = time.perf_counter()
    rows = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    rows = rows[: config["init_rows"]]
    model.set_optimal_variational_distribution(x[rows], y[rows])
    losses = fit_svgp(
        model,
        x,
        y,
        num_steps=config["steps"],
        batch_size=config["batch_size"],
        lr=config["learning_rate"],
        seed=seed,
    )
    seconds = time.perf_counter() - started
    beta = float(model.covar_module.base_kernel.beta.detach().reshape(()))
    x_eval = torch.as_tensor(x_scaler.transform(x_test))
    with torch.no_grad():
        mean_z, variance_z = model.predict(x_eval, include_noise=True)  # standardised [T]
    scale = float(y_scaler.std.reshape(()))
    mean = y_scaler.inverse_transform(mean_z.numpy())
    variance = variance_z.numpy() * scale**2
    nll = 0.5 * (np.log(2 * math.pi * variance) + (y_test - mean) ** 2 / variance)
    return {
        "rmse": float(np.sqrt(np.mean((y_test - mean) ** 2))),
        "nll": float(nll.mean()),
        "num_inducing": model.features.num_inducing,
        "beta": beta,
        "prior_share": prior_variance_share(
            kind,
            x.shape[1] + 1,
            beta,
            config[f"{kind}_frequencies"],
            config["max_phases"],
            config["kernel_degree"],
        ),
        "final_loss": losses[-1],
        "train_seconds": seconds,
        **curve_summary(losses),
    }


def unit_seed(config: dict[str, Any], dataset: str, split: int, model: str) -> int:
    return zlib.crc32(f"{config['seed']}/{dataset}/{split}/{model}".encode())


def fit_unit(item: tuple[dict[str, Any], tuple[str, int, str]]) -> dict[str, Any]:
    """One (dataset, split, model) of the run with ``config``: its result row. Module-level and
    self-contained (it reads its own table and split), so that ``--jobs`` workers can run it."""
    from zonal.datasets import random_splits

    config, (dataset, split, model) = item
    x, y = load_table(dataset)
    splits = random_splits(len(x), config["num_splits"], config["test_fraction"], config["seed"])
    train, test = next(itertools.islice(splits, split, None))
    arrays = (x[train], y[train], x[test], y[test])
    return fit_one(model, arrays, config, unit_seed(config, dataset, split, model))


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and std (over splits) of RMSE and NLL per (dataset, model)."""
    summary = []
    for dataset, model in sorted({(r["dataset"], r["model"]) for r in rows}):
        found = [r for r in rows if (r["dataset"], r["model"]) == (dataset, model)]
        entry: dict[str, Any] = {
            "dataset": dataset,
            "model": model,
            "splits": len(found),
            "num_inducing": found[0]["num_inducing"],
        }
        for key in ("rmse", "nll", "train_seconds"):
            values = [r[key] for r in found]
            entry[key] = statistics.fmean(values)
            entry[f"{key}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        summary.append(entry)
    return summary


@register_experiment(
    "sparse-phases-regression",
    summary="seed 002 fig. 2 on protein and flights (stand-ins): sparse (15 x 100 phases) vs "
    "complete (5 frequencies) harmonic features, polynomial-decay kernel; RMSE and NLL",
    quick=QUICK,
    converged=CONVERGED,
    full=FULL,
    differences={
        "converged": "stand-in data: protein for song, buzz and houseelectric; reduced: "
        "protein only (flights in full), 2000 steps (about 50 epochs)",
        "quick": "stand-in data: protein for song, buzz and houseelectric; reduced: 1 split, 40 "
        "phases, 200 steps (not converged)",
        "full": "stand-in data: protein and NYC flights for song, buzz and houseelectric",
    },
    paper=PAPER,
    # measured: the converged run's six fits took 4,684 s (2,594 s wall with --jobs 2)
    cpu_hours={"converged": 1.3},
)
def run_seed002_regression(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Fit every (dataset, split, model), checkpointing after each; then the summary and figure."""
    todo = [
        (dataset, split, model)
        for dataset in config["datasets"]
        for split in range(config["num_splits"])
        for model in MODELS
    ]
    state = run_dir.load_checkpoint()
    rows: list[dict[str, Any]] = [] if state is None else list(state["rows"])
    done = {(r["dataset"], r["split"], r["model"]) for r in rows}
    pending = [(config, unit) for unit in todo if unit not in done]
    for (_, (dataset, split, model)), row in run_dir.map_units(
        fit_unit, pending, finished=len(todo) - len(pending), unit="fit"
    ):
        rows.append({"dataset": dataset, "split": split, "model": model, **row})
        run_dir.save_checkpoint({"rows": rows})
    # In the units' order, whatever order ``--jobs`` workers finished them in.
    order = {unit: position for position, unit in enumerate(todo)}
    rows.sort(key=lambda r: order[r["dataset"], r["split"], r["model"]])
    summary = summarise(rows)
    run_dir.save_table("results.csv", rows)
    run_dir.save_table("summary.csv", summary)
    _plot(run_dir, rows)
    metrics: dict[str, Any] = {}
    for entry in summary:
        metrics.setdefault(entry["dataset"], {})[entry["model"]] = {
            key: entry[key]
            for key in ("rmse", "rmse_std", "nll", "nll_std", "num_inducing", "train_seconds")
        }
    return metrics


def _plot(run_dir: RunDirectory, rows: list[dict[str, Any]]) -> None:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    datasets = sorted({r["dataset"] for r in rows})
    figure = Figure(figsize=(3.2 * len(datasets), 4.8))
    axes = figure.subplots(2, len(datasets), squeeze=False)
    for column, dataset in enumerate(datasets):
        for row, metric in enumerate(("nll", "rmse")):
            axis = axes[row][column]
            for position, model in enumerate(MODELS):
                values = [r[metric] for r in rows if (r["dataset"], r["model"]) == (dataset, model)]
                axis.scatter([position] * len(values), values, color=f"C{position}", s=14)
            axis.set_xticks(range(len(MODELS)), MODELS)
            axis.set_xlim(-0.5, len(MODELS) - 0.5)
            axis.set_ylabel(f"test {metric.upper()}")
            if row == 0:
                axis.set_title(dataset)
    figure.suptitle("seed 002 fig. 2 on stand-ins (one point per split)", fontsize=8)
    run_dir.save_figure("figure_2.png", figure)


__all__ = ["FULL", "MODELS", "PAPER", "QUICK", "run_seed002_regression", "summarise"]
