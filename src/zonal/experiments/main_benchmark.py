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
import sys
from collections.abc import Mapping
from typing import Any

from zonal.experiments._main_benchmark_data import (
    SYNTHETIC,
    first_line,
    load_data,
    synthetic_regression,
)
from zonal.experiments._main_benchmark_figure import FIGURE_FILE, plot_traces
from zonal.experiments._main_benchmark_models import (
    MODEL_LABELS,
    MODELS,
    SEED_COUNTERPART,
    fit_and_score,
)
from zonal.experiments._main_benchmark_tables import (
    format_table,
    metric_key,
    summarise,
    summary_metrics,
    target_cell,
    verdicts,
)
from zonal.experiments.errors import ExperimentError
from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory
from zonal.experiments.uci_dgp import TABLE_1

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
RESULTS_FILE = "results.csv"
TRACES_FILE = "traces.csv"
SUMMARY_FILE = "summary.csv"
TABLE_FILE = "summary.md"
RESULT_COLUMNS = ("dataset", "split", "model", "num_inducing", "steps", "num_train", "num_test",
                  "mse", "tll", "seconds", "target_mse", "seconds_to_target")  # fmt: skip
TRACE_COLUMNS = ("dataset", "split", "model", "stage", "step", "seconds", "test_mse")
SUMMARY_COLUMNS = ("dataset", "model", "num_inducing", "steps", "splits", "mse", "mse_std", "tll",
                   "tll_std", "seconds", "seconds_std", "target_mse", "reached",
                   "seconds_to_target", "seconds_to_target_std", "seed_model", "seed_mse",
                   "seed_mse_std", "seed_tll", "seed_tll_std")  # fmt: skip


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
                raise ExperimentError(f"{first_line(error)} (or {SYNTHETIC!r})") from error
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


@register_experiment(
    "main-benchmark",
    validate=_check_config,
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
            loaded = {dataset: load_data(dataset, config)}
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
    return summary_metrics(summary, config, threads)


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


__all__ = [
    "FIGURE_FILE",
    "FULL",
    "MODELS",
    "MODEL_LABELS",
    "QUICK",
    "RESULTS_FILE",
    "RESULT_COLUMNS",
    "SEED_COUNTERPART",
    "SEED_DATASETS",
    "SEED_SOURCE",
    "SUMMARY_COLUMNS",
    "SUMMARY_FILE",
    "TABLE_FILE",
    "TRACES_FILE",
    "TRACE_COLUMNS",
    "fit_and_score",
    "metric_key",
    "plot_traces",
    "run_main_benchmark",
    "summarise",
    "synthetic_regression",
    "target_cell",
    "verdicts",
]
