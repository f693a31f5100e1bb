"""Deprecated path of ``zonal.tabular.saved`` (kept for one release)."""

from zonal._deprecated import warn_moved
from zonal.tabular.saved import (
    FORMAT,
    FORMAT_VERSION,
    ModelFileError,
    checkpoint_state,
    load_model,
    save_model,
    state_digest,
)

warn_moved("zonal.saved_model", "zonal.tabular.saved")

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ModelFileError",
    "checkpoint_state",
    "load_model",
    "save_model",
    "state_digest",
]
