"""The user's tables for ``zonal fit`` and ``zonal predict``: reading CSV / TSV / NPZ / Parquet,
writing results (CSV or NPZ).

**CSV**: comma-separated (**TSV**, a ``.tsv`` file: tab-separated), UTF-8 (a byte-order mark is
allowed), a header row of column names, then one row per data point. Cells are numbers in Python
syntax (``1.5``, ``-2e-3``). Empty cells and ``NA``, ``N/A``, ``NaN``, ``null``, ``None``, ``?``
(any case) are missing values. Columns that a command does not use may hold anything.

**NPZ** (``numpy.savez``), in one of two layouts:

- *one array per column*: every array is 1-D with the same length N; the array names are the
  column names, in the order they were saved (``np.savez(path, x1=..., x2=..., y=...)``);
- *matrix*: an array ``X`` [N, D], optionally ``columns`` (D names, a string array; default
  ``x0 .. x{D-1}``), ``y`` [N] and ``target`` (the name of ``y``, a 0-d string array; default
  ``"y"``): ``np.savez(path, X=X, y=y, columns=np.array(names))``.

**Parquet** (needs ``pyarrow``, extra ``zonal[scale]``): numeric and boolean columns as numbers
(nulls missing), others as text.

Arrays are read with ``allow_pickle=False``. Problems are ``TableError`` s that name the file, the
columns and the rows (CSV: line numbers of the file, the header being line 1; NPZ: 0-based rows).
"""

from __future__ import annotations

import csv
import importlib
import io
import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from zonal._files import write_new_file

MISSING_TOKENS = frozenset({"", "na", "n/a", "nan", "null", "none", "?"})
SUFFIXES = (".csv", ".npz")
#: the formats ``read_table`` reads (``SUFFIXES`` are those ``write_table`` writes)
READ_SUFFIXES = (".csv", ".tsv", ".npz", ".parquet")
_SHOWN = 5  # rows named per column in an error message
_NAMES_SHOWN = 8  # column names listed by an error message before "and N more"
MAX_MAGNITUDE = 1e150
"""Largest |value| a numeric cell may hold: squares of larger numbers overflow float64, so the
standardisation (and every kernel after it) would turn the column into zeros or NaN."""
_TOO_LARGE = f"values too large (|x| > {MAX_MAGNITUDE:g})"


def name_list(names: Sequence[str], shown: int = _NAMES_SHOWN) -> str:
    """Quoted, comma-separated ``names``, the first ``shown`` of them and "and N more" after."""
    listed = ", ".join(repr(str(name)) for name in names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")


class TableError(ValueError):
    """A table cannot be read or does not fit the request; the message names the file."""


class DataWarning(UserWarning):
    """A table that can be fitted but deserves a note: more input columns than rows, or input
    columns of a single value (``zonal fit`` prints it as a ``zonal: note:`` line)."""


@dataclass(frozen=True, eq=False)
class Table:
    """A table read from ``path``: its column names and, per column, the cells.

    CSV cells are kept as text until a command asks for numbers (``numeric``), so that a column the
    command does not use may hold anything; NPZ columns are numeric arrays already.
    """

    path: Path
    columns: tuple[str, ...]
    cells: Mapping[str, np.ndarray]  # column -> [N] (float64, or object for CSV text)
    num_rows: int
    is_csv: bool

    def row_label(self, row: int) -> str:
        """How an error names data row ``row`` (0-based): a file line (CSV) or an array index."""
        return f"line {row + 2}" if self.is_csv else f"row {row}"

    def column_named(self, name: str) -> str | None:
        """The table's column ``name``, or else the one column whose name without surrounding
        spaces is ``name``'s without them (a CSV header is stripped, a Parquet or NPZ name kept
        as written, ``--target`` and ``--features`` stripped: so ``" wind speed "`` in a Parquet
        file is the column ``wind speed`` of the same table saved as CSV); None if there is none,
        or several."""
        if name in self.cells:
            return name
        matches = [column for column in self.columns if column.strip() == name.strip()]
        return matches[0] if len(matches) == 1 else None

    def require(self, names: Sequence[str], role: str) -> tuple[str, ...]:
        """The table's columns for ``names`` (``column_named``); a ``TableError`` listing the
        table's columns if any is missing."""
        found = [self.column_named(name) for name in names]
        missing = [name for name, column in zip(names, found, strict=True) if column is None]
        if missing:
            raise TableError(
                f"{self.path}: no {role} column {name_list(missing)}; its columns are "
                f"{name_list(self.columns)}"
            )
        return tuple(column for column in found if column is not None)

    def numeric(self, names: Sequence[str], role: str = "input") -> np.ndarray:
        """The columns ``names`` as a float64 matrix [N, len(names)].

        Missing, non-numeric, infinite or too large (|x| > ``MAX_MAGNITUDE``) cells are a
        ``TableError`` naming every bad column with its first rows.
        """
        names = self.require(names, role)
        matrix = np.empty((self.num_rows, len(names)), dtype=np.float64)
        problems: dict[str, list[str]] = {"missing values": [], "non-numeric values": [],
                                          "infinite values": [], _TOO_LARGE: []}  # fmt: skip
        for index, name in enumerate(names):
            values, bad = _to_float(self.cells[name])
            matrix[:, index] = values
            for kind, rows in bad.items():
                if len(rows):
                    problems[kind].append(self._describe(name, rows, kind))
        messages = [f"{kind} in {'; '.join(found)}" for kind, found in problems.items() if found]
        if messages:
            raise TableError(f"{self.path}: " + ". ".join(messages))
        return matrix

    def _describe(self, name: str, rows: np.ndarray, kind: str) -> str:
        shown = ", ".join(self.row_label(int(row)) for row in rows[:_SHOWN])
        more = f" and {len(rows) - _SHOWN} more" if len(rows) > _SHOWN else ""
        text = f"column {name!r} at {shown}{more}"
        if kind == "non-numeric values":
            examples = ", ".join(repr(str(self.cells[name][int(row)])) for row in rows[:3])
            text += f" ({examples})"
        return text


def read_table(path: str | os.PathLike[str]) -> Table:
    """Read a CSV, TSV, NPZ or Parquet table (see the module docstring for the layouts)."""
    path = Path(path)
    if path.is_dir():
        raise TableError(
            f"{path}: is a folder; give a .csv, .tsv, .npz or .parquet file, or stream a folder of "
            "CSV / Parquet partitions with --chunk-size ROWS"
        )
    suffix = path.suffix.lower()
    if suffix not in READ_SUFFIXES:
        raise TableError(
            f"{path}: unknown table format {path.suffix!r}; use a .csv, .tsv, .npz or .parquet file"
        )
    if not path.is_file():
        raise TableError(f"{path}: no such file")
    if suffix in (".csv", ".tsv"):
        return _read_csv(path, "\t" if suffix == ".tsv" else ",")
    if suffix == ".parquet":
        return _read_parquet(path)
    return _read_npz(path)


def write_table(
    path: str | os.PathLike[str],
    columns: Mapping[str, np.ndarray],
    *,
    force: bool = False,
) -> Path:
    """Write equal-length 1-D ``columns`` as CSV (or NPZ, one array per column, for a .npz path).

    The file is written atomically and an existing file is replaced only with ``force``.
    """
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise TableError(f"{path}: unknown table format {path.suffix!r}; use a .csv or .npz file")
    arrays = {name: np.asarray(values).reshape(-1) for name, values in columns.items()}
    lengths = {len(values) for values in arrays.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns of different lengths {sorted(lengths)}")
    if path.suffix.lower() == ".npz":
        return write_new_file(
            path, lambda handle: np.savez(handle, **cast(dict[str, Any], arrays)), force=force
        )

    def write_csv(handle: IO[str]) -> None:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(list(arrays))
        writer.writerows(zip(*(_format_column(values) for values in arrays.values()), strict=True))

    return write_new_file(path, write_csv, mode="w", force=force)


# ---------------------------------------------------------------------------------------- CSV


def _read_csv(path: Path, delimiter: str = ",") -> Table:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise TableError(f"{path}: not UTF-8 text ({error}); is it really a CSV file?") from error
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    except csv.Error as error:
        raise TableError(f"{path}: not a readable CSV file ({error})") from error
    rows = [row for row in rows if row]  # blank lines
    if not rows:
        raise TableError(f"{path}: the file is empty; expected a header row of column names")
    header = [name.strip() for name in rows[0]]
    separators = [mark for mark in ";\t|," if len(header) == 1 and mark in header[0]
                  and mark != delimiter]  # fmt: skip
    if separators:
        kind = "tab-separated .tsv" if delimiter == "\t" else "comma-separated .csv"
        raise TableError(
            f"{path}: the header is one column, {header[0][:60]!r}, holding {separators[0]!r}: "
            f"a {kind} file has {delimiter!r} between its cells (a .tsv file is read with tabs)"
        )
    check_header(path, header)
    body = rows[1:]
    if not body:
        raise TableError(f"{path}: the file has a header but no data rows")
    ragged = [i for i, row in enumerate(body) if len(row) != len(header)]
    if ragged:
        shown = ", ".join(f"line {i + 2} ({len(body[i])} cells)" for i in ragged[:_SHOWN])
        raise TableError(
            f"{path}: the header has {len(header)} columns but {len(ragged)} row(s) do not: {shown}"
        )
    cells = {
        name: np.array([row[j].strip() for row in body], dtype=object)
        for j, name in enumerate(header)
    }
    return Table(path, tuple(header), cells, len(body), is_csv=True)


def check_header(path: Path, header: list[str]) -> None:
    """A ``TableError`` for a header with an empty, repeated or numeric column name."""
    empty = [str(j + 1) for j, name in enumerate(header) if not name]
    if empty:
        raise TableError(
            f"{path}: the header row has empty column names (column {', '.join(empty)})"
        )
    duplicated = sorted({name for name in header if header.count(name) > 1})
    if duplicated:
        raise TableError(f"{path}: duplicated column names {', '.join(map(repr, duplicated))}")
    numeric = [name for name in header if is_number(name)]
    if len(numeric) == len(header):
        raise TableError(
            f"{path}: the first row ({', '.join(header[:4])}, ...) looks like data, not column "
            "names; add a header row"
        )


def is_number(text: str) -> bool:
    """Whether ``text`` reads as a number (``float`` accepts it)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------------ Parquet
def _read_parquet(path: Path) -> Table:
    """A Parquet file's columns: numeric and boolean ones as float64 (nulls NaN), others as text
    (nulls empty, so missing)."""
    try:
        parquet = importlib.import_module("pyarrow.parquet")
        types = importlib.import_module("pyarrow.types")
    except ImportError as error:
        raise TableError(
            f"{path}: reading Parquet needs pyarrow: pip install 'zonal[scale]' (or pyarrow)"
        ) from error
    try:
        names = [str(name) for name in parquet.ParquetFile(path).schema_arrow.names]
        check_header(path, names)  # before reading: pyarrow refuses duplicated names its own way
        table = parquet.read_table(path)
    except TableError:
        raise
    except Exception as error:  # pyarrow raises ArrowInvalid, OSError, ... for damaged files
        reason = (str(error).strip().splitlines() or [""])[0][:200]
        raise TableError(f"{path}: not a readable Parquet file ({reason})") from error
    if table.num_rows == 0:
        raise TableError(f"{path}: the table has no rows")
    cells: dict[str, np.ndarray] = {}
    for name, column in zip(names, table.columns, strict=True):
        kind = column.type
        if types.is_integer(kind) or types.is_floating(kind) or types.is_boolean(kind):
            values = [np.nan if value is None else float(value) for value in column.to_pylist()]
            cells[name] = np.array(values, dtype=np.float64)
        else:
            texts = ["" if value is None else str(value) for value in column.to_pylist()]
            cells[name] = np.array(texts, dtype=object)
    return Table(path, tuple(names), cells, table.num_rows, is_csv=False)


# ---------------------------------------------------------------------------------------- NPZ
def _read_npz(path: Path) -> Table:
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        if "allow_pickle" in str(error) and zipfile.is_zipfile(path):
            raise TableError(
                f"{path}: an array of Python objects (dtype=object), which zonal does not "
                "unpickle: save text columns as strings (np.asarray(column, dtype=str)) and "
                "numbers as numbers"
            ) from error
        reason = "it is not a zip archive" if not zipfile.is_zipfile(path) else "a damaged array"
        raise TableError(f"{path}: not a readable NPZ archive ({reason})") from error
    if not arrays:
        raise TableError(f"{path}: the archive holds no arrays")
    if "X" in arrays:
        columns, cells = _matrix_layout(path, arrays)
    else:
        columns, cells = _column_layout(path, arrays)
    lengths = {len(values) for values in cells.values()}
    if len(lengths) != 1:
        sizes = ", ".join(f"{name!r}: {len(values)}" for name, values in cells.items())
        raise TableError(f"{path}: the columns have different lengths ({sizes})")
    num_rows = lengths.pop()
    if num_rows == 0:
        raise TableError(f"{path}: the table has no rows")
    return Table(path, tuple(columns), cells, num_rows, is_csv=False)


def _matrix_layout(path: Path, arrays: dict[str, np.ndarray]) -> tuple[list[str], dict]:
    unknown = sorted(set(arrays) - {"X", "y", "columns", "target"})
    if unknown:
        raise TableError(
            f"{path}: unexpected arrays {unknown} beside 'X'; the matrix layout holds X, and "
            "optionally columns, y and target"
        )
    matrix = arrays["X"]
    if matrix.ndim != 2:
        raise TableError(f"{path}: 'X' must be a matrix [N, D], got shape {matrix.shape}")
    width = matrix.shape[1]
    names = [f"x{j}" for j in range(width)]
    if "columns" in arrays:
        names = [str(name) for name in np.asarray(arrays["columns"]).reshape(-1)]
        if len(names) != width:
            raise TableError(
                f"{path}: 'columns' has {len(names)} names but 'X' has {width} columns"
            )
    cells = {name: _numeric_array(path, name, matrix[:, j]) for j, name in enumerate(names)}
    if "y" in arrays:
        target = str(np.asarray(arrays.get("target", "y")).reshape(-1)[0])
        if arrays["y"].ndim != 1:
            raise TableError(f"{path}: 'y' must be 1-D [N], got shape {arrays['y'].shape}")
        cells[target] = _numeric_array(path, target, arrays["y"])
        names.append(target)
    if len(set(names)) != len(names):
        raise TableError(f"{path}: duplicated column names in 'columns' / 'target'")
    return names, cells


def _column_layout(path: Path, arrays: dict[str, np.ndarray]) -> tuple[list[str], dict]:
    not_vectors = [
        f"{name!r} {values.shape}" for name, values in arrays.items() if values.ndim != 1
    ]
    if not_vectors:
        raise TableError(
            f"{path}: arrays {', '.join(not_vectors)} are not 1-D columns; store one 1-D array per "
            "column, or a matrix 'X' [N, D] (see `zonal fit --help`)"
        )
    cells = {name: _numeric_array(path, name, values) for name, values in arrays.items()}
    return list(arrays), cells


def _numeric_array(path: Path, name: str, values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "biuf":
        return values.astype(np.float64)
    if values.dtype.kind in "US":  # text: parsed like CSV cells when a command uses the column
        return values.astype(str).astype(object)
    raise TableError(f"{path}: column {name!r} has dtype {values.dtype}, not numbers")


# ---------------------------------------------------------------------------------------- cells


def _to_float(column: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(float64 values, {problem: 0-based rows}) for a numeric or text column."""
    if column.dtype == object:
        values = np.empty(len(column), dtype=np.float64)
        missing, text = [], []
        for row, cell in enumerate(column):
            cell = str(cell).strip()
            if cell.lower() in MISSING_TOKENS:
                missing.append(row)
                values[row] = np.nan
                continue
            try:
                if "_" in cell:  # Python reads "1_000" as 1000; a table cell with _ is text
                    raise ValueError(cell)
                values[row] = float(cell)
            except ValueError:
                text.append(row)
                values[row] = np.nan
        missing_rows = np.array(missing, dtype=np.int64)
        text_rows = np.array(text, dtype=np.int64)
    else:
        values = column.astype(np.float64)
        missing_rows = np.flatnonzero(np.isnan(values))
        text_rows = np.array([], dtype=np.int64)
    infinite_rows = np.flatnonzero(np.isinf(values))
    finite = np.isfinite(values)
    large_rows = np.flatnonzero(np.abs(np.where(finite, values, 0.0)) > MAX_MAGNITUDE)
    return values, {
        "missing values": missing_rows,
        "non-numeric values": text_rows,
        "infinite values": infinite_rows,
        _TOO_LARGE: large_rows,
    }


def _format_column(values: np.ndarray) -> list[Any]:
    if values.dtype.kind == "f":
        return [repr(float(value)) for value in values]
    return values.tolist()
