"""Writing a user's output file atomically, and never over an existing file unless asked to.

The data go to a temporary file beside the target, are flushed and fsynced, and only then appear
under the target's name: by ``os.link`` (which fails if the name is taken, so a file that appeared
in the meantime is not clobbered either) or, with ``force``, by ``os.replace``. A failure part way
leaves the target as it was and removes the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


class OutputExistsError(FileExistsError):
    """The output file exists and overwriting it was not asked for (``--force``)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"{path} already exists; choose another output or pass --force to replace it"
        )
        self.path = path


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

    ``mode`` is ``"wb"`` or ``"w"`` (UTF-8 text, no newline translation). Without ``force`` an
    existing ``path`` is an ``OutputExistsError`` and is left untouched.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    target = check_new_output(path, force=force)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    encoding = None if mode == "wb" else "utf-8"
    newline = None if mode == "wb" else ""
    try:
        with open(temporary, mode.replace("w", "x"), encoding=encoding, newline=newline) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if force:
            os.replace(temporary, target)
        else:
            _link_without_clobbering(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
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
