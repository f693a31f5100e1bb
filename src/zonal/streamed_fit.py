"""``zonal fit --chunk-size``: the one-pass SGPR fitted to a table too large for memory.

The collapsed SGPR (``zonal.models.SGPR``; seed 000 sec. 3.3, seed 002 sec. 5) sees the training
rows only through the sums

    A = sum_i phi_r(x_i) phi_r(x_i)^T [M, M],  c = sum_i phi_r(x_i) y_i [M],  y^T y,  sum_i r_i^2,  N,

and the standardisation of ``zonal fit`` only through per-column moments, so the table is read in
chunks of ``chunk_size`` rows and never held whole:

1. **Pass 1** reads every chunk, checks it (a missing, non-numeric or infinite cell, or a CSV row
   with the wrong number of cells, is a ``PartitionError`` naming the partition file, the line and
   the global row, before any optimisation) and accumulates, over the training rows, the column
   moments that ``Standardizer.fit`` computes in memory (``RunningMoments``: the same
   magnitude-relative, overflow-safe rule), the distinct target values (a classification target
   is refused: the SGPR is Gaussian only) and, with ARD, the training rows of the
   ``ARD_SUBSAMPLE`` smallest hash keys (a uniform subsample without replacement).
2. **Pass 2** adds each chunk's statistics (the kernel of work ``SGPR.statistics_kernel``, shared
   with the in-memory and Dask passes, on the standardised training rows; the next chunk is read
   while the current one is added) for every candidate kernel; they are committed to the models only
   when the pass has ended. Every ``checkpoint_every`` chunks (and on Ctrl-C) the running totals and
   the position reached are written together, atomically, to a state file beside the output, so an
   interrupted pass resumes after the last saved chunk and counts no row twice; a state file from
   other data (size, modification time or a hash of the first and last MiB of a partition) or other
   settings is refused (``ResumeError``), ``restart=True`` discards it.
3. **The bound** is maximised by L-BFGS (``SGPR.fit``), the kernel with the larger bound is kept
   (as ``zonal.recipes.train_sgpr`` does) and the checkpoint is written in the format of
   ``zonal.saved_model``, so ``zonal predict`` reads it unchanged.
4. **Pass 3** scores the fitted model on the held-out rows (mean log predictive density and MSE
   in the target's units).

The validation rows are chosen per row, streaming-compatibly: global row g (0-based, counted over
the partitions in order, header lines excluded) is held out when u(seed, g) < fraction, with u a
splitmix64 hash mapped to [0, 1). So the split differs from the in-memory ``zonal fit``'s
(a seeded permutation of all rows), and holds out about, not exactly, ``fraction`` of the rows.

Inputs: one CSV file, several CSV / Parquet partitions, or a folder of them (its ``*.csv`` and
``*.parquet`` files in name order). Every partition has the first one's columns. CSV cells follow
``zonal.tabular``'s rules (read with pandas' C parser; a chunk with anything unusual is re-read
with the csv module and checked by ``zonal.tabular.Table.numeric``).
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import io
import itertools
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from zonal._files import atomic_writer, check_new_output, interrupts_deferred
from zonal.datasets import Standardizer
from zonal.scale.dask_statistics import PartitionError
from zonal.fitting import (
    DEFAULT_VALIDATION_FRACTION,
    TabularModel,
    Trained,
    _in_target_units,
    select_columns,
    validation_metrics,
)
from zonal.models import SGPR
from zonal.models.sgpr import add_statistics
from zonal.models.sgpr_statistics import StatisticsKernel, read_ahead
from zonal.recipes import (
    ARD_ITERATIONS,
    ARD_SUBSAMPLE,
    UnsupportedLikelihoodError,
    build_sgpr,
    resolve_spec,
)
from zonal.saved_model import save_model
from zonal.tabular import Table, TableError, _check_header, _is_number
from zonal.targets import (
    MAX_AUTO_CLASSES,
    MIN_ROWS_PER_AUTO_CLASS,
    REGRESSION,
    detect_target,
    label_texts,
)

#: partition file suffixes read by the streamed fit
PARTITION_SUFFIXES = (".csv", ".parquet")
#: the running statistics are saved every this many chunks of pass 2
CHECKPOINT_EVERY = 16
#: bytes hashed at each end of a partition for the resume fingerprint
FINGERPRINT_BYTES = 1 << 20
STATE_FORMAT = "zonal.streamed-fit-state"
#: 2: the running totals are in the features' zonal basis (``zonal.models.sgpr_statistics``);
#: 3: the file starts with the sha256 of the serialised state (``_save_state``)
STATE_VERSION = 3
#: the relative spread below which a column counts as constant (``Standardizer.fit``'s default)
RELATIVE_TOLERANCE = 1e-12
_UINT64 = (1 << 64) - 1


class ResumeError(TableError):
    """A saved streamed-fit state does not belong to this input or these settings."""


# ------------------------------------------------------------------------------------ partitions
def list_partitions(sources: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The partition files of ``sources``: files as given, a folder's ``*.csv`` / ``*.parquet``
    files in name order; a ``TableError`` for a missing path, an unknown suffix, a file listed
    twice or none."""
    if isinstance(sources, str | os.PathLike):
        sources = [sources]
    partitions: list[Path] = []
    for source in map(Path, sources):
        if source.is_dir():
            found = sorted(p for p in source.iterdir()
                           if p.is_file() and p.suffix.lower() in PARTITION_SUFFIXES)  # fmt: skip
            if not found:
                raise TableError(f"{source}: the folder holds no .csv or .parquet partition")
            partitions += found
        elif not source.is_file():
            raise TableError(f"{source}: no such file or folder")
        elif source.suffix.lower() not in PARTITION_SUFFIXES:
            raise TableError(
                f"{source}: unknown partition format {source.suffix!r}; the streamed fit reads "
                ".csv and .parquet files"
            )
        else:
            partitions.append(source)
    if not partitions:
        raise TableError("no input: give a CSV file, several partitions or a folder of them")
    resolved = [path.resolve() for path in partitions]
    twice = sorted({str(path) for path in resolved if resolved.count(path) > 1})
    if twice:
        raise TableError(f"partitions listed twice (their rows would count twice): {twice}")
    return partitions


@dataclass(frozen=True, eq=False)
class _ChunkTable(Table):
    """The cells of one chunk, named in errors by their line in the partition and global row."""

    first_row: int = 0  # the chunk's first data row within its partition (0-based)
    first_global_row: int = 0

    def row_label(self, row: int) -> str:
        local = self.first_row + row
        where = f"line {local + 2}" if self.is_csv else f"row {local}"
        return f"{where} (global row {self.first_global_row + row})"


@dataclass(frozen=True)
class Chunk:
    """Rows [first_row, first_row + n) of a partition: inputs x [n, D] and targets y [n]."""

    x: np.ndarray
    y: np.ndarray
    partition: int
    first_row: int  # within the partition
    first_global_row: int


def _module(name: str, extra: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ImportError(
            f"the streamed fit reads tables with {name}: pip install {extra}"
        ) from error


def partition_columns(path: Path) -> tuple[str, ...]:
    """The column names of a partition (a CSV header is checked as ``zonal.tabular`` does)."""
    if path.suffix.lower() == ".parquet":
        parquet = _module("pyarrow.parquet", "pyarrow")
        try:
            return tuple(parquet.ParquetFile(path).schema_arrow.names)
        except Exception as error:  # pyarrow raises several types for damaged files
            raise TableError(f"{path}: not a readable Parquet file ({error})") from error
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            header = next((row for row in csv.reader(handle) if row), None)
    except (UnicodeDecodeError, csv.Error) as error:
        raise TableError(f"{path}: not a readable UTF-8 CSV file ({error})") from error
    if header is None:
        raise TableError(f"{path}: the file is empty; expected a header row of column names")
    header = [name.strip() for name in header]
    _check_header(path, header)
    return tuple(header)


class _RawRows:
    """The data rows of a CSV partition as the csv module reads them, from a position that only
    moves forward: chunks that pandas found unusual are re-checked here, cell by cell."""

    def __init__(self, path: Path) -> None:
        self._handle = open(path, newline="", encoding="utf-8-sig")  # noqa: SIM115 (closed by close)
        self._rows = (row for row in csv.reader(self._handle) if row)
        next(self._rows, None)  # the header
        self.position = 0

    def first_ragged(self, first_row: int, count: int | None, width: int) -> tuple[int, int] | None:
        """(data row, cell count) of the first row in [first_row, first_row + count) (to the end
        for None) whose cell count is not ``width``; None if there is none."""
        rows = itertools.islice(self._rows, first_row - self.position,
                                None if count is None else first_row - self.position + count)  # fmt: skip
        self.position = first_row
        for row in rows:
            self.position += 1
            if len(row) != width:
                return self.position - 1, len(row)
        return None

    def close(self) -> None:
        self._handle.close()


class PartitionReader:
    """The chunks of the partitions: the inputs ``features`` and the target ``target`` of at most
    ``chunk_size`` rows each, checked; every partition must have the first one's columns."""

    def __init__(
        self,
        partitions: Sequence[Path],
        target: str,
        chunk_size: int,
        features: Sequence[str] | None = None,
    ) -> None:
        self.partitions = list(partitions)
        self.chunk_size = chunk_size
        self.columns = partition_columns(self.partitions[0])
        header = Table(self.partitions[0], self.columns,
                       {name: np.empty(0, object) for name in self.columns}, 0, True)  # fmt: skip
        self.features = select_columns(header, target, features)
        self.target = target
        for index, path in enumerate(self.partitions[1:], start=1):
            columns = partition_columns(path)
            if set(columns) != set(self.columns):
                raise PartitionError(
                    f"{self._where(index)} has {len(columns)} columns "
                    f"({', '.join(map(repr, columns))}) but {self.partitions[0]} has "
                    f"{len(self.columns)} ({', '.join(map(repr, self.columns))})"
                )

    def _where(self, partition: int) -> str:
        return f"partition {partition + 1} of {len(self.partitions)} ({self.partitions[partition]})"

    def chunks(self, partition: int, partition_start: int) -> Iterator[Chunk]:
        """The chunks of partition ``partition`` (0-based) whose first row is the global row
        ``partition_start``; bad data is a ``PartitionError`` naming the file and the rows."""
        path = self.partitions[partition]
        if path.suffix.lower() == ".parquet":
            frames, raw = self._parquet_frames(path), None
        else:
            raw = _RawRows(path)
            frames = self._csv_frames(partition, partition_start, raw)
        try:
            first_row = 0
            for frame in frames:
                x, y = self._values(frame, partition, first_row, partition_start, raw)
                yield Chunk(x, y, partition, first_row, partition_start + first_row)
                first_row += len(y)
        finally:
            if raw is not None:
                raw.close()

    def _csv_frames(self, partition: int, partition_start: int, raw: _RawRows) -> Iterator[Any]:
        pandas = _module("pandas", "'zonal[data]'")
        reader = pandas.read_csv(self.partitions[partition], chunksize=self.chunk_size,
                                 encoding="utf-8-sig", keep_default_na=False, na_values=[""],
                                 skip_blank_lines=True)  # fmt: skip
        rows = 0
        with reader:
            while True:
                try:
                    frame = next(reader)
                except StopIteration:
                    return
                except (pandas.errors.ParserError, UnicodeDecodeError) as error:
                    self._check_cell_counts(partition, partition_start, raw, rows, None)
                    raise PartitionError(
                        f"{self._where(partition)}: not a readable UTF-8 CSV file ({error})"
                    ) from error
                frame.columns = [str(name).strip() for name in frame.columns]
                rows += len(frame)
                yield frame

    def _check_cell_counts(
        self,
        partition: int,
        partition_start: int,
        raw: _RawRows,
        first_row: int,
        count: int | None,
    ) -> None:
        found = raw.first_ragged(first_row, count, len(self.columns))
        if found is not None:
            row, cells = found
            raise PartitionError(
                f"{self._where(partition)}: line {row + 2} (global row "
                f"{partition_start + row}) has {cells} cells but the header has "
                f"{len(self.columns)} columns"
            )

    def _values(
        self,
        frame: Any,
        partition: int,
        first_row: int,
        partition_start: int,
        raw: _RawRows | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(x [n, D], y [n]) of a chunk. The first chunk of a CSV partition (pandas would read a
        first column without header as an index), and any with a blank, non-numeric or non-finite
        cell, are checked cell by cell."""
        names = [*self.features, self.target]
        values = None
        if all(frame[name].dtype.kind in "iuf" for name in names):
            values = frame[names].to_numpy(np.float64)  # [n, D + 1]
        clean = values is not None and bool(np.isfinite(values).all())
        chunk_global_row = partition_start + first_row
        if raw is not None and (first_row == 0 or not clean or frame.isna().to_numpy().any()):
            self._check_cell_counts(partition, partition_start, raw, first_row, len(frame))
        if not clean:
            cells = {name: frame[name].to_numpy(object) for name in names}
            table = _ChunkTable(self.partitions[partition], tuple(names), cells, len(frame),
                                raw is not None, first_row, chunk_global_row)  # fmt: skip
            try:
                values = table.numeric(names)
            except TableError as error:
                labels, missing = label_texts(cells[self.target])
                text = [label for label in np.delete(labels, missing) if not _is_number(label)]
                note = (
                    "; the target holds text labels (classification), which the streamed fit "
                    "(SGPR, Gaussian likelihood) cannot fit"
                    if text
                    else ""
                )
                where = self._where(partition)
                raise PartitionError(f"{where}: {str(error).split(': ', 1)[-1]}{note}") from error
            bad = np.flatnonzero(~np.isfinite(values).all(axis=1))  # e.g. a "-nan" cell
            if len(bad):
                raise PartitionError(
                    f"{self._where(partition)}: a NaN value at {table.row_label(int(bad[0]))}"
                )
        return values[:, :-1], values[:, -1]

    def _parquet_frames(self, path: Path) -> Iterator[Any]:
        parquet = _module("pyarrow.parquet", "pyarrow")
        names = [*self.features, self.target]
        for batch in parquet.ParquetFile(path).iter_batches(self.chunk_size, columns=names):
            yield batch.to_pandas()


# ------------------------------------------------------------------------------------ moments
class RunningMoments:
    """Per-column moments of rows seen chunk by chunk, by ``Standardizer.fit``'s rule.

    ``Standardizer.fit`` divides each column by its largest magnitude m = max_i |v_i| before
    taking moments (no overflow at 1e300, no underflow at 1e-300). Here m grows with the chunks:
    the running mean and sum of squared deviations of v / m are rescaled by m_old / m_new <= 1 when
    m grows, and a chunk's (count n_b, mean mu_b, squares S_b) join the running (n_a, mu_a, S_a) by
    Chan, Golub and LeVeque's pairwise update

        mu = mu_a + (mu_b - mu_a) n_b / n,   S = S_a + S_b + (mu_b - mu_a)^2 n_a n_b / n.

    ``standardizer`` returns mean = mu m and std = sqrt(S / n) m (population), std 1 for a column
    whose relative spread sqrt(S / n) is at most ``RELATIVE_TOLERANCE`` (constant).
    """

    def __init__(self, width: int) -> None:
        self.count = 0
        self.magnitude = np.zeros(width)  # [D], largest |v| so far
        self.mean = np.zeros(width)  # [D], of v / magnitude
        self.squares = np.zeros(width)  # [D], sum of (v / magnitude - mean)^2

    def update(self, values: np.ndarray) -> None:
        """Add the rows ``values`` [n, D] (finite)."""
        if len(values) == 0:
            return
        magnitude = np.maximum(self.magnitude, np.abs(values).max(axis=0))  # [D]
        unit = np.where(magnitude > 0, magnitude, 1.0)
        ratio = self.magnitude / unit  # [D], <= 1
        scaled = values / unit  # [n, D], entries in [-1, 1]
        chunk_mean = scaled.mean(axis=0)
        chunk_squares = ((scaled - chunk_mean) ** 2).sum(axis=0)
        total = self.count + len(values)
        delta = chunk_mean - self.mean * ratio
        self.mean = self.mean * ratio + delta * (len(values) / total)
        self.squares = (
            self.squares * ratio**2 + chunk_squares + delta**2 * (self.count * len(values) / total)
        )
        self.count, self.magnitude = total, magnitude

    def standardizer(self) -> Standardizer:
        """The ``Standardizer`` of the rows seen (``[D]`` mean and std)."""
        if self.count == 0:
            raise ValueError("no rows: the moments are empty")
        unit = np.where(self.magnitude > 0, self.magnitude, 1.0)
        spread = np.sqrt(self.squares / self.count)
        constant = spread <= RELATIVE_TOLERANCE
        return Standardizer(mean=self.mean * unit, std=np.where(constant, 1.0, spread * unit))


# ------------------------------------------------------------------------------------ rows
def _splitmix64(values: np.ndarray) -> np.ndarray:
    """Steele, Lea and Flood's splitmix64 finaliser of uint64 ``values`` (wrapping arithmetic)."""
    values = values + np.uint64(0x9E3779B97F4A7C15)
    values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


def row_uniforms(rows: np.ndarray, seed: int, stream: int = 0) -> np.ndarray:
    """u [n] in [0, 1): a hash of (``seed``, ``stream``, global row) per row, so a row's draw does
    not depend on the chunking; 53 bits of splitmix64(row xor key)."""
    key = _splitmix64(_splitmix64(np.array([seed & _UINT64], dtype=np.uint64))
                      + np.uint64(stream))  # fmt: skip
    bits = _splitmix64(np.asarray(rows, dtype=np.uint64) ^ key) >> np.uint64(11)
    return bits.astype(np.float64) * 2.0**-53


def held_out(rows: np.ndarray, seed: int, fraction: float) -> np.ndarray:
    """The validation mask [n] of global ``rows``: u(seed, row) < ``fraction``."""
    return row_uniforms(rows, seed, 0) < fraction


class _Subsample:
    """The ``size`` rows with the smallest hash keys seen so far (bottom-k: a uniform sample
    without replacement, the same whatever the chunking)."""

    def __init__(self, size: int, width: int) -> None:
        self.size = size
        self.keys = np.empty(0)
        self.x = np.empty((0, width))
        self.y = np.empty(0)

    def add(self, keys: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
        keys = np.concatenate([self.keys, keys])
        x, y = np.concatenate([self.x, x]), np.concatenate([self.y, y])
        kept = np.argsort(keys, kind="stable")[: self.size]
        self.keys, self.x, self.y = keys[kept], x[kept], y[kept]


def _count_values(counts: dict[float, int] | None, y: np.ndarray) -> dict[float, int] | None:
    """Running counts of the target's values while they may be class labels (at most
    ``MAX_AUTO_CLASSES`` integers), else None."""
    if counts is None or not np.all(y == np.round(y)):
        return None
    values, found = np.unique(y, return_counts=True)
    for value, count in zip(values.tolist(), found.tolist(), strict=True):
        counts[value] = counts.get(value, 0) + count
    return counts if len(counts) <= MAX_AUTO_CLASSES else None


def _check_regression(counts: dict[float, int] | None, likelihood: str | None, name: str) -> None:
    """Refuse a target that ``zonal.targets.detect_target`` reads as class labels."""
    if counts is None or likelihood == "gaussian":
        return
    values = np.array(sorted(counts))
    # up to MAX_AUTO_CLASSES * MIN_ROWS_PER_AUTO_CLASS copies of each value: the detection only
    # compares the row count with that many rows, so it decides as on the whole column
    copies = np.minimum([counts[value] for value in values],
                        MAX_AUTO_CLASSES * MIN_ROWS_PER_AUTO_CLASS)  # fmt: skip
    labels = np.repeat(label_texts(values)[0], copies)
    if detect_target(labels, None, f"target {name!r}").is_classification:
        raise UnsupportedLikelihoodError(
            f"the target {name!r} holds {len(values)} integer values: a classification target, "
            "which the streamed fit (SGPR, Gaussian likelihood) cannot fit; pass --likelihood "
            "gaussian to fit the values as numbers, or drop --chunk-size"
        )


# ------------------------------------------------------------------------------------ state
def state_path_for(output: str | os.PathLike[str]) -> Path:
    """The resume state of a streamed fit writing ``output``: ``<output>.state`` beside it."""
    output = Path(output)
    return output.with_name(f"{output.name}.state")


def fingerprint(partitions: Sequence[Path]) -> list[dict[str, Any]]:
    """Per partition: its resolved path, size, modification time (ns) and the sha256 of its
    first and last ``FINGERPRINT_BYTES`` (a resume refuses partitions that changed)."""
    prints = []
    for path in partitions:
        stat = path.stat()
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            digest.update(handle.read(FINGERPRINT_BYTES))
            handle.seek(max(stat.st_size - FINGERPRINT_BYTES, 0))
            digest.update(handle.read(FINGERPRINT_BYTES))
        prints.append({"path": str(path.resolve()), "size": int(stat.st_size),
                       "mtime_ns": int(stat.st_mtime_ns), "sha256": digest.hexdigest()})  # fmt: skip
    return prints


def _save_state(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically, Ctrl-C held until it is written: the sha256 of the serialised
    state on the first line, then the state (``_load_state`` checks the one against the other)."""
    with interrupts_deferred():
        buffer = io.BytesIO()
        torch.save(state, buffer)
        payload = buffer.getvalue()
        with atomic_writer(path, "wb") as handle:
            handle.write(hashlib.sha256(payload).hexdigest().encode("ascii") + b"\n")
            handle.write(payload)


def _read_state(path: Path) -> Any:
    """The state saved by ``_save_state``; a ``ValueError`` when its checksum does not match (a
    damaged or truncated file) or it is not such a file."""
    data = path.read_bytes()
    digest, newline, payload = data[:64], data[64:65], data[65:]
    if newline != b"\n" or hashlib.sha256(payload).hexdigest().encode("ascii") != digest:
        raise ValueError("its checksum does not match its contents (damaged or truncated)")
    return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)


def _load_state(
    path: Path, inputs: list[dict[str, Any]], settings: dict[str, Any], restart: bool
) -> dict[str, Any] | None:
    """The saved state of an interrupted fit of these inputs and settings (None: none, or
    ``restart``); a ``ResumeError`` naming what changed otherwise."""
    if not path.exists():
        return None
    if restart:
        path.unlink()
        return None
    advice = f"delete {path} or pass --restart to start again"
    try:
        state = _read_state(path)
    except Exception as error:  # torch raises many types for damaged files
        raise ResumeError(
            f"{path}: not a readable streamed-fit state ({error}); {advice}"
        ) from error
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT \
            or state.get("version") != STATE_VERSION:  # fmt: skip
        raise ResumeError(f"{path} is not a streamed-fit state of this zonal; {advice}")
    saved = state["inputs"]
    if [entry["path"] for entry in saved] != [entry["path"] for entry in inputs]:
        raise ResumeError(
            f"{path} belongs to the partitions {', '.join(entry['path'] for entry in saved)}, not "
            f"to {', '.join(entry['path'] for entry in inputs)}; {advice}"
        )
    _check_unchanged(saved, inputs, f"since the interrupted fit, so {path} cannot be resumed; "
                     + advice)  # fmt: skip
    differ = sorted(key for key in settings if state["settings"].get(key) != settings[key])
    if differ:
        shown = ", ".join(f"{key} {state['settings'].get(key)!r} -> {settings[key]!r}"
                          for key in differ)  # fmt: skip
        raise ResumeError(f"{path} was saved with other settings ({shown}); {advice}")
    return state


def _check_unchanged(saved: list[dict[str, Any]], current: list[dict[str, Any]], when: str) -> None:
    """A ``ResumeError`` naming the first partition whose fingerprint changed ``when``."""
    for old, new in zip(saved, current, strict=True):
        changed = [key for key in ("size", "mtime_ns", "sha256") if old[key] != new[key]]
        if changed:
            raise ResumeError(
                f"the partition {new['path']} changed ({', '.join(changed)} differ: size "
                f"{old['size']} -> {new['size']} bytes) {when}"
            )


# ------------------------------------------------------------------------------------ passes
def _progress_bar(description: str, total: int | None, initial: int, progress: bool) -> tqdm:
    return tqdm(desc=description, total=total, initial=initial, unit=" rows", unit_scale=True,
                disable=not progress, dynamic_ncols=True)  # fmt: skip


def first_pass(
    reader: PartitionReader,
    *,
    validation_fraction: float,
    seed: int,
    ard: bool,
    likelihood: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Pass 1 (module docstring): check every chunk and return the training rows' scalers
    (``x_scaler``, ``y_scaler``), ``num_rows``, ``num_validation_rows``, ``partition_rows`` and,
    with ``ard``, the ``subsample`` (x, y) of raw training rows."""
    width = len(reader.features)
    x_moments, y_moments = RunningMoments(width), RunningMoments(1)
    counts: dict[float, int] | None = {}
    subsample = _Subsample(ARD_SUBSAMPLE, width) if ard else None
    partition_rows: list[int] = []
    num_rows = num_valid = 0
    with _progress_bar("pass 1/3 check, standardise", None, 0, progress) as bar:
        for partition in range(len(reader.partitions)):
            start = num_rows
            for chunk in reader.chunks(partition, num_rows):
                rows = np.arange(chunk.first_global_row, chunk.first_global_row + len(chunk.y))
                valid = held_out(rows, seed, validation_fraction)  # [n]
                train = ~valid
                x_moments.update(chunk.x[train])
                y_moments.update(chunk.y[train, None])
                counts = _count_values(counts, chunk.y)
                if subsample is not None:
                    subsample.add(row_uniforms(rows[train], seed, 1), chunk.x[train],
                                  chunk.y[train])  # fmt: skip
                num_valid += int(valid.sum())
                num_rows += len(rows)
                bar.update(len(rows))
            partition_rows.append(num_rows - start)
    source = reader.partitions[0] if len(reader.partitions) == 1 else "the partitions"
    if num_rows - num_valid < 2:
        raise TableError(
            f"{source}: {num_rows} rows, {num_rows - num_valid} for training; fitting needs at "
            "least 2 training rows"
        )
    if validation_fraction > 0 and num_valid == 0:
        raise TableError(
            f"the validation split is empty: {validation_fraction:g} of {num_rows} rows drew no "
            "row; use more rows, a larger --validation-fraction, or --validation-fraction 0"
        )
    _check_regression(counts, likelihood, reader.target)
    y_moments_scaler = y_moments.standardizer()
    y_scaler = Standardizer(mean=y_moments_scaler.mean[0], std=y_moments_scaler.std[0])
    with np.errstate(over="ignore"):
        if not np.isfinite(np.float64(y_scaler.std) ** 2):
            raise TableError(
                f"{source}: the target {reader.target!r} spreads over {float(y_scaler.std):.3g} "
                "units: its predictive variances would overflow float64; rescale the column"
            )
    return {
        "x_scaler": x_moments.standardizer(),
        "y_scaler": y_scaler,
        "num_rows": num_rows,
        "num_validation_rows": num_valid,
        "partition_rows": partition_rows,
        "subsample": None if subsample is None else (subsample.x, subsample.y),
    }


def accumulate_chunk(
    kernels: dict[str, StatisticsKernel],
    totals: dict[str, list[torch.Tensor]],
    x: torch.Tensor,
    y: torch.Tensor,
    first_row: int,
) -> dict[str, list[torch.Tensor]]:
    """New running totals (in the zonal basis of ``zonal.models.sgpr_statistics``): ``totals``
    plus each model's statistics of the standardised training rows x [n, D], y [n]; ``totals`` is
    not changed, so an interrupted call leaves the saved totals whole."""
    added = {}
    for name, kernel in kernels.items():
        parts = kernel.empty()
        kernel.add_(parts, *kernel.model._checked_rows(x, y, first_row))
        added[name] = add_statistics(totals.get(name), parts)
    return added


def second_pass(
    reader: PartitionReader,
    models: dict[str, SGPR],
    state: dict[str, Any],
    state_path: Path,
    *,
    checkpoint_every: int = CHECKPOINT_EVERY,
    progress: bool = False,
) -> dict[str, list[torch.Tensor]]:
    """Pass 2 (module docstring) from the position saved in ``state``: the statistics of every
    model over the training rows (``SGPR.STATISTICS`` order). The running totals and the position
    after the last chunk added are saved together every ``checkpoint_every`` chunks and on
    Ctrl-C."""
    kernels = {name: model.statistics_kernel() for name, model in models.items()}
    settings, first = state["settings"], state["first_pass"]
    x_scaler = Standardizer(mean=first["x_mean"].numpy(), std=first["x_std"].numpy())
    y_scaler = Standardizer(mean=first["y_mean"].numpy(), std=first["y_std"].numpy())
    partition_starts = np.concatenate([[0], np.cumsum(first["partition_rows"])]).tolist()
    done = (state["totals"], state["position"])  # one name: updated in one step
    unsaved = 0

    def save() -> None:
        _save_state(state_path, {**state, "totals": done[0], "position": done[1]})

    bar = _progress_bar("pass 2/3 statistics", first["num_rows"], done[1]["rows"], progress)
    try:
        for partition in range(done[1]["partition"], len(reader.partitions)):
            skip = done[1]["chunks"] if partition == done[1]["partition"] else 0
            chunks = read_ahead(reader.chunks(partition, partition_starts[partition]))
            for index, chunk in enumerate(chunks):
                if index < skip:
                    continue
                rows = np.arange(chunk.first_global_row, chunk.first_global_row + len(chunk.y))
                train = ~held_out(rows, settings["seed"], settings["validation_fraction"])
                x = torch.from_numpy(x_scaler.transform(chunk.x[train]))  # [n, D]
                y = torch.from_numpy(y_scaler.transform(chunk.y[train]))  # [n]
                totals = done[0]
                if len(y):
                    totals = accumulate_chunk(kernels, totals, x, y, chunk.first_global_row)
                done = (totals, {"partition": partition, "chunks": index + 1,
                                 "rows": int(rows[-1]) + 1})  # fmt: skip
                bar.update(len(rows))
                unsaved += 1
                if unsaved >= checkpoint_every:
                    save()
                    unsaved = 0
            done = (done[0], {"partition": partition + 1, "chunks": 0,
                              "rows": partition_starts[partition + 1]})  # fmt: skip
    except KeyboardInterrupt:
        save()
        raise
    finally:
        bar.close()
    return {name: kernels[name].finish(totals) for name, totals in done[0].items()}


@torch.no_grad()
def third_pass(
    reader: PartitionReader,
    fitted: TabularModel,
    *,
    seed: int,
    validation_fraction: float,
    progress: bool = False,
) -> dict[str, float]:
    """Pass 3: the mean log predictive density and MSE of the held-out rows under the fitted
    model (``zonal.fitting.validation_metrics``, chunk by chunk), in standardised units."""
    model = fitted.trained.model
    sums = {"log_likelihood": 0.0, "mse": 0.0}
    count = 0
    with _progress_bar("pass 3/3 validation", fitted.num_rows, 0, progress) as bar:
        start = 0
        for partition in range(len(reader.partitions)):
            for chunk in reader.chunks(partition, start):
                rows = np.arange(chunk.first_global_row, chunk.first_global_row + len(chunk.y))
                valid = held_out(rows, seed, validation_fraction)
                if valid.any():
                    x = torch.from_numpy(fitted.x_scaler.transform(chunk.x[valid]))  # [n, D]
                    y = torch.from_numpy(fitted.y_scaler.transform(chunk.y[valid]))  # [n]
                    metrics = validation_metrics(model, REGRESSION, x, y)
                    for key in sums:
                        sums[key] += metrics[key] * len(y)
                    count += len(y)
                start += len(rows)
                bar.update(len(rows))
    return {key: value / count for key, value in sums.items()}


# ------------------------------------------------------------------------------------ fit
def streamed_fit(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    target: str,
    *,
    output: str | os.PathLike[str],
    chunk_size: int,
    features: Sequence[str] | None = None,
    model: str = "auto",
    likelihood: str | None = None,
    validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
    kernel: str = "auto",
    num_inducing: int | None = None,
    steps: int | None = None,
    learning_rate: float | None = None,
    ard: bool | None = None,
    seed: int = 0,
    progress: bool = False,
    restart: bool = False,
    force: bool = False,
    checkpoint_every: int = CHECKPOINT_EVERY,
) -> TabularModel:
    """Fit the SGPR to the partitions ``sources`` read ``chunk_size`` rows at a time (module
    docstring) and save the checkpoint ``output`` (``zonal.saved_model``, for ``zonal predict``);
    returns the fitted model.

    ``model`` is ``"sgpr"`` or ``"auto"`` (the SGPR, with ARD unless ``ard=False``, as under
    ``zonal fit --model auto``); the other options are those of ``zonal.fitting.fit_data``. An
    interrupted fit resumes from its state file ``state_path_for(output)`` when called again with
    the same inputs and settings (``restart`` discards it); the file is removed on success.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"the chunk size must be a positive number of rows, got {chunk_size!r}")
    if model not in ("auto", "sgpr"):
        raise ValueError(
            f"--chunk-size fits the one-pass SGPR (sgpr, or auto meaning sgpr), not {model!r}: its "
            "statistics are sums over rows; drop --chunk-size to train other models in memory"
        )
    if likelihood not in (None, "gaussian"):
        raise UnsupportedLikelihoodError(
            f"the streamed fit is the SGPR's collapsed bound of a Gaussian likelihood and cannot "
            f"train a {likelihood} likelihood (classification); drop --chunk-size"
        )
    if not (isinstance(validation_fraction, int | float) and 0 <= validation_fraction < 1):
        raise ValueError(f"the validation fraction must lie in [0, 1), got {validation_fraction!r}")
    output = check_new_output(output, force=force)
    started = time.perf_counter()
    partitions = list_partitions(sources)
    reader = PartitionReader(partitions, target, chunk_size, features)
    use_ard = ard is not False if model == "auto" else bool(ard)
    spec = resolve_spec(len(reader.features), model="sgpr", kernel=kernel,
                        num_inducing=num_inducing, steps=steps, learning_rate=learning_rate,
                        likelihood="gaussian", ard=use_ard, seed=seed)  # fmt: skip
    settings = {"features": list(reader.features), "target": target, "chunk_size": chunk_size,
                "validation_fraction": float(validation_fraction), "seed": int(seed),
                "likelihood": likelihood or "", "spec": spec}  # fmt: skip
    state_path = state_path_for(output)
    inputs = fingerprint(partitions)
    state = _load_state(state_path, inputs, settings, restart)
    names = ["arccos", "polynomial-decay"] if spec["kernel"] == "auto" else [spec["kernel"]]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        models = {name: build_sgpr({**spec, "kernel": name}) for name in names}
    if state is None:
        first = first_pass(reader, validation_fraction=validation_fraction, seed=seed, ard=use_ard,
                           likelihood=likelihood, progress=progress)  # fmt: skip
        if first["subsample"] is not None:  # ARD: scales by the bound of the subsample
            x_sub = torch.from_numpy(first["x_scaler"].transform(first["subsample"][0]))
            y_sub = torch.from_numpy(first["y_scaler"].transform(first["subsample"][1]))
            for sgpr in models.values():
                sgpr.fit_input_scales(x_sub, y_sub, subsample_size=ARD_SUBSAMPLE,
                                      max_iter=ARD_ITERATIONS, seed=seed)  # fmt: skip
        state = _initial_state(inputs, settings, first, models)
        _save_state(state_path, state)
    else:
        for name, sgpr in models.items():
            sgpr.load_state_dict(state["models"][name])
    _check_unchanged(state["inputs"], fingerprint(partitions), "during the fit; run it again")
    if not state["finished"]:
        state["totals"] = second_pass(reader, models, state, state_path,
                                      checkpoint_every=checkpoint_every, progress=progress)  # fmt: skip
        state["finished"] = True
        _save_state(state_path, state)
    fitted = _optimise(models, state, spec, reader, partitions, started)
    if state["first_pass"]["num_validation_rows"]:
        _check_unchanged(state["inputs"], fingerprint(partitions), "during the fit; run it again")
        metrics = third_pass(reader, fitted, seed=seed, validation_fraction=validation_fraction,
                             progress=progress)  # fmt: skip
        score = {"seconds": time.perf_counter() - started, "objective": fitted.trained.objective,
                 **metrics}  # fmt: skip
        fitted.scores = {"sgpr": _in_target_units(score, REGRESSION, fitted.y_scaler)}
        fitted.validation = {key: value for key, value in fitted.scores["sgpr"].items()
                             if key not in ("seconds", "objective")}  # fmt: skip
    fitted.trained.seconds = time.perf_counter() - started
    save_model(fitted, output, force=force)
    state_path.unlink()
    return fitted


def _initial_state(
    inputs: list[dict[str, Any]],
    settings: dict[str, Any],
    first: dict[str, Any],
    models: dict[str, SGPR],
) -> dict[str, Any]:
    """The state saved after pass 1: its results, the models before pass 2 (their ARD scales
    and hyperparameters), no totals yet."""
    as_tensor = torch.as_tensor
    return {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "inputs": inputs,
        "settings": settings,
        "first_pass": {
            "x_mean": as_tensor(first["x_scaler"].mean),
            "x_std": as_tensor(first["x_scaler"].std),
            "y_mean": as_tensor(first["y_scaler"].mean),
            "y_std": as_tensor(first["y_scaler"].std),
            "num_rows": first["num_rows"],
            "num_validation_rows": first["num_validation_rows"],
            "partition_rows": first["partition_rows"],
        },
        "models": {name: sgpr.state_dict() for name, sgpr in models.items()},
        "totals": {},
        "position": {"partition": 0, "chunks": 0, "rows": 0},
        "finished": False,
    }


def _optimise(
    models: dict[str, SGPR],
    state: dict[str, Any],
    spec: dict[str, Any],
    reader: PartitionReader,
    partitions: list[Path],
    started: float,
) -> TabularModel:
    """Commit the totals, maximise each kernel's bound by L-BFGS and keep the larger bound (a
    kernel whose fit fails is skipped if another succeeds), as ``zonal.recipes.train_sgpr``."""
    fits: dict[str, tuple[SGPR, float]] = {}
    failures: list[ValueError] = []
    for name, sgpr in models.items():
        sgpr.commit_statistics(state["totals"][name])
        try:
            sgpr.fit(max_iter=spec["steps"], lr=spec["learning_rate"])
            with torch.no_grad():
                objective = float(sgpr.elbo() / sgpr.stat_count)
            if not math.isfinite(objective):
                raise ValueError(f"SGPR with the {name} kernel diverged (bound {objective})")
            fits[name] = (sgpr, objective)
        except ValueError as error:
            failures.append(error)
    if not fits:
        raise failures[0]
    best = max(fits, key=lambda name: fits[name][1])
    first = state["first_pass"]
    trained = Trained({**spec, "kernel": best}, fits[best][0], fits[best][1],
                      time.perf_counter() - started,
                      {name: fit[1] for name, fit in fits.items()})  # fmt: skip
    source = str(partitions[0]) if len(partitions) == 1 else \
        f"{len(partitions)} partitions: {partitions[0]} ... {partitions[-1]}"  # fmt: skip
    return TabularModel(
        trained,
        reader.features,
        reader.target,
        Standardizer(mean=first["x_mean"].numpy(), std=first["x_std"].numpy()),
        Standardizer(mean=first["y_mean"].numpy(), std=first["y_std"].numpy()),
        first["num_rows"],
        source,
        REGRESSION,
        num_validation_rows=first["num_validation_rows"],
    )


__all__ = [
    "PartitionError",
    "PartitionReader",
    "ResumeError",
    "RunningMoments",
    "first_pass",
    "held_out",
    "list_partitions",
    "row_uniforms",
    "second_pass",
    "state_path_for",
    "streamed_fit",
]
