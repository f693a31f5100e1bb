"""The validation split of ``zonal fit``: a seeded share of the rows (stratified by class) held
out for early stopping, the model choice and stacking.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from zonal.tabular.tables import TableError
from zonal.tabular.targets import (
    Target,
)


@dataclass(frozen=True)
class Split:
    """Standardised training and validation tensors (targets: values or class indices)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_valid: torch.Tensor
    y_valid: torch.Tensor


def validation_split(
    codes: np.ndarray, target: Target, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, validation rows): ``round(fraction * n)`` rows of each class (of all rows
    for regression) drawn with ``seed``, leaving every class at least one training row. A
    ``TableError`` when a positive fraction leaves no validation row."""
    if not (isinstance(fraction, int | float) and 0 <= fraction < 1):
        raise ValueError(f"the validation fraction must lie in [0, 1), got {fraction!r}")
    num_rows = len(codes)
    rng = np.random.default_rng(seed)
    groups = (
        [np.flatnonzero(codes == c) for c in range(len(target.classes))]
        if target.is_classification
        else [np.arange(num_rows)]
    )
    valid: list[np.ndarray] = []
    for rows in groups:
        count = min(round(fraction * len(rows)), len(rows) - 1)
        valid.append(rng.permutation(rows)[:count])
    valid_rows = np.sort(np.concatenate(valid)).astype(np.int64)
    if fraction > 0 and len(valid_rows) == 0:
        raise TableError(
            f"the validation split is empty: {fraction:g} of {num_rows} rows rounds to no row; "
            "use more rows, a larger --validation-fraction, or --validation-fraction 0 (no early "
            "stopping, the model chosen by its training objective)"
        )
    train_rows = np.setdiff1d(np.arange(num_rows), valid_rows)
    return train_rows, valid_rows
