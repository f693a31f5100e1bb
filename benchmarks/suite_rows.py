"""Per-row test records of the development suite (``fit_suite.py``) and what they allow.

A suite unit's mean scores (test MSE or accuracy, TLL) say nothing about how much they would move
with other test rows, and on the suite's small tables (17-73 test rows per split) that is most of
a ratio's spread. So every unit also keeps its per-row figures (``test_rows``):

* regression: the squared error (m_i - y_i)^2 and, where the method has a predictive variance,
  the log density log N(y_i | m_i, v_i) of each test row (standardised units);
* classification: whether the predicted class is right, and log p(y_i | x_i).

From them ``ratio_interval`` gives a paired bootstrap interval of a table's ratio zonal / svgp:
each draw resamples the test rows of every split with replacement, the *same* rows for both
methods (their errors on a row are correlated: a hard row is hard for both), and recomputes the
ratio of the split-averaged means (MSE for regression, log loss for classification), as
``fit_suite.table_means`` computes it. The interval is the draws' ``level`` central quantiles.

Figures are kept to ``SIGNIFICANT_DIGITS`` significant digits (the file of a whole suite stays a
few megabytes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from zonal.datasets import Standardizer
from zonal.tabular.diagnostics import FitDiagnostics

#: significant digits kept per row
SIGNIFICANT_DIGITS = 6
#: bootstrap draws of ``ratio_interval``, and its central level
BOOTSTRAP_DRAWS = 2000
INTERVAL_LEVEL = 0.9


def compact(values: np.ndarray) -> list[float]:
    """Values [n] as floats of ``SIGNIFICANT_DIGITS`` significant digits (JSON-ready)."""
    return [float(f"{value:.{SIGNIFICANT_DIGITS}g}") for value in np.asarray(values, np.float64)]


def regression_rows(mean: np.ndarray, variance: np.ndarray | None, y: np.ndarray) -> dict:
    """``{"squared_error": [n], "log_density": [n]}`` of predictive means and variances [n]
    against targets y [n] (no ``log_density`` without variances)."""
    rows: dict[str, list[float]] = {"squared_error": compact((mean - y) ** 2)}
    if variance is not None:
        log_density = -0.5 * (np.log(2 * math.pi * variance) + (y - mean) ** 2 / variance)
        rows["log_density"] = compact(log_density)
    return rows


def classification_rows(probabilities: np.ndarray, labels: np.ndarray) -> dict:
    """``{"correct": [n], "log_density": [n]}`` of class probabilities [n, C] against label
    indices [n] (the log density floored at log of the smallest float, as ``class_scores``)."""
    picked = probabilities[np.arange(len(labels)), labels]  # [n]
    return {
        "correct": [float(value) for value in probabilities.argmax(-1) == labels],
        "log_density": compact(np.log(np.maximum(picked, np.finfo(np.float64).tiny))),
    }


def model_rows(
    diagnostics: FitDiagnostics,
    moments: dict[str, tuple[torch.Tensor, torch.Tensor]],
    fit_scaler: Standardizer,
    suite_scaler: Standardizer,
) -> dict[str, dict[str, list[float]]]:
    """Per model ``auto`` kept (regression), the per-row figures a stack of any weights needs:
    its test predictive ``mean`` and ``variance`` (``moments``, the diagnostics' ``test_moments``,
    put in the suite's units) and its ``validation_log_density`` on the rows ``auto`` scored it
    on (the fit's units: a shift shared by every model, which no stacking weight depends on)."""
    scale = float(fit_scaler.std) / float(suite_scaler.std)
    rows: dict[str, dict[str, list[float]]] = {}
    for name, (mean, variance) in moments.items():
        raw = fit_scaler.inverse_transform(mean.numpy())  # [T], the target's units
        rows[name] = {
            "mean": compact(suite_scaler.transform(raw)),
            "variance": compact(variance.numpy() * scale**2),
        }
        if name in diagnostics.validation_log_density:
            rows[name]["validation_log_density"] = compact(
                diagnostics.validation_log_density[name].numpy()
            )
    return rows


def classifier_rows(
    diagnostics: FitDiagnostics, probabilities_of: dict[str, torch.Tensor]
) -> dict[str, dict[str, list]]:
    """Per classifier ``auto`` kept, what a mixture of any weights needs: its test class
    ``probabilities`` [T][C] (``probabilities_of``, the diagnostics' ``test_probabilities``) and
    its ``validation_log_density`` (log p of the true class) on the rows ``auto`` scored it on."""
    rows: dict[str, dict[str, list]] = {}
    for name, probabilities in probabilities_of.items():
        rows[name] = {"probabilities": [compact(row) for row in probabilities.numpy()]}
        if name in diagnostics.validation_log_density:
            rows[name]["validation_log_density"] = compact(
                diagnostics.validation_log_density[name].numpy()
            )
    return rows


def _losses(unit: dict[str, Any]) -> np.ndarray | None:
    """The per-row losses whose mean the ratio compares: squared errors (regression) or
    -log p (classification); None when the unit has no rows."""
    rows = unit.get("test_rows")
    if rows is None:
        return None
    if unit["task"] == "regression":
        return np.asarray(rows["squared_error"], dtype=np.float64)
    return -np.asarray(rows["log_density"], dtype=np.float64)


def ratio_interval(
    zonal: Sequence[dict[str, Any]],
    svgp: Sequence[dict[str, Any]],
    *,
    draws: int = BOOTSTRAP_DRAWS,
    level: float = INTERVAL_LEVEL,
    seed: int = 0,
) -> tuple[float, float] | None:
    """The paired bootstrap interval (module docstring) of the ratio mean_s(zonal loss) /
    mean_s(svgp loss) over the splits of one table, from its zonal and svgp units (the same
    splits, each unit with ``test_rows``); None when a unit has no rows or the splits or row
    counts differ."""
    by_split = {unit["split"]: unit for unit in svgp}
    if not zonal or sorted(by_split) != sorted(unit["split"] for unit in zonal):
        return None
    pairs = []
    for unit in zonal:
        ours, theirs = _losses(unit), _losses(by_split[unit["split"]])
        if ours is None or theirs is None or len(ours) != len(theirs) or not len(ours):
            return None
        pairs.append((ours, theirs))
    rng = np.random.default_rng(seed)
    ours_total = np.zeros(draws)
    theirs_total = np.zeros(draws)
    for ours, theirs in pairs:
        picks = rng.integers(0, len(ours), size=(draws, len(ours)))  # [B, n]
        ours_total += ours[picks].mean(1)
        theirs_total += theirs[picks].mean(1)
    ratios = ours_total / theirs_total  # [B] (the splits' count cancels)
    tail = (1 - level) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


__all__ = [
    "BOOTSTRAP_DRAWS",
    "INTERVAL_LEVEL",
    "classification_rows",
    "classifier_rows",
    "compact",
    "model_rows",
    "ratio_interval",
    "regression_rows",
]
