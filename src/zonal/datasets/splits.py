"""Reproducible train / test splits: index arrays drawn from a seeded ``numpy.random.Generator``.

Every function returns sorted int64 row indices; the same arguments give the same split on every
machine (numpy's PCG64 stream is stable across platforms and versions).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator

import numpy as np


def _check_count(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _num_test(num_points: int, test_fraction: float) -> int:
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    num_test = round(test_fraction * num_points)
    if not 0 < num_test < num_points:
        raise ValueError(
            f"test_fraction={test_fraction} of {num_points} points leaves an empty train or test set"
        )
    return num_test


def _split_permutation(permutation: np.ndarray, num_test: int) -> tuple[np.ndarray, np.ndarray]:
    test = np.sort(permutation[:num_test]).astype(np.int64)
    train = np.sort(permutation[num_test:]).astype(np.int64)
    return train, test


def train_test_split(
    num_points: int, test_fraction: float = 0.1, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(train_idx, test_idx)``: a random partition of ``range(num_points)`` with
    ``round(test_fraction * num_points)`` test points, drawn from ``default_rng(seed)``."""
    num_points = _check_count(num_points, "num_points", 2)
    num_test = _num_test(num_points, test_fraction)
    permutation = np.random.default_rng(seed).permutation(num_points)
    return _split_permutation(permutation, num_test)


def random_splits(
    num_points: int, num_splits: int = 10, test_fraction: float = 0.1, seed: int = 0
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``num_splits`` independent random train / test splits (90 / 10 by default).

    Split ``i`` is drawn from ``default_rng([seed, i])``, so it does not depend on how many splits
    are asked for: the first 5 of 10 splits are the 5 splits of ``num_splits=5``.
    """
    num_points = _check_count(num_points, "num_points", 2)
    num_splits = _check_count(num_splits, "num_splits", 1)
    num_test = _num_test(num_points, test_fraction)
    for index in range(num_splits):
        permutation = np.random.default_rng([seed, index]).permutation(num_points)
        yield _split_permutation(permutation, num_test)


def kfold_splits(
    num_points: int, num_folds: int = 10, seed: int = 0, shuffle: bool = True
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """K-fold cross-validation: ``num_folds`` ``(train_idx, test_idx)`` whose test sets partition
    ``range(num_points)`` (sizes differ by at most one). Rows are shuffled by ``default_rng(seed)``
    first unless ``shuffle=False``."""
    num_points = _check_count(num_points, "num_points", 2)
    num_folds = _check_count(num_folds, "num_folds", 2)
    if num_folds > num_points:
        raise ValueError(f"num_folds={num_folds} exceeds num_points={num_points}")
    order = (
        np.random.default_rng(seed).permutation(num_points) if shuffle else np.arange(num_points)
    )
    for fold in np.array_split(order, num_folds):
        test = np.sort(fold).astype(np.int64)
        yield np.setdiff1d(order, test).astype(np.int64), test
