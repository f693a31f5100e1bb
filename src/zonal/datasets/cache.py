"""The datasets' folder in the user cache, and hashing of the files in it.

The cache root is ``zonal.paths.cache_root`` (re-exported here); files are placed with
``zonal._files``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from zonal.paths import cache_root

_CHUNK = 1 << 20


def datasets_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds downloaded dataset artifacts: ``cache_dir`` itself when given, else
    ``cache_root() / "datasets"``."""
    return Path(cache_dir) if cache_dir is not None else cache_root() / "datasets"


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of the file at ``path``, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


__all__ = [
    "cache_root",
    "datasets_dir",
    "sha256_bytes",
    "sha256_file",
]
