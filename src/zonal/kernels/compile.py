"""Optional ``torch.compile`` of the elementwise functions that fill zonal Gram matrices.

A closed-form shape (arc-cosine, NTK, chordal Matérn) or a Clenshaw sum (Mercer kernels) is a chain
of elementwise operations on a tile of cosines; compiled, the chain becomes one vectorised loop that
reads the tile once and writes the result over it (``in_place``; 3x to 8x faster per tile than
eager PyTorch on one CPU thread, see ``benchmarks/kernels.py``). Compiling costs seconds, once per
function, tile shape and process (less with inductor's on-disk cache), so it is used only for
matrices of at least ``min_entries`` entries and never under autograd (``tiles.gram_no_grad`` runs
without a graph).

Settings: the environment variable ``ZONAL_COMPILE=0`` switches compilation off at import;
``compile_settings(enabled=..., min_entries=...)`` changes it for a block of code. If compiling fails
(no C++ compiler, an unsupported platform), zonal warns once and uses the eager function.
"""

from __future__ import annotations

import contextlib
import os
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch


def _enabled_by_environment() -> bool:
    return os.environ.get("ZONAL_COMPILE", "1").strip().lower() not in {"0", "false", "off", "no"}


@dataclass
class CompileSettings:
    """Whether to compile tile functions, and from how many Gram matrix entries on."""

    enabled: bool = field(default_factory=_enabled_by_environment)
    min_entries: int = 1 << 22


SETTINGS = CompileSettings()

_COMPILED: dict[Callable, Callable] = {}
_IN_PLACE: dict[Callable, Callable] = {}
_FAILED: set[Callable] = set()


@contextlib.contextmanager
def compile_settings(
    *, enabled: bool | None = None, min_entries: int | None = None
) -> Iterator[CompileSettings]:
    """Change ``SETTINGS`` inside a ``with`` block (restored afterwards)."""
    saved = (SETTINGS.enabled, SETTINGS.min_entries)
    if enabled is not None:
        SETTINGS.enabled = bool(enabled)
    if min_entries is not None:
        SETTINGS.min_entries = int(min_entries)
    try:
        yield SETTINGS
    finally:
        SETTINGS.enabled, SETTINGS.min_entries = saved


def in_place(function: Callable[..., Any]) -> Callable[..., None]:
    """``apply_(work, *arguments)``: work := function(work, *arguments), written into ``work``.

    ``work`` is a tile or a tuple of tiles (a kernel's state per entry, see
    ``tiles.CosineMap.state``) and ``function`` returns the same structure. One wrapper per function
    (cached); each has a code object of its own: torch.compile keeps its compiled graphs per code
    object, and the closures of one ``def`` share theirs, so kernels would otherwise evict each
    other's graphs.
    """
    wrapper = _IN_PLACE.get(function)
    if wrapper is None:

        def apply_(work: torch.Tensor | tuple[torch.Tensor, ...], *arguments: object) -> None:
            values = function(work, *arguments)
            if isinstance(work, tuple):
                for tile, value in zip(work, values, strict=True):
                    tile.copy_(value)
            else:
                work.copy_(values)

        wrapper = _IN_PLACE[function] = types.FunctionType(
            apply_.__code__.replace(), apply_.__globals__, apply_.__name__, None,
            apply_.__closure__,
        )  # fmt: skip
    return wrapper


def tile_runner(function: Callable[..., torch.Tensor], num_entries: int) -> Callable[..., None]:
    """``in_place(function)``, compiled for a matrix of ``num_entries`` entries when enabled.

    The compiled version falls back to the eager one (with one warning) if compilation fails.
    """
    eager = in_place(function)
    if not SETTINGS.enabled or num_entries < SETTINGS.min_entries or function in _FAILED:
        return eager
    compiled = _COMPILED.get(function)
    if compiled is None:
        compiled = _COMPILED[function] = torch.compile(
            eager, options={"cpp.enable_floating_point_contract_flag": "fast"}
        )

    def run(*args: object) -> None:
        if function in _FAILED:
            return eager(*args)
        try:
            return compiled(*args)
        except Exception as error:  # compilation failed: no compiler, unsupported platform, ...
            _FAILED.add(function)
            warnings.warn(
                f"zonal: torch.compile of {function.__qualname__} failed ({type(error).__name__}: "
                f"{error}); using eager PyTorch. Set ZONAL_COMPILE=0 to skip compiling.",
                RuntimeWarning,
                stacklevel=2,
            )
            return eager(*args)

    return run
