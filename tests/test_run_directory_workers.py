"""``RunDirectory.map_units`` with worker processes: a caller that stops (Ctrl-C, a failed unit,
an early exit) stops the workers instead of waiting for every unit."""

from __future__ import annotations

import time

import pytest

from zonal.experiments.run_directory import RunDirectory


def _sleep_unit(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _failing_unit(seconds: float) -> float:
    if seconds < 1:
        raise ValueError("unit failed")
    time.sleep(seconds)
    return seconds


def test_workers_stop_when_the_caller_stops_early(tmp_path):
    """The caller takes the fast unit's result and stops: the two minute-long units are not
    waited for (before, the pool's shutdown waited for them, as it did after Ctrl-C)."""
    started = time.monotonic()
    results = RunDirectory(tmp_path, jobs=2).map_units(_sleep_unit, [0.1, 60.0, 60.0])
    assert next(results) == (0.1, 0.1)
    results.close()
    assert time.monotonic() - started < 30


def test_a_failed_unit_raises_without_waiting_for_the_others(tmp_path):
    started = time.monotonic()
    with pytest.raises(ValueError, match="unit failed"):
        list(RunDirectory(tmp_path, jobs=2).map_units(_failing_unit, [0.1, 60.0, 60.0]))
    assert time.monotonic() - started < 30
