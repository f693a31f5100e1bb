"""The vish-flights experiment (seed 001 ch. 3): the SGPR against SVGPs trained to a plateau."""

from __future__ import annotations

import csv
import math

import pytest
import torch

from zonal.experiments import run_experiment
from zonal.experiments.vish_flights import compare, plateau_callback
from zonal.models.training import StopTraining

TINY = {
    "dataset": "synthetic",
    "num_train": 1200,
    "test_rows": 300,
    "frequencies": 3,
    "kernel_degree": 4,
    "lbfgs_steps": 10,
    "num_inducing": 16,
    "batch_size": 256,
    "eval_every": 5,
    "patience": 2,
    "max_seconds": 2.0,
}


def _read(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_vish_flights_compares_each_svgp_with_the_sgpr_of_its_split(tmp_path):
    """One row per (split, model); each SVGP row's time to the SGPR's RMSE is the first point of
    its curve at or below that RMSE, and its speed-up that time over the SGPR's seconds."""
    result = run_experiment("vish-flights", overrides=TINY, runs_root=tmp_path)
    rows = _read(result.path / "results.csv")
    assert [(r["split"], r["model"]) for r in rows] == [
        ("0", "sgpr"),
        ("0", "zonal-svgp"),
        ("0", "rbf-svgp"),
    ]
    curves = _read(result.path / "curves.csv")
    sgpr = rows[0]
    for row in rows[1:]:
        assert row["stopped"] in ("plateau", "time cap")
        assert row["converged"] == str(row["stopped"] == "plateau")
        points = [
            (float(c["seconds"]), float(c["rmse"])) for c in curves if c["model"] == row["model"]
        ]
        assert float(row["best_rmse"]) == min(rmse for _, rmse in points)
        reached = [s for s, rmse in points if rmse <= float(sgpr["rmse"])]
        taken = reached[0] if reached else points[-1][0]
        assert float(row["speedup"]) == pytest.approx(taken / float(sgpr["seconds"]))
        assert row["speedup_is_lower_bound"] == str(not reached)
        assert float(row["accuracy_ratio"]) == pytest.approx(
            float(sgpr["rmse"]) / float(row["best_rmse"])
        )
    assert float(sgpr["rmse"]) < 1.0  # the synthetic target is learnable (standardised RMSE)
    assert set(result.metrics) == {"sgpr", "zonal-svgp", "rbf-svgp"}
    pytest.importorskip("matplotlib")
    assert (result.path / "figure_3.png").exists()


def test_a_subset_of_models_fits_only_those(tmp_path):
    """``models`` picks the fits (an ablation of the SGPR's features runs no SVGP); an unknown
    name is refused before anything runs."""
    result = run_experiment("vish-flights", overrides={**TINY, "models": ["sgpr"]},
                            runs_root=tmp_path)  # fmt: skip
    assert [r["model"] for r in _read(result.path / "results.csv")] == ["sgpr"]
    assert set(result.metrics) == {"sgpr"}
    with pytest.raises(ValueError, match="models must be some of"):
        run_experiment("vish-flights", overrides={**TINY, "models": ["gp"]}, runs_root=tmp_path)


def test_the_sgpr_with_input_scales_learns_them_before_its_pass(tmp_path, monkeypatch):
    """``input_scales``: the SGPR's embedding has learnable scales, fitted (away from 1) on a
    subsample's bound before the statistics pass, which then runs at them."""
    from zonal.models import SGPR

    fitted = []
    original = SGPR.fit_statistics

    def spy(self, *args, **kwargs):
        fitted.append(self.input_map.input_scales.detach().clone())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SGPR, "fit_statistics", spy)
    settings = {**TINY, "models": ["sgpr"], "input_scales": True}
    result = run_experiment("vish-flights", overrides=settings, runs_root=tmp_path)
    assert len(fitted) == 1 and not torch.allclose(fitted[0], torch.ones_like(fitted[0]))
    from zonal.experiments.vish_flights import QUICK
    from zonal.tabular.recipes.sgpr import ARD_SUBSAMPLE

    assert QUICK["input_scale_rows"] == ARD_SUBSAMPLE  # the default is zonal fit's
    assert math.isfinite(float(_read(result.path / "results.csv")[0]["rmse"]))


def test_compare_flags_an_svgp_that_never_reaches_the_sgpr_as_a_lower_bound():
    rows = [
        {"split": 0, "model": "sgpr", "rmse": 0.5, "seconds": 2.0},
        {
            "split": 0,
            "model": "rbf-svgp",
            "seconds": 30.0,
            "best_rmse": 0.6,
            "curve": [[10.0, 0.8, 100], [30.0, 0.6, 200]],
        },
        {
            "split": 0,
            "model": "zonal-svgp",
            "seconds": 30.0,
            "best_rmse": 0.45,
            "curve": [[10.0, 0.7, 100], [20.0, 0.5, 200], [30.0, 0.45, 300]],
        },
    ]
    rbf, zonal = compare(rows)[1:]
    assert rbf["seconds_to_sgpr_rmse"] is None and rbf["speedup_is_lower_bound"]
    assert rbf["speedup"] == 15.0  # its whole 30 s over the SGPR's 2 s
    assert rbf["accuracy_ratio"] == pytest.approx(0.5 / 0.6)
    assert zonal["seconds_to_sgpr_rmse"] == 20.0 and zonal["speedup"] == 10.0
    assert not zonal["speedup_is_lower_bound"]


class _Scripted(torch.nn.Module):
    """A model whose test predictions have the RMSE of a script, one value per evaluation."""

    def __init__(self, errors):
        super().__init__()
        self.errors = list(errors)

    def predict(self, x, include_noise=False):
        error = self.errors.pop(0)
        return torch.full((len(x),), error, dtype=torch.float64), torch.ones(len(x))


@pytest.mark.parametrize(
    ("errors", "stops_after"),
    [
        ([1.0, 0.9, 0.8, 0.7, 0.6, 0.5], None),  # still improving: never stops
        ([1.0, 0.9, 0.8, 0.8, 0.8, 0.8], 5),  # two evaluations no better than 0.8: plateau
        ([1.0, 0.9, 0.8, 0.79999, 0.8, 0.8], 5),  # better by less than the 1e-3 tolerance
    ],
)
def test_plateau_rule_stops_after_patience_evaluations_without_relative_gain(errors, stops_after):
    config = {
        "eval_every": 1,
        "patience": 2,
        "plateau_tolerance": 1e-3,
        "max_seconds": math.inf,
    }
    history, stopped = [], []
    model = _Scripted(errors)
    callback = plateau_callback(model, torch.zeros(4, 2), torch.zeros(4), config, history, stopped)
    stopped_at = None
    for step in range(len(errors)):
        try:
            callback(step, 0.0)
        except StopTraining:
            assert stopped == ["plateau"]
            stopped_at = step + 1
            break
    assert stopped_at == stops_after
    assert [round(h[1], 6) for h in history] == [round(e, 6) for e in errors[: len(history)]]


def test_a_target_stops_the_training_at_the_first_evaluation_that_reaches_it():
    config = {"eval_every": 1, "patience": 5, "plateau_tolerance": 1e-3, "max_seconds": math.inf}
    history, stopped = [], []
    callback = plateau_callback(
        _Scripted([0.9, 0.7, 0.5, 0.4]), torch.zeros(4, 2), torch.zeros(4), config, history,
        stopped, target=0.6,
    )  # fmt: skip
    with pytest.raises(StopTraining):
        for step in range(4):
            callback(step, 0.0)
    assert stopped == ["matched"] and len(history) == 3
