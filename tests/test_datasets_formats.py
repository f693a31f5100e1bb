"""Parsers of the original formats and the allow-list unpickler, on small inputs written here."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import struct

import numpy as np
import pandas as pd
import pytest

from zonal.datasets.errors import UnsafePickleError
from zonal.datasets.parsers import (
    maybe_gunzip,
    parse_arff,
    parse_csv_table,
    parse_excel_sheet,
    parse_idx,
    parse_libsvm,
    parse_whitespace_table,
)
from zonal.datasets.safe_pickle import load_numpy_pickle


def write_idx(array: np.ndarray) -> bytes:
    """IDX bytes of a uint8 array: magic 0 0 0x08 ndim, big-endian dims, the values."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def test_whitespace_table_skips_blank_lines() -> None:
    text = b"-2.3 0.568 4.78\n  1 2   3\n\n4\t5 6\n\n"
    np.testing.assert_array_equal(
        parse_whitespace_table(text), [[-2.3, 0.568, 4.78], [1, 2, 3], [4, 5, 6]]
    )
    with pytest.raises(ValueError, match="row 2 has 2 fields"):
        parse_whitespace_table(b"1 2 3\n4 5\n")


def test_csv_with_and_without_header() -> None:
    table, names = parse_csv_table(b'"RMSD","F1","F2"\n17.284,13558.3,0.31\n6.0,1e-3,2\n', True)
    assert names == ["RMSD", "F1", "F2"]
    np.testing.assert_array_equal(table, [[17.284, 13558.3, 0.31], [6.0, 1e-3, 2.0]])
    table, names = parse_csv_table(gzip.compress(b"6.32e-03,1.8e+01\n2.7e-02,0\n"), False)
    assert names is None and table.shape == (2, 2) and table[0, 0] == 6.32e-3
    with pytest.raises(ValueError, match="non-numeric"):
        parse_csv_table(b"1,a\n", False)


@pytest.mark.parametrize(("magic", "reader"), [(b"PK\x03\x04", "openpyxl"), (b"\xd0\xcf", "xlrd")])
def test_an_excel_file_without_its_reader_names_the_reader_and_the_extra(
    monkeypatch: pytest.MonkeyPatch, magic: bytes, reader: str
) -> None:
    """pandas without openpyxl (.xlsx) or xlrd (.xls) raised pandas' own ImportError; the error
    names the reader and zonal's data extra."""
    import sys

    pytest.importorskip("pandas")
    monkeypatch.setitem(sys.modules, reader, None)  # import fails
    with pytest.raises(
        ImportError, match=f"needs pandas and {reader}: pip install 'zonal\\[data\\]'"
    ):
        parse_excel_sheet(magic + b"rest of the workbook")


def test_excel_sheet_by_name_drops_empty_rows() -> None:
    buffer = io.BytesIO()
    pytest.importorskip("openpyxl")  # the data extra's Excel reader and writer
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        pd.DataFrame({"Z": [9.0]}).to_excel(writer, sheet_name="Other", index=False)
        pd.DataFrame({"AT": [14.96, None, 25.18], "PE": [463.26, None, 444.37]}).to_excel(
            writer, sheet_name="Sheet1", index=False
        )
    table, names = parse_excel_sheet(buffer.getvalue(), "Sheet1")
    assert names == ["AT", "PE"]
    np.testing.assert_array_equal(table, [[14.96, 463.26], [25.18, 444.37]])
    first, _ = parse_excel_sheet(buffer.getvalue(), 0)
    assert first.tolist() == [[9.0]]


def test_libsvm_dense_with_missing_indices() -> None:
    features, labels = parse_libsvm(b"-1 1:1.5 2:-0.5 \n1 2:3\n# comment\n+1 1:2\n", num_features=2)
    np.testing.assert_array_equal(features, [[1.5, -0.5], [0.0, 3.0], [2.0, 0.0]])
    np.testing.assert_array_equal(labels, [-1, 1, 1])
    with pytest.raises(ValueError, match="line 1"):
        parse_libsvm(b"1 a:b\n")
    with pytest.raises(ValueError, match="exceeds"):
        parse_libsvm(b"1 3:1\n", num_features=2)


def test_idx_round_trip_plain_and_gzip() -> None:
    images = np.arange(2 * 3 * 4).reshape(2, 3, 4).astype(np.uint8)
    np.testing.assert_array_equal(parse_idx(write_idx(images)), images)
    np.testing.assert_array_equal(parse_idx(gzip.compress(write_idx(images))), images)
    labels = np.array([9, 0, 3], dtype=np.uint8)
    assert parse_idx(write_idx(labels)).tolist() == [9, 0, 3]
    floats = np.array([1.5, -2.0], dtype=">f4")
    raw = bytes([0, 0, 0x0D, 1]) + struct.pack(">I", 2) + floats.tobytes()
    np.testing.assert_array_equal(parse_idx(raw), [1.5, -2.0])


def test_idx_rejects_bad_magic_and_truncation() -> None:
    with pytest.raises(ValueError, match="not an IDX"):
        parse_idx(b"\x01\x00\x08\x01")
    with pytest.raises(ValueError, match="needs"):
        parse_idx(write_idx(np.zeros((2, 2)))[:-1])


def test_arff_numeric() -> None:
    text = b"""% comment
@relation kin8nm
@attribute theta1 numeric
@attribute 'y' REAL

@data
0.5,1.25
-0.1,0.3
"""
    table, names = parse_arff(text)
    assert names == ["theta1", "y"]
    np.testing.assert_array_equal(table, [[0.5, 1.25], [-0.1, 0.3]])
    with pytest.raises(ValueError, match="numeric"):
        parse_arff(b"@attribute c {a,b}\n@data\na\n")


def test_maybe_gunzip() -> None:
    assert maybe_gunzip(gzip.compress(b"abc")) == b"abc"
    assert maybe_gunzip(b"abc") == b"abc"


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_numpy_pickle_loads_arrays(protocol: int) -> None:
    content = (
        (np.random.default_rng(0).random((3, 4), dtype=np.float32), np.arange(3)),
        {"labels": np.array([1, 2], dtype=np.int64), "scalar": np.float64(2.5)},
        [1, "text", None],
    )
    loaded = load_numpy_pickle(pickle.dumps(content, protocol=protocol))
    np.testing.assert_array_equal(loaded[0][0], content[0][0])
    assert loaded[0][0].dtype == np.float32
    np.testing.assert_array_equal(loaded[1]["labels"], [1, 2])
    assert loaded[1]["scalar"] == 2.5 and loaded[2] == [1, "text", None]


class _Exploit:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("echo pwned",))


def test_malicious_pickle_rejected_without_running() -> None:
    payload = pickle.dumps((np.zeros(2), _Exploit()), protocol=2)
    assert b"system" in payload
    with pytest.raises(UnsafePickleError, match=r"(posix|os|nt)\.system"):
        load_numpy_pickle(payload)


@pytest.mark.parametrize(
    "module, name",
    [
        ("builtins", "eval"),
        ("numpy", "load"),
        ("numpy.core.multiarray", "fromfile"),
        ("os", "system"),
    ],
)
def test_globals_outside_allow_list_rejected(module: str, name: str) -> None:
    payload = b"\x80\x02c" + f"{module}\n{name}\n".encode() + b"."
    with pytest.raises(UnsafePickleError, match=f"{module}.{name}"):
        load_numpy_pickle(payload)


def test_legacy_numpy_core_path_is_allowed() -> None:
    payload = pickle.dumps(np.arange(4.0), protocol=2)
    assert b"_reconstruct" in payload
    legacy = payload.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    np.testing.assert_array_equal(load_numpy_pickle(legacy), np.arange(4.0))
