"""Seed 001 ch. 3 (VISH) on the flights stand-in: the one-pass harmonic SGPR against SVGPs trained
until their test RMSE stops improving, and the time each needs to reach the other's accuracy.

The claim (seed 001 ch. 3, abstract): on a regression with 6 million rows (the US airline delays,
not obtainable here), variational inducing spherical harmonics fit "two orders of magnitude faster
compared to standard sparse GPs, while retaining state of the art accuracy". The stand-in is the
largest regression obtainable here, the NYC 2013 flights (273,853 x 8, ``zonal.datasets``): the
arrival delay from the month, day, weekday, departure time, air time, distance, plane age and
scheduled hour.

Protocol, per split (``zonal.datasets.random_splits``, ``test_fraction`` 0.2; ``num_train``
training rows drawn from the split's training part, all of them when None; ``test_rows`` rows of
its test part, all when None), inputs and target standardised with the training rows' statistics:

- **SGPR** (``zonal.models.SGPR``): complete spherical harmonics of degrees 0..``frequencies`` - 1
  on [x, 1] / ||[x, 1]|| (660 features for d = 9 at 5 frequencies) under the polynomial-decay
  kernel (seed 002 eq. 15, truncated at ``kernel_degree``); one pass over the training rows for the
  sufficient statistics (chunks of ``chunk_size``), then ``lbfgs_steps`` L-BFGS iterations on the
  collapsed bound (seed 000 sec. 3.3). Its test RMSE is the accuracy the SVGPs must reach. With
  ``input_scales`` it first learns one scale per input, [s * x, 1], on the bound of
  ``input_scale_rows`` random training rows (default 1,024, as ``zonal fit --ard``;
  ``SGPR.fit_input_scales``, on the clock: ``scales_seconds`` of its ``seconds``), and the pass
  runs at those scales.
- **SVGPs**, each trained by Adam (``learning_rate``, minibatches of ``batch_size``, epochs of a
  permutation) from its default initialisation until its test RMSE has not improved by a relative
  ``plateau_tolerance`` for ``patience`` evaluations (one every ``eval_every`` steps, off the clock),
  or ``max_seconds`` have passed (a time cap: the row says so): ``zonal-svgp``, the same features
  and kernel as the SGPR; ``rbf-svgp``, GPyTorch's SVGP with ``num_inducing`` learned inducing
  points and an RBF-ARD kernel (``zonal.experiments._baselines.InducingPointSVGP``), the seed's
  "standard sparse GP".

Clocks are CPU seconds of the process (``time.process_time``; single-threaded runs, so the same as
an idle machine's wall clock, but blind to neighbours). From each SVGP's history of (seconds, RMSE)
the summary derives, per split: ``seconds_to_sgpr_rmse`` (the first evaluation at or below the
SGPR's RMSE; empty when it never got there), ``speedup`` (that time over the SGPR's whole fit; when
the SVGP never reached it, its whole training time over the SGPR's, a lower bound flagged in
``speedup_is_lower_bound``) and ``accuracy_ratio`` (the SGPR's RMSE over the SVGP's best: at most
1 means the SGPR is at least as accurate).

Outputs: ``results.csv`` (one row per split and model), ``curves.csv`` (every SVGP evaluation),
``figure_3.png`` (test RMSE against CPU seconds, log scale: one line per SVGP and split, one point
per SGPR fit); a checkpoint after every fit, and a resumed run skips the fits it has.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

MODELS = ("sgpr", "zonal-svgp", "rbf-svgp")
SVGPS = MODELS[1:]
QUICK: dict[str, Any] = {
    "seed": 0,
    "dataset": "flights",  # or "synthetic" (a small made-up problem, for tests)
    "num_train": 10000,  # None: every training row of the split
    "num_splits": 1,
    "test_fraction": 0.2,
    "test_rows": 5000,  # None: every test row of the split
    "frequencies": 5,
    "input_scales": False,  # the SGPR learns one scale per input first (ARD) ...
    "input_scale_rows": 1024,  # ... on the bound of this many random training rows
    "kernel_degree": 8,
    "initial_noise": 0.1,
    "lbfgs_steps": 50,
    "chunk_size": 16384,
    "num_inducing": 500,
    "batch_size": 1024,
    "learning_rate": 0.01,
    "eval_every": 100,
    "patience": 5,
    "plateau_tolerance": 1e-3,
    "max_seconds": 60.0,
    "models": list(MODELS),  # a subset for ablations of one model (the SGPR's features)
}
# Every training row (219,082), 3 splits, the SVGPs to their plateau within 30 CPU-minutes each:
# at most about 3 x (2 x 30 + 1) minutes of one core, less where the SVGPs plateau earlier.
CONVERGED: dict[str, Any] = {
    "num_train": None,
    "num_splits": 3,
    "test_rows": 20000,
    "max_seconds": 1800.0,
}
FULL: dict[str, Any] = {
    "num_train": None,
    "num_splits": 5,
    "test_rows": None,
    "max_seconds": 3600.0,
}
PAPER: dict[str, dict[str, Any]] = {
    "seed 001 ch. 3 (6M-row airline data; 'two orders of magnitude faster')": {}
}
DIFFERENCES = {
    "quick": "stand-in data: NYC flights 2013 for the 6-million-row airline data; reduced: one "
    "split of 10,000 training rows, SVGPs capped at 60 CPU-seconds (not converged)",
    "converged": "stand-in data: NYC flights 2013 (219,082 training rows) for the 6-million-row "
    "airline data; reduced: 3 splits, 20,000 test rows, SVGPs capped at 30 CPU-minutes",
    "full": "stand-in data: NYC flights 2013 for the 6-million-row airline data (not obtainable "
    "here); 5 splits, every test row, SVGPs capped at one CPU-hour",
}


def load_table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X [N, D], y [N]) of a registry dataset, or of ``"synthetic"`` (3,000 rows, 4 inputs)."""
    if name == "synthetic":
        generator = np.random.default_rng(0)
        x = generator.standard_normal((3000, 4))
        y = np.sin(2 * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] + 0.1 * generator.standard_normal(3000)
        return x, y
    from zonal.datasets import load_dataset

    data = load_dataset(name)
    return data.X, data.y


def split_arrays(
    config: dict[str, Any], split: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x, y, x_test, y_test) of ``split``, standardised with the training rows' statistics."""
    from zonal.datasets import Standardizer, random_splits

    x_all, y_all = load_table(config["dataset"])
    splits = random_splits(len(x_all), split + 1, config["test_fraction"], config["seed"])
    train, test = list(splits)[split]
    generator = np.random.default_rng([config["seed"], split, 1])
    if config["num_train"] is not None and config["num_train"] < len(train):
        train = np.sort(generator.permutation(train)[: config["num_train"]])
    if config["test_rows"] is not None and config["test_rows"] < len(test):
        test = np.sort(generator.permutation(test)[: config["test_rows"]])
    x_scaler, y_scaler = Standardizer.fit(x_all[train]), Standardizer.fit(y_all[train])

    def tensor(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(array), dtype=torch.float64)

    return (
        tensor(x_scaler.transform(x_all[train])),
        tensor(y_scaler.transform(y_all[train])),
        tensor(x_scaler.transform(x_all[test])),
        tensor(y_scaler.transform(y_all[test])),
    )


def harmonic_parts(input_dim: int, config: dict[str, Any]) -> tuple[Any, Any]:
    """The SGPR's (and zonal SVGP's) kernel and complete harmonic features on S^{input_dim}."""
    from zonal.experiments.seed002_common import continuous_depth_kernel, harmonic_features

    kernel = continuous_depth_kernel(input_dim + 1, config["kernel_degree"])
    features = harmonic_features("complete", input_dim + 1, config["frequencies"], 0, seed=0)
    return kernel, features


def held_out_metrics(model: Any, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(RMSE, mean negative log predictive density with the noise) on standardised targets."""
    with torch.no_grad():
        mean, variance = model.predict(x, include_noise=True)  # [T], [T]
    squared = (mean - y) ** 2
    nll = 0.5 * (torch.log(2 * math.pi * variance) + squared / variance)
    return float(squared.mean().sqrt()), float(nll.mean())


def fit_sgpr(data: tuple[torch.Tensor, ...], config: dict[str, Any]) -> dict[str, Any]:
    """One statistics pass and ``lbfgs_steps`` L-BFGS iterations; CPU seconds of both."""
    from zonal.geometry import SphereEmbedding
    from zonal.models import SGPR
    from zonal.tabular.recipes.sgpr import ARD_ITERATIONS

    x, y, x_test, y_test = data
    kernel, features = harmonic_parts(x.shape[1], config)
    embedding = None
    if config["input_scales"]:
        embedding = SphereEmbedding(1.0, input_scales=1.0, input_dim=x.shape[1])
    model = SGPR(kernel, features, x.shape[1], input_map=embedding)
    started = time.process_time()
    scales = 0.0
    if config["input_scales"]:
        model.fit_input_scales(
            x, y, subsample_size=config["input_scale_rows"], max_iter=ARD_ITERATIONS,
            seed=config["seed"],
        )  # fmt: skip
        scales = time.process_time() - started
    model.fit_statistics(x, y, chunk_size=config["chunk_size"])
    data_pass = time.process_time() - started - scales
    model.fit(max_iter=config["lbfgs_steps"])
    seconds = time.process_time() - started
    rmse, nll = held_out_metrics(model, x_test, y_test)
    return {
        "num_inducing": features.num_inducing,
        "seconds": seconds,
        "data_pass_seconds": data_pass,
        "scales_seconds": scales,
        "rmse": rmse,
        "best_rmse": rmse,
        "nll": nll,
        "stopped": "fitted",
        "converged": True,
    }


def build_svgp(model: str, x: torch.Tensor, config: dict[str, Any], seed: int) -> Any:
    """``zonal-svgp`` (the SGPR's features and kernel) or ``rbf-svgp`` (GPyTorch, RBF-ARD)."""
    from zonal.experiments._baselines import InducingPointSVGP
    from zonal.models import SVGP
    from zonal.tabular.recipes.parts import gaussian_likelihood

    if model == "rbf-svgp":
        first = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
        return InducingPointSVGP(x[first[: config["num_inducing"]]], "rbf")
    kernel, features = harmonic_parts(x.shape[1], config)
    likelihood = gaussian_likelihood(config["initial_noise"])
    return SVGP(kernel, features, x.shape[1], likelihood=likelihood)


def plateau_callback(
    model: Any,
    x_test: torch.Tensor,
    y_test: torch.Tensor,
    config: dict[str, Any],
    history: list[tuple[float, float, int]],
    stopped: list[str],
    target: float | None = None,
) -> Callable[[int, float], None]:
    """The training callback: every ``eval_every`` steps, the test RMSE (off the clock) appended to
    ``history`` as (CPU seconds of training, RMSE, step); ends the training (``StopTraining``, the
    reason appended to ``stopped``) when the RMSE is at most ``target`` ("matched", if a target is
    given), when the last ``patience`` evaluations are all worse than the best before them by a
    relative ``plateau_tolerance`` ("plateau"), or when ``max_seconds`` of training have passed
    ("time cap")."""
    from zonal.models.training import StopTraining

    clock = {"seconds": 0.0, "started": time.process_time()}
    patience = config["patience"]

    def callback(step: int, loss: float) -> None:
        if (step + 1) % config["eval_every"]:
            return
        clock["seconds"] += time.process_time() - clock["started"]
        rmse, _ = held_out_metrics(model, x_test, y_test)
        model.train()
        history.append((clock["seconds"], rmse, step + 1))
        best_before = min(h[1] for h in history[:-patience] or history)
        for reason, reached in (
            ("matched", target is not None and rmse <= target),
            (
                "plateau",
                len(history) > patience
                and all(
                    h[1] > best_before * (1 - config["plateau_tolerance"])
                    for h in history[-patience:]
                ),
            ),
            ("time cap", clock["seconds"] > config["max_seconds"]),
        ):
            if reached:
                stopped.append(reason)
                raise StopTraining(reason)
        clock["started"] = time.process_time()

    return callback


def fit_svgp_to_plateau(
    model_name: str, data: tuple[torch.Tensor, ...], config: dict[str, Any], seed: int
) -> dict[str, Any]:
    """Train one SVGP until its test RMSE plateaus (or the time cap); its history and metrics."""
    from zonal.models.training import fit_svgp

    x, y, x_test, y_test = data
    torch.manual_seed(seed)
    model = build_svgp(model_name, x, config, seed)
    history: list[tuple[float, float, int]] = []
    stopped: list[str] = []
    fit_svgp(
        model,
        x,
        y,
        num_steps=10**9,
        batch_size=config["batch_size"],
        lr=config["learning_rate"],
        seed=seed,
        callback=plateau_callback(model, x_test, y_test, config, history, stopped),
    )
    model.eval()
    best_seconds, best_rmse, _ = min(history, key=lambda h: h[1])
    rmse, nll = held_out_metrics(model, x_test, y_test)
    num_inducing = getattr(getattr(model, "features", None), "num_inducing", None)
    return {
        "num_inducing": num_inducing or config["num_inducing"],
        "seconds": history[-1][0],
        "rmse": rmse,
        "best_rmse": best_rmse,
        "best_seconds": best_seconds,
        "nll": nll,
        "steps": history[-1][2],
        "epochs": history[-1][2] * config["batch_size"] / len(x),
        "stopped": stopped[0],
        "converged": stopped[0] == "plateau",
        "curve": [list(point) for point in history],
    }


def unit_seed(config: dict[str, Any], split: int, model: str) -> int:
    return zlib.crc32(f"{config['seed']}/{split}/{model}".encode())


def fit_unit(item: tuple[dict[str, Any], tuple[int, str]]) -> dict[str, Any]:
    """One (split, model) of the run with ``config`` (module-level, for ``--jobs`` workers)."""
    config, (split, model) = item
    data = split_arrays(config, split)
    if model == "sgpr":
        return fit_sgpr(data, config)
    return fit_svgp_to_plateau(model, data, config, unit_seed(config, split, model))


def compare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with, on each SVGP row, its split's SGPR RMSE and seconds, the SVGP's time to
    reach that RMSE, the speed-up of the SGPR and the accuracy ratio (module docstring)."""
    sgpr = {row["split"]: row for row in rows if row["model"] == "sgpr"}
    compared = []
    for row in rows:
        row = dict(row)
        reference = sgpr.get(row["split"])
        if row["model"] != "sgpr" and reference is not None:
            reached = next((h for h in row.get("curve", []) if h[1] <= reference["rmse"]), None)
            taken = reached[0] if reached is not None else row["seconds"]
            row.update(
                sgpr_rmse=reference["rmse"],
                sgpr_seconds=reference["seconds"],
                seconds_to_sgpr_rmse=reached[0] if reached is not None else None,
                speedup=taken / reference["seconds"],
                speedup_is_lower_bound=reached is None,
                accuracy_ratio=reference["rmse"] / row["best_rmse"],
            )
        compared.append(row)
    return compared


def _check_config(config: dict[str, Any]) -> None:
    """A ``ValueError`` naming a dataset or model the run cannot use, before its folder is made."""
    if config["dataset"] not in ("flights", "synthetic"):
        raise ValueError(f"dataset must be 'flights' or 'synthetic', got {config['dataset']!r}")
    unknown = sorted(set(config["models"]) - set(MODELS))
    if unknown or not config["models"] or len(set(config["models"])) < len(config["models"]):
        raise ValueError(
            f"models must be some of {list(MODELS)}, each once, got {config['models']}"
        )


@register_experiment(
    "vish-flights",
    validate=_check_config,
    summary="seed 001 ch. 3 on flights (stand-in for the airline data): the one-pass harmonic "
    "SGPR against SVGPs (same features; GPyTorch RBF-ARD) trained to their plateau; time to "
    "equal test RMSE",
    quick=QUICK,
    converged=CONVERGED,
    full=FULL,
    differences=DIFFERENCES,
    paper=PAPER,
    headline=("rbf-svgp.speedup", "sgpr.rmse", "rbf-svgp.best_rmse"),
    cpu_hours={"converged": 0.7},  # measured: about 40 CPU-minutes
)
def run_vish_flights(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Fit every (split, model), checkpointing after each; then the comparison and the figure."""
    from zonal.experiments._convergence import without_curve

    _check_config(config)
    todo = [(split, model) for split in range(config["num_splits"]) for model in config["models"]]
    state = run_dir.load_checkpoint()
    rows: list[dict[str, Any]] = [] if state is None else list(state["rows"])
    done = {(r["split"], r["model"]) for r in rows}
    pending = [(config, unit) for unit in todo if unit not in done]
    for (_, (split, model)), row in run_dir.map_units(
        fit_unit, pending, finished=len(todo) - len(pending), unit="fit"
    ):
        rows.append({"split": split, "model": model, **row})
        run_dir.save_checkpoint({"rows": rows})
    compared = compare(rows)
    run_dir.save_table("results.csv", [without_curve(r) for r in compared])
    run_dir.save_table(
        "curves.csv",
        [
            {"split": r["split"], "model": r["model"], "seconds": s, "rmse": e, "step": k}
            for r in rows
            for s, e, k in r.get("curve", [])
        ],
    )
    _plot(run_dir, rows)
    metrics: dict[str, Any] = {}
    for model in config["models"]:
        found = [r for r in compared if r["model"] == model]
        keys = ("rmse", "best_rmse", "seconds", "nll", "speedup", "accuracy_ratio")
        metrics[model] = {
            key: float(np.mean([r[key] for r in found])) for key in keys if key in found[0]
        }
    return metrics


def _plot(run_dir: RunDirectory, rows: list[dict[str, Any]]) -> None:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    figure = Figure(figsize=(6.0, 4.0))
    axis = figure.subplots()
    for index, model in enumerate(MODELS):
        found = [r for r in rows if r["model"] == model]
        for number, row in enumerate(found):
            label = model if number == 0 else None
            if model == "sgpr":
                axis.scatter([row["seconds"]], [row["rmse"]], color="C0", zorder=3, label=label)
            else:
                curve = np.asarray(row["curve"])  # [evaluations, 3]: seconds, RMSE, step
                axis.plot(curve[:, 0], curve[:, 1], color=f"C{index}", lw=1, label=label)
    axis.set_xscale("log")
    axis.set_xlabel("training CPU seconds")
    axis.set_ylabel("test RMSE (standardised)")
    axis.legend(fontsize=8)
    axis.set_title("seed 001 ch. 3 on flights (one line or point per split)", fontsize=9)
    run_dir.save_figure("figure_3.png", figure)


__all__ = [
    "CONVERGED",
    "FULL",
    "MODELS",
    "QUICK",
    "compare",
    "plateau_callback",
    "run_vish_flights",
]
