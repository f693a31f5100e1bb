"""``zonal fit --model auto`` stacks its regression candidates (``zonal.tabular.stacking.stack_fits``): the
weights maximise the validation log density of the mixture, the stacked model is saved, reloaded
and predicted like any other (stacked classifiers: tests/test_stacked_classifiers.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from zonal.cli import main
from zonal.models import SVGP
from zonal.models.stacking import (
    WEIGHT_RESOLUTION,
    StackedModel,
    bootstrap_stacking_weights,
    posterior_stacking_weights,
    quantize_weights,
    stacking_weights,
)
from zonal.tabular import candidates, fitting, stacking
from zonal.tabular.fitting import fit_data
from zonal.tabular.model import STACKED
from zonal.tabular.predict import predict_data
from zonal.tabular.recipes import AUTO_REFINEMENT_GAP, AUTO_REFINEMENT_SHARE, auto_refinement
from zonal.tabular.saved import ModelFileError, load_model, save_model
from zonal.tabular.split import Split
from zonal.tabular.stacking import STACKING_DRAWS
from zonal.tabular.tables import TableError
from zonal.tabular.targets import REGRESSION

pytestmark = pytest.mark.usefixtures("without_the_exact_gp")


SMALL = {"num_inducing": 16, "steps": 10}


def regression_rows(num_rows: int = 160, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_rows, 2))
    y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] ** 2 + 0.1 * rng.standard_normal(num_rows)
    return x, y


def fixed_weights(monkeypatch: pytest.MonkeyPatch, weights: list[float]) -> None:
    """Make ``stack_fits`` use ``weights`` (for tests of what is done with a stack, not of how
    its weights are found)."""
    chosen = torch.tensor(weights, dtype=torch.float64)
    monkeypatch.setattr(stacking, "validation_weights", lambda log_densities, **options: chosen)


def force_refinement(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``auto`` train its refinement (the svgp) whatever the validation scores say."""
    monkeypatch.setattr(fitting, "auto_refinement", lambda scores, likelihood: "svgp")


def test_auto_stacks_its_regression_candidates_with_bootstrap_weights_of_the_validation_density(
    monkeypatch,
):
    """The weights are the mean over Bayesian-bootstrap replicates of the validation rows of the
    weights maximising the mixture's validation density (each replicate's EM is checked against
    scipy in test_stacking.py), rounded to multiples of 1/20; the stack's density is the
    weighted mixture's."""
    recorded = {}
    stack_fits = fitting.stack_fits

    def recording(fits, scores, split, target, **options):
        """Record the candidates' validation log densities and the stack's, before the stack's
        shallow components condition on the validation rows."""
        names = list(fits)
        recorded["log_densities"] = torch.stack(
            [fits[name].model.log_predictive_density(split.x_valid, split.y_valid)
             for name in names], dim=1,
        )  # fmt: skip
        fit, new_scores = stack_fits(fits, scores, split, target, **options)
        recorded.update(names=names, stacked=fit.model.log_predictive_density(split.x_valid,
                                                                              split.y_valid))  # fmt: skip
        return fit, new_scores

    monkeypatch.setattr(fitting, "stack_fits", recording)
    force_refinement(monkeypatch)
    x, y = regression_rows()
    fitted = fit_data(x, y, feature_columns=["a", "b"], **SMALL)
    names = recorded["names"]
    assert names == ["sgpr", "adgp", "svgp"]
    log_densities = recorded["log_densities"]  # [n_valid, 3]
    bagged = bootstrap_stacking_weights(log_densities, STACKING_DRAWS, seed=0)  # fit's seed
    weights = np.array([fitted.scores[name]["weight"] for name in names])
    # the mean rounded to multiples of 1/20 (largest remainder: within 1/20)
    np.testing.assert_allclose(weights * WEIGHT_RESOLUTION, np.round(weights * WEIGHT_RESOLUTION),
                               atol=1e-9)  # fmt: skip
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(weights, quantize_weights(bagged).numpy(), atol=1e-12)
    assert np.abs(weights - bagged.numpy()).max() <= 1.0 / WEIGHT_RESOLUTION + 1e-6
    if fitted.spec["model"] == STACKED:  # the mixture's density is the weighted one
        kept = [name for name in names if fitted.scores[name]["weight"] > 0]
        expected = torch.logsumexp(
            torch.stack([np.log(fitted.scores[name]["weight"])
                         + log_densities[:, names.index(name)] for name in kept]),
            dim=0,
        )  # fmt: skip
        torch.testing.assert_close(recorded["stacked"], expected, rtol=1e-10, atol=1e-10)
    else:  # the weights picked one candidate
        assert fitted.scores[fitted.spec["model"]]["weight"] == 1.0


def test_a_stacked_model_round_trips_through_its_checkpoint_and_the_cli(
    monkeypatch, tmp_path, capsys
):
    fixed_weights(monkeypatch, [0.5, 0.25, 0.25])
    force_refinement(monkeypatch)
    x, y = regression_rows()
    rows = np.column_stack([x, y])
    data = tmp_path / "train.csv"
    np.savetxt(data, rows, delimiter=",", header="a,b,y", comments="")
    checkpoint, output = tmp_path / "model.pt", tmp_path / "pred.csv"
    fit = ["fit", str(data), "--target", "y", "-o", str(checkpoint), "--likelihood", "gaussian"]
    assert main([*fit, "--num-inducing", "16", "--steps", "10"]) == 0
    out = capsys.readouterr().out
    assert "fitted stacked (0.50 sgpr" in out and "stacked (chosen)" in out
    assert "adgp: validation" in out and "weight 0.25" in out
    loaded = load_model(checkpoint)
    assert loaded.spec["model"] == STACKED and loaded.spec["weights"] == [0.5, 0.25, 0.25]
    assert isinstance(loaded.trained.model, StackedModel)
    assert [part["model"] for part in loaded.spec["components"]] == ["sgpr", "adgp", "svgp"]
    # predictions in target units: the mixture's moments from its three reloaded components
    prediction = predict_data(loaded, x[:20])
    inputs = torch.from_numpy(loaded.x_scaler.transform(x[:20]))
    means, second = 0.0, 0.0
    for weight, component in zip([0.5, 0.25, 0.25], loaded.trained.model.components, strict=True):
        mean, variance = component.predict(inputs, include_noise=True)
        means, second = means + weight * mean, second + weight * (variance + mean**2)
    std = float(loaded.y_scaler.std)
    np.testing.assert_allclose(prediction["mean"], loaded.y_scaler.inverse_transform(means.numpy()),
                               rtol=1e-10)  # fmt: skip
    np.testing.assert_allclose(prediction["variance"], (second - means**2).numpy() * std**2,
                               rtol=1e-9)  # fmt: skip
    # --samples reaches the deep component: 8 inner draws move the mixture from the default 32
    few = tmp_path / "few.csv"
    assert main(["predict", str(checkpoint), str(data), "-o", str(output)]) == 0
    assert main(["predict", str(checkpoint), str(data), "-o", str(few), "--samples", "8"]) == 0
    default, drawn = (np.loadtxt(path, delimiter=",", skiprows=1) for path in (output, few))
    assert np.isfinite(drawn).all() and not np.allclose(drawn[:, 1], default[:, 1], rtol=1e-9)


def test_the_saved_stack_predicts_exactly_like_the_fitted_one(monkeypatch, tmp_path):
    fixed_weights(monkeypatch, [0.0, 0.5, 0.5])
    force_refinement(monkeypatch)
    x, y = regression_rows()
    fitted = fit_data(x, y, feature_columns=["a", "b"], **SMALL)
    assert [part["model"] for part in fitted.spec["components"]] == ["adgp", "svgp"]
    save_model(fitted, tmp_path / "model.pt")
    loaded = load_model(tmp_path / "model.pt")
    before, after = predict_data(fitted, x), predict_data(loaded, x)
    for key in before:
        np.testing.assert_allclose(after[key], before[key], rtol=1e-12, atol=1e-12)


def test_a_stack_of_single_layer_models_draws_no_samples(monkeypatch):
    fixed_weights(monkeypatch, [0.5, 0.0, 0.5])
    force_refinement(monkeypatch)
    x, y = regression_rows()
    fitted = fit_data(x, y, feature_columns=["a", "b"], **SMALL)
    assert fitted.describe().startswith("stacked (0.50 sgpr (")
    assert " + 0.50 svgp (" in fitted.describe()
    with pytest.raises(TableError, match="stacked draws no samples"):
        predict_data(fitted, x, samples=4)


@pytest.mark.parametrize("damage", ["nested", "weights", "input_dim", "other weights"])
def test_a_checkpoint_with_a_malformed_stack_is_refused(damage, monkeypatch, tmp_path):
    fixed_weights(monkeypatch, [0.5, 0.5, 0.0])
    x, y = regression_rows()
    path = tmp_path / "model.pt"
    save_model(fit_data(x, y, feature_columns=["a", "b"], **SMALL), path)
    state = torch.load(path, weights_only=True)
    spec = state["spec"]
    if damage == "nested":
        spec["components"][1] = {**spec, "components": [dict(spec["components"][0])],
                                 "weights": [1.0]}  # fmt: skip
    elif damage == "weights":
        spec["weights"] = [1.0]
    elif damage == "input_dim":
        spec["components"][0]["input_dim"] = 3
    else:  # the spec's weights no longer those of the (checksummed) state
        spec["weights"] = [0.25, 0.75]
    torch.save(state, path)
    message = "differ from the state's" if damage == "other weights" else "unknown model spec"
    with pytest.raises(ModelFileError, match=message):
        load_model(path)


@pytest.mark.parametrize("rows", [slice(None), slice(0, 3)])
def test_a_candidate_whose_densities_are_nan_gets_weight_zero(rows, monkeypatch):
    """NaN on every validation row or on three of them: the candidate is broken, weight 0."""
    density = SVGP.log_predictive_density

    def broken(self, X, y, **options):
        values = density(self, X, y, **options).clone()
        values[rows] = float("nan")
        return values

    monkeypatch.setattr(SVGP, "log_predictive_density", broken)
    force_refinement(monkeypatch)
    x, y = regression_rows()
    fitted = fit_data(x, y, feature_columns=["a", "b"], **SMALL)
    assert fitted.scores["svgp"]["weight"] == 0.0
    assert fitted.scores["sgpr"]["weight"] + fitted.scores["adgp"]["weight"] == pytest.approx(1.0)
    models = [part["model"] for part in fitted.spec.get("components", [fitted.spec])]
    assert "svgp" not in models


@pytest.mark.parametrize(
    ("sgpr", "adgp", "likelihood", "expected"),
    [
        (-1.15, -1.12, "gaussian", "svgp"),  # white wine: shallow models compete
        (-0.34, -0.07, "gaussian", None),  # airfoil: the deep model is far ahead
        (-1.15, -1.12, "bernoulli", None),  # no refinement for classification
        (float("nan"), -1.12, "gaussian", None),  # a candidate without a finite score
        (None, -1.12, "gaussian", None),  # the sgpr failed
    ],
)
def test_the_refinement_runs_where_the_sgpr_scores_close_to_the_deep_model(
    sgpr, adgp, likelihood, expected
):
    scores = {"adgp": {"log_likelihood": adgp}}
    if sgpr is not None:
        scores["sgpr"] = {"log_likelihood": sgpr}
    assert auto_refinement(scores, likelihood) == expected
    gap = AUTO_REFINEMENT_GAP
    assert auto_refinement({"sgpr": {"log_likelihood": -gap * 0.99},
                            "adgp": {"log_likelihood": 0.0}}, "gaussian") == "svgp"  # fmt: skip
    assert auto_refinement({"sgpr": {"log_likelihood": -gap * 1.01},
                            "adgp": {"log_likelihood": 0.0}}, "gaussian") is None  # fmt: skip


def test_no_refinement_follows_a_trained_exact_gp():
    # the exact GP holds the harmonic SVGP's kernels and input scales without its approximations
    close = {"sgpr": {"log_likelihood": -1.15}, "adgp": {"log_likelihood": -1.12}}
    assert auto_refinement(close, "gaussian") == "svgp"
    assert auto_refinement({**close, "exact": {"log_likelihood": -1.0}}, "gaussian") is None


def test_the_refinement_gets_its_share_of_the_budget_or_is_skipped(monkeypatch):
    """The refinement's deadline is the nearer of the overall deadline and its share of the
    budget from its start; it is skipped when less than half its share is left."""
    calls = []
    train_candidates = candidates.train_candidates

    def recording(names, split, target, deadline, *args, **kwargs):
        calls.append((list(names), deadline, time.monotonic()))
        return train_candidates(names, split, target, deadline, *args, **kwargs)

    monkeypatch.setattr(fitting, "train_candidates", recording)
    monkeypatch.setattr(candidates, "train_candidates", recording)
    force_refinement(monkeypatch)
    x, y = regression_rows()
    budget = 60.0
    started = time.monotonic()
    fitted = fit_data(x, y, feature_columns=["a", "b"], budget=budget, **SMALL)
    (first, overall, _), (refinement, deadline, called) = calls
    assert first == ["sgpr", "adgp"] and refinement == ["svgp"] and "svgp" in fitted.scores
    assert overall == pytest.approx(started + budget, abs=0.5)
    assert deadline == pytest.approx(called + AUTO_REFINEMENT_SHARE * budget, abs=0.1)
    # less than half the share left: skipped, nothing added
    fits, scores = {}, {}
    split = Split(*[torch.zeros(0)] * 4)
    near = time.monotonic() + 0.4 * AUTO_REFINEMENT_SHARE * budget
    interrupted = candidates.train_refinement("svgp", fits, scores, split, REGRESSION, near,
                                              budget, False, 0, {})  # fmt: skip
    assert not interrupted and fits == {} and scores == {}
    assert len(calls) == 2


def test_ctrl_c_while_stacking_keeps_the_chosen_candidate_as_a_checkpoint(
    monkeypatch, tmp_path, capsys
):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fitting, "stack_fits", interrupted)
    x, y = regression_rows()
    data = tmp_path / "train.csv"
    np.savetxt(data, np.column_stack([x, y]), delimiter=",", header="a,b,y", comments="")
    checkpoint = tmp_path / "model.pt"
    fit = ["fit", str(data), "--target", "y", "-o", str(checkpoint), "--likelihood", "gaussian"]
    assert main([*fit, "--num-inducing", "16", "--steps", "10"]) == 130
    assert "interrupted: kept the best" in capsys.readouterr().err
    loaded = load_model(checkpoint)
    best = max(loaded.scores, key=lambda name: loaded.scores[name]["log_likelihood"])
    assert loaded.spec["model"] == best and loaded.interrupted


def test_the_stacks_shallow_components_condition_on_the_validation_rows_too(monkeypatch):
    """After stacking, the SGPR's statistics and the SVGP's q(u) are those of all rows: the SGPR
    counts every row, and the SVGP's whitened q(u) mean is the Titsias optimum over all rows,
    m = (I + A A^T / s^2)^{-1} A y / s^2 with A = L^{-1} Kuf, solved here densely."""
    fixed_weights(monkeypatch, [0.4, 0.3, 0.3])
    force_refinement(monkeypatch)
    x, y = regression_rows()
    fitted = fit_data(x, y, feature_columns=["a", "b"], **SMALL)
    sgpr, _, svgp = fitted.trained.model.components
    assert int(sgpr.stat_count) == len(x) and fitted.num_validation_rows > 0
    inputs = torch.from_numpy(fitted.x_scaler.transform(x))
    targets = torch.from_numpy(fitted.y_scaler.transform(y))
    with torch.no_grad():
        _, projection = svgp.inducing_strategy.projection(svgp.lift(inputs))  # A [M, N]
        noise = svgp.likelihood.noise.reshape(())
        precision = (
            torch.eye(len(projection), dtype=torch.float64) + projection @ projection.T / noise
        )
        expected = torch.linalg.solve(precision, projection @ targets / noise)  # [M]
        mean = svgp.inducing_strategy._variational_distribution.variational_mean
    torch.testing.assert_close(mean, expected, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("model", ["sgpr", "svgp"])
def test_a_named_shallow_model_conditions_on_the_validation_rows_too(model):
    """Not only a stack: a named SGPR counts every row in its statistics, and a named Gaussian
    SVGP's q(u) is the Titsias optimum over every row (its mean changes from the trained one)."""
    x, y = regression_rows()
    fitted = fit_data(x, y, feature_columns=["a", "b"], model=model, **SMALL)
    assert fitted.num_validation_rows > 0
    trained = fitted.trained.model
    if model == "sgpr":
        assert int(trained.stat_count) == len(x)
    else:
        inputs = torch.from_numpy(fitted.x_scaler.transform(x))
        targets = torch.from_numpy(fitted.y_scaler.transform(y))
        before = trained.variational_strategy.variational_distribution.mean.detach().clone()
        trained.set_optimal_variational_distribution(inputs, targets)  # the optimum over all rows
        after = trained.variational_strategy.variational_distribution.mean.detach()
        torch.testing.assert_close(before, after, rtol=1e-8, atol=1e-10)


def test_validation_weights_round_the_bootstrap_plain_or_posterior_weights():
    """``validation_weights``: a column with a NaN is a broken candidate (weight 0, -inf to the
    weightings); the rest get the rounded bootstrap mean (default), the rounded plain weights (0
    draws) or the rounded posterior mean (a ``concentration``); no finite density at all: None."""
    generator = torch.Generator().manual_seed(0)
    log_densities = torch.randn(12, 3, generator=generator, dtype=torch.float64)
    log_densities[4, 1] = torch.nan
    masked = log_densities.clone()
    masked[:, 1] = -torch.inf
    expected = {
        "bootstrap": bootstrap_stacking_weights(masked, STACKING_DRAWS, seed=2),
        "plain": stacking_weights(masked),
        "posterior": posterior_stacking_weights(masked, concentration=0.5, seed=2),
    }
    found = {
        "bootstrap": stacking.validation_weights(log_densities, seed=2),
        "plain": stacking.validation_weights(log_densities, draws=0),
        "posterior": stacking.validation_weights(log_densities, seed=2, concentration=0.5),
    }
    for name, weights in found.items():
        assert weights is not None and weights[1] == 0, name
        torch.testing.assert_close(weights, quantize_weights(expected[name]), msg=name)
    assert stacking.validation_weights(torch.full((3, 2), torch.nan, dtype=torch.float64)) is None
