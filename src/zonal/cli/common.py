"""What every command of the ``zonal`` command line shares: the one-line errors, exit codes and
plain-text tables."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """A failure to report to the user as one line, without a traceback."""


def positive_int(text: str) -> int:
    """An argument that must be a positive whole number (``--jobs``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def error_text(error: BaseException) -> str:
    """The message of ``error``; a ``KeyError``'s without the quotes ``str`` adds."""
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error)


def format_shape(shape: object) -> str:
    """A dataset's shape as ``N x D``."""
    if isinstance(shape, tuple | list):
        return " x ".join(str(size) for size in shape)
    return str(shape)


LIST_COLUMN = 48
"""Characters of a padded column of ``experiment list`` before it is shortened with "..."."""


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the cut marked by "..."."""
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print ``rows`` in left-aligned columns under ``header`` (the last column is not padded)."""
    table = [tuple(header), *(tuple(str(cell) for cell in row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())


def exit_code(code: object) -> int:
    """An exit code from what ``sys.exit`` or a ``main()`` returned: ``None`` is 0, text is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return EXIT_ERROR


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` as Ctrl-C does, so that ``kill``
    stops a command the way Ctrl-C would: runs checkpoint and print how to go on, and worker
    processes are terminated rather than orphaned (a background job started with ``&`` ignores
    SIGINT, so ``kill -TERM`` is how it is stopped; with the default action the parent died at
    once and its workers went on competing for the cores). Only in the main thread, where Python
    runs signal handlers; the previous handler comes back at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
