"""Deprecated path of ``zonal.tabular.streamed`` (kept for one release)."""

from zonal._deprecated import warn_moved
from zonal.tabular.streamed import (
    CHECKPOINT_EVERY,
    FINGERPRINT_BYTES,
    PARTITION_SUFFIXES,
    RELATIVE_TOLERANCE,
    STATE_FORMAT,
    STATE_VERSION,
    Chunk,
    PartitionError,
    PartitionReader,
    ResumeError,
    RunningMoments,
    accumulate_chunk,
    fingerprint,
    first_pass,
    held_out,
    list_partitions,
    partition_columns,
    row_uniforms,
    second_pass,
    state_path_for,
    streamed_fit,
    third_pass,
)

warn_moved("zonal.streamed_fit", "zonal.tabular.streamed")

__all__ = [
    "CHECKPOINT_EVERY",
    "FINGERPRINT_BYTES",
    "PARTITION_SUFFIXES",
    "RELATIVE_TOLERANCE",
    "STATE_FORMAT",
    "STATE_VERSION",
    "Chunk",
    "PartitionError",
    "PartitionReader",
    "ResumeError",
    "RunningMoments",
    "accumulate_chunk",
    "fingerprint",
    "first_pass",
    "held_out",
    "list_partitions",
    "partition_columns",
    "row_uniforms",
    "second_pass",
    "state_path_for",
    "streamed_fit",
    "third_pass",
]
