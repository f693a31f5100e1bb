"""The papers' experiments, runnable from one command line (``zonal experiment run NAME``).

Each experiment is one module of this package that registers a run function with
``@register_experiment``; every run writes a new folder with its config, metrics, tables, figures,
checkpoint and a ``report.md`` that puts our numbers beside the paper's. Modules are imported the
first time the registry is queried (``list_experiments``, ``get_experiment``), not on import.
"""

from zonal.experiments.errors import CheckpointError, ConfigError, ExperimentError
from zonal.experiments.registry import (
    Experiment,
    get_experiment,
    list_experiments,
    register_experiment,
)
from zonal.experiments.run import (
    ExperimentRun,
    RunResult,
    create_run,
    execute_run,
    open_run,
    resume_experiment,
    run_experiment,
)
from zonal.experiments.run_directory import RunDirectory

__all__ = [
    "CheckpointError",
    "ConfigError",
    "Experiment",
    "ExperimentError",
    "ExperimentRun",
    "RunDirectory",
    "RunResult",
    "create_run",
    "execute_run",
    "get_experiment",
    "list_experiments",
    "open_run",
    "register_experiment",
    "resume_experiment",
    "run_experiment",
]
