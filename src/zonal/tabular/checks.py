"""Checks of a table's target and inputs shared by the in-memory fit (``zonal.tabular.fitting``)
and the streamed fit (``zonal.tabular.streamed``): a regression target of one value and values
too large for float64's squares are named errors; more input columns than rows, input columns
of one value, input columns that count the rows (IDs) and, under ``auto``, a regression whose
candidates too few validation rows would weigh are ``DataWarning`` notes."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from zonal.tabular.tables import DataWarning, Table, TableError

#: rows a column must count before ``warn_about_row_numbers`` takes it for a row number
ROW_NUMBER_MIN_ROWS = 10


def check_regression_target(values: np.ndarray, column: str, source: str) -> None:
    """A ``TableError`` for a regression target of one value on every row (present cells): there
    is nothing to learn, and its standard deviation of 0 would scale every prediction by 0.
    ``values`` may be the whole column or only its smallest and largest value."""
    present = values[~np.isnan(values)]
    if len(present) and np.all(present == present[0]):
        raise TableError(
            f"{source or 'the data'}: the target {column!r} holds a single value "
            f"({present[0]:.6g}) on every row: there is nothing to fit"
        )


def check_magnitudes(x: np.ndarray, columns: Sequence[str], source: str) -> None:
    """A ``TableError`` naming the columns of ``x`` [N, D] (and their first rows, 0-based) that
    hold missing (NaN) or infinite values, or values above ``MAX_MAGNITUDE`` in size: the checks
    ``Table.numeric`` makes on a file's cells, made by it, for arrays given directly (the
    scikit-learn estimators, ``fit_data``, ``predict_data``; their column names are unique)."""
    cells = {name: x[:, index] for index, name in enumerate(columns)}
    Table(Path(source or "the data"), tuple(columns), cells, len(x), is_csv=False).numeric(columns)


def constant_columns(x: np.ndarray) -> np.ndarray:
    """[D] booleans: the columns of ``x`` [n, D] that hold one value on every row (none for n = 0)."""
    if len(x) == 0:
        return np.zeros(x.shape[1], dtype=bool)
    return np.all(x == x[0], axis=0)


def warn_about_inputs(
    columns: Sequence[str], constant: np.ndarray, num_rows: int, source: str
) -> None:
    """``DataWarning`` notes on inputs that fit but deserve a word: more input columns than rows
    (the model is then fitted, and the validation scores say what it is worth), and the columns
    flagged in ``constant`` [D] (one value on the training rows: kept, they standardise to 0 and
    carry nothing)."""
    where = source or "the data"
    if len(columns) > num_rows:
        warnings.warn(
            f"{where}: {num_rows} rows x {len(columns)} input columns: more columns than rows, "
            "so many input directions are never observed; the fit relies on the kernel's "
            "smoothness (check the validation scores, or fit fewer input columns)",
            DataWarning,
            stacklevel=3,
        )
    names = [name for name, flag in zip(columns, constant, strict=True) if flag]
    if names:
        shown = ", ".join(map(repr, names[:5])) + (" ..." if len(names) > 5 else "")
        warnings.warn(
            f"{where}: {len(names)} input column(s) hold a single value on the training rows "
            f"({shown}): kept, standardised to 0, they carry no information",
            DataWarning,
            stacklevel=3,
        )


def warn_about_few_scoring_rows(num_scoring: int, candidates: Sequence[str], source: str) -> None:
    """A ``DataWarning`` note when ``auto``'s regression ``candidates`` are scored on fewer
    validation rows than their K - 1 free stacking weights (``num_scoring``; tables of about 24
    rows or fewer at the default validation share): the rows cannot determine the weights, so
    the choice among the candidates rests on one row. The note names the alternative that is
    better calibrated there: the exact GP alone by MAP with input scales by BIC
    (docs/fit_evidence.md, sessions 40-41: on 10 and 20 rows of 17 tables, seeds 18-20, mean
    test log likelihoods -2.8 and -1.6 against ``auto``'s -25.5 and -4.0, test MSE 1.09 and 0.82
    of ``auto``'s; on seeds 6-8 at 10 rows 1.14: as ``auto``'s rule it was not adopted)."""
    if num_scoring == 0 or num_scoring >= len(candidates) - 1:  # none: no stack to weigh
        return
    where = source or "the data"
    rows = f"{num_scoring} validation row{'s' if num_scoring != 1 else ''}"
    warnings.warn(
        f"{where}: {rows} score{'s' if num_scoring == 1 else ''} the {len(candidates)} "
        f"candidates of --model auto ({', '.join(candidates)}): too few to weigh them, so the "
        f"choice rests on {'that row' if num_scoring == 1 else 'those rows'}; --model exact "
        "--hyperpriors --ard-by-bic fits one model by criteria over all the training rows "
        "instead (better calibrated on tables this small, its error sometimes larger)",
        DataWarning,
        stacklevel=3,
    )


def warn_about_row_numbers(x: np.ndarray, columns: Sequence[str], source: str) -> None:
    """A ``DataWarning`` note on input columns of ``x`` [N, D] that count the rows: consecutive
    integers k, k + 1, ... in the table's order (N >= ``ROW_NUMBER_MIN_ROWS``). Such a column is
    most often a row number or an ID; fitted as an input, it lets a model tell the rows apart by
    their place in the file, and a table to predict (with other IDs) lies outside its range."""
    if len(x) < ROW_NUMBER_MIN_ROWS:
        return
    steps = np.diff(x, axis=0)  # [N - 1, D]
    counting = np.all(steps == 1, axis=0) & (x[0] == np.round(x[0]))  # [D]
    names = [name for name, flag in zip(columns, counting, strict=True) if flag]
    if names:
        warnings.warn(
            f"{source or 'the data'}: input column(s) {', '.join(map(repr, names))} count the "
            "rows (consecutive integers in the table's order): fitted as inputs like any other; "
            "if they are row numbers or IDs (a time index is a real input), leave them out "
            "(zonal fit --features, or drop the columns from X)",
            DataWarning,
            stacklevel=3,
        )


__all__ = [
    "check_magnitudes",
    "check_regression_target",
    "constant_columns",
    "warn_about_inputs",
    "warn_about_row_numbers",
]
