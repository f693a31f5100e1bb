"""The real datasets' shapes (the registry in zonal.datasets), fetched into the user cache.

Skipped, not failed, where an artifact cannot be fetched (offline, no apt-get). The small datasets
run by default once their artifacts are cached; MNIST and Fashion-MNIST (20 and 31 MB downloads,
several seconds to parse) are marked slow.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from zonal.datasets import DatasetUnavailableError, get_spec, load_dataset

FETCH_TIMEOUT = 60.0

# name -> (X shape, predefined split sizes)
REAL_SHAPES = {
    "yacht": ((308, 6), {}),
    "boston": ((506, 13), {}),
    "concrete": ((1030, 8), {}),
    "power": ((9568, 4), {}),
    "protein": ((45730, 9), {}),
    "banana": ((5300, 2), {}),
    "digits": ((1797, 64), {}),
    "mnist": ((70000, 784), {"train": 50000, "validation": 10000, "test": 10000}),
    "fashion-mnist": ((70000, 784), {"train": 60000, "test": 10000}),
}
HEAVY = {"mnist", "fashion-mnist"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in REAL_SHAPES],
)
def test_real_dataset_shape(name: str) -> None:
    try:
        data = load_dataset(name, timeout=FETCH_TIMEOUT)
    except DatasetUnavailableError as error:
        pytest.skip(f"{name} cannot be fetched here: {str(error).splitlines()[0]}")
    except ImportError as error:  # an Excel table without the data extra's readers
        pytest.skip(f"{name} needs an optional reader: {error}")
    shape, splits = REAL_SHAPES[name]
    assert data.X.shape == shape == get_spec(name).shape
    assert data.y.shape == (shape[0],)
    assert data.X.dtype == np.float64 and np.isfinite(data.X).all()
    assert {split: len(rows) for split, rows in data.splits.items()} == splits
    if data.task == "classification":
        assert data.y.min() == 0 and data.num_classes == (2 if name == "banana" else 10)


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="scikit-learn absent")
def test_digits_match_scikit_learn() -> None:
    from sklearn.datasets import load_digits

    reference = load_digits()
    data = load_dataset("digits")
    np.testing.assert_array_equal(data.X, reference.data)
    np.testing.assert_array_equal(data.y, reference.target)
