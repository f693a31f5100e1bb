"""Predictions of a fitted table model for new rows: the predictive mean, variance and interval
in the target's units (regression), or one probability column per class and the predicted class.
"""

from __future__ import annotations

import warnings
from statistics import NormalDist

import numpy as np
import torch

from zonal.tabular.checks import check_magnitudes
from zonal.tabular.metrics import class_probabilities
from zonal.tabular.model import TabularModel
from zonal.tabular.tables import DataWarning, Table, TableError, name_list
from zonal.tabular.targets import (
    encode_labels,
    label_texts,
)


def predict_table(
    fitted: TabularModel,
    table: Table,
    *,
    include_noise: bool = True,
    level: float = 0.95,
    samples: int | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """``predict_data`` on the model's input columns of ``table``; for a classifier, a target
    column in the table must hold only classes the model knows (a ``LabelError`` otherwise)."""
    missing = [name for name in fitted.feature_columns if table.column_named(name) is None]
    if missing:
        raise TableError(
            f"{table.path}: the model was fitted on {len(fitted.feature_columns)} columns "
            f"({name_list(fitted.feature_columns)}) but this table lacks {len(missing)} of them "
            f"({name_list(missing)}); its {len(table.columns)} columns are "
            f"{name_list(table.columns)}"
        )
    target_column = table.column_named(fitted.target_column)
    if fitted.target.is_classification and target_column is not None:
        labels, absent = label_texts(table.cells[target_column])
        present = np.setdiff1d(np.arange(table.num_rows), absent)
        encode_labels(fitted.target, labels[present],
                      f"{table.path}: the column {fitted.target_column!r}")  # fmt: skip
    x = table.numeric(fitted.feature_columns)
    return predict_data(fitted, x, include_noise=include_noise, level=level, samples=samples,
                        seed=seed)  # fmt: skip


def at_training_constants(fitted: TabularModel, x: np.ndarray) -> np.ndarray:
    """x [N, D] with each of ``fitted.constant_columns`` (one value on the training rows) at that
    value: the model never saw the column vary, so another value would move its predictions by
    extrapolation alone (a value 10 units off raised the variance a thousandfold). A
    ``DataWarning`` note names the columns whose values differ."""
    positions = [fitted.feature_columns.index(name) for name in fitted.constant_columns]
    values = np.asarray(fitted.x_scaler.mean, dtype=np.float64)[positions]  # [K]
    differs = [p for p, v in zip(positions, values, strict=True) if np.any(x[:, p] != v)]
    if not differs:
        return x
    trained_at = dict(zip(positions, values.tolist(), strict=True))
    shown = ", ".join(f"{fitted.feature_columns[p]!r} (trained at {trained_at[p]:g})"
                      for p in differs[:5]) + (" ..." if len(differs) > 5 else "")  # fmt: skip
    warnings.warn(
        f"{len(differs)} input column(s) held one value on the training rows and differ here: "
        f"{shown}; read at the training value, since the model cannot know their effect",
        DataWarning,
        stacklevel=3,
    )
    x = x.copy()
    x[:, positions] = values
    return x


def predict_data(
    fitted: TabularModel,
    x: np.ndarray,
    *,
    include_noise: bool = True,
    level: float = 0.95,
    samples: int | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Predictions for inputs x [N, D] in the model's column order.

    Regression: ``mean``, ``variance``, ``lower``, ``upper`` in the target's units; the variance
    is that of a new observation (``include_noise``) or of the latent function, the interval the
    central ``level`` interval of the Gaussian predictive (mean +- 1.96 sd at 95%).
    Classification: ``prob_<label>`` per class (``class_probabilities``) and the most probable
    ``class``. A deep model averages ``samples`` draws of its inner layers (default: its own
    number) from ``seed``; softmax probabilities draw from ``seed`` too.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    model = fitted.trained.model
    if model._is_ensemble and getattr(model, "draws_samples", True):  # a deep model's draws
        setattr(model, "posterior_seed", seed)  # noqa: B010 (a plain attribute, not a Module)
        if samples is not None:
            if samples < 1:
                raise TableError(f"--samples must be a positive integer, got {samples}")
            setattr(model, "num_posterior_samples", samples)  # noqa: B010
    elif samples is not None:
        raise TableError(f"{fitted.spec['model']} draws no samples: drop --samples")
    x = np.asarray(x, dtype=np.float64)
    check_magnitudes(x, fitted.feature_columns, "the inputs")
    x = at_training_constants(fitted, x)
    inputs = torch.from_numpy(fitted.x_scaler.transform(x))
    if fitted.target.is_classification:
        probabilities = class_probabilities(model, inputs, fitted.target, seed=seed).cpu().numpy()
        columns = {f"prob_{label}": probabilities[:, c]
                   for c, label in enumerate(fitted.target.classes)}  # fmt: skip
        columns["class"] = np.array(fitted.target.classes)[probabilities.argmax(-1)]
        return columns
    latent_mean, latent_variance = model.predict(inputs, include_noise=include_noise)
    mean = fitted.y_scaler.inverse_transform(latent_mean.cpu().numpy())
    variance = fitted.y_scaler.inverse_transform_variance(latent_variance.cpu().numpy())
    half_width = NormalDist().inv_cdf(0.5 + level / 2) * np.sqrt(variance)
    return {"mean": mean, "variance": variance, "lower": mean - half_width,
            "upper": mean + half_width}  # fmt: skip
