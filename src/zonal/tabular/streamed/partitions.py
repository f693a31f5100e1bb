"""The partitions of a streamed fit and their reader: one CSV file, several CSV / Parquet
partitions, or a folder of them, read ``chunk_size`` rows at a time and checked cell by cell (a bad
cell is a ``PartitionError`` naming the partition file, the line and the global row).
"""

from __future__ import annotations

import csv
import importlib
import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zonal.scale.dask_statistics import PartitionError
from zonal.tabular.fitting import select_columns
from zonal.tabular.tables import Table, TableError, check_header, is_number
from zonal.tabular.targets import (
    label_texts,
)

#: partition file suffixes read by the streamed fit
PARTITION_SUFFIXES = (".csv", ".parquet")


def list_partitions(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
) -> list[Path]:
    """The partition files of ``sources``: files as given, a folder's ``*.csv`` / ``*.parquet``
    files in name order; a ``TableError`` for a missing path, an unknown suffix, a file listed
    twice or none."""
    listed = [sources] if isinstance(sources, str | os.PathLike) else sources
    partitions: list[Path] = []
    for source in map(Path, listed):
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
    """The column names of a partition (a CSV header is checked as ``zonal.tabular.tables`` does)."""
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
    check_header(path, header)
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
        (self.target,) = header.require([target], "target")
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
                present = np.delete(labels, missing)
                text = [label for label in present if not is_number(label)]
                note = (  # mostly text, as zonal.tabular.targets reads a column of labels
                    "; the target holds text labels (classification), which the streamed fit "
                    "(SGPR, Gaussian likelihood) cannot fit"
                    if len(text) >= len(present) / 2
                    else ""
                )
                where = self._where(partition)
                scope = (f" (counted in the {len(frame)}-row chunk from {table.row_label(0)}: the "
                         "streamed fit stops at its first bad chunk)")  # fmt: skip
                raise PartitionError(
                    f"{where}: {str(error).split(': ', 1)[-1]}{scope}{note}"
                ) from error
            bad = np.flatnonzero(~np.isfinite(values).all(axis=1))  # e.g. a "-nan" cell
            if len(bad):
                raise PartitionError(
                    f"{self._where(partition)}: a NaN value at {table.row_label(int(bad[0]))}"
                )
        assert values is not None  # read in one piece, or checked cell by cell
        return values[:, :-1], values[:, -1]

    def _parquet_frames(self, path: Path) -> Iterator[Any]:
        parquet = _module("pyarrow.parquet", "pyarrow")
        names = [*self.features, self.target]
        for batch in parquet.ParquetFile(path).iter_batches(self.chunk_size, columns=names):
            yield batch.to_pandas()
