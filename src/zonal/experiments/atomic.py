"""Atomic file writes: write a temporary file beside the target, then ``os.replace`` it into place.

A reader (or a later resume) sees either the earlier file or the complete new one, never a torn write:
if writing fails part way, the temporary file is removed and the earlier file is left as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on success move it onto ``path``.

    ``mode`` is ``"wb"`` (bytes) or ``"w"`` (UTF-8 text). The data is flushed and fsynced before the
    ``os.replace``; if the ``with`` body raises, the temporary file is deleted and ``path`` untouched.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    target = Path(path)
    # An exclusive-create open (not mkstemp) so the file gets the usual umask permissions, not 0600.
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    encoding = None if mode == "wb" else "utf-8"
    newline = None if mode == "wb" else ""
    handle = open(temporary, mode.replace("w", "x"), encoding=encoding, newline=newline)  # noqa: SIM115
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_writer(path, "wb") as handle:
        handle.write(data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_writer(path, "w") as handle:
        handle.write(text)


def write_json_atomic(path: str | os.PathLike[str], value: Any) -> None:
    """Write ``value`` as indented JSON to ``path`` atomically (see ``to_jsonable`` for the types)."""
    text = json.dumps(to_jsonable(value), indent=2) + "\n"
    write_text_atomic(path, text)


def to_jsonable(value: Any) -> Any:
    """Turn ``value`` into plain JSON types: tensors and NumPy values become numbers or lists,
    paths become strings, tuples become lists, mapping keys become strings.

    Raises ``TypeError`` naming the type of anything else, so a bad metric fails before any file is
    written.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "tolist"):  # torch.Tensor, numpy.ndarray and numpy scalars
        return to_jsonable(value.tolist())
    raise TypeError(f"cannot store a {type(value).__name__} in JSON: {value!r}")
