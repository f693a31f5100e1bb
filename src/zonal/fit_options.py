"""Deprecated path of ``zonal.tabular.options`` (kept for one release)."""

from zonal._deprecated import warn_moved
from zonal.tabular.options import (
    DEFAULT_BUDGET,
    DEFAULT_VALIDATION_FRACTION,
    KERNELS,
    LIKELIHOODS,
    RECIPE_DEFAULTS,
    RECIPE_SUMMARIES,
)

warn_moved("zonal.fit_options", "zonal.tabular.options")

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_VALIDATION_FRACTION",
    "KERNELS",
    "LIKELIHOODS",
    "RECIPE_DEFAULTS",
    "RECIPE_SUMMARIES",
]
