"""The user cache folder and the file operations on it: hashing and atomic placement."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from zonal import paths

_CHUNK = 1 << 20


def cache_root() -> Path:
    """The user cache root (``zonal.paths.cache_root``)."""
    return paths.cache_root()


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


def scratch_dir(folder: Path) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder inside ``folder`` (same file system, so ``os.replace`` out of it is atomic)."""
    folder.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".partial-", dir=folder)


def place_atomically(source: Path, target: Path) -> Path:
    """Move ``source`` onto ``target`` in one step: readers see the old file or the new, never half."""
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, target)
    return target
