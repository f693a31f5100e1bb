"""``RunDirectory``: the folder one experiment run writes into, and the handle its run function gets.

Each run gets a new folder ``<runs root>/<name>-<UTC timestamp>-<short id>``, created with
``exist_ok=False`` (a name that is taken is retried with a fresh id), so a run never overwrites an
earlier one. Everything is written atomically (``zonal._files``); the checkpoint is a
``torch.save`` of a dict, read back with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from zonal._files import atomic_writer, write_json_atomic, write_text_atomic
from zonal.experiments.errors import CheckpointError, ExperimentError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

T = TypeVar("T")
R = TypeVar("R")

CHECKPOINT_FILE = "checkpoint.pt"
LOCK_FILE = ".lock"
_MAX_NAME_ATTEMPTS = 100


def utc_timestamp() -> str:
    """The current UTC time as ``YYYYmmddTHHMMSSZ`` (sorts by time, safe in file names)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def short_id() -> str:
    """Six random hex digits that tell apart runs started in the same second."""
    return secrets.token_hex(3)


class RunDirectory:
    """A run folder: write tables, figures and JSON into it, save and load the run's checkpoint.

    Create a fresh one with ``RunDirectory.create``; open an existing one with ``RunDirectory(path)``.
    """

    def __init__(self, path: str | os.PathLike[str], description: str = "", jobs: int = 1) -> None:
        self.path = Path(path)
        self.description = description or self.path.name
        if jobs < 1:
            raise ValueError(f"jobs must be a positive number of processes, got {jobs}")
        self.jobs = jobs  # processes ``map_units`` may use; never part of the config
        if not self.path.is_dir():
            raise FileNotFoundError(f"run folder {self.path} does not exist")

    @classmethod
    def create(cls, runs_root: str | os.PathLike[str], experiment_name: str) -> RunDirectory:
        """Create ``runs_root/<experiment_name>-<UTC timestamp>-<short id>``, never reusing a folder."""
        root = Path(runs_root)
        root.mkdir(parents=True, exist_ok=True)
        for _ in range(_MAX_NAME_ATTEMPTS):
            path = root / f"{experiment_name}-{utc_timestamp()}-{short_id()}"
            try:
                path.mkdir(exist_ok=False)
            except FileExistsError:
                continue
            return cls(path, description=experiment_name)
        raise FileExistsError(
            f"no free run folder name under {root} after {_MAX_NAME_ATTEMPTS} tries"
        )

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the folder's lock (``.lock``, an advisory ``flock``) while a run writes into it: a
        second process running or resuming the same folder gets an ``ExperimentError``."""
        handle = open(self.path / LOCK_FILE, "a")  # noqa: SIM115 (held for the whole block)
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as error:
                raise ExperimentError(
                    f"run folder {self.path} is in use by another zonal process; wait for it to "
                    "finish (or stop it) before resuming"
                ) from error
            yield
        finally:
            handle.close()  # closing releases the lock

    @property
    def name(self) -> str:
        """The folder's name, ``<experiment>-<timestamp>-<id>``."""
        return self.path.name

    def file(self, name: str) -> Path:
        """The path of the file ``name`` in the run folder (a plain file name, no sub-folders)."""
        if not name or Path(name).name != name or name in (".", ".."):
            raise ValueError(f"expected a plain file name inside the run folder, got {name!r}")
        return self.path / name

    # Outputs -------------------------------------------------------------------------------------

    def save_text(self, name: str, text: str) -> Path:
        """Write ``text`` to the file ``name`` atomically; returns its path."""
        path = self.file(name)
        write_text_atomic(path, text)
        return path

    def save_json(self, name: str, value: Any) -> Path:
        """Write ``value`` as JSON (tensors and NumPy values converted) atomically; returns its path."""
        path = self.file(name)
        write_json_atomic(path, value)
        return path

    def save_table(
        self, name: str, rows: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None
    ) -> Path:
        """Write ``rows`` (one mapping per row) as CSV; ``columns`` defaults to every key that
        occurs in ``rows``, in first-seen order (a row without a key gets an empty cell)."""
        rows = list(rows)
        if columns is None:
            columns = list(dict.fromkeys(key for row in rows for key in row))
        path = self.file(name)
        with atomic_writer(path, "w") as handle:
            writer = csv.DictWriter(
                handle, fieldnames=list(columns), restval="", lineterminator="\n"
            )
            writer.writeheader()
            writer.writerows(rows)
        return path

    def save_figure(self, name: str, figure: Figure, **savefig_kwargs: Any) -> Path:
        """Save a matplotlib ``figure`` (PNG unless ``name`` says otherwise) atomically."""
        path = self.file(name)
        savefig_kwargs.setdefault("dpi", 150)
        savefig_kwargs.setdefault("bbox_inches", "tight")
        file_format = path.suffix.lstrip(".") or "png"
        with atomic_writer(path, "wb") as handle:
            figure.savefig(handle, format=file_format, **savefig_kwargs)
        return path

    def progress(self, iterable: Iterable[T], **tqdm_kwargs: Any) -> Iterable[T]:
        """``iterable`` wrapped in a tqdm progress bar (shown on a terminal, silent otherwise).

        Pass ``total`` and ``initial`` when a resumed loop starts part way.
        """
        from tqdm.auto import tqdm

        tqdm_kwargs.setdefault("desc", self.description)
        tqdm_kwargs.setdefault("disable", None)  # None: hidden when stderr is not a terminal
        tqdm_kwargs.setdefault("dynamic_ncols", True)
        return tqdm(iterable, **tqdm_kwargs)

    def map_units(
        self,
        function: Callable[[T], R],
        units: Sequence[T],
        *,
        finished: int = 0,
        **tqdm_kwargs: Any,
    ) -> Iterator[tuple[T, R]]:
        """(unit, ``function(unit)``) for every unit, with a progress bar: in order in this
        process when ``jobs`` is 1, else as they finish in ``jobs`` worker processes (spawned:
        ``function`` must be a module-level function and its units picklable).

        Units must not depend on one another or on the order they run in (each seeds itself), so
        that a run gives the same rows whatever its ``jobs``; the caller checkpoints after each.
        If the caller stops (Ctrl-C, a unit that raised, an early exit), the workers are
        terminated rather than left to finish their units (``zonal._workers``); their units'
        progress is what they last checkpointed.
        A resumed run passes the number of units it has ``finished`` before, where the bar starts.
        """
        tqdm_kwargs.setdefault("total", finished + len(units))
        tqdm_kwargs.setdefault("initial", finished)
        if self.jobs == 1 or len(units) <= 1:
            for unit in self.progress(units, **tqdm_kwargs):
                yield unit, function(unit)
            return
        from zonal._workers import in_worker_processes

        yield from in_worker_processes(
            function,
            units,
            min(self.jobs, len(units)),
            wrap=lambda futures: self.progress(futures, **tqdm_kwargs),
        )

    # Checkpoints ---------------------------------------------------------------------------------

    @property
    def checkpoint_path(self) -> Path:
        """Where ``save_checkpoint`` writes (``checkpoint.pt`` in the run folder)."""
        return self.path / CHECKPOINT_FILE

    def save_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Save ``state`` (tensors, numbers, strings, lists, dicts: what ``torch.load`` reads with
        ``weights_only=True``) so that an interrupted run can continue from here.

        Written to a temporary file and moved into place, so a crash mid-save keeps the previous one.
        Put everything the rest of the run depends on in ``state``: model and optimiser
        ``state_dict()``s, the step counter and the state of any ``torch.Generator`` in use.
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"checkpoint state must be a mapping, got {type(state).__name__}")
        with atomic_writer(self.checkpoint_path, "wb") as handle:
            torch.save(dict(state), handle)

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The state last given to ``save_checkpoint``, or ``None`` if the run has none yet.

        Raises ``CheckpointError`` naming the file if it exists but cannot be read.
        """
        path = self.checkpoint_path
        if not path.exists():
            return None
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise CheckpointError(
                f"checkpoint {path} is corrupt or unreadable ({type(exc).__name__}: "
                f"{_first_line(exc)}); delete it to restart the run from the beginning"
            ) from exc
        if not isinstance(state, dict):
            raise CheckpointError(
                f"checkpoint {path} holds a {type(state).__name__}, expected the dict saved by "
                "save_checkpoint"
            )
        return state


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no details"
