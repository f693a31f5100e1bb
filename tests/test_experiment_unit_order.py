"""Experiments whose fits run in ``--jobs`` worker processes put the rows back in their units'
order, whatever order the workers finish in: with ``map_units`` yielding the units in reverse,
each table is the in-order run's."""

from __future__ import annotations

import csv

import pytest

from test_experiment_residual_dgp import TINY_UCI
from test_experiment_seed002 import TINY_MAGIC, TINY_REGRESSION
from test_experiment_uci_report import TINY as TINY_REPORT
from zonal.experiments import run_experiment
from zonal.experiments.run_directory import RunDirectory


def _rows(path):
    with path.open() as handle:
        return [{k: v for k, v in row.items() if "seconds" not in k}
                for row in csv.DictReader(handle)]  # fmt: skip


def _in_reverse(self, function, units, *, finished=0, **tqdm_kwargs):
    for unit in reversed(list(units)):
        yield unit, function(unit)


@pytest.mark.parametrize(
    ("name", "overrides", "tables"),
    [
        ("sparse-phases-magic", TINY_MAGIC, ("results.csv", "traces.csv")),
        ("sparse-phases-regression", TINY_REGRESSION, ("results.csv",)),
        ("residual-dgp-uci", TINY_UCI, ("results.csv",)),
        ("uci-report", TINY_REPORT, ("results.csv",)),
    ],
)
def test_rows_come_back_in_the_units_order(name, overrides, tables, tmp_path, monkeypatch):
    in_order = run_experiment(name, overrides=overrides, runs_root=tmp_path / "in-order")
    monkeypatch.setattr(RunDirectory, "map_units", _in_reverse)
    reversed_run = run_experiment(name, overrides=overrides, runs_root=tmp_path / "reversed")
    for table in tables:
        ours = _rows(reversed_run.path / table)
        assert len(ours) > 1
        assert ours == _rows(in_order.path / table)
