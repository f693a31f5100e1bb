"""Deprecated path of ``zonal.tabular.fitting`` (kept for one release)."""

from zonal._deprecated import warn_moved
from zonal.tabular.candidates import AUTO_STEP_FACTOR, auto_uses_ard
from zonal.tabular.fitting import fit_data, fit_table, select_columns, table_target
from zonal.tabular.metrics import (
    PROBABILITY_CHUNK,
    SOFTMAX_DRAWS,
    class_probabilities,
    validation_metrics,
    validation_score,
)
from zonal.tabular.model import STACKED, TabularModel, Trained, build_model, describe_model
from zonal.tabular.predict import predict_data, predict_table
from zonal.tabular.split import MONITORED_VALIDATION_ROWS, Split, validation_split
from zonal.tabular.stacking import condition_on_all_rows, stack_fits

warn_moved("zonal.fitting", "zonal.tabular.fitting")

__all__ = [
    "AUTO_STEP_FACTOR",
    "MONITORED_VALIDATION_ROWS",
    "PROBABILITY_CHUNK",
    "SOFTMAX_DRAWS",
    "STACKED",
    "Split",
    "TabularModel",
    "Trained",
    "auto_uses_ard",
    "build_model",
    "class_probabilities",
    "condition_on_all_rows",
    "describe_model",
    "fit_data",
    "fit_table",
    "predict_data",
    "predict_table",
    "select_columns",
    "stack_fits",
    "table_target",
    "validation_metrics",
    "validation_score",
    "validation_split",
]
