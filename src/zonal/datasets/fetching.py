"""Fetch a dataset's artifact into the cache, verify it, read its members, load the dataset.

Order of work for ``fetch(name)``: first every source's cached copy (a corrupt one is deleted),
then each source's download in the registry's order; a download that fails (offline, tool missing)
moves on to the next source, a download whose checksum is wrong stops with
``ChecksumMismatchError`` (naming the file and both hashes). When nothing is left,
``DatasetUnavailableError`` says how to get the file by hand and where to put it.

The download step is injectable: pass ``downloader=`` (a function ``(artifact, folder, timeout) ->
path``) to ``fetch`` / ``load_dataset``, or monkeypatch ``download_artifact``; tests never reach
the network.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zonal.datasets.archives import read_members
from zonal.datasets.cache import datasets_dir, sha256_bytes, sha256_file
from zonal.datasets.dataset import Dataset
from zonal.datasets.errors import (
    ChecksumMismatchError,
    CorruptArtifactError,
    DatasetUnavailableError,
    DownloadError,
)
from zonal.datasets.registry import get_spec
from zonal.datasets.sources import Artifact
from zonal.datasets.spec import DatasetSpec, Source

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 600.0
Downloader = Callable[[Artifact, Path, float], Path]
PathLike = str | os.PathLike[str]


def download_artifact(artifact: Artifact, folder: Path, timeout: float) -> Path:
    """The default downloader: the artifact's own download (pip, apt-get or urllib)."""
    return artifact.download(folder, timeout)


@dataclass(frozen=True)
class Fetched:
    """A verified artifact: the source it came from, its path and its members' bytes by role."""

    source: Source
    path: Path
    blobs: dict[str, bytes]


def read_verified(source: Source, path: Path) -> dict[str, bytes]:
    """Check ``path`` against the registry's sha256 (whole file and/or members) and return the
    members' bytes by role. Raises ``ChecksumMismatchError`` / ``CorruptArtifactError``."""
    expected = source.artifact.sha256
    if expected is not None and (actual := sha256_file(path)) != expected:
        raise ChecksumMismatchError(path, expected, actual)
    roles = list(source.members)
    contents = read_members(path, [source.members[role].path for role in roles])
    blobs = dict(zip(roles, contents, strict=True))
    for role, member in source.members.items():
        data = blobs[role]
        if member.sha256 is not None and (actual := sha256_bytes(data)) != member.sha256:
            raise ChecksumMismatchError(path, member.sha256, actual, member.describe())
    if not source.verifiable:
        warnings.warn(
            f"{path} is not verified: the registry records no sha256 for {source.describe()} "
            f"(this file's sha256 is {sha256_file(path)})",
            stacklevel=3,
        )
    return blobs


def _from_cache(source: Source, folder: Path, failures: list[str]) -> Fetched | None:
    """The verified cached copy of ``source``'s artifact, or None (a corrupt copy is deleted)."""
    cached = source.artifact.find_cached(folder)
    if cached is None:
        return None
    try:
        return Fetched(source, cached, read_verified(source, cached))
    except CorruptArtifactError as error:
        if source.artifact.kind == "installed":  # not ours to delete: skip this source
            failures.append(f"{source.artifact.describe()}: {error}")
            return None
        logger.warning("%s; deleting it to download it again", error)
        cached.unlink(missing_ok=True)
        return None


def _unavailable_message(spec: DatasetSpec, folder: Path, failures: list[str]) -> str:
    lines = [
        f"dataset {spec.name!r} is not in the cache folder {folder} and no source could deliver it:",
        *(f"  - {failure}" for failure in failures),
        "To get it, do one of these (on a machine that reaches the source), then load it again:",
        *(f"  - {source.artifact.instructions(folder)}" for source in spec.sources),
        "(ZONAL_CACHE_DIR chooses another cache root; the files go in its datasets/ folder.)",
    ]
    return "\n".join(lines)


def fetch_verified(
    name: str,
    cache_dir: PathLike | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    downloader: Downloader | None = None,
) -> Fetched:
    """Find or download the artifact of dataset ``name``, verify it and read its members."""
    spec = get_spec(name)
    folder = datasets_dir(cache_dir)
    download = downloader or download_artifact
    failures: list[str] = []
    for source in spec.sources:
        found = _from_cache(source, folder, failures)
        if found is not None:
            return found
    for source in spec.sources:
        if source.artifact.kind == "installed":
            if source.artifact.find_cached(folder) is None:
                failures.append(f"{source.artifact.describe()}: not installed")
            continue
        try:
            path = download(source.artifact, folder, timeout)
        except DownloadError as error:
            failures.append(f"{source.artifact.describe()}: {error}")
            continue
        return Fetched(source, path, read_verified(source, path))
    raise DatasetUnavailableError(_unavailable_message(spec, folder, failures))


def fetch(
    name: str,
    cache_dir: PathLike | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    downloader: Downloader | None = None,
) -> Path:
    """The path of the verified artifact that holds dataset ``name``, downloading it on first use.

    Args:
        name: a registry name (see ``list_datasets``).
        cache_dir: the folder for artifacts; default ``$ZONAL_CACHE_DIR/datasets``, else
            ``$XDG_CACHE_HOME/zonal/datasets``, else ``~/.cache/zonal/datasets``.
        timeout: seconds allowed for each download attempt.
        downloader: replaces the download step ``(artifact, folder, timeout) -> path`` (tests).

    Raises:
        ValueError: unknown name (the message lists the known ones).
        DatasetUnavailableError: no cached copy and every source failed; says how to get it.
        ChecksumMismatchError: a freshly downloaded file does not match the registry's sha256.
    """
    return fetch_verified(name, cache_dir, timeout=timeout, downloader=downloader).path


def load_dataset(
    name: str,
    cache_dir: PathLike | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    downloader: Downloader | None = None,
) -> Dataset:
    """Fetch (see ``fetch``) and parse dataset ``name`` from its original file format.

    Raises what ``fetch`` raises, and ``CorruptArtifactError`` (naming the file) when a fetched
    file does not parse as its format (e.g. an unverified URL download that holds an error page).
    """
    fetched = fetch_verified(name, cache_dir, timeout=timeout, downloader=downloader)
    try:
        dataset = fetched.source.load(fetched.blobs)
    except (ValueError, pickle.UnpicklingError) as error:
        raise CorruptArtifactError(
            f"cannot load {name!r} from {fetched.path} ({fetched.source.describe()}): {error}. "
            "Delete the file to fetch it again"
        ) from error
    return dataclasses.replace(dataset, source=f"{fetched.source.describe()} [{fetched.path}]")
