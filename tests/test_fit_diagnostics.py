"""``fit_data(..., diagnostics=FitDiagnostics())`` (``zonal.tabular.diagnostics``): the models
``auto``'s rules left out are trained and kept without changing ``auto``'s own model, the stacks
``test_scores`` rebuilds are ``auto``'s (weights and test scores), and ``benchmarks/fit_rules.py``'s
leave-one-table-out choice picks a setting on the other tables only."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zonal.datasets import Standardizer
from zonal.models.stacking import quantize_weights, stacking_weights
from zonal.tabular.diagnostics import REFINEMENT, SGPR_ARD, FitDiagnostics
from zonal.tabular.fitting import fit_data
from zonal.tabular.model import STACKED
from zonal.tabular.options import DEFAULT_VALIDATION_FRACTION
from zonal.tabular.predict import predict_data
from zonal.tabular.split import Split
from zonal.tabular.targets import REGRESSION

SMALL = {"num_inducing": 16, "steps": 10}


pytestmark = pytest.mark.usefixtures("without_the_exact_gp")


def rows(num_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_rows, 3))
    y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] ** 2 + 0.1 * rng.standard_normal(num_rows)
    return x, y


@pytest.fixture(scope="module")
def diagnosed():
    x, y = rows(160, 0)
    diagnostics = FitDiagnostics()
    fitted = fit_data(x, y, feature_columns=["a", "b", "c"], seed=0, diagnostics=diagnostics,
                      **SMALL)  # fmt: skip
    return x, y, fitted, diagnostics


def test_the_rules_left_out_models_are_trained_and_kept(diagnosed):
    """auto trained sgpr and adgp; the refinement and the SGPR with input scales are kept beside
    them (the refinement whether or not auto trained it), each with validation densities."""
    _, _, _, diagnostics = diagnosed
    assert diagnostics.auto_models[:2] == ["sgpr", "adgp"]
    assert set(diagnostics.fits) == {"sgpr", "adgp", REFINEMENT, SGPR_ARD}
    assert diagnostics.fits[SGPR_ARD].spec["ard"] and not diagnostics.fits["sgpr"].spec["ard"]
    for name, density in diagnostics.validation_log_density.items():
        # the half of the validation rows that scores auto's fits (the other half watches)
        assert density.shape == (round(DEFAULT_VALIDATION_FRACTION * 160) // 2,)
        assert diagnostics.validation_log_likelihood[name] == pytest.approx(float(density.mean()))
    assert diagnostics.gap == pytest.approx(
        diagnostics.validation_log_likelihood["adgp"]
        - diagnostics.validation_log_likelihood["sgpr"]
    )
    assert diagnostics.overhead_seconds > 0


def test_the_rebuilt_stack_is_autos_model(diagnosed):
    """The variant of auto's own models has auto's weights and its test MSE and Gaussian TLL."""
    _, _, fitted, diagnostics = diagnosed
    x_test, y_test = rows(80, 1)
    variants = diagnostics.test_scores(
        torch.from_numpy(fitted.x_scaler.transform(x_test)),
        torch.from_numpy(fitted.y_scaler.transform(y_test)),
    )
    assert len(variants) == 2**4 - 1  # every non-empty set of the 4 models
    rebuilt = variants["+".join(diagnostics.auto_models)]
    predictions = predict_data(fitted, x_test)
    mean = fitted.y_scaler.transform(predictions["mean"])
    variance = predictions["variance"] / float(fitted.y_scaler.std) ** 2
    y = fitted.y_scaler.transform(y_test)
    assert rebuilt["mse"] == pytest.approx(float(np.mean((mean - y) ** 2)), rel=1e-9)
    tll = -0.5 * np.mean(np.log(2 * math.pi * variance) + (y - mean) ** 2 / variance)
    assert rebuilt["tll"] == pytest.approx(float(tll), rel=1e-9)
    kept = [name for name, w in zip(diagnostics.auto_models, rebuilt["weights"], strict=True)
            if w > 0]  # fmt: skip
    if fitted.spec["model"] == "stacked":  # its components and weights, in order
        assert [c["model"] for c in fitted.spec["components"]] == kept
        assert [w for w in rebuilt["weights"] if w > 0] == pytest.approx(fitted.spec["weights"])
    else:  # the one candidate the weights picked
        assert kept == [fitted.spec["model"]]
    assert sum(rebuilt["weights"]) == pytest.approx(1.0)


def test_diagnostics_do_not_change_autos_model(diagnosed):
    """Without a budget the fit is deterministic: the same predictions with or without them."""
    x, y, fitted, _ = diagnosed
    plain = fit_data(x, y, feature_columns=["a", "b", "c"], seed=0, **SMALL)
    x_test, _ = rows(40, 2)
    assert plain.describe() == fitted.describe()
    ours, theirs = predict_data(fitted, x_test), predict_data(plain, x_test)
    np.testing.assert_allclose(ours["mean"], theirs["mean"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours["variance"], theirs["variance"], rtol=1e-10)


@pytest.mark.parametrize(
    ("budget", "time_left", "expected"),
    [(45.0, 20.0, 9.0), (45.0, 6.0, 6.0), (45.0, 4.0, 0.0), (None, None, None)],
)
def test_the_refinement_gets_the_time_auto_had_left(budget, time_left, expected):
    """A fifth of the budget, or what was left of it; none when less than half the share was
    left (``train_refinement`` skips it then); unlimited without a budget."""
    diagnostics = FitDiagnostics()
    diagnostics.record({}, {}, Split(*[torch.zeros(0)] * 4), REGRESSION, candidates=["sgpr"],
                       budget=budget, time_left=time_left)  # fmt: skip
    assert diagnostics.refinement_seconds == expected
    assert diagnostics.refinement_possible == (expected != 0.0)


def test_the_suite_scores_variants_in_its_own_units(benchmark_module):
    """The suite standardises the test target with all training rows, the fit with its training
    rows less the validation ones: the rebuilt auto model's test MSE and TLL, converted, are the
    suite's own scores of auto's predictions."""
    fit_suite = benchmark_module("fit_suite")
    x, y = rows(200, 4)
    x_test, y_test = rows(60, 5)
    data = fit_suite.SplitData(x, 3.0 * y + 7.0, x_test, 3.0 * y_test + 7.0, False, 0,
                               Standardizer.fit(3.0 * y + 7.0))  # fmt: skip
    result = fit_suite.run_zonal(data, 0, budget=4.0)
    expected = data.y_scaler.transform(data.y_test)
    auto = "+".join(result["diagnostics"]["auto_models"])
    rebuilt = result["diagnostics"]["variants"][auto]
    assert rebuilt["mse"] == pytest.approx(np.mean((result["mean"] - expected) ** 2), rel=1e-9)
    tll = -0.5 * np.mean(np.log(2 * math.pi * result["variance"])
                         + (expected - result["mean"]) ** 2 / result["variance"])  # fmt: skip
    assert rebuilt["tll"] == pytest.approx(tll, rel=1e-9)


@pytest.fixture(scope="module")
def classified():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((150, 2))
    labels = (x[:, 0] + 0.3 * rng.standard_normal(150) > 0).astype(int)
    diagnostics = FitDiagnostics()
    fitted = fit_data(x, labels, feature_columns=["a", "b"], likelihood="bernoulli", seed=0,
                      diagnostics=diagnostics, **SMALL)  # fmt: skip
    return x, labels, fitted, diagnostics


def test_classification_keeps_each_candidate_with_accuracy_and_tll(classified):
    x, labels, fitted, diagnostics = classified
    assert set(diagnostics.fits) == set(diagnostics.auto_models)  # no counterfactuals
    x_test = torch.from_numpy(fitted.x_scaler.transform(x[:30]))
    variants = diagnostics.test_scores(x_test, torch.from_numpy(labels[:30]))
    assert set(variants) == set(diagnostics.auto_models)
    kept = [name for name in diagnostics.auto_models if fitted.scores[name]["weight"] > 0]
    assert fitted.spec["model"] == (STACKED if len(kept) > 1 else kept[0])  # auto stacks them
    probabilities = diagnostics.test_probabilities(x_test)  # the same seeded draws
    truth = labels[:30].astype(np.int64)
    for name, scores in variants.items():
        chosen = probabilities[name].numpy()  # [30, 2]
        assert scores["accuracy"] == pytest.approx(np.mean(chosen.argmax(-1) == truth))
        assert scores["tll"] == pytest.approx(np.log(chosen[np.arange(30), truth]).mean(), rel=1e-9)


def test_a_classifiers_validation_densities_are_what_auto_scored(classified):
    """Per row, log p(true class) whose mean is auto's own validation score of the candidate."""
    _, _, fitted, diagnostics = classified
    for name, density in diagnostics.validation_log_density.items():
        assert density.shape == (len(diagnostics.scoring.y_valid),)
        assert float(density.mean()) == pytest.approx(fitted.scores[name]["log_likelihood"])


def test_classifier_records_rebuild_each_candidate_and_mixture(classified, benchmark_module,
                                                               fit_rules):  # fmt: skip
    """``suite_rows.classifier_rows`` keeps each classifier's test probabilities and validation
    densities: a one-member mixture gives back that candidate's test accuracy and TLL; a mixture
    of all of them has a TLL at least its weighted members' mean (log is concave), so at least
    their lowest."""
    suite_rows = benchmark_module("suite_rows")
    x, labels, fitted, diagnostics = classified
    x_test = torch.from_numpy(fitted.x_scaler.transform(x[:60]))
    probabilities_of = diagnostics.test_probabilities(x_test)
    variants = diagnostics.test_scores(x_test, torch.from_numpy(labels[:60]))
    assert variants == diagnostics.test_scores(
        x_test, torch.from_numpy(labels[:60]), predictions=probabilities_of
    )
    models = suite_rows.classifier_rows(diagnostics, probabilities_of)
    for name, scores in variants.items():
        unit = {"diagnostics": {"auto_models": [name], "models": models,
                                "test_targets": labels[:60].tolist()}}  # fmt: skip
        accuracy, tll = fit_rules.mixture_scores(unit)
        assert accuracy == pytest.approx(scores["accuracy"])
        assert tll == pytest.approx(scores["tll"], rel=1e-4)
    everything = {"diagnostics": {"auto_models": list(models), "models": models,
                                  "test_targets": labels[:60].tolist()}}  # fmt: skip
    for weighting in fit_rules.WEIGHTINGS:
        _, tll = fit_rules.mixture_scores(everything, weighting)
        assert tll >= min(variants[name]["tll"] for name in models) - 1e-4


def test_a_named_model_has_no_rules_to_diagnose():
    x, y = rows(40, 0)
    with pytest.raises(ValueError, match="model='auto' only"):
        fit_data(x, y, feature_columns=["a", "b", "c"], model="sgpr", diagnostics=FitDiagnostics())


# --------------------------------------------------------------------------- fit_rules.py


@pytest.fixture(scope="module")
def fit_rules(benchmark_module):
    return benchmark_module("fit_rules")


def test_per_row_records_rebuild_every_stack(diagnosed, benchmark_module, fit_rules):
    """``suite_rows.model_rows`` keeps what a stack needs (test moments in the suite's units,
    validation log densities): with auto's weights (the bootstrap's, from the fit's seed),
    ``fit_rules.stack_scores`` gives back each variant's test MSE and TLL, in another unit of the target
    too (the suite's standardisation, here twice the fit's scale and shifted); the plain
    weights give a stack's error too."""
    suite_rows = benchmark_module("suite_rows")
    _, _, fitted, diagnostics = diagnosed
    x_test, y_test = rows(80, 1)
    x = torch.from_numpy(fitted.x_scaler.transform(x_test))
    targets = torch.from_numpy(fitted.y_scaler.transform(y_test))
    variants = diagnostics.test_scores(x, targets)
    assert variants == diagnostics.test_scores(x, targets, predictions=diagnostics.test_moments(x))
    suite_scaler = Standardizer(mean=np.float64(fitted.y_scaler.mean + 0.3),
                                std=np.float64(2 * fitted.y_scaler.std))  # fmt: skip
    moments = diagnostics.test_moments(x)
    models = suite_rows.model_rows(diagnostics, moments, fitted.y_scaler, suite_scaler)
    unit = {"split": 0, "diagnostics": {"auto_models": diagnostics.auto_models, "models": models,
            "test_targets": suite_rows.compact(suite_scaler.transform(y_test))}}  # fmt: skip
    for key, scores in variants.items():
        members = frozenset(key.split("+"))
        mse, tll = fit_rules.stack_scores(unit, members, "bagged", seed=0)  # auto's weights
        assert mse == pytest.approx(scores["mse"] / 4, rel=1e-4), key  # the suite's unit: 2x
        assert tll == pytest.approx(scores["tll"] + math.log(2), abs=1e-4), key  # densities 2x
    everything = frozenset(diagnostics.fits)
    plain, _ = fit_rules.stack_scores(unit, everything, "plain")
    # the same stack computed here from the fit's own records: the plain weights of its
    # validation densities, the mixture of its test means, the error in the suite's unit
    names = [name for name in diagnostics.auto_models if name in everything]
    names += sorted(everything - set(names))
    densities = torch.stack([diagnostics.validation_log_density[name] for name in names], 1)
    weights = quantize_weights(stacking_weights(densities))  # [K]
    mixed = sum(weight * moments[name][0] for weight, name in zip(weights, names, strict=True))
    expected = float((mixed - targets).square().mean()) / 4
    assert plain == pytest.approx(expected, rel=1e-6)


def made_up_unit(table: str, gap: float, mse_without: float, mse_with: float) -> dict:
    """A zonal unit whose stack without the refinement has ``mse_without`` and with it
    ``mse_with``; the SGPR's validation score is the DGP's minus ``gap``."""

    def scores(mse: float, valid: float = 0.0) -> dict:
        return {"mse": mse, "tll": -1.0, "weights": [], "validation_log_likelihood": valid}

    return {
        "table": table, "task": "regression", "split": 0, "method": "zonal", "mse": mse_without,
        "diagnostics": {"auto_models": ["sgpr", "adgp"], "gap": gap, "variants": {
            "sgpr": scores(1.0, -gap), "adgp": scores(1.0, 0.0), "svgp": scores(1.0),
            "sgpr+adgp": scores(mse_without), "sgpr+adgp+svgp": scores(mse_with)},
            "refinement_possible": True},
    }  # fmt: skip


def test_leave_one_table_out_chooses_on_the_other_tables(fit_rules):
    """Tables a and b gain from the refinement at gaps 0.02 and 0.05 (the SGPR close to the DGP);
    table c loses at gap 0.5. Left out, each is judged by the setting chosen on the other two."""
    units = [made_up_unit("a", 0.02, 1.0, 0.5), made_up_unit("b", 0.05, 1.0, 0.5),
             made_up_unit("c", 0.5, 1.0, 2.0)]  # fmt: skip
    svgp = {"a": 1.0, "b": 1.0, "c": 1.0}
    settings = {"never": fit_rules.auto_candidates,
                "always": lambda u: fit_rules.with_refinement(u, fit_rules.auto_candidates(u),
                                                              math.inf)}  # fmt: skip
    rows = {row["table"]: row for row in fit_rules.leave_one_table_out(
        units, settings, "never", svgp, grid=fit_rules.gap_grid)}  # fmt: skip
    # without a: b gains at 0.05, c loses at 0.5: tau = 0.275 keeps both right (geometric mean
    # 0.71 against 1 for never and always), and refines a (0.02 < 0.275)
    assert rows["a"] == {"table": "a", "chosen": "tau=0.275", "loto": 0.5, "current": 1.0,
                         "best": 0.5}  # fmt: skip
    assert rows["b"]["chosen"] == "tau=0.26" and rows["b"]["loto"] == 0.5
    # without c: both others gain, so "always" wins there (0.5) and refining c costs 2x
    assert rows["c"] == {"table": "c", "chosen": "always", "loto": 2.0, "current": 1.0,
                         "best": 1.0}  # fmt: skip


def test_the_selection_ceiling_takes_each_splits_test_best(fit_rules, capsys):
    """Table a: auto's stack (MSE 1.0) is beaten on test by the refinement's stack (0.5), whose
    member svgp alone has 1.0 and sgpr 0.8; the ceiling's single model is sgpr (0.8), its stack
    the three (0.5), both below auto's 1.0 against an SVGP of 1.0."""
    unit = made_up_unit("a", 0.02, 1.0, 0.5)
    unit["diagnostics"]["variants"]["sgpr"]["mse"] = 0.8
    assert fit_rules.test_best(unit, singles=True) == frozenset(["sgpr"])
    assert fit_rules.test_best(unit, singles=False) == frozenset(["sgpr", "adgp", "svgp"])
    fit_rules.selection_ceiling([unit], {"a": 1.0})
    printed = capsys.readouterr().out
    assert "a" + " " * 23 + f"{1.0:>14.3f}{0.8:>14.3f}{0.5:>14.3f}" in printed
    assert "auto: geometric mean 1.0000, worst 1.000, above 1.05: none" in printed


def test_the_classification_ceiling_takes_each_metrics_best_auto_included(fit_rules, capsys):
    """Accuracy's best is the stack (0.9), TLL's is auto's own bootstrap mixture (-0.2): each
    metric is maximised on its own, over the variants and auto."""

    def scores(accuracy: float, tll: float) -> dict:
        return {"accuracy": accuracy, "tll": tll, "weights": [], "validation_log_likelihood": 0.0}

    unit = {"table": "c", "task": "classification", "split": 0, "method": "zonal",
            "accuracy": 0.8, "tll": -0.2, "diagnostics": {"variants": {
                "svgp": scores(0.7, -0.5), "adgp": scores(0.8, -0.4),
                "svgp+adgp": scores(0.9, -0.3)}}}  # fmt: skip
    fit_rules.classification_ceiling([unit])
    printed = capsys.readouterr().out
    assert "c" + " " * 23 + f"{0.8:>15.4f}{0.9:>10.4f}{-0.2:>10.3f}{-0.2:>10.3f}" in printed


def test_gap_rows_finds_the_row_that_carries_each_splits_gap(fit_rules, capsys):
    """Two splits of 4 test rows: zonal's squared errors equal the SVGP's (0.1) but on one row a
    split (0.1 + 0.9 on split 0's row 2, 0.1 + 0.5 on split 1's row 0), which carries all of the
    split's gap (share 1.00). Pooled ratio (1.3 + 0.9) / 0.8 = 2.75; with those rows left out,
    0.6 / 0.6 = 1. A table at most 1.05 is not listed."""

    def unit(table: str, split: int, method: str, errors: list[float]) -> dict:
        return {"table": table, "task": "regression", "split": split, "method": method,
                "test_rows": {"squared_error": errors}}  # fmt: skip

    units = [
        unit("t", 0, "zonal", [0.1, 0.1, 1.0, 0.1]), unit("t", 0, "svgp", [0.1] * 4),
        unit("t", 1, "zonal", [0.6, 0.1, 0.1, 0.1]), unit("t", 1, "svgp", [0.1] * 4),
        unit("level", 0, "zonal", [0.1, 0.2]), unit("level", 0, "svgp", [0.2, 0.1]),
    ]  # fmt: skip
    fit_rules.gap_rows(units)
    printed = capsys.readouterr().out
    assert "ratio 2.750, without those rows 1.000; split 0 row 2: 1.00; split 1 row 0: 1.00" in (
        printed
    )
    assert "level" not in printed


# --------------------------------------------------------------------------- stack_ceiling.py


def test_stack_ceiling_against_closed_forms(benchmark_module):
    """Two candidates give the true class probability 0.8 (``a``) and 0.6 (``b``) on every test
    row and score the scoring rows equally: the likelihood is flat in the weights, so ``auto``'s
    posterior-mean weights are the uniform prior's mean, 1/2 each, and its TLL is log 0.7; the
    in-sample optimum puts all weight on ``a`` (log 0.8); adding test rows, on which ``a`` is
    better, moves the weights towards it (strictly between); the baseline is its rows' mean."""
    stack_ceiling = benchmark_module("stack_ceiling")
    targets = [0, 1] * 20  # [40]
    probabilities = {"a": [[0.8, 0.2], [0.2, 0.8]] * 20, "b": [[0.6, 0.4], [0.4, 0.6]] * 20}
    models = {name: {"probabilities": rows, "validation_log_density": [math.log(0.7)] * 12}
              for name, rows in probabilities.items()}  # fmt: skip
    zonal = {"table": "t", "task": "classification", "split": 3, "method": "zonal",
             "diagnostics": {"models": models, "test_targets": targets}}  # fmt: skip
    svgp = {"table": "t", "task": "classification", "split": 3, "method": "svgp",
            "test_rows": {"log_density": [-0.3] * 40}}  # fmt: skip
    found = stack_ceiling.table_scores([zonal, svgp])["t"]
    assert found["auto"] == pytest.approx(math.log(0.7), abs=1e-12)
    assert found["optimum"] == pytest.approx(math.log(0.8), abs=1e-6)
    assert found["a alone"] == pytest.approx(math.log(0.8)) and found["b alone"] == pytest.approx(
        math.log(0.6)
    )
    assert math.log(0.7) + 1e-3 < found["+half"] < math.log(0.8)
    assert found["baseline"] == pytest.approx(-0.3) and found["splits"] == 1
