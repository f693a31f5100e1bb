"""Unpickle numpy arrays without running arbitrary code: a ``find_class`` allow-list.

``pickle.load`` imports and calls whatever global a pickle names (``os.system`` included), so a
downloaded pickle is never loaded with it. ``load_numpy_pickle`` resolves only the globals that
numpy's array and scalar reconstruction needs (plus ``_codecs.encode``, which protocols 0-2 use
for bytes) and raises ``UnsafePickleError`` for anything else.
"""

from __future__ import annotations

import codecs
import importlib
import io
import pickle
from collections.abc import Callable

import numpy as np

from zonal.datasets.errors import UnsafePickleError


def _numpy_core_attribute(module: str, name: str) -> Callable[..., object]:
    """``numpy._core.<module>.<name>`` (numpy >= 2) or ``numpy.core.<module>.<name>`` (numpy 1)."""
    try:
        found = importlib.import_module(f"numpy._core.{module}")
    except ImportError:  # numpy 1.x
        found = importlib.import_module(f"numpy.core.{module}")
    return getattr(found, name)


# (numpy.core submodule, name) pairs of array, scalar and buffer reconstruction
_CORE_GLOBALS = frozenset(
    {("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer")}
)


def _allowed_global(module: str, name: str) -> object | None:
    """The object for an allowed ``(module, name)`` pair, else None."""
    if module == "numpy" and name in ("ndarray", "dtype"):
        return getattr(np, name)
    if (module, name) == ("_codecs", "encode"):  # how protocols 0-2 write bytes under Python 3
        return codecs.encode
    for prefix in ("numpy.core.", "numpy._core."):
        submodule = module.removeprefix(prefix)
        if module.startswith(prefix) and (submodule, name) in _CORE_GLOBALS:
            return _numpy_core_attribute(submodule, name)
    return None


class NumpyUnpickler(pickle.Unpickler):
    """An unpickler that builds numpy arrays, tuples, lists, dicts and plain values, nothing else."""

    def find_class(self, module: str, name: str) -> object:
        found = _allowed_global(module, name)
        if found is None:
            raise UnsafePickleError(
                f"refusing to unpickle the global {module}.{name}: only numpy array "
                "reconstruction (numpy.ndarray, numpy.dtype, numpy.core.multiarray._reconstruct "
                "and the like) is allowed in a data pickle"
            )
        return found


def load_numpy_pickle(data: bytes, encoding: str = "latin1") -> object:
    """Unpickle ``data`` with the allow-list; ``encoding='latin1'`` reads Python 2 array pickles."""
    return NumpyUnpickler(io.BytesIO(data), encoding=encoding).load()
