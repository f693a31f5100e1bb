"""Training curves and the fixed rule that calls a run converged.

A converged protocol (``--protocol converged``) must show its training curve flattening. Every fit of
such a run keeps its loss curve thinned to ``curve_points`` points and is judged by one rule fixed
before any run: the mean loss over the last tenth of the steps may be at most ``tolerance`` below
the mean over the tenth before it,

    plateau_drop = mean(loss[-n/10:]) - mean(loss[-2n/10:-n/10])   (negative: still falling),
    converged    = plateau_drop >= -tolerance,

with the loss per training point (e.g. the negative ELBO divided by N), so ``tolerance`` is in nats
per point. The rule reads the curve only; it never looks at test metrics.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

PLATEAU_TOLERANCE = 0.005
"""Nats per point the loss may still fall over the last tenth of training for a converged fit."""


#: fewest steps the rule judges (shorter curves have a plateau drop of 0 by definition)
MIN_PLATEAU_STEPS = 20


def plateau_drop(losses: Sequence[float]) -> float:
    """mean(last tenth) - mean(the tenth before); 0 for curves shorter than 20 steps."""
    if len(losses) < MIN_PLATEAU_STEPS:
        return 0.0
    window = len(losses) // 10
    last = statistics.fmean(losses[-window:])
    before = statistics.fmean(losses[-2 * window : -window])
    return last - before


def is_converged(losses: Sequence[float], tolerance: float = PLATEAU_TOLERANCE) -> bool:
    """Whether the curve has flattened: ``plateau_drop(losses) >= -tolerance``."""
    return plateau_drop(losses) >= -tolerance


def thin_curve(losses: Sequence[float], points: int) -> list[tuple[int, float]]:
    """(step, mean loss of the steps since the previous point) at ``points`` evenly spaced steps
    (all steps when there are fewer), so that a curve of any length plots and saves small."""
    if not losses:
        return []
    stride = max(1, len(losses) // max(1, points))
    curve = []
    for end in range(stride, len(losses) + 1, stride):
        curve.append((end, statistics.fmean(losses[end - stride : end])))
    if curve[-1][0] != len(losses):
        curve.append((len(losses), statistics.fmean(losses[curve[-1][0] :])))
    return curve


def curve_summary(losses: Sequence[float], tolerance: float = PLATEAU_TOLERANCE) -> dict[str, Any]:
    """The convergence columns of one fit: steps, plateau drop and the verdict of the rule."""
    return {
        "steps_run": len(losses),
        "plateau_drop": plateau_drop(losses),
        "converged": is_converged(losses, tolerance),
    }


class StopAtPlateau:
    """A step callback (``callback(step, loss)``) that ends training by raising ``StopTraining``
    at the first epoch end, after at least ``min_epochs`` epochs and ``MIN_PLATEAU_STEPS`` steps
    (the rule needs two windows of two steps), where the rule above calls the losses so far
    converged: the same rule that judges a fit, used as its stopping rule."""

    def __init__(
        self, steps_per_epoch: int, min_epochs: int = 2, tolerance: float = PLATEAU_TOLERANCE
    ) -> None:
        if steps_per_epoch < 1 or min_epochs < 1:
            raise ValueError(
                f"steps_per_epoch and min_epochs must be >= 1, got {steps_per_epoch}, {min_epochs}"
            )
        self.steps_per_epoch = steps_per_epoch
        self.min_epochs = min_epochs
        self.tolerance = tolerance
        self.losses: list[float] = []

    def __call__(self, step: int, loss: float) -> None:
        from zonal.models.training import StopTraining

        self.losses.append(loss)
        epochs, rest = divmod(len(self.losses), self.steps_per_epoch)
        if (
            rest == 0
            and epochs >= self.min_epochs
            and len(self.losses) >= MIN_PLATEAU_STEPS
            and is_converged(self.losses, self.tolerance)
        ):
            raise StopTraining("the loss is on its plateau")


def without_curve(row: dict[str, Any]) -> dict[str, Any]:
    """A result row without its saved curve (for the one-row-per-fit table)."""
    return {key: value for key, value in row.items() if key != "curve"}


def curve_rows(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """Long-format training curves: one row per (fit, saved step), the fit named by ``keys``."""
    return [
        {**{key: row[key] for key in keys}, "step": step, "loss": loss}
        for row in rows
        for step, loss in row.get("curve", [])
    ]


def plot_curves(axis: Any, curves: Sequence[tuple[str, Sequence[tuple[int, float]]]]) -> None:
    """Loss against step for each (label, thinned curve) on a matplotlib ``axis``."""
    for label, curve in curves:
        if curve:
            steps, values = zip(*curve, strict=True)
            axis.plot(steps, values, linewidth=0.8, label=label)
    axis.set_xlabel("step")
    axis.set_ylabel("training loss per point")


def save_curve_panels(
    run_dir: Any,
    rows: Sequence[dict[str, Any]],
    panel_keys: Sequence[str],
    label: Callable[[dict[str, Any]], str],
    *,
    symlog: bool = False,
) -> None:
    """``training_curves.png`` in ``run_dir`` (a ``RunDirectory``): the saved curves of ``rows``,
    one panel per value of ``panel_keys`` (titled by it), each curve named by ``label(row)``;
    nothing without matplotlib or curves."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    panels = sorted({tuple(r[key] for key in panel_keys) for r in rows if r.get("curve")})
    if not panels:
        return
    figure = Figure(figsize=(3.2 * len(panels), 3.0))
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for axis, panel in zip(axes, panels, strict=True):
        found = [r for r in rows if tuple(r[key] for key in panel_keys) == panel]
        plot_curves(axis, [(label(r), r.get("curve", [])) for r in found])
        axis.set_title(
            ", ".join(f"{key} {value}" for key, value in zip(panel_keys, panel, strict=True)),
            fontsize=8,
        )
        if symlog:
            axis.set_yscale("symlog", linthresh=0.1)
    axes[0].legend(frameon=False, fontsize=5)
    run_dir.save_figure("training_curves.png", figure)


__all__ = [
    "PLATEAU_TOLERANCE",
    "StopAtPlateau",
    "curve_rows",
    "curve_summary",
    "is_converged",
    "plateau_drop",
    "plot_curves",
    "save_curve_panels",
    "thin_curve",
    "without_curve",
]
