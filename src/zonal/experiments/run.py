"""Running an experiment: resolve its config, give it a new run folder, call it, write the results.

A run folder holds ``config.json`` (which experiment, preset and resolved config), whatever the
experiment writes (CSV tables, PNG figures, ``checkpoint.pt``), and, once it has finished,
``report.md`` and ``metrics.json`` (written last: its presence marks a finished run).

``run_experiment`` does it all in one call; ``create_run`` / ``open_run`` + ``execute_run`` split it so
that a caller knows the folder before the experiment starts (the CLI prints it, to resume from).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

import zonal
from zonal._files import to_jsonable
from zonal.experiments.config import resolve_config, resolve_protocol
from zonal.experiments.errors import ConfigError, ExperimentError
from zonal.experiments.registry import Experiment, get_experiment
from zonal.experiments.report import flatten_metrics, format_value, render_report
from zonal.experiments.run_directory import RunDirectory

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.json"
REPORT_FILE = "report.md"
DEFAULT_RUNS_ROOT = Path("runs")
_FIGURE_SUFFIXES = (".png", ".svg")
_HEADLINE_SIZE = 4


@dataclass(frozen=True)
class ExperimentRun:
    """An experiment bound to its run folder and resolved config, ready to execute."""

    experiment: Experiment
    directory: RunDirectory
    config: dict[str, Any]
    preset: str  # the protocol: "quick", "converged" or "full"
    resumed: bool = False


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced."""

    experiment: str
    path: Path
    metrics: dict[str, Any]
    seconds: float
    headline: tuple[str, ...] = ()

    @property
    def report_path(self) -> Path:
        """The run's ``report.md``."""
        return self.path / REPORT_FILE

    def summary_line(self) -> str:
        """One line for the terminal: the headline metrics, the time, and where the report is."""
        flat = flatten_metrics(self.metrics)
        keys = [key for key in self.headline if key in flat] or [
            key for key, value in flat.items() if isinstance(value, int | float)
        ][:_HEADLINE_SIZE]
        shown = ", ".join(f"{key}={format_value(flat[key])}" for key in keys)
        return f"{self.experiment}: {shown or 'done'} in {self.seconds:.1f} s -> {self.report_path}"


def _as_experiment(experiment: Experiment | str) -> Experiment:
    return experiment if isinstance(experiment, Experiment) else get_experiment(experiment)


def create_run(
    experiment: Experiment | str,
    *,
    full: bool = False,
    overrides: Mapping[str, Any] | None = None,
    runs_root: str | os.PathLike[str] = DEFAULT_RUNS_ROOT,
    protocol: str | None = None,
    jobs: int = 1,
) -> ExperimentRun:
    """Resolve the config, create a new run folder under ``runs_root`` and write ``config.json``;
    ``jobs`` processes may run its independent units (``RunDirectory.map_units``).

    ``protocol`` is "quick", "converged" or "full" (``full=True`` is "full"); ``config.json``
    lists under "overridden" the keys whose values ``overrides`` changed from the protocol's."""
    experiment = _as_experiment(experiment)
    preset = resolve_protocol(experiment, protocol, full=full)
    # Through JSON and back, so a fresh run sees exactly the config a resumed one reads from disk.
    config = to_jsonable(resolve_config(experiment, protocol=preset, overrides=overrides))
    base = to_jsonable(resolve_config(experiment, protocol=preset))
    if experiment.validate is not None:
        try:
            experiment.validate(dict(config))
        except ValueError as error:
            raise ConfigError(f"{experiment.name}: {error}") from error
    changed = sorted(key for key in config if config[key] != base[key])
    directory = RunDirectory.create(runs_root, experiment.name)
    directory.jobs = jobs
    directory.save_json(
        CONFIG_FILE,
        {
            "experiment": experiment.name,
            "preset": preset,
            "overridden": changed,
            "config": config,
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "zonal_version": zonal.__version__,
        },
    )
    return ExperimentRun(experiment, directory, config, preset)


def open_run(
    run_path: str | os.PathLike[str],
    *,
    experiment: Experiment | str | None = None,
    jobs: int = 1,
) -> ExperimentRun:
    """Reopen an unfinished run folder to resume it with its stored config.

    ``experiment``, if given, must be the one the folder was made by; ``jobs`` as in
    ``create_run`` (how many processes run it does not change what it computes).
    """
    path = Path(run_path)
    stored = _read_config(path)
    name = stored["experiment"]
    if experiment is not None:
        expected = _as_experiment(experiment)
        if expected.name != name:
            raise ExperimentError(
                f"run folder {path} belongs to experiment {name!r}, not {expected.name!r}"
            )
    else:
        expected = get_experiment(name)
    if (path / METRICS_FILE).exists():
        raise ExperimentError(
            f"run folder {path} has already finished (see {path / REPORT_FILE}); nothing to resume"
        )
    directory = RunDirectory(path, description=name, jobs=jobs)
    preset = stored.get("preset", "quick")
    # A key added to the experiment after this folder was made takes its protocol's default.
    config = {**resolve_config(expected, protocol=preset), **stored["config"]}
    return ExperimentRun(
        expected,
        directory,
        config,
        preset,
        resumed=directory.checkpoint_path.exists(),
    )


def execute_run(run: ExperimentRun) -> RunResult:
    """Call the experiment, then write ``report.md`` and ``metrics.json`` into its folder.

    The global random generators (``random``, NumPy, torch) are seeded from ``config["seed"]`` when
    the config has one; an experiment that must resume exactly keeps its own generator state in its
    checkpoint.
    """
    experiment, directory, config = run.experiment, run.directory, run.config
    seed = config.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        _seed_everything(seed)
    with directory.exclusive():  # one process at a time writes into a run folder
        started = time.perf_counter()
        metrics = experiment.run(dict(config), directory)
        seconds = time.perf_counter() - started
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"experiment {experiment.name!r} returned a {type(metrics).__name__}, expected a mapping"
        )
    metrics = to_jsonable(dict(metrics))
    details = [
        f"preset: {run.preset}" + (", resumed from its checkpoint" if run.resumed else ""),
        f"finished {datetime.now(UTC).isoformat(timespec='seconds')} after {seconds:.1f} s"
        + (" (this session)" if run.resumed else ""),
        f"zonal {zonal.__version__}, torch {torch.__version__}, {torch.get_num_threads()} thread(s)",
    ]
    if run.preset in experiment.differences:
        details.append(
            f"differences from the seed's protocol: {experiment.differences[run.preset]}"
        )
    files = sorted(path.name for path in directory.path.iterdir() if not path.name.startswith("."))
    report = render_report(
        title=experiment.name,
        summary=experiment.summary,
        run_name=directory.name,
        metrics=metrics,
        paper=experiment.paper,
        config=config,
        details=details,
        figures=[name for name in files if name.endswith(_FIGURE_SUFFIXES)],
        tables=[name for name in files if name.endswith(".csv")],
        protocol=experiment.protocol_label(run.preset),
    )
    directory.save_text(REPORT_FILE, report)
    directory.save_json(METRICS_FILE, metrics)
    return RunResult(experiment.name, directory.path, metrics, seconds, experiment.headline)


def run_experiment(
    experiment: Experiment | str,
    *,
    full: bool = False,
    overrides: Mapping[str, Any] | None = None,
    runs_root: str | os.PathLike[str] = DEFAULT_RUNS_ROOT,
    protocol: str | None = None,
) -> RunResult:
    """Run ``experiment`` (an ``Experiment`` or a registered name) in a new folder under ``runs_root``."""
    run = create_run(
        experiment, full=full, overrides=overrides, runs_root=runs_root, protocol=protocol
    )
    return execute_run(run)


def resume_experiment(
    run_path: str | os.PathLike[str], *, experiment: Experiment | str | None = None
) -> RunResult:
    """Continue the unfinished run in ``run_path`` from its last checkpoint, with its stored config."""
    return execute_run(open_run(run_path, experiment=experiment))


def _read_config(path: Path) -> dict[str, Any]:
    config_path = path / CONFIG_FILE
    if not path.is_dir():
        raise ExperimentError(f"run folder {path} does not exist")
    if not config_path.is_file():
        raise ExperimentError(f"{path} is not a run folder: it has no {CONFIG_FILE}")
    try:
        stored = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExperimentError(f"cannot read {config_path}: {exc}") from exc
    if (
        not isinstance(stored, dict)
        or not isinstance(stored.get("experiment"), str)
        or not isinstance(stored.get("config"), dict)
    ):
        raise ExperimentError(f"{config_path} lacks the 'experiment' and 'config' entries of a run")
    return stored


def _seed_everything(seed: int) -> None:
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
