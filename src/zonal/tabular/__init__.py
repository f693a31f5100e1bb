"""``zonal fit`` as a library: a user's table in, a fitted and saved GP model out.

One module per idea:

- ``tables``: reading CSV / NPZ tables and writing results; ``targets``: the target column,
  regression or classification, and its class labels;
- ``options``: the names and defaults of the fit, importable without torch (the command line's
  help is built from them);
- ``recipes``: the presets (one module per model family, their registry and the ``auto`` rule);
- ``fitting``: ``fit_table`` / ``fit_data``, the steps of a fit; ``split`` (the validation split),
  ``candidates`` (training the recipes within the budget), ``metrics`` (validation scores),
  ``stacking`` (stacking and conditioning on every row), ``model`` (the fitted model), ``predict``;
- ``saved``: the checkpoint file; ``streamed``: the fit of a table too large for memory, read in
  chunks; ``sklearn``: the scikit-learn estimators (the extra ``zonal[sklearn]``).

The names below are imported from their modules on first use, so that importing this package (and
``zonal.tabular.options``) costs no torch import.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zonal.tabular.fitting import fit_data, fit_table
    from zonal.tabular.model import TabularModel
    from zonal.tabular.predict import predict_data, predict_table
    from zonal.tabular.saved import ModelFileError, load_model, save_model
    from zonal.tabular.streamed import streamed_fit
    from zonal.tabular.tables import DataWarning, Table, TableError, read_table, write_table
    from zonal.tabular.targets import LabelError, Target, detect_target

#: the package's names, each with the module that defines it
_EXPORTS = {
    "DataWarning": "tables",
    "LabelError": "targets",
    "ModelFileError": "saved",
    "Table": "tables",
    "TableError": "tables",
    "TabularModel": "model",
    "Target": "targets",
    "detect_target": "targets",
    "fit_data": "fitting",
    "fit_table": "fitting",
    "load_model": "saved",
    "predict_data": "predict",
    "predict_table": "predict",
    "read_table": "tables",
    "save_model": "saved",
    "streamed_fit": "streamed",
    "write_table": "tables",
}
#: names of the former module ``zonal.tabular`` that live in ``zonal.tabular.tables`` now: kept
#: here, with a ``DeprecationWarning``, for one release
_MOVED = ("MAX_MAGNITUDE", "MISSING_TOKENS", "SUFFIXES", "name_list")

__all__ = [
    "DataWarning",
    "LabelError",
    "ModelFileError",
    "Table",
    "TableError",
    "TabularModel",
    "Target",
    "detect_target",
    "fit_data",
    "fit_table",
    "load_model",
    "predict_data",
    "predict_table",
    "read_table",
    "save_model",
    "streamed_fit",
    "write_table",
]


def __getattr__(name: str) -> Any:
    """Import a name of ``__all__`` from its module on first use (and a former name of
    ``zonal.tabular`` from ``zonal.tabular.tables``, with a deprecation warning)."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"zonal.tabular.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    if name in _MOVED:
        warnings.warn(
            f"zonal.tabular.{name} is deprecated and will be removed in the next release; import "
            f"it from zonal.tabular.tables",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("zonal.tabular.tables"), name)
    raise AttributeError(f"module 'zonal.tabular' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
