"""Turn the verified member bytes of one source into a ``Dataset``: column roles, labels, splits.

Every loader takes ``{role: bytes}`` (the roles its source declares, ``"data"`` for single-file
datasets) and returns the ``Dataset``; the parsing of the file format itself is in ``parsers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from zonal.datasets.dataset import Dataset
from zonal.datasets.parsers import (
    maybe_gunzip,
    parse_arff,
    parse_csv_table,
    parse_excel_sheet,
    parse_idx,
    parse_libsvm,
    parse_whitespace_table,
)
from zonal.datasets.safe_pickle import load_numpy_pickle

Blobs = Mapping[str, bytes]

YACHT_FEATURES = (
    "buoyancy_position",
    "prismatic_coefficient",
    "length_displacement_ratio",
    "beam_draught_ratio",
    "length_beam_ratio",
    "froude_number",
)
BOSTON_FEATURES = (
    "CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT",
)  # fmt: skip
ENERGY_FEATURES = (
    "relative_compactness",
    "surface_area",
    "wall_area",
    "roof_area",
    "overall_height",
    "orientation",
    "glazing_area",
    "glazing_area_distribution",
)


def _check_columns(name: str, table: np.ndarray, expected: int) -> None:
    if table.ndim != 2 or table.shape[1] != expected:
        raise ValueError(
            f"{name}: expected a table with {expected} columns, got shape {table.shape}"
        )


def regression_dataset(
    name: str,
    table: np.ndarray,
    target_column: int,
    feature_names: Sequence[str],
    target_name: str,
) -> Dataset:
    """Split a numeric table [N, D + 1] into features (all other columns) and one target column."""
    _check_columns(name, table, len(feature_names) + 1)
    target = target_column % table.shape[1]
    features = np.delete(table, target, axis=1)
    return Dataset(
        name=name,
        X=np.ascontiguousarray(features, dtype=np.float64),
        y=np.ascontiguousarray(table[:, target], dtype=np.float64),
        task="regression",
        feature_names=tuple(feature_names),
        target_names=(target_name,),
    )


def _split_names(names: list[str], target_column: int) -> tuple[list[str], str]:
    target = names[target_column]
    return [n for i, n in enumerate(names) if i != target_column % len(names)], target


def load_yacht(blobs: Blobs) -> Dataset:
    """Yacht hydrodynamics (UCI): 6 hull / speed features, target residuary resistance (last)."""
    table = parse_whitespace_table(blobs["data"])
    return regression_dataset("yacht", table, -1, YACHT_FEATURES, "residuary_resistance")


def load_concrete(blobs: Blobs) -> Dataset:
    """Concrete compressive strength (UCI, Excel): 8 mixture features, target strength (last)."""
    table, names = parse_excel_sheet(blobs["data"], 0)
    _check_columns("concrete", table, 9)
    features, target = _split_names(names, -1)
    return regression_dataset("concrete", table, -1, features, target)


def load_power(blobs: Blobs) -> Dataset:
    """Combined-cycle power plant (UCI CCPP, Excel Sheet1): AT, V, AP, RH -> PE (last)."""
    table, names = parse_excel_sheet(blobs["data"], "Sheet1")
    _check_columns("power", table, 5)
    features, target = _split_names(names, -1)
    return regression_dataset("power", table, -1, features, target)


def load_protein(blobs: Blobs) -> Dataset:
    """Protein tertiary structure (UCI CASP, CSV with header): target RMSD (first), F1..F9."""
    table, names = parse_csv_table(blobs["data"], header=True)
    _check_columns("protein", table, 10)
    assert names is not None
    features, target = _split_names(names, 0)
    return regression_dataset("protein", table, 0, features, target)


def load_boston_csv(blobs: Blobs) -> Dataset:
    """Boston housing as mlxtend ships it: CSV without header, 13 features, target MEDV (last)."""
    table, _ = parse_csv_table(blobs["data"], header=False)
    return regression_dataset("boston", table, -1, BOSTON_FEATURES, "MEDV")


def load_boston_whitespace(blobs: Blobs) -> Dataset:
    """Boston housing as UCI's ``housing.data``: whitespace table, target MEDV (last)."""
    table = parse_whitespace_table(blobs["data"])
    return regression_dataset("boston", table, -1, BOSTON_FEATURES, "MEDV")


def load_energy(blobs: Blobs) -> Dataset:
    """Energy efficiency (UCI ENB2012, Excel): X1..X8 -> heating load Y1 (cooling load Y2 dropped,
    as in the common GP benchmarks)."""
    table, _ = parse_excel_sheet(blobs["data"], 0)
    _check_columns("energy", table, 10)
    return regression_dataset("energy", table[:, :9], -1, ENERGY_FEATURES, "heating_load")


def load_kin8nm(blobs: Blobs) -> Dataset:
    """Kin8nm (Delve, OpenML ARFF): 8 joint angles theta1..theta8 -> end-effector distance y."""
    table, names = parse_arff(blobs["data"])
    _check_columns("kin8nm", table, 9)
    features, target = _split_names(names, -1)
    return regression_dataset("kin8nm", table, -1, features, target)


def load_banana(blobs: Blobs) -> Dataset:
    """Banana (Raetsch's benchmark, libsvm text): 2 features, labels -1 / +1 mapped to 0 / 1."""
    features, labels = parse_libsvm(blobs["data"], num_features=2)
    if not np.isin(labels, (-1.0, 1.0)).all():
        raise ValueError(f"banana: labels must be -1 or +1, got {np.unique(labels)}")
    return Dataset(
        name="banana",
        X=features,
        y=(labels > 0).astype(np.int64),
        task="classification",
        feature_names=("x1", "x2"),
        target_names=("label",),
    )


def _pixel_names(num_pixels: int) -> tuple[str, ...]:
    return tuple(f"pixel_{i}" for i in range(num_pixels))


def _concatenate_splits(
    name: str,
    parts: Sequence[tuple[str, np.ndarray, np.ndarray]],
    image_shape: tuple[int, ...],
    scale: float = 1.0,
) -> Dataset:
    """One ``Dataset`` holding predefined splits ``(split, images [n, ...], labels [n])`` back to
    back, images flattened to rows and multiplied by ``scale``."""
    splits, start = {}, 0
    for split, images, labels in parts:
        if images.shape[0] != labels.shape[0]:
            raise ValueError(f"{name} {split}: {images.shape[0]} images, {labels.shape[0]} labels")
        splits[split] = np.arange(start, start + images.shape[0])
        start += images.shape[0]
    features = np.concatenate(
        [images.reshape(images.shape[0], -1) for _, images, _ in parts], dtype=np.float64
    )
    if scale != 1.0:
        features *= scale
    return Dataset(
        name=name,
        X=features,
        y=np.concatenate([labels for _, _, labels in parts]).astype(np.int64),
        task="classification",
        feature_names=_pixel_names(features.shape[1]),
        target_names=("digit" if name == "mnist" else "label",),
        splits=splits,
        image_shape=image_shape,
    )


def load_mnist(blobs: Blobs) -> Dataset:
    """MNIST as ``mnist.pkl.gz`` (deeplearning.net layout): a pickled tuple (train, validation,
    test) of (images float32 [n, 784] in [0, 1], labels int [n]); 50k / 10k / 10k.

    Unpickled with the numpy-only allow-list of ``safe_pickle``, never with ``pickle.load``.
    """
    content = load_numpy_pickle(maybe_gunzip(blobs["data"]))
    if not (isinstance(content, tuple | list) and len(content) == 3):
        raise ValueError("mnist.pkl.gz must hold a (train, validation, test) tuple")
    parts = []
    for split, pair in zip(("train", "validation", "test"), content, strict=True):
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise ValueError(f"mnist {split} must be an (images, labels) pair")
        images, labels = (np.asarray(item) for item in pair)
        if images.ndim != 2 or images.shape[1] != 784 or labels.ndim != 1:
            raise ValueError(f"mnist {split}: images {images.shape}, labels {labels.shape}")
        parts.append((split, images, labels))
    return _concatenate_splits("mnist", parts, (28, 28))


def load_fashion_mnist(blobs: Blobs) -> Dataset:
    """Fashion-MNIST from its four IDX files: 60k train / 10k test images 28 x 28, 10 classes.

    Pixels are divided by 255, the scale of ``mnist.pkl.gz``.
    """
    parts = []
    for split in ("train", "test"):
        images = parse_idx(blobs[f"{split}_images"])
        labels = parse_idx(blobs[f"{split}_labels"])
        if images.ndim != 3 or labels.ndim != 1:
            raise ValueError(f"fashion-mnist {split}: images {images.shape}, labels {labels.shape}")
        parts.append((split, images, labels))
    image_shape = tuple(parts[0][1].shape[1:])
    return _concatenate_splits("fashion-mnist", parts, image_shape, scale=1.0 / 255.0)


def load_digits(blobs: Blobs) -> Dataset:
    """Optical digits 8 x 8 (UCI optdigits test set, as bundled by scikit-learn): CSV rows of 64
    pixel counts 0..16 and the digit (last); 1797 rows."""
    table, _ = parse_csv_table(blobs["data"], header=False)
    _check_columns("digits", table, 65)
    return Dataset(
        name="digits",
        X=np.ascontiguousarray(table[:, :64]),
        y=table[:, 64].astype(np.int64),
        task="classification",
        feature_names=tuple(f"pixel_{r}_{c}" for r in range(8) for c in range(8)),
        target_names=("digit",),
        image_shape=(8, 8),
    )
