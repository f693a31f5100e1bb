"""The figure of the main benchmark (``zonal.experiments.main_benchmark``): test MSE against
training seconds beside the target and seed 000 table 1."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from zonal.experiments._main_benchmark_models import MODEL_LABELS, SEED_COUNTERPART
from zonal.experiments.uci_dgp import TABLE_1

if TYPE_CHECKING:
    from zonal.experiments.run_directory import RunDirectory

FIGURE_FILE = "main_benchmark.png"


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
