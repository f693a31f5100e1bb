"""Parsers of the original file formats, bytes in, float64 tables out.

Each parser reads the format as its authors wrote it (whitespace text, CSV, Excel, libsvm, IDX,
ARFF, KEEL) and raises ``ValueError`` naming the line or field it cannot read. None of them knows which
dataset it reads: column roles are the loaders' business (``zonal.datasets.loaders``).
"""

from __future__ import annotations

import csv
import gzip
import importlib
import io
from dataclasses import dataclass

import numpy as np

GZIP_MAGIC = b"\x1f\x8b"

# IDX type codes (third byte of the magic number) -> big-endian numpy dtypes
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def maybe_gunzip(data: bytes) -> bytes:
    """``data`` decompressed if it starts with the gzip magic, else unchanged."""
    return gzip.decompress(data) if data[:2] == GZIP_MAGIC else data


def _text_lines(data: bytes) -> list[str]:
    return maybe_gunzip(data).decode("utf-8-sig").splitlines()


def _float_rows(rows: list[list[str]], first_line: int) -> np.ndarray:
    """Stack rows of numeric strings into a float64 table [N, C], checking every row's length."""
    if not rows:
        raise ValueError("the table has no data rows")
    width = len(rows[0])
    for number, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(
                f"row {first_line + number} has {len(row)} fields where the first has {width}"
            )
    try:
        return np.array(rows, dtype=np.float64)
    except ValueError as error:
        raise ValueError(f"non-numeric field in the table: {error}") from error


def parse_whitespace_table(data: bytes) -> np.ndarray:
    """A table of numbers separated by blanks, one row a line; blank lines are skipped. [N, C]"""
    rows = [line.split() for line in _text_lines(data) if line.strip()]
    return _float_rows(rows, first_line=1)


def parse_text_rows(data: bytes, delimiter: str | None = None) -> list[list[str]]:
    """The rows of a text table as stripped strings: fields split at ``delimiter`` (CSV quoting
    allowed) or, when it is None, at runs of blanks; blank lines are skipped. For tables that mix
    text and numbers, whose loaders decide what each column means."""
    lines = [line for line in _text_lines(data) if line.strip()]
    if delimiter is None:
        return [line.split() for line in lines]
    return [[field.strip() for field in row] for row in csv.reader(lines, delimiter=delimiter)]


def parse_csv_table(
    data: bytes, header: bool, delimiter: str = ","
) -> tuple[np.ndarray, list[str] | None]:
    """A delimited (by default comma-separated) numeric table [N, C] and its header's column
    names (None without one)."""
    text = io.StringIO("\n".join(_text_lines(data)))
    rows = [row for row in csv.reader(text, delimiter=delimiter) if row]
    names = [name.strip() for name in rows.pop(0)] if header and rows else None
    table = _float_rows([[field.strip() for field in row] for row in rows], 1 + int(header))
    if names is not None and len(names) != table.shape[1]:
        raise ValueError(f"the header has {len(names)} names for {table.shape[1]} columns")
    return table, names


def parse_excel_sheet(data: bytes, sheet: str | int = 0) -> tuple[np.ndarray, list[str]]:
    """The numeric table [N, C] of one sheet of an Excel workbook and its header row's names.

    Rows and columns that are entirely empty are dropped (some workbooks carry trailing ones).
    Needs pandas and openpyxl (the ``data`` extra; ``.xls`` files also need xlrd).
    """
    # .xlsx is a zip archive, read by openpyxl; .xls an OLE2 file, read by xlrd
    engine = "openpyxl" if data[:2] == b"PK" else "xlrd"
    try:
        import pandas as pd

        importlib.import_module(engine)
    except ImportError as error:
        raise ImportError(
            f"reading this Excel file needs pandas and {engine}: pip install 'zonal[data]'"
            + (" xlrd" if engine == "xlrd" else "")
        ) from error
    frame = pd.read_excel(io.BytesIO(data), sheet_name=sheet, header=0, engine=engine)
    frame = frame.dropna(axis=0, how="all").dropna(axis=1, how="all")
    names = [str(name).strip() for name in frame.columns]
    try:
        table = frame.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"sheet {sheet!r} holds non-numeric cells: {error}") from error
    return table, names


def parse_libsvm(data: bytes, num_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """libsvm / svmlight text: ``label index:value ...`` with 1-based indices, absent = 0.

    Returns the dense features [N, num_features] (default: the largest index seen) and the labels
    [N] as float64.
    """
    labels: list[float] = []
    entries: list[dict[int, float]] = []
    for number, line in enumerate(_text_lines(data), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        try:
            labels.append(float(fields[0]))
            row: dict[int, float] = {}
            for field in fields[1:]:
                position, number_text = field.split(":", 1)
                row[int(position)] = float(number_text)
        except ValueError as error:
            raise ValueError(
                f"line {number} is not libsvm 'label index:value ...': {line!r}"
            ) from error
        if any(index < 1 for index in row):
            raise ValueError(f"line {number}: libsvm feature indices start at 1")
        entries.append(row)
    if not entries:
        raise ValueError("the libsvm file has no data lines")
    width = num_features or max((max(row, default=0) for row in entries), default=0)
    features = np.zeros((len(entries), width))
    for row_number, row in enumerate(entries):
        for index, value in row.items():
            if index > width:
                raise ValueError(f"feature index {index} exceeds num_features={width}")
            features[row_number, index - 1] = value
    return features, np.asarray(labels)


def parse_idx(data: bytes) -> np.ndarray:
    """An IDX array (the MNIST file format; gzip allowed) in its native shape and dtype.

    Header: two zero bytes, a type code, the number of dimensions, then each dimension as a
    big-endian uint32; then the values, big-endian, in C order.
    """
    raw = maybe_gunzip(data)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in IDX_DTYPES:
        raise ValueError(f"not an IDX file (magic bytes {raw[:4]!r})")
    dtype, ndim = IDX_DTYPES[raw[2]], raw[3]
    header_end = 4 + 4 * ndim
    if len(raw) < header_end:
        raise ValueError("truncated IDX header")
    shape = tuple(int(size) for size in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header_end != expected:
        raise ValueError(
            f"IDX body holds {len(raw) - header_end} bytes; shape {shape} of {dtype} needs {expected}"
        )
    values = np.frombuffer(raw, dtype=dtype, offset=header_end).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def parse_arff(data: bytes) -> tuple[np.ndarray, list[str]]:
    """A numeric ARFF file (Weka / OpenML): ``@attribute`` names, then ``@data`` CSV rows."""
    names: list[str] = []
    lines = _text_lines(data)
    for number, line in enumerate(lines):
        stripped = line.strip()
        lowered = stripped.lower()
        if lowered.startswith("@attribute"):
            parts = stripped.split(None, 2)
            if len(parts) < 3 or parts[2].strip().lower() not in ("numeric", "real", "integer"):
                raise ValueError(f"ARFF line {number + 1}: only numeric attributes are supported")
            names.append(parts[1].strip("'\""))
        elif lowered.startswith("@data"):
            body = [row for row in lines[number + 1 :] if row.strip() and not row.startswith("%")]
            rows = [[field.strip() for field in row] for row in csv.reader(body)]
            table = _float_rows(rows, first_line=number + 2)
            if table.shape[1] != len(names):
                raise ValueError(
                    f"ARFF declares {len(names)} attributes, rows have {table.shape[1]}"
                )
            return table, names
    raise ValueError("no @data section in the ARFF file")


@dataclass(frozen=True)
class KeelTable:
    """A parsed KEEL file: numeric inputs [N, D], the class label of each row, attribute names
    (empty where the file has no ``@attribute`` lines) and the ``@relation`` name."""

    features: np.ndarray
    labels: tuple[str, ...]
    names: tuple[str, ...] = ()
    relation: str = ""


def parse_keel_dat(data: bytes) -> KeelTable:
    """Read a KEEL ``.dat`` file: ``@`` header lines (optional), then rows ``x_1, ..., x_D, class``;
    lines starting with ``%`` or ``#`` are comments.

    The ``@inputs`` line, when present, fixes D and the order of the names; otherwise every
    attribute but the last is an input. Missing values (``?``), ragged rows and non-numeric
    inputs raise ``ValueError`` naming the line.
    """
    relation, names, inputs = "", [], None
    rows: list[list[str]] = []
    first_data_line = 0
    for number, line in enumerate(data.decode("utf-8-sig").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith(("%", "#")):  # "#": header lines commented out
            continue
        if text.startswith("@"):
            keyword, _, rest = text.partition(" ")
            keyword = keyword.lower()
            if keyword == "@relation":
                relation = rest.strip()
            elif keyword == "@attribute":
                names.append(rest.strip().split()[0])
            elif keyword == "@inputs":
                inputs = [name.strip() for name in rest.split(",") if name.strip()]
            continue
        if not rows:
            first_data_line = number
        rows.append([field.strip() for field in text.split(",")])
    if not rows:
        raise ValueError("the KEEL file has no data rows")
    width = len(rows[0])
    for offset, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(
                f"KEEL row at line {first_data_line + offset} has {len(row)} fields, "
                f"the first row has {width}"
            )
        if "?" in row:
            raise ValueError(f"KEEL row at line {first_data_line + offset} has a missing value")
    if inputs is not None and len(inputs) != width - 1:
        raise ValueError(f"@inputs names {len(inputs)} attributes, the rows have {width - 1}")
    if names and inputs is None and len(names) != width:
        raise ValueError(f"{len(names)} @attribute lines for rows of {width} fields")
    try:
        features = np.array([row[:-1] for row in rows], dtype=np.float64)
    except ValueError as error:
        raise ValueError(f"non-numeric input in the KEEL file: {error}") from error
    return KeelTable(
        features=features,
        labels=tuple(row[-1] for row in rows),
        names=tuple(inputs if inputs is not None else names[:-1]),
        relation=relation,
    )
