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

#: compiled wrappers, one per variant (``_variant``): each has its own code object, hence its own
#: torch.compile cache, so kernels and settings do not crowd each other out of dynamo's limit of
#: ``torch._dynamo.config.recompile_limit`` graphs per code object
_COMPILED: dict[tuple, Callable] = {}
_FAILED: set[tuple] = set()


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


def in_place(function: Callable[..., Any]) -> Callable[..., Any]:
    """``apply_(work, *arguments)``: function(work, *arguments), written over ``work`` when it has
    the same shape (returned: ``work``), else returned as a new tensor (arguments with a batch
    shape of their own broadcast the tiles).

    ``work`` is a tile or a tuple of tiles (a kernel's state per entry, see
    ``tiles.CosineMap.state``) and ``function`` returns the same structure. Every call makes a new
    wrapper with a code object of its own: torch.compile keeps its compiled graphs per code
    object, and the closures of one ``def`` share theirs.
    """

    def apply_(work: torch.Tensor | tuple[torch.Tensor, ...], *arguments: object) -> Any:
        values = function(work, *arguments)
        if isinstance(work, tuple):
            if any(value.shape != tile.shape for value, tile in zip(values, work, strict=True)):
                return values
            for tile, value in zip(work, values, strict=True):
                tile.copy_(value)
            return work
        if values.shape != work.shape:
            return values
        return work.copy_(values)

    return types.FunctionType(
        apply_.__code__.replace(), apply_.__globals__, apply_.__name__, None, apply_.__closure__
    )


def _variant(function: Callable, work: torch.Tensor | tuple, arguments: tuple) -> tuple:
    """What a compiled graph of ``function`` is specialised to, apart from the tile sizes: the
    dtype, device and rank of the work tiles, their number, the constants among the arguments and
    the shapes of the tensors among them."""
    tiles = work if isinstance(work, tuple) else (work,)
    described = tuple(
        (tuple(argument.shape), argument.dtype) if isinstance(argument, torch.Tensor) else argument
        for argument in arguments
    )
    first = tiles[0]
    return (function, first.dtype, first.device.type, first.dim(), len(tiles), described)


def recompile_limit_raises() -> contextlib.AbstractContextManager:
    """A context for a loop of ``tile_runner`` calls (entered once: it costs tens of microseconds)
    in which a variant that reaches dynamo's recompile limit raises, so that it falls back to
    eager with zonal's warning, instead of running uncompiled silently."""
    return torch._dynamo.config.patch(fail_on_recompile_limit_hit=True)


def tile_runner(function: Callable[..., Any], num_entries: int) -> Callable[..., Any]:
    """``in_place(function)``, compiled (one wrapper per ``_variant``) for a matrix of
    ``num_entries`` entries when enabled.

    A variant whose compilation fails, or which reaches dynamo's recompile limit (inside
    ``recompile_limit_raises``), runs eagerly from then on, with one warning.
    """
    eager = in_place(function)
    if not SETTINGS.enabled or num_entries < SETTINGS.min_entries:
        return eager

    def run(work: torch.Tensor | tuple, *arguments: object) -> Any:
        key = _variant(function, work, arguments)
        if key in _FAILED:
            return eager(work, *arguments)
        compiled = _COMPILED.get(key)
        if compiled is None:
            compiled = _COMPILED[key] = torch.compile(
                in_place(function), options={"cpp.enable_floating_point_contract_flag": "fast"}
            )
        try:
            return compiled(work, *arguments)
        except Exception as error:  # no compiler, unsupported platform, recompile limit, ...
            _FAILED.add(key)
            warnings.warn(
                f"zonal: torch.compile of {function.__qualname__} failed ({type(error).__name__}: "
                f"{error}); using eager PyTorch. Set ZONAL_COMPILE=0 to skip compiling.",
                RuntimeWarning,
                stacklevel=2,
            )
            return eager(work, *arguments)

    return run
