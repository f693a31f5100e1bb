"""The errors raised by ``zonal.datasets``: each message says what went wrong and what to do."""

from __future__ import annotations

import pickle


class DatasetUnavailableError(RuntimeError):
    """No cached copy of a dataset and every source failed; the message says how to get the data."""


class CorruptArtifactError(RuntimeError):
    """A downloaded artifact cannot be read as the archive it should be (truncated, wrong format)."""


class ChecksumMismatchError(CorruptArtifactError):
    """A file (or a member inside an archive) does not have the sha256 the registry records."""

    def __init__(self, path: object, expected: str, actual: str, member: str | None = None) -> None:
        self.path = path
        self.expected = expected
        self.actual = actual
        self.member = member
        where = f"member {member!r} of {path}" if member else str(path)
        super().__init__(
            f"sha256 mismatch for {where}: expected {expected}, got {actual}. The file is corrupt "
            "or not the one the registry describes; delete it and fetch again"
        )


class DownloadError(RuntimeError):
    """One source could not deliver its artifact (no network, tool missing, command failed)."""


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle referenced a global outside the allow-list of numpy array reconstruction."""
