"""Figures of the dataset-shift experiments (``zonal.experiments.dataset_shift``): each metric
against the shift level per model, and reliability diagrams."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zonal.experiments.run_directory import RunDirectory

LABELS = {"accuracy": "accuracy", "tll": "test log likelihood", "ece": "ECE (15 bins)",
          "entropy": "predictive entropy (nats)"}  # fmt: skip


def plot_shift_figures(
    run_dir: RunDirectory, rows: list[dict[str, Any]], bins: list[dict[str, Any]]
) -> None:
    """One figure per (dataset, shift family): the four metrics against the level, one line per
    model with standard-error bars; one reliability figure per dataset."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    from zonal.experiments.dataset_shift import METRICS, MODELS, mean_and_error

    for dataset, shift in sorted({(r["dataset"], r["shift"]) for r in rows}):
        subset = [r for r in rows if (r["dataset"], r["shift"]) == (dataset, shift)]
        figure = Figure(figsize=(13, 3.0), layout="constrained")
        axes = figure.subplots(1, len(METRICS))
        for axis, metric in zip(axes, METRICS, strict=True):
            for model in [m for m in MODELS if any(r["model"] == m for r in subset)]:
                levels = sorted({r["level"] for r in subset if r["model"] == model})
                means, errors = [], []
                for level in levels:
                    values = [
                        r[metric] for r in subset if (r["model"], r["level"]) == (model, level)
                    ]
                    mean, error = mean_and_error(values)
                    means.append(mean)
                    errors.append(0.0 if math.isnan(error) else error)
                axis.errorbar(levels, means, yerr=errors, marker="o", markersize=3, label=model)
            axis.set_xlabel("angle (degrees)" if shift == "rotation" else f"{shift} intensity")
            axis.set_ylabel(LABELS[metric])
        axes[0].legend(frameon=False, fontsize=7)
        figure.suptitle(f"{dataset}: {shift}", fontsize=9)
        run_dir.save_figure(f"shift_{dataset}_{shift}.png", figure)
    for dataset in sorted({b["dataset"] for b in bins}):
        subset = [b for b in bins if b["dataset"] == dataset]
        panels = sorted({(b["shift"], b["level"]) for b in subset})
        figure = Figure(figsize=(3.2 * len(panels), 3.2))
        axes = figure.subplots(1, len(panels), squeeze=False)[0]
        for axis, (shift, level) in zip(axes, panels, strict=True):
            for model in [m for m in MODELS if any(b["model"] == m for b in subset)]:
                cell = [
                    b
                    for b in subset
                    if (b["model"], b["shift"], b["level"]) == (model, shift, level)
                ]
                filled = [b for b in cell if b["count"] > 0]
                axis.plot([b["confidence"] for b in filled], [b["accuracy"] for b in filled],
                          marker="o", markersize=3, label=model)  # fmt: skip
            axis.plot([0, 1], [0, 1], color="grey", linestyle=":")
            axis.set_title(f"{shift} {level:g}", fontsize=8)
            axis.set_xlabel("confidence")
        axes[0].set_ylabel("accuracy")
        axes[0].legend(frameon=False, fontsize=7)
        figure.suptitle(f"{dataset}: reliability (first repeat)", fontsize=9)
        run_dir.save_figure(f"reliability_{dataset}.png", figure)
