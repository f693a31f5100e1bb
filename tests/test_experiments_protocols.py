"""Protocols of an experiment (quick, converged, full) and the rule that calls a fit converged."""

from __future__ import annotations

import json

import pytest

from zonal.experiments import Experiment, ExperimentError, create_run
from zonal.experiments._convergence import (
    StopAtPlateau,
    curve_summary,
    is_converged,
    plateau_drop,
    thin_curve,
)
from zonal.experiments.config import resolve_config
from zonal.experiments.run import open_run
from zonal.models.training import StopTraining


def _noop(config, run_dir):
    return {"value": config["steps"]}


PROTOCOLS = Experiment(
    "protocol-example",
    "summary",
    _noop,
    quick={"seed": 0, "steps": 10, "repeats": 1},
    converged={"steps": 500, "repeats": 3},
    full={"steps": 1000},
    differences={"converged": "reduced: 3 repeats", "full": "stand-in data"},
)
QUICK_ONLY = Experiment("quick-only", "summary", _noop, quick={"seed": 0, "steps": 10})


def test_each_protocol_overrides_quick_and_user_overrides_come_last():
    assert resolve_config(PROTOCOLS)["steps"] == 10
    assert resolve_config(PROTOCOLS, protocol="converged") == {
        "seed": 0,
        "steps": 500,
        "repeats": 3,
    }
    assert resolve_config(PROTOCOLS, protocol="full") == {"seed": 0, "steps": 1000, "repeats": 1}
    assert resolve_config(PROTOCOLS, full=True)["steps"] == 1000
    assert resolve_config(PROTOCOLS, protocol="converged", overrides={"steps": 7})["steps"] == 7


def test_protocols_offered_and_refused_by_name():
    assert PROTOCOLS.protocols == ("quick", "converged", "full")
    assert QUICK_ONLY.protocols == ("quick", "full")
    with pytest.raises(ExperimentError, match="'quick-only' has no converged protocol"):
        resolve_config(QUICK_ONLY, protocol="converged")
    with pytest.raises(ExperimentError, match="unknown protocol 'long'"):
        resolve_config(PROTOCOLS, protocol="long")
    with pytest.raises(ExperimentError, match="--full and --protocol converged disagree"):
        resolve_config(PROTOCOLS, protocol="converged", full=True)


def test_converged_keys_must_be_quick_keys_and_differences_known_protocols():
    with pytest.raises(ValueError, match=r"converged config keys \['extra'\]"):
        Experiment("bad", "summary", _noop, quick={"steps": 1}, converged={"extra": 2})
    with pytest.raises(ValueError, match="differences for unknown protocols"):
        Experiment("bad", "summary", _noop, quick={"steps": 1}, differences={"long": "x"})
    with pytest.raises(ValueError, match="cpu_hours for unknown protocols"):
        Experiment("bad", "summary", _noop, quick={"steps": 1}, cpu_hours={"long": 1.0})
    with pytest.raises(ValueError, match="must be positive and finite"):
        Experiment("bad", "summary", _noop, quick={"steps": 1}, cpu_hours={"full": 0.0})


def test_run_folder_records_protocol_and_overridden_keys(tmp_path):
    run = create_run(PROTOCOLS, protocol="converged", overrides={"repeats": 5}, runs_root=tmp_path)
    stored = json.loads((run.directory.path / "config.json").read_text())
    assert stored["preset"] == "converged"
    assert stored["overridden"] == ["repeats"]
    assert stored["config"] == {"seed": 0, "steps": 500, "repeats": 5}


def test_resume_fills_keys_added_after_the_folder_was_made(tmp_path):
    run = create_run(PROTOCOLS, protocol="converged", runs_root=tmp_path)
    path = run.directory.path / "config.json"
    stored = json.loads(path.read_text())
    del stored["config"]["repeats"]  # as if the key had been added to the experiment later
    stored["config"]["steps"] = 42
    path.write_text(json.dumps(stored))
    reopened = open_run(run.directory.path, experiment=PROTOCOLS)
    assert reopened.preset == "converged"
    assert reopened.config == {"seed": 0, "steps": 42, "repeats": 3}


def test_plateau_drop_is_the_difference_of_the_last_two_tenths():
    losses = [float(v) for v in range(100, 0, -1)]  # falls by 1 per step
    # last tenth 10..1 (mean 5.5) against 20..11 (mean 15.5)
    assert plateau_drop(losses) == pytest.approx(-10.0)
    assert not is_converged(losses)
    flat = [1.0] * 50 + [0.5] * 50
    assert plateau_drop(flat) == 0.0 and is_converged(flat)
    assert plateau_drop([3.0, 2.0]) == 0.0  # too short to judge: no drop measured


def test_tolerance_is_in_loss_units_and_inclusive():
    losses = [1.0] * 80 + [1.0] * 10 + [0.995] * 10
    assert plateau_drop(losses) == pytest.approx(-0.005)
    assert is_converged(losses, tolerance=0.0051)
    assert not is_converged(losses, tolerance=0.0049)
    summary = curve_summary(losses)
    assert summary["steps_run"] == 100 and summary["plateau_drop"] == pytest.approx(-0.005)
    exact = [1.0] * 90 + [0.5] * 10  # a drop of exactly 0.5 (binary fractions)
    assert plateau_drop(exact) == -0.5
    assert is_converged(exact, tolerance=0.5) and not is_converged(exact, tolerance=0.4999)


def test_thin_curve_averages_blocks_and_keeps_the_last_step():
    curve = thin_curve([float(i) for i in range(10)], 3)
    assert curve == [(3, 1.0), (6, 4.0), (9, 7.0), (10, 9.0)]
    assert thin_curve([2.0, 4.0], 10) == [(1, 2.0), (2, 4.0)]
    assert thin_curve([], 5) == []


def test_stop_at_plateau_ends_training_at_the_first_epoch_end_the_rule_accepts():
    """A loss falling by 1 per step for 50 steps, then flat: with 10 steps per epoch the rule
    (last tenth against the tenth before, 0.005 tolerance) first holds at an epoch end once the
    flat part fills the last two tenths of the curve; never mid-epoch, never before min_epochs."""
    losses = [50.0 - step for step in range(50)] + [1.0] * 500
    stopper = StopAtPlateau(steps_per_epoch=10, min_epochs=2)
    stopped_at = None
    for step, loss in enumerate(losses):
        try:
            stopper(step, loss)
        except StopTraining:
            stopped_at = step
            break
    assert stopped_at is not None and (stopped_at + 1) % 10 == 0
    seen = losses[: stopped_at + 1]
    assert is_converged(seen)
    assert not any(is_converged(losses[:end]) for end in range(20, stopped_at + 1, 10))
    flat = StopAtPlateau(steps_per_epoch=10, min_epochs=3)
    with pytest.raises(StopTraining):
        for step in range(30):
            flat(step, 1.0)
    assert len(flat.losses) == 30  # a flat curve stops only at the third epoch's end
    short = StopAtPlateau(steps_per_epoch=2, min_epochs=1)
    for step in range(19):  # a plateau drop needs 20 steps: shorter curves never stop
        short(step, 0.0)
    with pytest.raises(StopTraining):
        short(19, 0.0)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        StopAtPlateau(steps_per_epoch=0)
