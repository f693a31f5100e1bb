"""Deprecated path of ``zonal.tabular.sklearn`` (kept for one release)."""

from zonal._deprecated import warn_moved
from zonal.tabular.sklearn import ZonalClassifier, ZonalRegressor, expected_failed_checks

warn_moved("zonal.sklearn", "zonal.tabular.sklearn")

__all__ = [
    "ZonalClassifier",
    "ZonalRegressor",
    "expected_failed_checks",
]
