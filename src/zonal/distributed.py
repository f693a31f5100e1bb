"""Deprecated path of ``zonal.scale.dask_statistics`` (kept for one release)."""

from zonal._deprecated import warn_moved
from zonal.scale.dask_statistics import (
    SPLIT_EVERY,
    DistributedExtraMissingError,
    PartitionError,
    fit_statistics_distributed,
    statistics_map_reduce,
)

warn_moved("zonal.distributed", "zonal.scale.dask_statistics")

__all__ = [
    "SPLIT_EVERY",
    "DistributedExtraMissingError",
    "PartitionError",
    "fit_statistics_distributed",
    "statistics_map_reduce",
]
