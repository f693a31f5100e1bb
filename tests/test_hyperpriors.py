"""Type-II MAP fits of the exact GP under log-normal hyperpriors (``zonal.models.hyperpriors``),
and ``zonal fit``'s option for them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch

from zonal.cli import main
from zonal.models import ExactZonalGP, Hyperpriors
from zonal.models.hyperpriors import log_normal_log_density
from zonal.tabular.candidates import recipe_options
from zonal.tabular.diagnostics import SGPR_ARD, FitDiagnostics
from zonal.tabular.fitting import fit_data
from zonal.tabular.recipes import resolve_spec
from zonal.tabular.recipes.exact import exact_gp
from zonal.tabular.saved import load_model


def _tiny_table(seed: int, rows: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` rows of 3 standard normal inputs and y = sin(2 x0) + x1^2 / 2 - x2 + noise 0.1."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 3))
    y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] ** 2 - x[:, 2] + 0.1 * rng.normal(size=rows)
    return torch.tensor(x), torch.tensor((y - y.mean()) / y.std())


def test_the_log_normal_density_is_scipys():
    values = torch.tensor([1e-4, 0.3, 1.0, 7.5, 2e3], dtype=torch.float64)
    ours = log_normal_log_density(values, -0.7, 1.3)
    theirs = scipy.stats.lognorm.logpdf(values.numpy(), s=1.3, scale=math.exp(-0.7))
    np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-12)


def test_the_default_priors_centre_the_scales_at_one_over_root_d():
    priors = Hyperpriors.default(16)
    assert priors.input_scales == pytest.approx((math.log(0.25), math.sqrt(3)))
    assert priors.noise == (-4.0, 1.0) and priors.signal_variance == (0.0, 1.0)


@pytest.mark.parametrize(
    "arguments, message",
    [({"input_scales": (0.0, 0.0)}, "input_scales prior"), ({"noise": (math.nan, 1.0)}, "noise")],
)
def test_a_prior_without_a_positive_finite_width_is_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        Hyperpriors(**arguments)


@pytest.mark.parametrize("input_dim", [0, 2.5, True])
def test_default_priors_need_a_positive_integer_dimension(input_dim):
    with pytest.raises(ValueError, match="input_dim"):
        Hyperpriors.default(input_dim)


def test_the_log_prior_sums_the_learned_scales_noise_and_mean_signal_variance():
    x, y = _tiny_table(0, rows=8)
    model = exact_gp({"kernel": "arccos", "input_dim": 3, "ard": True}, x, y)
    priors = Hyperpriors.default(3)
    with torch.no_grad():
        variance = model.kernel(model.input_map.lift(x)).to_dense().diagonal().mean()
        expected = (
            log_normal_log_density(model.input_map.input_scales, *priors.input_scales).sum()
            + log_normal_log_density(model.noise, *priors.noise)
            + log_normal_log_density(variance, *priors.signal_variance)
        )
        assert float(model.log_prior(priors)) == pytest.approx(float(expected), rel=1e-12)
        plain = exact_gp({"kernel": "arccos", "input_dim": 3}, x, y)  # no learned input scales
        only_noise = Hyperpriors(noise=(-4.0, 1.0))
        expected = log_normal_log_density(plain.noise, -4.0, 1.0)
        assert float(plain.log_prior(only_noise)) == pytest.approx(float(expected), rel=1e-12)


def test_the_map_fit_maximises_the_likelihood_plus_the_log_prior():
    x, y = _tiny_table(1, rows=12)
    priors = Hyperpriors.default(3)
    fitted = {}
    for name, prior in [("ml", None), ("map", priors)]:
        model = exact_gp({"kernel": "chordal-se", "input_dim": 3, "ard": True}, x, y)
        trace = model.fit(max_iter=100, priors=prior)
        with torch.no_grad():
            log_likelihood = float(model.marginal_log_likelihood())
            log_prior = float(model.log_prior(priors))
        fitted[name] = (log_likelihood, log_prior)
        final = log_likelihood + (0.0 if prior is None else log_prior)
        assert max(trace) == pytest.approx(final / len(y), abs=1e-9)
    (ml_likelihood, ml_prior), (map_likelihood, map_prior) = fitted["ml"], fitted["map"]
    assert map_likelihood + map_prior > ml_likelihood + ml_prior + 1e-6
    assert ml_likelihood > map_likelihood


@pytest.mark.parametrize("seed", [0, 2])
def test_maximum_likelihood_lets_five_rows_scales_diverge_and_the_map_fit_keeps_them(seed):
    x, y = _tiny_table(seed)
    scales = {}
    for name, prior in [("ml", None), ("map", Hyperpriors.default(3))]:
        model = exact_gp({"kernel": "arccos", "input_dim": 3, "ard": True}, x, y)
        model.fit(max_iter=200, priors=prior)
        scales[name] = float(model.input_map.input_scales.detach().max())
    assert scales["ml"] > 100
    assert scales["map"] < 10


def test_hyperpriors_are_the_exact_gps_option_and_in_the_spec_only_when_on():
    assert "hyperpriors" not in resolve_spec(3, model="exact")
    assert "hyperpriors" not in resolve_spec(3, model="exact", hyperpriors=False)
    assert resolve_spec(3, model="exact", hyperpriors=True)["hyperpriors"] is True
    with pytest.raises(ValueError, match="hyperpriors is for the exact GP's fit, not sgpr's"):
        resolve_spec(3, model="sgpr", hyperpriors=True)
    assert "hyperpriors" not in resolve_spec(3, model="sgpr", hyperpriors=False)  # the default
    options = {"hyperpriors": True}
    assert "hyperpriors" not in recipe_options("sgpr", options, True, ["sgpr", "exact"])
    assert recipe_options("exact", options, True, ["sgpr", "exact"])["hyperpriors"] is True


@pytest.fixture
def seen_priors(monkeypatch) -> list:
    """The ``priors`` of every ``ExactZonalGP.fit`` call while the test runs, in order."""
    seen = []
    fit = ExactZonalGP.fit

    def recording_fit(self, *args, **kwargs):
        seen.append(kwargs.get("priors"))
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(ExactZonalGP, "fit", recording_fit)
    return seen


@pytest.mark.parametrize("flag, expected", [("--hyperpriors", True), ("--no-hyperpriors", False),
                                            (None, False)])  # fmt: skip
def test_zonal_fit_hyperpriors_fits_the_exact_gp_by_map(flag, expected, tmp_path, seen_priors):
    x, y = _tiny_table(3, rows=20)
    table = tmp_path / "tiny.csv"
    rows = ["a,b,c,y"] + [
        ",".join(f"{v:.6f}" for v in (*row, t)) for row, t in zip(x, y, strict=True)
    ]
    table.write_text("\n".join(rows) + "\n")
    output = tmp_path / "model.pt"
    code = main(["fit", str(table), "--target", "y", "--model", "exact", "--kernel", "arccos",
                 "--quiet", "--validation-fraction", "0", *([flag] if flag else []),
                 "--output", str(output)])  # fmt: skip
    assert code == 0
    assert load_model(output).spec.get("hyperpriors", False) is expected
    assert seen_priors == [Hyperpriors.default(3) if expected else None]


def test_the_regressors_hyperpriors_parameter_reaches_the_exact_gp(seen_priors):
    from zonal.tabular.sklearn import ZonalRegressor

    x, y = _tiny_table(4, rows=20)
    for value in (True, False):
        seen_priors.clear()
        estimator = ZonalRegressor("exact", kernel="arccos", hyperpriors=value,
                                   validation_fraction=0.0, budget=None)  # fmt: skip
        estimator.fit(x.numpy(), y.numpy())
        assert estimator.get_params()["hyperpriors"] is value
        assert estimator.fitted_.spec.get("hyperpriors", False) is value
        assert seen_priors == [Hyperpriors.default(3) if value else None]


def test_auto_gives_the_priors_to_its_exact_gp_and_keeps_the_diagnostics_sgpr_with_scales():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(60, 3))
    y = np.sin(2 * x[:, 0]) + x[:, 1] + 0.1 * rng.normal(size=60)
    diagnostics = FitDiagnostics()
    fitted = fit_data(x, y, feature_columns=["a", "b", "c"], hyperpriors=True, budget=8,
                      diagnostics=diagnostics)  # fmt: skip
    assert diagnostics.fits["exact"].spec["hyperpriors"] is True
    assert "hyperpriors" not in diagnostics.fits["sgpr"].spec
    assert SGPR_ARD in diagnostics.fits  # the counterfactual SGPR with input scales trained
    assert fitted.scores


@pytest.mark.parametrize("value", [None, False])
def test_the_regressors_default_follows_auto_and_false_keeps_maximum_likelihood(value, seen_priors):
    """``hyperpriors=None`` (the default) lets ``auto`` fit its exact GP by MAP on a table of at
    most 128 training rows (``small_table_options``); ``False`` keeps maximum likelihood."""
    from zonal.tabular.sklearn import ZonalRegressor

    x, y = _tiny_table(6, rows=40)
    ZonalRegressor(hyperpriors=value, budget=6).fit(x.numpy(), y.numpy())
    assert seen_priors  # the exact GP trained
    expected = Hyperpriors.default(3) if value is None else None
    assert all(priors == expected for priors in seen_priors)
