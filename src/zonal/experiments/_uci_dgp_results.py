"""The ``uci-dgp`` experiment's tables and figure: mean and spread over splits beside seed 000
table 1, the time each traced model takes to a common test MSE (fig. 6 as numbers), and the traces
of test MSE against training time (fig. 6)."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from zonal.experiments._uci_dgp_presets import TABLE_1

if TYPE_CHECKING:
    from zonal.experiments.run_directory import RunDirectory


def _spread(values: list[float]) -> float:
    """Sample standard deviation (0 for a single value)."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(rows: list[dict[str, Any]], config: dict[str, Any]) -> list[dict[str, Any]]:
    """Mean and std over splits per (dataset, model), with table 1's numbers beside them."""
    summary = []
    for dataset in config["datasets"]:
        for model in config["models"]:
            found = [r for r in rows if r["dataset"] == dataset and r["model"] == model]
            if not found:
                continue
            entry: dict[str, Any] = {"dataset": dataset, "model": model, "splits": len(found)}
            for metric in ("mse", "tll"):
                values = [r[metric] for r in found]
                entry[metric] = statistics.fmean(values)
                entry[f"{metric}_std"] = _spread(values)
                paper = TABLE_1.get(dataset, {}).get(metric, {}).get(model)
                entry[f"paper_{metric}"] = paper[0] if paper else None
                entry[f"paper_{metric}_std"] = paper[1] if paper else None
            if "network_mse" in found[0]:
                entry["network_mse"] = statistics.fmean(r["network_mse"] for r in found)
            entry["train_seconds"] = statistics.fmean(r["train_seconds"] for r in found)
            summary.append(entry)
    return summary


def table_markdown(summary: list[dict[str, Any]]) -> str:
    """``table1.md``: ours ``mean (std)`` beside the paper's, per dataset and model."""

    def cell(mean: float | None, std: float | None) -> str:
        return "—" if mean is None else f"{mean:.3f} ({std:.3f})"

    lines = [
        "| dataset | model | MSE ours | MSE paper | TLL ours | TLL paper | network MSE | train s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for e in summary:
        network = e.get("network_mse")
        lines.append(
            f"| {e['dataset']} | {e['model']} | {cell(e['mse'], e['mse_std'])} | "
            f"{cell(e['paper_mse'], e['paper_mse_std'])} | {cell(e['tll'], e['tll_std'])} | "
            f"{cell(e['paper_tll'], e['paper_tll_std'])} | "
            f"{'—' if network is None else f'{network:.3f}'} | {e['train_seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def time_to_common_target(traces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Seed 000 fig. 6 as numbers: per (dataset, split), the test MSE every traced model reaches
    by the end of its training (the largest of their last traced MSEs) and each model's training
    seconds to first reach it (``_dgp_common.seconds_to_target``), beside its whole training time.
    Splits missing a traced model's trace are left out."""
    from zonal.experiments._dgp_common import seconds_to_target

    grouped: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = {}
    for point in traces:
        models = grouped.setdefault((point["dataset"], point["split"]), {})
        models.setdefault(point["model"], []).append(point)
    rows = []
    for (dataset, split), models in grouped.items():
        if len(models) < 2:
            continue
        target = max(trace[-1]["test_mse"] for trace in models.values())
        for model, trace in models.items():
            rows.append(
                {
                    "dataset": dataset,
                    "split": split,
                    "model": model,
                    "target_mse": target,
                    "seconds_to_target": seconds_to_target(trace, target),
                    "trained_seconds": trace[-1]["seconds"],
                }
            )
    return rows


def plot_traces(
    run_dir: RunDirectory, traces: list[dict[str, Any]], config: dict[str, Any]
) -> None:
    """``traces.png``: test MSE against training seconds, one panel per dataset (seed 000 fig. 6).

    One line per (model, split); the ADGP's network stage is dashed, its ELBO stage solid; dotted
    horizontal lines are table 1's final MSE of the same models.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    datasets = [d for d in config["datasets"] if any(t["dataset"] == d for t in traces)]
    models = [m for m in config["trace_models"] if any(t["model"] == m for t in traces)]
    figure = Figure(figsize=(4.2 * len(datasets), 3.4))
    axes = figure.subplots(1, len(datasets), squeeze=False)[0]
    for axis, dataset in zip(axes, datasets, strict=True):
        for colour, model in enumerate(models):
            for split in range(config["num_splits"]):
                for stage, style in (("network", "--"), ("elbo", "-")):
                    points = [
                        t
                        for t in traces
                        if (t["dataset"], t["model"], t["split"], t["stage"])
                        == (dataset, model, split, stage)
                    ]
                    if not points:
                        continue
                    axis.plot(
                        [max(p["seconds"], 1e-2) for p in points],
                        [p["test_mse"] for p in points],
                        style,
                        color=f"C{colour}",
                        alpha=0.8,
                        label=f"{model} ({stage})" if split == 0 else None,
                    )
            paper = TABLE_1.get(dataset, {}).get("mse", {}).get(model)
            if paper is not None:
                axis.axhline(paper[0], color=f"C{colour}", linestyle=":", linewidth=1)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("training wall time (s)")
        axis.set_title(dataset)
    axes[0].set_ylabel("test MSE (standardised)")
    axes[0].legend(frameon=False, fontsize=7)
    figure.suptitle("dotted: seed 000 table 1 final MSE", fontsize=8)
    run_dir.save_figure("traces.png", figure)
