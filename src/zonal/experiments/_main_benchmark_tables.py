"""The tables of the main benchmark (``zonal.experiments.main_benchmark``): the summary over splits
beside seed 000 table 1, its markdown table with the per-dataset verdicts, and ``metrics.json``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from zonal.experiments._main_benchmark_models import MODEL_LABELS, SEED_COUNTERPART
from zonal.experiments.uci_dgp import TABLE_1

#: what metrics.json holds per dataset and model
METRIC_KEYS = ("mse", "mse_std", "tll", "tll_std", "seconds", "reached", "seconds_to_target")


def metric_key(model: str) -> str:
    """The model's name in ``metrics.json`` (``"gpytorch-svgp"`` -> ``"gpytorch_svgp"``)."""
    return model.replace("-", "_")


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


def summary_metrics(
    summary: Sequence[Mapping[str, Any]], config: Mapping[str, Any], threads: int
) -> dict[str, Any]:
    """``metrics.json``: the ``METRIC_KEYS`` of every dataset and model, the targets and the
    number of threads."""
    metrics: dict[str, Any] = {}
    for entry in summary:
        metrics.setdefault(entry["dataset"], {})[metric_key(entry["model"])] = {
            key: entry[key] for key in METRIC_KEYS
        }
    metrics["target_mse"] = {name: config["target_mse"][name] for name in config["datasets"]}
    metrics["threads"] = threads
    return metrics
