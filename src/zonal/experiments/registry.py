"""The experiment registry: each paper experiment is one module that registers itself by name.

A module of the ``zonal.experiments`` package becomes an experiment by decorating its run function::

    @register_experiment(
        "uci-regression",
        summary="SVGP with spherical harmonic features on the UCI benchmarks",
        quick={"seed": 0, "dataset": "yacht", "steps": 300},
        converged={"steps": 2000},
        full={"steps": 5000},
        paper={"seed 000 table 2": {"test_rmse": 0.12}},
    )
    def run_uci_regression(config: dict, run_dir: RunDirectory) -> dict: ...

The package's modules are imported the first time the registry is asked for an experiment (not when
``zonal`` or ``zonal.experiments`` is imported), so experiment modules should keep their top-level
imports light and import heavy machinery inside the run function. A module that fails to import does
not break the others: the failure is kept and reported (see ``discovery_failures``).
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from zonal.experiments.errors import ExperimentError

if TYPE_CHECKING:
    from zonal.experiments.run_directory import RunDirectory

PROTOCOLS = ("quick", "converged", "full")
"""The presets of an experiment: quick (minutes: the code runs), converged (at most a few hours of
one core, to convergence, at least three seeds: whether the method works), full (the seed's own)."""

RunFunction = Callable[[dict[str, Any], "RunDirectory"], Mapping[str, Any]]
"""``run(config, run_dir) -> metrics``: the body of an experiment."""

_NAME_PATTERN = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@dataclass(frozen=True)
class Experiment:
    """The description of one experiment.

    Attributes:
        name: kebab-case name used on the command line (``zonal experiment run NAME``).
        summary: one line saying what the experiment computes.
        run: ``run(config, run_dir) -> metrics``; ``config`` is the resolved config dict, ``run_dir``
            the ``RunDirectory`` to write tables, figures and checkpoints into, and the returned
            mapping of metrics (numbers, strings, small lists; nested mappings allowed) goes to
            ``metrics.json`` and the report.
        quick: the default config (small enough for a laptop in minutes). Its keys are the only keys
            a run accepts; include ``"seed"`` if the experiment is random.
        converged: overrides of ``quick`` for the converged protocol (``--protocol converged``): the
            seed's experiment made to fit one CPU core in at most about two hours, run to
            convergence with at least three seeds or splits; ``differences`` says how it departs
            from the seed's own protocol.
        full: overrides of ``quick`` for the paper-sized run (``--full``, the seed's protocol).
        paper: the seed's reference values, ``{source: {quantity: value}}`` with ``source`` such as
            ``"seed 000 table 2"``; a quantity named like a metric is put beside it in the report.
            A source with no values (``{}``) still records that the experiment reproduces it.
        headline: metrics shown in the one-line summary at the end of a run (default: the first few).
        module: the module that registered the experiment.
        differences: per protocol (``"quick"``, ``"converged"``, ``"full"``), how it departs from the
            seed's protocol and data ("stand-in data: ...", "reduced: ..."); shown in the report.
        validate: ``validate(config)`` raises ``ValueError`` naming a setting the experiment cannot
            run with (a choice outside its list, settings that contradict each other); called on the
            resolved config before a run folder is made.
        cpu_hours: per protocol, the CPU-hours of one core a run takes (measured on a finished run
            where there is one, else estimated from timed parts), so that ``zonal experiment
            reproduce`` can run the cheapest first and say what its queue costs.
    """

    name: str
    summary: str
    run: RunFunction
    quick: Mapping[str, Any] = field(default_factory=dict)
    full: Mapping[str, Any] = field(default_factory=dict)
    converged: Mapping[str, Any] = field(default_factory=dict)
    differences: Mapping[str, str] = field(default_factory=dict)
    paper: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    headline: tuple[str, ...] = ()
    module: str = ""
    validate: Callable[[dict[str, Any]], Any] | None = None
    cpu_hours: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _NAME_PATTERN.fullmatch(self.name):
            raise ValueError(
                f"experiment name must be kebab-case (a-z, 0-9, '-'), got {self.name!r}"
            )
        if not callable(self.run):
            raise TypeError(f"experiment {self.name!r}: run must be callable")
        for preset in ("full", "converged"):
            unknown = sorted(set(getattr(self, preset)) - set(self.quick))
            if unknown:
                raise ValueError(
                    f"experiment {self.name!r}: {preset} config keys {unknown} are not in the "
                    f"quick config ({preset} only overrides quick)"
                )
        for table in ("differences", "cpu_hours"):
            unknown_protocols = sorted(set(getattr(self, table)) - set(PROTOCOLS))
            if unknown_protocols:
                raise ValueError(
                    f"experiment {self.name!r}: {table} for unknown protocols "
                    f"{unknown_protocols} (known: {', '.join(PROTOCOLS)})"
                )
        bad_hours = sorted(k for k, v in self.cpu_hours.items() if not 0 < float(v) < math.inf)
        if bad_hours:
            raise ValueError(
                f"experiment {self.name!r}: cpu_hours of {bad_hours} must be positive and finite"
            )
        # Read-only copies, so that a run cannot change the defaults of the next one.
        for preset in ("quick", "full", "converged", "differences", "cpu_hours"):
            object.__setattr__(self, preset, MappingProxyType(dict(getattr(self, preset))))
        paper = {
            str(source): MappingProxyType(dict(values)) for source, values in self.paper.items()
        }
        object.__setattr__(self, "paper", MappingProxyType(paper))
        object.__setattr__(self, "headline", tuple(self.headline))

    @property
    def protocols(self) -> tuple[str, ...]:
        """The protocols this experiment offers: quick and full always, converged where defined."""
        return tuple(p for p in PROTOCOLS if p != "converged" or self.converged)

    def protocol_label(self, protocol: str) -> str:
        """``protocol`` with how it departs from the seed's: "quick (reduced)", "full (stand-in)";
        a quick preset is always reduced, a protocol without a difference stated is the seed's."""
        text = self.differences.get(protocol, "")
        marks = [mark for mark in ("reduced", "stand-in") if mark in text]
        if protocol == "quick" and "reduced" not in marks:
            marks.insert(0, "reduced")
        return f"{protocol} ({', '.join(marks)})" if marks else protocol

    @property
    def reproduces(self) -> tuple[str, ...]:
        """The seed tables and figures this experiment reproduces (the sources of ``paper``)."""
        return tuple(self.paper)


_EXPERIMENTS: dict[str, Experiment] = {}
_DISCOVERY_FAILURES: dict[str, str] = {}
_discovered = False


def add_experiment(experiment: Experiment) -> Experiment:
    """Register ``experiment``; a second experiment of the same name from another module is an error."""
    existing = _EXPERIMENTS.get(experiment.name)
    if existing is not None and existing.module != experiment.module:
        raise ValueError(
            f"experiment {experiment.name!r} is registered twice: by {existing.module} "
            f"and by {experiment.module}"
        )
    _EXPERIMENTS[experiment.name] = experiment
    return experiment


def register_experiment(
    name: str,
    *,
    summary: str,
    quick: Mapping[str, Any] | None = None,
    full: Mapping[str, Any] | None = None,
    converged: Mapping[str, Any] | None = None,
    differences: Mapping[str, str] | None = None,
    paper: Mapping[str, Mapping[str, Any]] | None = None,
    headline: Sequence[str] = (),
    validate: Callable[[dict[str, Any]], Any] | None = None,
    cpu_hours: Mapping[str, float] | None = None,
) -> Callable[[RunFunction], RunFunction]:
    """Decorator that registers ``run(config, run_dir) -> metrics`` as the experiment ``name``.

    The arguments are those of ``Experiment``; the function is returned unchanged.
    """

    def decorator(run: RunFunction) -> RunFunction:
        add_experiment(
            Experiment(
                name=name,
                summary=summary,
                run=run,
                quick=quick or {},
                full=full or {},
                converged=converged or {},
                differences=differences or {},
                paper=paper or {},
                headline=tuple(headline),
                module=getattr(run, "__module__", ""),
                validate=validate,
                cpu_hours=cpu_hours or {},
            )
        )
        return run

    return decorator


def discover_experiments() -> None:
    """Import every public module of ``zonal.experiments`` once, so that they register themselves."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = importlib.import_module("zonal.experiments")
    for module in pkgutil.iter_modules(package.__path__, prefix="zonal.experiments."):
        if module.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        try:
            importlib.import_module(module.name)
        except Exception as exc:  # a broken module must not hide the others
            last = traceback.extract_tb(exc.__traceback__)[-1]
            _DISCOVERY_FAILURES[module.name] = (
                f"{type(exc).__name__}: {exc} ({last.filename}:{last.lineno})"
            )


def discovery_failures() -> dict[str, str]:
    """Modules of ``zonal.experiments`` that failed to import, with the reason, after discovery."""
    discover_experiments()
    return dict(_DISCOVERY_FAILURES)


def list_experiments() -> list[Experiment]:
    """All registered experiments, sorted by name."""
    discover_experiments()
    return [_EXPERIMENTS[name] for name in sorted(_EXPERIMENTS)]


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``; an ``ExperimentError`` listing the known names otherwise."""
    discover_experiments()
    try:
        return _EXPERIMENTS[name]
    except KeyError:
        known = ", ".join(sorted(_EXPERIMENTS)) or "none"
        message = f"unknown experiment {name!r}; known experiments: {known}"
        if _DISCOVERY_FAILURES:
            message += f" (modules that failed to import: {', '.join(sorted(_DISCOVERY_FAILURES))})"
        raise ExperimentError(message) from None
