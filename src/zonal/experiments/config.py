"""Resolving an experiment's config: the quick defaults, the full overrides, then the user's overrides.

The quick config fixes the keys and the type of each value; an override of an unknown key or of the
wrong type is an ``ExperimentError`` that names the key and lists the known ones. Overrides given as
text (``--set steps=100``) are parsed as JSON literals unless the default is a string. Ranges follow
the defaults: numbers must be finite, a setting whose default is positive stays positive and one
whose default is non-negative stays non-negative (counts, rates, noise levels, seeds), and a list
whose default is non-empty stays non-empty, with elements of its default's element type. All of it
is checked before a run folder is made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from zonal.experiments.errors import ExperimentError
from zonal.experiments.registry import PROTOCOLS, Experiment

_PYTHON_LITERALS = {"True": True, "False": False, "None": None}


def resolve_config(
    experiment: Experiment,
    *,
    full: bool = False,
    overrides: Mapping[str, Any] | None = None,
    protocol: str | None = None,
) -> dict[str, Any]:
    """The config a run uses: ``quick``, updated by the protocol's preset (``converged`` or
    ``full``; ``full=True`` is ``protocol="full"``), then by ``overrides``.

    Values in ``overrides`` may be text (from the command line): they are parsed to the type of the
    default (``"100"`` -> 100 for an int default, kept as text for a string default).
    """
    protocol = resolve_protocol(experiment, protocol, full=full)
    config = dict(experiment.quick)
    if protocol != "quick":
        config.update(getattr(experiment, protocol))
    for key, value in (overrides or {}).items():
        if key not in config:
            known = ", ".join(sorted(config)) or "none"
            raise ExperimentError(
                f"unknown config key {key!r} for experiment {experiment.name!r}; known keys: {known}"
            )
        config[key] = _coerce(key, value, config[key])
    return config


def resolve_protocol(experiment: Experiment, protocol: str | None, *, full: bool = False) -> str:
    """The protocol a run uses: ``protocol`` if given (checked), else "full" or "quick"."""
    if protocol is None:
        return "full" if full else "quick"
    if full and protocol != "full":
        raise ExperimentError(f"--full and --protocol {protocol} disagree")
    if protocol not in PROTOCOLS:
        raise ExperimentError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    if protocol not in experiment.protocols:
        raise ExperimentError(
            f"experiment {experiment.name!r} has no {protocol} protocol; it offers "
            f"{', '.join(experiment.protocols)}"
        )
    return protocol


def parse_assignment(text: str) -> tuple[str, str]:
    """Split a ``key=value`` command-line assignment into ``(key, value_text)``."""
    key, separator, value = text.partition("=")
    if not separator or not key.strip():
        raise ExperimentError(f"expected key=value, got {text!r}")
    return key.strip(), value


def _parse_literal(text: str) -> Any:
    """``text`` as a JSON literal (numbers, true/false/null, lists), or the text itself."""
    if text in _PYTHON_LITERALS:
        return _PYTHON_LITERALS[text]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _coerce(key: str, value: Any, default: Any) -> Any:
    """``value`` checked against (and, for text or an int given for a float, converted to) the type
    of ``default``; a ``None`` default accepts anything."""
    if isinstance(value, str) and not isinstance(default, str):
        value = _parse_literal(value)
    if default is None:
        return value
    expected = type(default)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if expected in (list, tuple) and isinstance(value, list | tuple):
        return _check_list(key, list(value), default)
    if isinstance(value, expected) and not (expected is int and isinstance(value, bool)):
        return _check_range(key, value, default)
    raise ExperimentError(
        f"config key {key!r} expects a value of type {expected.__name__} (default {default!r}), "
        f"got {value!r}"
    )


def _check_range(key: str, value: Any, default: Any) -> Any:
    """A number finite and on the side of zero its default is on (see the module docstring)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if not math.isfinite(value):
        raise ExperimentError(f"config key {key!r} must be a finite number, got {value!r}")
    if default > 0 and value <= 0:
        raise ExperimentError(
            f"config key {key!r} must be > 0 (default {default!r}), got {value!r}"
        )
    if default >= 0 and value < 0:
        raise ExperimentError(
            f"config key {key!r} must be >= 0 (default {default!r}), got {value!r}"
        )
    return value


def _check_list(key: str, value: list[Any], default: Any) -> list[Any]:
    """A list non-empty when its default is, each element checked like the default's first."""
    if not default:
        return value
    if not value:
        raise ExperimentError(f"config key {key!r} needs at least one value (default {default!r})")
    return [_coerce(f"{key}[{index}]", item, default[0]) for index, item in enumerate(value)]
