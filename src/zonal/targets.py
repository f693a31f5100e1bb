"""Deprecated path of ``zonal.tabular.targets`` (kept for one release)."""

from zonal._deprecated import warn_moved
from zonal.tabular.targets import (
    MAX_AUTO_CLASSES,
    MIN_ROWS_PER_AUTO_CLASS,
    REGRESSION,
    LabelError,
    Target,
    detect_target,
    encode_labels,
    label_texts,
)

warn_moved("zonal.targets", "zonal.tabular.targets")

__all__ = [
    "MAX_AUTO_CLASSES",
    "MIN_ROWS_PER_AUTO_CLASS",
    "REGRESSION",
    "LabelError",
    "Target",
    "detect_target",
    "encode_labels",
    "label_texts",
]
