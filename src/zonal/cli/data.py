"""``zonal data list | fetch``: the datasets of ``zonal.datasets``."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from zonal.cli.common import (
    CommandError,
    error_text,
    format_shape,
    print_table,
)


def add_data_parser(commands: Any) -> None:
    """The ``data`` command and its actions."""
    data = commands.add_parser("data", help="list and fetch the datasets")
    data_commands = data.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = data_commands.add_parser("list", help="list the known datasets")
    listing.set_defaults(handler=data_list)
    fetch = data_commands.add_parser("fetch", help="download a dataset into the cache")
    fetch.add_argument("name", metavar="NAME", help="dataset name (see `zonal data list`)")
    fetch.set_defaults(handler=data_fetch)


def data_list(args: argparse.Namespace) -> int:
    list_datasets = _datasets_function("list_datasets")
    try:
        entries = list_datasets()
    except (LookupError, ValueError, OSError) as error:
        raise CommandError(error_text(error)) from error
    rows = [(entry.name, entry.task, format_shape(entry.shape), entry.source) for entry in entries]
    print_table(("NAME", "TASK", "SHAPE", "SOURCE"), rows)
    return 0


def data_fetch(args: argparse.Namespace) -> int:
    fetch = _datasets_function("fetch")
    datasets = importlib.import_module("zonal.datasets")
    data_errors = tuple(
        getattr(datasets, name)
        for name in ("DatasetUnavailableError", "CorruptArtifactError")
        if hasattr(datasets, name)
    )
    try:
        path = fetch(args.name)
    except (LookupError, ValueError, OSError, *data_errors) as error:
        raise CommandError(f"cannot fetch {args.name!r}: {error_text(error)}") from error
    print(path)
    return 0


def _datasets_function(name: str) -> Callable[..., Any]:
    """``zonal.datasets.<name>``, imported now; a ``CommandError`` if it is not there."""
    try:
        datasets = importlib.import_module("zonal.datasets")
    except ImportError as error:
        raise CommandError(f"the datasets are not available: {error}") from error
    function = getattr(datasets, name, None)
    if function is None:
        raise CommandError(f"zonal.datasets has no {name}(); the datasets are not available")
    return function
