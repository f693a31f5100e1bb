"""Bayesian optimisation on spheres with a shallow GP, a switch to a residual deep GP, and an
adaptive switch (seed 004 sec. 4.2, fig. 4.2).

Protocol (seed 004 sec. 4.2, app. A.2): minimise each function (``zonal.bo.objectives``: the
singular function on S^2, Ackley on S^3, optionally the smooth one) from 5 uniform initial points
for ``steps`` BO steps, log expected improvement maximised on the sphere
(``zonal.bo.optimize_acqf_sphere``), the surrogate retrained after every step, ``repeats`` seeds.
Three strategies (``zonal.bo.optimize``):

* ``shallow``: the exact GP with the intrinsic Matérn-5/2 kernel throughout;
* ``switch``: the same for ``switch_after`` steps, then the residual DGP (the seed: 180 + 20);
* ``adaptive``: the residual DGP from the first check at which it predicts the most recent
  ``holdout`` points better than the shallow GP (held-out log predictive density).

Steps are seeded by their index, so ``switch`` and ``adaptive`` repeat the ``shallow`` run's
choices until they switch: they are branched from its state (``BOState.branch``) instead of
recomputed. The seed's deep model is trained for 500 Adam steps at 0.01 after every BO step; here
the first deep fit of a run takes ``deep_steps`` and later ones continue from the previous step's
parameters for ``deep_warm_steps`` (``LoopSettings.warm_start``), at ``deep_lr``.
``well_radius`` sets the singular function's well (``zonal.bo.singular_objective``; 0.05).

Outputs: ``results.csv`` (regret per function, strategy, repeat and evaluation), ``summary.csv``
(median and quartiles of log10 regret per evaluation), ``figure_4_2.png`` (median and
inter-quartile band of log10 regret against BO steps), the run states under ``states/``
(a resumed run continues each BO run where it stopped). The seed reports no numbers for fig. 4.2,
only claims: large, often immediate gains after the switch on the singular function, none on
Ackley; the metrics give the median log10 regret at the switch and at the end for each strategy.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zonal.experiments.registry import register_experiment
from zonal.experiments.residual_dgp_sphere import quartiles
from zonal.experiments.run_directory import RunDirectory

if TYPE_CHECKING:
    from zonal.bo import BOState, LoopSettings, SphereObjective

QUICK: dict[str, Any] = {
    "seed": 0,
    "functions": ["singular-s2", "ackley-s3"],
    "repeats": 3,
    "steps": 24,
    "switch_after": 16,
    "num_initial": 5,
    "acquisition": "qlogei",
    "num_restarts": 4,
    "raw_samples": 64,
    "mc_samples": 32,
    "hidden_layers": 1,
    "num_inducing": 20,
    "deep_steps": 60,
    "deep_warm_steps": 15,
    "deep_lr": 0.05,
    "posterior_samples": 8,
    "holdout": 5,
    "check_every": 4,
    "adaptive_min_points": 15,
    # the singular function's well radius r (``zonal.bo.singular_objective``; 0.05 by default)
    "well_radius": 0.05,
}
FULL: dict[str, Any] = {
    "repeats": 15,
    "steps": 200,
    "switch_after": 180,
    "num_restarts": 8,
    "raw_samples": 256,
    "mc_samples": 128,
    "num_inducing": 60,
    "deep_steps": 500,
    "deep_warm_steps": 100,
    "deep_lr": 0.01,
    "posterior_samples": 32,
    "check_every": 10,
    "adaptive_min_points": 50,
}
# The seed's protocol (200 steps, the switch after 180) with 5 seeds instead of 15: about 1.5
# CPU-hours (measured, session 15: 40 minutes on 2 cores with --jobs 2), resumable with --resume
# (each loop keeps a state file); --jobs 2 runs two (function, repeat) units at once.
CONVERGED: dict[str, Any] = {**FULL, "repeats": 5}
PAPER: dict[str, dict[str, Any]] = {"seed 004 fig. 4.2": {}}
STRATEGIES = ("shallow", "switch", "adaptive")
SETTING_KEYS = (
    "num_restarts",
    "raw_samples",
    "mc_samples",
    "hidden_layers",
    "num_inducing",
    "deep_steps",
    "deep_warm_steps",
    "deep_lr",
    "posterior_samples",
    "holdout",
    "check_every",
    "adaptive_min_points",
)


def loop_settings(config: dict[str, Any]) -> LoopSettings:
    """The ``LoopSettings`` of a config."""
    from zonal.bo import LoopSettings

    return LoopSettings(**{key: config[key] for key in SETTING_KEYS})


def run_seed(config: dict[str, Any], function: str, repeat: int) -> int:
    """The loop's seed of one (function, repeat), stable across runs."""
    import zlib

    return zlib.crc32(f"{config['seed']}/{function}/{repeat}".encode())


def first_adaptive_step(config: dict[str, Any]) -> int:
    """The first BO step at which the adaptive rule checks (``loop.choose_model``)."""
    points = max(config["adaptive_min_points"], config["holdout"] + 2)
    step = max(0, points - config["num_initial"])
    every = config["check_every"]
    return -(-step // every) * every


def objective_of(config: dict[str, Any], function: str) -> SphereObjective:
    """The test function ``function`` of a config (the singular one with its ``well_radius``)."""
    from zonal.bo import singular_objective, sphere_objective

    if function == "singular-s2":
        return singular_objective(config["well_radius"])
    return sphere_objective(function)


def run_strategy(
    config: dict[str, Any], function: str, repeat: int, strategy: str, states: Path
) -> BOState:
    """The finished ``BOState`` of one BO run, branched from the shallow run where it can be."""
    from zonal.bo import BOState, optimize

    objective = objective_of(config, function)
    path = states / f"{function}-{repeat}-{strategy}.pt"
    budget = config["num_initial"] + config["steps"]
    switch_after = config["switch_after"] if strategy == "switch" else None
    if strategy != "shallow" and not path.exists():
        shallow = BOState.load(states / f"{function}-{repeat}-shallow.pt")
        branch_step = (
            config["switch_after"] if strategy == "switch" else first_adaptive_step(config)
        )
        branch_step = min(branch_step, config["steps"])
        shallow.branch(strategy, config["num_initial"] + branch_step, switch_after).save(path)
    return optimize(
        objective,
        objective.ambient_dim,
        budget,
        model=strategy,
        switch_after=switch_after,
        num_initial=config["num_initial"],
        acquisition=config["acquisition"],
        optimum_value=objective.optimum_value,
        seed=run_seed(config, function, repeat),
        state_path=path,
        settings=loop_settings(config),
        progress=False,
    )


def repeat_unit(item: tuple[dict[str, Any], str, int, str]) -> list[BOState]:
    """The finished states of one (function, repeat), one per strategy of ``STRATEGIES`` (shallow
    first: the others branch from it). Module-level, so that ``--jobs`` workers can run it."""
    config, function, repeat, states = item
    return [
        run_strategy(config, function, repeat, strategy, Path(states)) for strategy in STRATEGIES
    ]


def log_regret(regret: float) -> float:
    """log10 of the regret, floored at 1e-16 (an exact hit)."""
    return math.log10(max(regret, 1e-16))


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median and quartiles of log10 regret per (function, strategy, step)."""
    cells: dict[tuple[str, str, int], list[float]] = {}
    for row in rows:
        key = (row["function"], row["strategy"], row["step"])
        cells.setdefault(key, []).append(log_regret(row["regret"]))
    summary = []
    for (function, strategy, step), values in sorted(cells.items()):
        low, median, high = quartiles(values)
        summary.append(
            {
                "function": function,
                "strategy": strategy,
                "step": step,
                "repeats": len(values),
                "log10_regret_q1": low,
                "log10_regret_median": median,
                "log10_regret_q3": high,
            }
        )
    return summary


def _check_config(config: dict[str, Any]) -> None:
    from zonal.bo import OBJECTIVES, singular_objective

    unknown = sorted(set(config["functions"]) - set(OBJECTIVES))
    if unknown:
        raise ValueError(f"unknown functions {unknown}; choose from {sorted(OBJECTIVES)}")
    if not 0 <= config["switch_after"] <= config["steps"]:
        raise ValueError("switch_after must lie between 0 and steps")
    singular_objective(config["well_radius"])  # ValueError outside (0, 1]
    if config["repeats"] < 1 or config["num_initial"] < 1:
        raise ValueError("repeats and num_initial must be >= 1")


@register_experiment(
    "bo-sphere",
    validate=_check_config,
    summary="Bayesian optimisation on S^2 / S^3: shallow intrinsic-Matérn GP, switch to a "
    "residual deep GP after K steps, adaptive switch; log10 regret median and IQR per step "
    "(seed 004 fig. 4.2)",
    quick=QUICK,
    converged=CONVERGED,
    full=FULL,
    differences={
        "converged": "reduced: 5 seeds (seed: 15); otherwise the seed's protocol",
        "quick": "reduced: 3 seeds, 24 steps with the switch after 16 (seed: 15 seeds, 180 + 20)",
        "full": "the seed's protocol (15 seeds, 180 + 20 steps)",
    },
    paper=PAPER,
    headline=(
        "singular-s2.shallow.final_median",
        "singular-s2.switch.final_median",
        "ackley-s3.shallow.final_median",
        "ackley-s3.switch.final_median",
    ),
    cpu_hours={"converged": 1.5},  # measured (session 15)
)
def run_bo_sphere(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Every (function, repeat, strategy) BO run, resumable, then the regret summary and figure.

    The (function, repeat) units are independent (``--jobs`` runs them in parallel); their rows are
    gathered in the units' order, so the tables do not depend on ``jobs``."""
    _check_config(config)
    states = run_dir.path / "states"
    states.mkdir(exist_ok=True)
    units = [
        (config, function, repeat, str(states))
        for function in config["functions"]
        for repeat in range(config["repeats"])
    ]
    finished = {
        (function, repeat): found
        for (_, function, repeat, _), found in run_dir.map_units(repeat_unit, units, unit="repeat")
    }
    rows: list[dict[str, Any]] = []
    seconds: dict[tuple[str, str], list[float]] = {}
    switched: dict[tuple[str, str], list[int]] = {}
    for _, function, repeat, _ in units:
        for strategy, state in zip(STRATEGIES, finished[function, repeat], strict=True):
            for index, regret in enumerate(state.regret().tolist()):
                step = index + 1 - config["num_initial"]
                if step >= 0:
                    rows.append(
                        {
                            "function": function,
                            "strategy": strategy,
                            "repeat": repeat,
                            "step": step,
                            "regret": regret,
                            "model": state.sources[index],
                        }
                    )
            for index, source in enumerate(state.sources[config["num_initial"] :]):
                if index < len(state.step_seconds):
                    seconds.setdefault((function, source), []).append(state.step_seconds[index])
            if state.switched_at is not None:
                switched.setdefault((function, strategy), []).append(state.switched_at)
    summary = summarise(rows)
    run_dir.save_table("results.csv", rows)
    run_dir.save_table("summary.csv", summary)
    _plot(run_dir, summary, config)
    return _metrics(summary, seconds, switched, config)


def _metrics(
    summary: list[dict[str, Any]],
    seconds: dict[tuple[str, str], list[float]],
    switched: dict[tuple[str, str], list[int]],
    config: dict[str, Any],
) -> dict[str, Any]:
    """Median log10 regret at the switch and at the end per (function, strategy), seconds per BO
    step per model, the adaptive switch's steps."""
    metrics: dict[str, Any] = {}
    at = {(e["function"], e["strategy"], e["step"]): e for e in summary}
    for function in config["functions"]:
        entry = metrics.setdefault(function, {})
        for strategy in STRATEGIES:
            final = at.get((function, strategy, config["steps"]))
            before = at.get((function, strategy, config["switch_after"]))
            if final is None:
                continue
            entry[strategy] = {
                "at_switch_median": None if before is None else before["log10_regret_median"],
                "final_median": final["log10_regret_median"],
                "final_q1": final["log10_regret_q1"],
                "final_q3": final["log10_regret_q3"],
            }
        for model in ("shallow", "deep"):
            times = seconds.get((function, model))
            if times:
                entry[f"{model}_seconds_per_step"] = statistics.fmean(times)
        steps = switched.get((function, "adaptive"))
        entry["adaptive_switch_steps"] = sorted(steps) if steps else []
    return metrics


def _plot(run_dir: RunDirectory, summary: list[dict[str, Any]], config: dict[str, Any]) -> None:
    """``figure_4_2.png``: median log10 regret and its inter-quartile band per strategy."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    functions = config["functions"]
    figure = Figure(figsize=(3.8 * len(functions), 3.2), layout="constrained")
    axes = figure.subplots(1, len(functions), squeeze=False)[0]
    for axis, function in zip(axes, functions, strict=True):
        for strategy, colour in zip(STRATEGIES, ("C1", "C0", "C2"), strict=True):
            cells = [e for e in summary if (e["function"], e["strategy"]) == (function, strategy)]
            if not cells:
                continue
            steps = [e["step"] for e in cells]
            axis.plot(
                steps, [e["log10_regret_median"] for e in cells], color=colour, label=strategy
            )
            axis.fill_between(
                steps,
                [e["log10_regret_q1"] for e in cells],
                [e["log10_regret_q3"] for e in cells],
                color=colour,
                alpha=0.2,
            )
        axis.axvline(config["switch_after"], color="grey", linestyle=":")
        axis.set_title(function)
        axis.set_xlabel("BO step")
        axis.set_ylabel("log10 regret")
    axes[0].legend(frameon=False, fontsize=7)
    figure.suptitle("BO on spheres: median and IQR of log10 regret (seed 004 fig. 4.2)", fontsize=8)
    run_dir.save_figure("figure_4_2.png", figure)


__all__ = ["FULL", "PAPER", "QUICK", "STRATEGIES", "run_bo_sphere", "summarise"]
