"""The wall-clock budget: its default (``"auto"``: by the rows for regression, 45 s per latent
function for classification) and its bound on the collapsed SGPR's L-BFGS too (it used to run to
its end)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from gpytorch.kernels import ScaleKernel

from zonal.cli import fit_args, main
from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import PolynomialDecayKernel
from zonal.models import SGPR
from zonal.models.training import TrainingControl
from zonal.tabular import fitting, recipes
from zonal.tabular.fitting import budget_seconds
from zonal.tabular.options import (
    AUTO_BUDGET,
    BATCH_SIZE,
    REGRESSION_BUDGET,
    default_budget,
    describe_default_budget,
)
from zonal.tabular.recipes import resolve_spec, train_sgpr
from zonal.tabular.targets import Target


def _sgpr(num_points: int = 200, seed: int = 0) -> tuple[SGPR, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, 3, generator=generator, dtype=torch.float64)
    noise = torch.randn(num_points, generator=generator, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0]) + 0.1 * noise
    kernel = ScaleKernel(PolynomialDecayKernel(4, max_degree=8, homogeneous=True)).double()
    model = SGPR(kernel, SphericalHarmonicFeatures(4, 6), 3)
    model.fit_statistics(x, y)
    return model, x, y


def test_lbfgs_stops_at_the_first_evaluation_past_the_deadline_at_the_best_bound():
    model, _, _ = _sgpr()
    with torch.no_grad():
        start = float(model.elbo())
    trace = model.fit(max_iter=100, deadline=time.monotonic() - 1.0)  # already passed
    assert len(trace) == 1  # the first evaluation; the next one is past the deadline
    with torch.no_grad():
        assert float(model.elbo()) == start  # the best (only) evaluation's parameters
    timed, _, _ = _sgpr()
    timed_trace = timed.fit(max_iter=100, deadline=time.monotonic() + 0.05)
    with torch.no_grad():
        assert float(timed.elbo()) / timed.stat_count == pytest.approx(max(timed_trace), abs=1e-12)
    unbounded, _, _ = _sgpr()
    assert len(unbounded.fit(max_iter=100)) > len(trace)


def test_a_deadline_far_away_reaches_the_same_optimum_as_no_deadline():
    bounded, _, _ = _sgpr()
    bounded.fit(max_iter=50, deadline=time.monotonic() + 3600)
    free, _, _ = _sgpr()
    free.fit(max_iter=50)
    with torch.no_grad():
        np.testing.assert_allclose(float(bounded.elbo()), float(free.elbo()), rtol=1e-4)


def test_train_sgpr_ends_near_its_deadline(monkeypatch):
    # each bound evaluation made slow, so that the deadline (not convergence) ends the fit
    _, x, y = _sgpr(400)
    spec = resolve_spec(x.shape[1], model="sgpr", num_inducing=120, steps=500)
    evaluations: list[int] = []
    elbo = SGPR.elbo

    def counted(self, *args, **kwargs):
        evaluations.append(1)
        return elbo(self, *args, **kwargs)

    monkeypatch.setattr(SGPR, "elbo", counted)
    train_sgpr(spec, x, y, TrainingControl())
    unbounded = len(evaluations)
    evaluations.clear()

    def slow(self, *args, **kwargs):
        time.sleep(0.05)
        return counted(self, *args, **kwargs)

    monkeypatch.setattr(SGPR, "elbo", slow)
    started = time.monotonic()
    fit = train_sgpr(spec, x, y, TrainingControl(deadline=started + 0.3))
    elapsed = time.monotonic() - started
    assert len(evaluations) < unbounded  # the deadline ended it (unbounded: > 0.05 s x count)
    assert elapsed < 0.3 + 2.0  # the pass and one evaluation past the deadline
    assert np.isfinite(fit.objective)


@pytest.mark.parametrize(
    ("likelihood", "classes", "seconds"),
    [("bernoulli", ("a", "b"), 45.0), ("softmax", ("a", "b", "c"), 135.0),
     ("softmax", tuple("0123456789"), 450.0)],
)  # fmt: skip
def test_the_auto_budget_of_a_classifier_is_45_seconds_per_latent_function(
    likelihood, classes, seconds
):
    target = Target(likelihood, classes)
    for rows in (40, 5000):  # whatever the rows
        assert budget_seconds(AUTO_BUDGET, target, rows) == seconds
        assert default_budget(likelihood, len(classes), rows) == seconds
    assert budget_seconds(12.5, target, 40) == 12.5 and budget_seconds(None, target, 40) is None


@pytest.mark.parametrize(
    ("rows", "seconds"),
    [(150, 30.0 * (150 / 1024) ** 0.5), (256, 15.0), (1024, 30.0), (9000, 30.0)],
)
def test_the_auto_budget_of_a_regression_grows_as_the_root_of_its_rows_to_a_minibatch(
    rows, seconds
):
    assert REGRESSION_BUDGET == 30.0 and BATCH_SIZE == recipes.BATCH_SIZE == 1024
    assert budget_seconds(AUTO_BUDGET, Target("gaussian"), rows) == pytest.approx(
        seconds, rel=1e-12
    )
    assert budget_seconds(7.0, Target("gaussian"), rows) == 7.0


def test_the_announced_budget_says_its_seconds_and_its_rule():
    assert describe_default_budget("gaussian", 0, 256) == (
        "budget 15 s (30 s x sqrt(256 / 1024 rows); --budget SECONDS sets it)"
    )
    assert describe_default_budget("gaussian", 0, 4096) == (
        "budget 30 s (30 s for a regression of 1024 rows or more; --budget SECONDS sets it)"
    )
    assert describe_default_budget("bernoulli", 2, 80) == (
        "budget 45 s (45 s for two classes; --budget SECONDS sets it)"
    )
    assert describe_default_budget("softmax", 30, 80) == (
        "budget 1350 s (45 s per class; --budget SECONDS sets it)"
    )
    assert describe_default_budget("gaussian", 0, 150).startswith("budget 11.5 s (30 s x sqrt(150")


def test_a_budget_that_is_neither_seconds_auto_nor_none_is_refused():
    for bad in ("soon", 0.0, -3.0):
        with pytest.raises(ValueError, match="the budget must be"):
            budget_seconds(bad, Target("gaussian"), 100)


class _StoppedError(Exception):
    pass


@pytest.mark.parametrize(
    ("labels", "expected"), [(2, 45.0), (4, 180.0), (None, 30.0 * (80 / 1024) ** 0.5)]
)
def test_fit_data_trains_to_the_default_deadline(monkeypatch, labels, expected):
    seen = {}

    def stop(names, split, target, deadline, *args, **kwargs):
        seen["seconds"] = deadline - time.monotonic()
        raise _StoppedError

    monkeypatch.setattr(fitting, "train_candidates", stop)
    x = np.random.default_rng(0).normal(size=(80, 2))
    y = x[:, 0] if labels is None else np.arange(80) % labels  # a regression of 80 rows, or classes
    with pytest.raises(_StoppedError):
        fitting.fit_data(x, y, feature_columns=["a", "b"], budget=AUTO_BUDGET)
    assert seen["seconds"] == pytest.approx(expected, abs=1.0)


def test_the_cli_defaults_to_the_auto_budget_and_says_which(tmp_path, capsys, monkeypatch):
    calls = {}

    def stop(table, column, **kwargs):
        calls["budget"] = kwargs["budget"]
        raise _StoppedError

    monkeypatch.setattr(fitting, "fit_table", stop)
    data = tmp_path / "table.csv"
    data.write_text("a,y\n" + "\n".join(f"{i},{'xyz'[i % 3]}" for i in range(60)) + "\n")
    with pytest.raises(_StoppedError):
        main(["fit", str(data), "--target", "y", "-o", str(tmp_path / "m.pt"), "--quiet"])
    assert calls["budget"] == AUTO_BUDGET
    assert (
        "zonal: budget 135 s (45 s per class; --budget SECONDS sets it)" in capsys.readouterr().err
    )
    numbers = tmp_path / "numbers.csv"
    numbers.write_text("a,y\n" + "\n".join(f"{i},{i / 7:.4f}" for i in range(64)) + "\n")
    with pytest.raises(_StoppedError):
        main(["fit", str(numbers), "--target", "y", "-o", str(tmp_path / "n.pt"), "--quiet"])
    assert "zonal: budget 7.5 s (30 s x sqrt(64 / 1024 rows)" in capsys.readouterr().err
    assert fit_args.budget("AUTO") == AUTO_BUDGET and fit_args.budget("none") is None
