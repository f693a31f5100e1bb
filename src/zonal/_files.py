"""zonal's one way of writing a file atomically, for every module that writes one.

The data go to a temporary file beside the target (same folder, so same file system), are flushed
and fsynced, and only then appear under the target's name: by ``os.replace`` (a reader, or a later
resume, sees the earlier file or the complete new one, never a torn write) or, where an existing file
must not be clobbered, by ``os.link`` (which fails if the name is taken, so a file that appeared in
the meantime is not clobbered either). A failure part way leaves the target as it was and removes
the temporary file.

* ``atomic_writer(path, mode)``: the context manager everything else is built on; the payload is
  written by the caller (``torch.save(state, handle)``, ``np.savez(handle, ...)``, text).
* ``write_bytes_atomic`` / ``write_text_atomic`` / ``write_json_atomic``: the common payloads.
* ``write_new_file`` / ``check_new_output``: a user's output file, never over an existing one
  unless ``force``.
* ``scratch_dir`` / ``place_atomically``: a file produced by another program (a download) is made
  in a scratch folder beside its target and moved into place in one step.
* ``interrupts_deferred``: Ctrl-C during a write is held until the write is complete, then raised.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any


class OutputExistsError(FileExistsError):
    """The output file exists and overwriting it was not asked for (``--force``)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"{path} already exists; choose another output or pass --force to replace it"
        )
        self.path = path


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT (Ctrl-C) until the block ends, then raise ``KeyboardInterrupt``: a state file
    being written is completed (and stays consistent with what was computed) before the program
    stops. Outside the main thread, where signal handlers cannot be set, the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


@contextlib.contextmanager
def atomic_writer(
    path: str | os.PathLike[str], mode: str = "wb", *, overwrite: bool = True
) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on success it becomes ``path``.

    ``mode`` is ``"wb"`` (bytes) or ``"w"`` (UTF-8 text, no newline translation). With
    ``overwrite`` an existing ``path`` is replaced; without, it is an ``OutputExistsError`` and is
    left untouched. If the ``with`` body raises, the temporary file is deleted and ``path`` is as
    it was.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    target = Path(path)
    # An exclusive-create open (not mkstemp) so the file gets the usual umask permissions, not 0600.
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    encoding = None if mode == "wb" else "utf-8"
    newline = None if mode == "wb" else ""
    try:
        with open(temporary, mode.replace("w", "x"), encoding=encoding, newline=newline) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(temporary, target)
        else:
            _link_without_clobbering(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (replacing an existing file)."""
    with atomic_writer(path, "wb") as handle:
        handle.write(data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (replacing an existing file)."""
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


def check_new_output(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """``path`` as a ``Path``, after checking that it may be written: its folder exists, it is not
    a folder, and it does not exist yet unless ``force``. Call it before long work, so that a run is
    not wasted on an output that will be refused."""
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a folder; give a file name for the output")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write {target}: the folder {target.parent} does not exist")
    if target.exists() and not force:
        raise OutputExistsError(target)
    return target


def write_new_file(
    path: str | os.PathLike[str],
    write: Callable[[IO[Any]], None],
    *,
    mode: str = "wb",
    force: bool = False,
) -> Path:
    """Call ``write(handle)`` on a temporary file beside ``path``, then publish it as ``path``.

    ``mode`` is ``"wb"`` or ``"w"`` (UTF-8 text). Without ``force`` an existing ``path`` is an
    ``OutputExistsError`` and is left untouched.
    """
    target = check_new_output(path, force=force)
    with atomic_writer(target, mode, overwrite=force) as handle:
        write(handle)
    return target


def scratch_dir(folder: Path) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder inside ``folder`` (same file system, so ``place_atomically`` out of it is
    one rename), removed with whatever is left in it when the ``with`` block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".partial-", dir=folder)


def place_atomically(source: Path, target: Path) -> Path:
    """Move ``source`` onto ``target`` in one step: readers see the old file or the new, never half."""
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, target)
    return target


def _link_without_clobbering(source: Path, target: Path) -> None:
    """Give ``source`` the name ``target`` unless that name exists (then ``OutputExistsError``)."""
    try:
        os.link(source, target)
    except FileExistsError:
        raise OutputExistsError(target) from None
    except OSError:  # a file system without hard links: check, then rename
        if target.exists():
            raise OutputExistsError(target) from None
        os.replace(source, target)
