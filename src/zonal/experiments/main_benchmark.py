"""Main benchmark (``zonal demo``): seed 000's point on real data, the activated deep GP against
GPyTorch's SVGP and deep GP, in test accuracy and in the training time to a common target accuracy.

On each dataset (quick: yacht and concrete, three random 90/10 splits, the splits of ``uci-dgp``
and of seed 000 sec. 5.2; inputs and target standardised with the training rows' statistics) four
models are trained on the same data, one process, the same threads:

- ``adgp``: zonal's activated DGP with 3 layers (ADGP-3, seed 000 sec. 5): Softplus activated
  features (N-tilde = 10) and first-order arc-cosine kernels in every layer, hidden layers of width
  5, M inducing variables per layer. Two-stage recipe (seed 000 sec. 5, seed 001 ch. 4): its
  posterior mean is a network, trained first by MSE; copied into the DGP, everything is then
  trained by the ELBO (the ``uci-dgp`` experiment's ``fit_model``).
- ``dgp``: zonal's DGP with 3 layers and inducing points in the lifted space [h, b], the same
  arc-cosine kernels, width and M (DGP-3), trained by the ELBO from the start.
- ``gpytorch-svgp``: GPyTorch's standard SVGP with learned inducing points and an RBF kernel with
  one lengthscale per input (ARD), a constant mean (``_baselines.InducingPointSVGP``).
- ``gpytorch-dgp``: GPyTorch's own ``DeepGP`` of the same depth, width and M with RBF-ARD kernels
  in every layer (``_baselines.GPyTorchDeepGP``), started as zonal's DGP-3 starts and trained by
  the same loop.

All four are trained by Adam on the minibatch ELBO (the ADGP's first stage by MSE) with the seed's
schedule: the learning rate cut by ``plateau_factor`` whenever the epoch loss stops improving for
``plateau_patience`` epochs. The deep models use the seed's learning rate 0.01 and minibatches of
1024 (a full batch on these datasets) with one sample propagated per step; the SVGP keeps the
settings of the baseline the previous main job used (learning rate 0.05, minibatches of 256). The
two DGPs take the same number of ELBO steps; the ADGP takes its network steps plus its ELBO steps.

Metrics per model and split, on the standardised scale as in seed 000 table 1: test MSE of the
predictive mean, test log likelihood (TLL, log p(y | x) per point; the Monte Carlo mixture over
``eval_samples`` draws for the deep models), training seconds, and the seconds each needed to reach
the dataset's target test MSE (``target_mse``; by default seed 000 table 1's DGP-3 MSE, the accuracy
the paper reports for a converged three-layer DGP). The test MSE is evaluated every ``trace_every``
steps off the training clock, and a model is credited with the training seconds of the first
evaluation at or below the target. The deep models' evaluations mix ``trace_samples`` inner draws
from their fixed ``posterior_seed``; with ``trace_samples`` equal to ``eval_samples`` (the presets)
the last evaluation is the final test MSE, so a model whose final MSE meets the target has reached
it. During the ADGP's first stage the trace is the network's test MSE: that network *is*
the ADGP's posterior mean once copied (a copy of a few milliseconds, on the clock).

The table gives mean ± std over the splits beside seed 000 table 1's ADGP-3 and DGP-3 (5 splits,
M = 512, many more steps), then, per dataset, which model is most accurate, which has the best TLL
and which reaches the target first, whoever it is. ``--full`` runs 5 splits on the five table-1
datasets obtainable here with M = 128 per layer and more steps. One tiny fit per model comes first
so that the timings leave out one-off costs. Every finished fit is checkpointed (with its trace),
so an interrupted run resumes where it stopped, with the same metrics (the times excepted).
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from zonal.experiments.errors import ExperimentError
from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory
from zonal.experiments.uci_dgp import TABLE_1

if TYPE_CHECKING:
    import torch

    #: (x_train [N, D], y_train [N], x_test [T, D], y_test [T])
    Split = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]

#: depth of the deep models (seed 000 table 1's three-layer models)
NUM_LAYERS = 3
MODELS = ("adgp", "dgp", "gpytorch-svgp", "gpytorch-dgp")
MODEL_LABELS = {
    "adgp": f"zonal ADGP-{NUM_LAYERS} (activated; network, then ELBO)",
    "dgp": f"zonal DGP-{NUM_LAYERS} (inducing points, arc-cosine)",
    "gpytorch-svgp": "GPyTorch SVGP (inducing points, RBF-ARD)",
    "gpytorch-dgp": f"GPyTorch DeepGP-{NUM_LAYERS} (inducing points, RBF-ARD)",
}
#: our models that stand for a model of seed 000 table 1
SEED_COUNTERPART = {"adgp": f"ADGP-{NUM_LAYERS}", "dgp": f"DGP-{NUM_LAYERS}"}
SEED_SOURCE = "seed 000 table 1"
SEED_DATASETS = ("yacht", "boston", "concrete", "power", "protein")
"""Table 1's datasets whose data this project can load."""
QUICK: dict[str, Any] = {
    "seed": 0,
    "datasets": ["yacht", "concrete"],  # or "synthetic" (made up, no download: for tests)
    "num_splits": 3,
    "test_fraction": 0.1,
    "max_rows": 0,  # > 0: a random subset of this many rows of each dataset (for tests)
    "models": list(MODELS),
    # seed 000 table 1's DGP-3 test MSE per dataset
    "target_mse": {name: TABLE_1[name]["mse"]["DGP-3"][0] for name in SEED_DATASETS},
    # the deep models (uci-dgp's settings)
    "num_inducing": 64,  # M per layer
    "hidden_width": 5,
    "truncation_level": 10,  # N-tilde
    "mean": "constant",
    "batch_size": 1024,
    "learning_rate": 0.01,
    "plateau_factor": 0.9,
    "plateau_patience": 10,  # epochs
    "network_steps": 400,  # ADGP stage 1 (MSE)
    "elbo_steps": 100,  # ADGP stage 2 (ELBO)
    "dgp_steps": 300,  # zonal's and GPyTorch's DGP (ELBO only)
    "train_samples": 1,
    "eval_samples": 32,
    "adgp_kernel_variance": 0.001,
    "adgp_initial_scale": 0.01,
    "dgp_inner_scale": 0.01,
    # GPyTorch's SVGP
    "svgp_num_inducing": 128,
    "svgp_steps": 1000,
    "svgp_batch_size": 256,
    "svgp_learning_rate": 0.05,
    # test-MSE evaluations for the traces and the time to the target
    "trace_every": 25,
    "trace_samples": 32,  # as eval_samples: the last evaluation is the final MSE
}
FULL: dict[str, Any] = {
    "datasets": list(SEED_DATASETS),
    "num_splits": 5,
    "num_inducing": 128,
    "network_steps": 2000,
    "elbo_steps": 1000,
    "dgp_steps": 3000,
    "svgp_num_inducing": 512,
    "svgp_steps": 5000,
    "svgp_batch_size": 1024,
    "eval_samples": 100,
    "trace_every": 100,
    "trace_samples": 100,
}
SYNTHETIC = "synthetic"
RESULTS_FILE = "results.csv"
TRACES_FILE = "traces.csv"
SUMMARY_FILE = "summary.csv"
TABLE_FILE = "summary.md"
FIGURE_FILE = "main_benchmark.png"
RESULT_COLUMNS = ("dataset", "split", "model", "num_inducing", "steps", "num_train", "num_test",
                  "mse", "tll", "seconds", "target_mse", "seconds_to_target")  # fmt: skip
TRACE_COLUMNS = ("dataset", "split", "model", "stage", "step", "seconds", "test_mse")
SUMMARY_COLUMNS = ("dataset", "model", "num_inducing", "steps", "splits", "mse", "mse_std", "tll",
                   "tll_std", "seconds", "seconds_std", "target_mse", "reached",
                   "seconds_to_target", "seconds_to_target_std", "seed_model", "seed_mse",
                   "seed_mse_std", "seed_tll", "seed_tll_std")  # fmt: skip


#: what metrics.json holds per dataset and model
METRIC_KEYS = ("mse", "mse_std", "tll", "tll_std", "seconds", "reached", "seconds_to_target")


def metric_key(model: str) -> str:
    """The model's name in ``metrics.json`` (``"gpytorch-svgp"`` -> ``"gpytorch_svgp"``)."""
    return model.replace("-", "_")


def _paper_reference() -> dict[str, dict[str, float]]:
    """Seed 000 table 1's ADGP-3 and DGP-3 under the metric names of our counterparts."""
    reference: dict[str, dict[str, float]] = {}
    for model, seed_model in SEED_COUNTERPART.items():
        values = reference.setdefault(f"{SEED_SOURCE} {seed_model}", {})
        for dataset in SEED_DATASETS:
            for metric in ("mse", "tll"):
                values[f"{dataset}.{metric_key(model)}.{metric}"] = TABLE_1[dataset][metric][
                    seed_model
                ][0]
    return reference


@register_experiment(
    "main-benchmark",
    summary="UCI regression: zonal's activated DGP (ADGP-3, network then ELBO) and DGP-3 against "
    "GPyTorch's SVGP (RBF-ARD) and DeepGP-3 on the same splits: test MSE, TLL, training seconds "
    "and seconds to a target test MSE, beside seed 000 table 1",
    quick=QUICK,
    full=FULL,
    paper=_paper_reference(),
    headline=(
        "yacht.adgp.mse",
        "yacht.gpytorch_svgp.mse",
        "concrete.adgp.mse",
        "concrete.gpytorch_svgp.mse",
    ),
)
def run_main_benchmark(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Fit every model on every split of every dataset (checkpointing after each); write the
    tables, the traces and the figure."""
    import torch
    from tqdm.auto import tqdm

    from zonal.experiments._dgp_common import seconds_to_target
    from zonal.experiments.uci_dgp import split_data, unit_seed

    _check_config(config)
    state = run_dir.load_checkpoint() or {}
    rows: list[dict[str, Any]] = list(state.get("rows", []))
    traces: list[dict[str, Any]] = list(state.get("traces", []))
    done = {(row["dataset"], row["split"], row["model"]) for row in rows}
    units = [(dataset, split, model) for dataset in config["datasets"]
             for split in range(config["num_splits"]) for model in config["models"]]  # fmt: skip
    pending = [unit for unit in units if unit not in done]
    if pending:
        _warm_up(config)
    loaded: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    progress = run_dir.progress(pending, total=len(units), initial=len(units) - len(pending),
                                unit="fit")  # fmt: skip
    for dataset, split, model in progress:
        if dataset not in loaded:
            loaded = {dataset: _load(dataset, config)}
        data = split_data(*loaded[dataset], split, config)
        trace: list[dict[str, Any]] = []
        seed = unit_seed(config, dataset, split, model)
        row = fit_and_score(model, data, config, seed, trace)
        target = float(config["target_mse"][dataset])
        row.update(target_mse=target, seconds_to_target=seconds_to_target(trace, target))
        key = {"dataset": dataset, "split": split, "model": model}
        rows.append({**key, **row})
        traces.extend({**key, **point} for point in trace)
        run_dir.save_checkpoint({"rows": rows, "traces": traces})
        tqdm.write(_progress_line(rows[-1], config), file=sys.stderr)  # above the bar
    summary = summarise(rows, config)
    threads = torch.get_num_threads()
    run_dir.save_table(RESULTS_FILE, rows, RESULT_COLUMNS)
    run_dir.save_table(TRACES_FILE, traces, TRACE_COLUMNS)
    run_dir.save_table(SUMMARY_FILE, summary, SUMMARY_COLUMNS)
    run_dir.save_text(TABLE_FILE, format_table(summary, config, threads=threads))
    plot_traces(run_dir, traces, config)
    return _metrics(summary, config, threads)


def _progress_line(row: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    reached = row["seconds_to_target"]
    target = (
        f"MSE <= {row['target_mse']:g} after {reached:.1f} s"
        if reached is not None
        else f"never MSE <= {row['target_mse']:g}"
    )
    return (
        f"main-benchmark: {row['dataset']} split {row['split'] + 1}/{config['num_splits']} "
        f"{MODEL_LABELS[row['model']]}: MSE {row['mse']:.4f}, TLL {row['tll']:.3f}, "
        f"{row['seconds']:.1f} s, {target}"
    )


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
        if name != SYNTHETIC:
            try:
                spec = get_spec(name)
            except (KeyError, ValueError) as error:
                raise ExperimentError(f"{_first_line(error)} (or {SYNTHETIC!r})") from error
            if spec.task != "regression":
                raise ExperimentError(f"dataset {name!r} is not a regression dataset")
        target = config["target_mse"].get(name)
        if (
            isinstance(target, bool)
            or not isinstance(target, int | float)
            or not (0 < target < math.inf)
        ):
            raise ExperimentError(
                f"target_mse needs a positive number for dataset {name!r}, got {target!r} "
                f"(target_mse = {dict(config['target_mse'])})"
            )


# ------------------------------------------------------------------------------------ data


def synthetic_regression(num_rows: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """x ~ N(0, I_3), y = sin(2 x_0) x_1 + 0.5 x_2 + 0.1 noise: a stand-in that needs no download."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_rows, 3))
    y = np.sin(2 * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] + 0.1 * rng.standard_normal(num_rows)
    return x, y


def _load(name: str, config: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """(X [N, D], y [N]) float64 tensors of a registered regression dataset or ``"synthetic"``,
    maybe subsampled to ``max_rows`` rows."""
    import torch

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
    return torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)


def _first_line(error: BaseException) -> str:
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    return (text.strip().splitlines() or [""])[0]


# ------------------------------------------------------------------------------------ models


def fit_and_score(
    model: str,
    data: tuple[Any, Any, Any, Any],
    config: Mapping[str, Any],
    seed: int,
    trace: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Train ``model`` on standardised (x_train [N, D], y_train [N], x_test [T, D], y_test [T])
    under ``seed``; its test MSE and TLL (through the model contract), training seconds and
    steps. Test-MSE evaluations ``{stage, step, seconds, test_mse}`` are appended to ``trace``
    (None: no evaluations during training)."""
    x_train, _, x_test, _ = data
    if model in SEED_COUNTERPART:
        from zonal.experiments.uci_dgp import fit_model

        row = fit_model(SEED_COUNTERPART[model], data, dict(config), seed, trace)
        scored = {"mse": row["mse"], "tll": row["tll"], "seconds": row["train_seconds"],
                  "steps": row["steps"], "num_inducing": config["num_inducing"]}  # fmt: skip
    elif model == "gpytorch-dgp":
        scored = _fit_gpytorch_dgp(data, config, seed, trace)
    else:
        scored = _fit_gpytorch_svgp(data, config, seed, trace)
    return {"num_train": len(x_train), "num_test": len(x_test), **scored}


def _fit_gpytorch_dgp(
    data: Split, config: Mapping[str, Any], seed: int, trace: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """GPyTorch's DeepGP, started as zonal's DGP-3 and trained by the same ELBO loop."""
    import torch

    from zonal.experiments._baselines import gpytorch_deep_gp
    from zonal.experiments._dgp_common import (
        Schedule,
        Stopwatch,
        predictive_mse,
        regression_metrics,
        train_elbo,
    )
    from zonal.experiments.uci_dgp import trace_options

    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)  # the layers' samples use the global stream
    generator = torch.Generator().manual_seed(seed)
    model = gpytorch_deep_gp(x_train, NUM_LAYERS, hidden_width=config["hidden_width"],
                             num_inducing=config["num_inducing"], seed=seed,
                             inner_scale=config["dgp_inner_scale"])  # fmt: skip
    clock = Stopwatch()  # training only, as for zonal's models (uci-dgp's fit_model)
    evaluate = lambda: predictive_mse(model, x_test, y_test, config["trace_samples"])  # noqa: E731
    train_elbo(model, x_train, y_train, config["dgp_steps"], Schedule.from_config(dict(config)),
               generator, num_samples=config["train_samples"], clock=clock,
               **trace_options(trace, "elbo", evaluate, config["trace_every"]))  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        scores = regression_metrics(model, x_test, y_test, config["eval_samples"])
    return {**scores, "seconds": clock.seconds, "steps": config["dgp_steps"],
            "num_inducing": config["num_inducing"]}  # fmt: skip


def _fit_gpytorch_svgp(
    data: Split, config: Mapping[str, Any], seed: int, trace: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """GPyTorch's SVGP with RBF-ARD, inducing points at random training inputs, Adam on the
    minibatch ELBO with plateau cuts."""
    import torch

    from zonal.experiments._baselines import inducing_point_model
    from zonal.experiments._dgp_common import Schedule, Stopwatch, timed
    from zonal.experiments.uci_dgp import trace_options
    from zonal.models import fit_svgp

    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    size = min(config["svgp_num_inducing"], len(x_train))
    points = x_train[torch.randperm(len(x_train), generator=generator)[:size]]  # [M, D]
    model = inducing_point_model("rbf", points)
    clock = Stopwatch()
    schedule = Schedule(
        batch_size=config["svgp_batch_size"],
        learning_rate=config["svgp_learning_rate"],
        plateau_factor=config["plateau_factor"],
        plateau_patience=config["plateau_patience"],
    )

    def evaluate() -> float:
        try:
            mean, _ = model.predict(x_test)  # in eval mode, where GPyTorch caches Kzz's root
        finally:
            model.train()  # train mode again, which clears those caches before the next step
        return float(torch.mean((mean - y_test) ** 2))

    steps = config["svgp_steps"]
    options = schedule.options(generator)
    timed(
        lambda callback: fit_svgp(
            model, x_train, y_train, num_steps=steps, callback=callback, **options
        ),
        steps,
        clock=clock,
        **trace_options(trace, "elbo", evaluate, config["trace_every"]),
    )
    mean, _ = model.predict(x_test)
    tll = float(torch.mean(model.log_predictive_density(x_test, y_test)))
    return {"mse": float(torch.mean((mean - y_test) ** 2)), "tll": tll, "seconds": clock.seconds,
            "steps": steps, "num_inducing": size}  # fmt: skip


def _warm_up(config: Mapping[str, Any]) -> None:
    """A tiny fit of every model first, so that the timings leave out one-off costs (imports,
    first-touch allocations, kernels' compilation caches)."""
    import torch

    x, y = (torch.from_numpy(part) for part in synthetic_regression(48, seed=0))
    data = (x[:40], y[:40], x[40:], y[40:])
    tiny = {**config, "num_inducing": 4, "network_steps": 3, "elbo_steps": 3, "dgp_steps": 3,
            "svgp_num_inducing": 4, "svgp_steps": 3, "eval_samples": 2, "trace_samples": 2}  # fmt: skip
    for model in config["models"]:
        with torch.random.fork_rng(devices=[]):
            fit_and_score(model, data, tiny, seed=0, trace=None)


# ------------------------------------------------------------------------------------ tables


def _spread(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof 1; 0 for one value)."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(rows: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per (dataset, model): mean and sample std over the splits of MSE, TLL and training seconds;
    how many splits reached the target and the mean and std of their seconds to it (None when
    none did); seed 000 table 1's numbers for the counterpart model beside."""
    summary: list[dict[str, Any]] = []
    for dataset in config["datasets"]:
        for model in config["models"]:
            group = [row for row in rows if (row["dataset"], row["model"]) == (dataset, model)]
            if not group:
                continue
            entry: dict[str, Any] = {
                "dataset": dataset,
                "model": model,
                "num_inducing": "/".join(sorted({str(row["num_inducing"]) for row in group})),
                "steps": "/".join(sorted({str(row["steps"]) for row in group})),
                "splits": len(group),
            }
            for key in ("mse", "tll", "seconds"):
                values = [float(row[key]) for row in group]
                entry[key], entry[f"{key}_std"] = statistics.fmean(values), _spread(values)
            reached = [row["seconds_to_target"] for row in group
                       if row["seconds_to_target"] is not None]  # fmt: skip
            entry["target_mse"] = float(config["target_mse"][dataset])
            entry["reached"] = len(reached)
            entry["seconds_to_target"] = statistics.fmean(reached) if reached else None
            entry["seconds_to_target_std"] = _spread(reached) if reached else None
            seed_model = SEED_COUNTERPART.get(model)
            paper = TABLE_1.get(dataset)
            entry["seed_model"] = seed_model if seed_model and paper else None
            for metric in ("mse", "tll"):
                mean, std = paper[metric][seed_model] if seed_model and paper else (None, None)
                entry[f"seed_{metric}"], entry[f"seed_{metric}_std"] = mean, std
            summary.append(entry)
    return summary


def _pm(value: float | None, spread: float | None, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f} ± {(spread or 0.0):.{digits}f}"


def target_cell(entry: Mapping[str, Any]) -> str:
    """Seconds to the target: mean ± std over the splits that reached it, with how many did;
    "never" with the training seconds when none did."""
    splits, reached = entry["splits"], entry["reached"]
    if not reached:
        return f"never (0/{splits}; trained {entry['seconds']:.1f} s)"
    seconds = _pm(entry["seconds_to_target"], entry["seconds_to_target_std"], 1)
    return f"{seconds} ({reached}/{splits})"


def format_table(
    summary: Sequence[Mapping[str, Any]], config: Mapping[str, Any], *, threads: int
) -> str:
    """The markdown table (ours: mean ± std over splits; seed 000 table 1 beside), the protocol,
    then per dataset who is most accurate, best calibrated and first to the target."""
    header = ["dataset", "model", "M", "steps", "test MSE", "test TLL", "train s",
              "s to target MSE", "seed 000 MSE", "seed 000 TLL"]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for entry in summary:
        dataset = entry["dataset"]
        cells = [
            f"{dataset} (target {entry['target_mse']:g})",
            MODEL_LABELS[entry["model"]],
            str(entry["num_inducing"]),
            str(entry["steps"]),
            _pm(entry["mse"], entry["mse_std"], 4),
            _pm(entry["tll"], entry["tll_std"], 3),
            _pm(entry["seconds"], entry["seconds_std"], 1),
            target_cell(entry),
            _pm(entry["seed_mse"], entry["seed_mse_std"], 3),
            _pm(entry["seed_tll"], entry["seed_tll_std"], 3),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    note = (
        f"\nMean ± std over {config['num_splits']} random 90/10 split(s) (seed 000: 5 splits, "
        "M = 512, many more steps); MSE and TLL on the standardised scale; training seconds on "
        f"{threads} thread(s), test evaluations off the clock. M: inducing variables per layer. "
        "Steps: ADGP network + ELBO steps, the others ELBO steps. Target: the test MSE first "
        f"reached at an evaluation every {config['trace_every']} steps (mean over the splits "
        "that reached it; the ADGP's first stage counts through its network, which is its "
        "posterior mean)."
    )
    return "\n".join(lines) + "\n" + note + "\n\n" + "\n".join(verdicts(summary)) + "\n"


def verdicts(summary: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per dataset: the lowest mean test MSE, the highest mean TLL and the fastest to
    the target, each named whoever it is, with zonal's best where zonal is not first."""
    lines = []
    for dataset in dict.fromkeys(entry["dataset"] for entry in summary):
        group = [entry for entry in summary if entry["dataset"] == dataset]
        parts = [
            _best(group, "mse", min, "lowest test MSE", "{:.4f}"),
            _best(group, "tll", max, "highest TLL", "{:.3f}"),
        ]
        reached = [entry for entry in group if entry["reached"]]
        if reached:
            parts.append(_fastest(group, reached))
        else:
            parts.append("no model reached the target")
        lines.append(f"- {dataset}: " + "; ".join(parts) + ".")
    return lines


def _short(model: str) -> str:
    return MODEL_LABELS[model].split(" (")[0]


def _best(
    group: Sequence[Mapping[str, Any]],
    key: str,
    choose: Callable[..., Mapping[str, Any]],
    what: str,
    number: str,
) -> str:
    best = choose(group, key=lambda entry: entry[key])
    text = f"{what} {_short(best['model'])} ({number.format(best[key])})"
    if best["model"] not in SEED_COUNTERPART:
        ours = [entry for entry in group if entry["model"] in SEED_COUNTERPART]
        if ours:
            zonal = choose(ours, key=lambda entry: entry[key])
            name = _short(zonal["model"]).removeprefix("zonal ")
            text += f", zonal's best {name} {number.format(zonal[key])}"
    return text


def _fastest(group: Sequence[Mapping[str, Any]], reached: Sequence[Mapping[str, Any]]) -> str:
    """The first to the target (most splits reached, then fewest seconds), with the ratio of
    every other model's seconds to its own (a bound for those that never got there), marked
    "within the spread" when the two means are less than their standard deviations apart."""
    best = min(reached, key=lambda entry: (-entry["reached"], entry["seconds_to_target"]))
    others = []
    for entry in group:
        if entry is best:
            continue
        if entry["reached"]:
            ratio = f"{entry['seconds_to_target'] / best['seconds_to_target']:.1f}x"
            gap = abs(entry["seconds_to_target"] - best["seconds_to_target"])
            if gap < entry["seconds_to_target_std"] + best["seconds_to_target_std"]:
                ratio += " (within the spread)"
        else:
            ratio = f"never, > {entry['seconds'] / best['seconds_to_target']:.1f}x"
        others.append(f"{_short(entry['model'])} {ratio}")
    text = (
        f"first to the target {_short(best['model'])} ({best['seconds_to_target']:.1f} s, "
        f"{best['reached']}/{best['splits']} splits)"
    )
    return text + (f"; the others' seconds to it: {', '.join(others)}" if others else "")


def _metrics(
    summary: Sequence[Mapping[str, Any]], config: Mapping[str, Any], threads: int
) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for entry in summary:
        metrics.setdefault(entry["dataset"], {})[metric_key(entry["model"])] = {
            key: entry[key] for key in METRIC_KEYS
        }
    metrics["target_mse"] = {name: config["target_mse"][name] for name in config["datasets"]}
    metrics["threads"] = threads
    return metrics


# ------------------------------------------------------------------------------------ figure


def plot_traces(
    run_dir: RunDirectory, traces: Sequence[Mapping[str, Any]], config: Mapping[str, Any]
) -> None:
    """``main_benchmark.png``: test MSE against training seconds, one panel per dataset, one line
    per (model, split); the ADGP's network stage dashed; the target as a black dashed line and
    seed 000 table 1's ADGP-3 / DGP-3 MSE as dotted lines in their models' colours (a seed line
    equal to the target is the target line, whose legend entry says so); every line is in the
    legend."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    datasets = [name for name in config["datasets"] if any(t["dataset"] == name for t in traces)]
    if not datasets:
        return
    figure = Figure(figsize=(4.4 * len(datasets), 3.8))
    axes = figure.subplots(1, len(datasets), squeeze=False)[0]
    for axis, dataset in zip(axes, datasets, strict=True):
        target = config["target_mse"][dataset]
        target_label = "target test MSE"
        for colour, model in enumerate(config["models"]):
            for split in range(config["num_splits"]):
                unit = (dataset, model, split)
                points = [t for t in traces if (t["dataset"], t["model"], t["split"]) == unit]
                for stage, style in (("network", "--"), ("elbo", "-")):
                    staged = [t for t in points if t["stage"] == stage]
                    if not staged:
                        continue
                    label = MODEL_LABELS[model] if split == 0 and stage == "elbo" else None
                    seconds = [max(t["seconds"], 1e-2) for t in staged]  # log axis
                    mse = [t["test_mse"] for t in staged]
                    axis.plot(seconds, mse, style, color=f"C{colour}", alpha=0.75, label=label)
            seed_model = SEED_COUNTERPART.get(model)
            if seed_model and dataset in TABLE_1:
                seed_mse = TABLE_1[dataset]["mse"][seed_model][0]
                if seed_mse == target:  # the target line stands for it (and says so)
                    target_label += f" = seed 000 table 1 {seed_model} (full protocol)"
                else:
                    axis.axhline(seed_mse, color=f"C{colour}", linestyle=":", linewidth=1,
                                 label=f"seed 000 table 1 {seed_model} (full protocol)")  # fmt: skip
        axis.axhline(target, color="black", linestyle="--", linewidth=0.8, label=target_label)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("training seconds")
        axis.set_title(dataset)
    axes[0].set_ylabel("test MSE (standardised)")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    figure.subplots_adjust(bottom=0.3, wspace=0.25)
    figure.suptitle(
        f"main-benchmark: {config['num_splits']} split(s); ADGP network stage dashed; dotted: "
        "seed 000 table 1 (ADGP-3, DGP-3)",
        fontsize=9,
    )
    run_dir.save_figure(FIGURE_FILE, figure)
