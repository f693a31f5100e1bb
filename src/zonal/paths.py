"""The one place that says where zonal keeps its user cache (fundamental systems, dataset
artifacts); every module that caches asks ``cache_root`` and adds its own sub-folder."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$ZONAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/zonal``, else ``~/.cache/zonal``."""
    if os.environ.get("ZONAL_CACHE_DIR"):
        return Path(os.environ["ZONAL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "zonal"
