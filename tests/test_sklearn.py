"""``zonal.tabular.sklearn``: scikit-learn's estimator checks, and a classification round trip on digits."""

from __future__ import annotations

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.metrics import accuracy_score, log_loss  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from zonal.tabular.sklearn import ZonalClassifier, ZonalRegressor, expected_failed_checks  # noqa: E402
from zonal.tabular.tables import TableError  # noqa: E402

#: fast settings for the checks: a small SVGP, six Adam steps, no validation split (the checks fit
#: tables of 10 to 30 rows, where 10% of a class rounds to no row: a named error by design)
CHECKED = {"num_inducing": 8, "steps": 6, "budget": None, "validation_fraction": 0.0}


@parametrize_with_checks(
    [ZonalRegressor("svgp-activated", **CHECKED), ZonalClassifier("svgp-activated", **CHECKED)],
    expected_failed_checks=expected_failed_checks,
)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_the_checks_expected_to_fail_meet_the_empty_validation_split():
    """With the default validation fraction, the two listed checks fit classes of 3 to 5 rows:
    each fails on the named empty-split error, and nothing else is listed."""
    from sklearn.utils import estimator_checks

    classifier = ZonalClassifier("svgp-activated", num_inducing=8, steps=6, budget=None)
    expected = expected_failed_checks(classifier)
    assert sorted(expected) == ["check_estimators_nan_inf", "check_n_features_in_after_fitting"]
    for name in expected:
        with pytest.raises(TableError, match="the validation split is empty"):
            getattr(estimator_checks, name)("ZonalClassifier", clone(classifier))
    assert expected_failed_checks(ZonalRegressor()) == {}
    assert expected_failed_checks(clone(classifier).set_params(validation_fraction=0.0)) == {}


def test_digits_round_trip_through_a_pipeline():
    """Four digit classes (8 x 8 images, 64 inputs): fit, class probabilities, accuracy; the
    estimator clones (get_params / set_params) and sits in a pipeline."""
    digits = load_digits(n_class=4)
    x, y = digits.data, np.array(["zero", "one", "two", "three"])[digits.target]
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:400], order[400:]
    classifier = ZonalClassifier("svgp-activated", num_inducing=16, steps=150, budget=None)
    pipeline = make_pipeline(FunctionTransformer(np.sqrt), clone(classifier))
    pipeline.fit(x[train], y[train])
    fitted = pipeline[-1]
    assert list(fitted.classes_) == ["one", "three", "two", "zero"]
    assert fitted.n_features_in_ == 64 and fitted.model_ == "svgp-activated"
    probabilities = pipeline.predict_proba(x[test])  # [N, 4], columns in classes_ order
    predicted = pipeline.predict(x[test])
    np.testing.assert_array_equal(predicted, fitted.classes_[probabilities.argmax(1)])
    assert accuracy_score(y[test], predicted) > 0.9
    assert log_loss(y[test], probabilities, labels=fitted.classes_) < 0.5  # chance: log 4 = 1.39
    assert fitted.validation_["accuracy"] > 0.8 and "log_likelihood" in fitted.validation_
    assert pipeline.score(x[test], y[test]) == accuracy_score(y[test], predicted)
    changed = clone(classifier).set_params(steps=3, random_state=5)
    assert changed.get_params()["steps"] == 3 and classifier.get_params()["steps"] == 150


def test_regressor_predictions_follow_the_target_units():
    """The target is standardised with the training rows: a target in other units (1e-6 y + 3)
    gives the same fit, so means map as 1e-6 m + 3 and standard deviations as 1e-6 s."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(80, 2))
    y = 5.0 + 2.0 * np.sin(x[:, 0]) + 0.1 * rng.normal(size=80)
    settings = {"num_inducing": 30, "steps": 30}
    regressor = ZonalRegressor("sgpr", **settings).fit(x, y)
    rescaled = ZonalRegressor("sgpr", **settings).fit(x, 1e-6 * y + 3.0)
    mean, std = regressor.predict(x[:5], return_std=True)
    other_mean, other_std = rescaled.predict(x[:5], return_std=True)
    np.testing.assert_allclose(other_mean, 1e-6 * mean + 3.0, rtol=1e-9)
    np.testing.assert_allclose(other_std, 1e-6 * std, rtol=1e-6)
    assert regressor.score(x, y) > 0.9  # R^2


def test_values_too_large_for_float64_squares_are_named_at_fit_and_predict():
    """The check the command line makes on a file's cells (|x| > 1e150 overflows the
    standardisation's squares) holds for arrays too: the column and row are named."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(30, 2))
    y = np.sin(x[:, 0])
    large = x.copy()
    large[3, 1] = 1e300
    settings = {"num_inducing": 8, "steps": 3, "budget": None}
    with pytest.raises(TableError, match=r"values too large .* column 'x1' at row 3$"):
        ZonalRegressor("sgpr", **settings).fit(large, y)
    regressor = ZonalRegressor("sgpr", **settings).fit(x, y)
    with pytest.raises(TableError, match=r"the inputs: values too large .* column 'x1' at row 3"):
        regressor.predict(large)
    from zonal.tabular.fitting import fit_data  # arrays given to the fitting layer directly

    large[5, 0] = -np.inf
    with pytest.raises(TableError, match=r"infinite values in column 'x0' at row 5\. values too"):
        fit_data(large, y, feature_columns=["x0", "x1"], model="sgpr", budget=None)


def test_an_unknown_kernel_is_refused_under_auto_too():
    """``model="auto"`` leaves out a kernel a candidate lacks, but a name no recipe knows is a
    typo: refused by name, as the named models refuse it."""
    x = np.random.default_rng(3).normal(size=(30, 2))
    for model in ("auto", "sgpr"):
        with pytest.raises(ValueError, match="unknown kernel 'rbf'; choose one of auto, arccos"):
            ZonalRegressor(model, kernel="rbf", budget=None, steps=2).fit(x, x[:, 0])


def test_random_state_takes_what_scikit_learn_passes():
    """An int seeds the fit; a ``RandomState`` (it raised a TypeError) gives the fit a seed drawn
    from it, so two equal states give equal fits; None draws from numpy's global state, as
    scikit-learn reads None."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(60, 2))
    y = np.sin(x[:, 0]) + 0.1 * rng.normal(size=60)
    settings = {"num_inducing": 8, "steps": 5, "budget": None}

    def fitted(random_state):
        return ZonalRegressor("svgp-activated", random_state=random_state, **settings).fit(x, y)

    from_states = [fitted(np.random.RandomState(4)).predict(x) for _ in range(2)]
    np.testing.assert_array_equal(*from_states)
    seed = np.random.RandomState(4).randint(2**31 - 1)
    np.testing.assert_array_equal(from_states[0], fitted(int(seed)).predict(x))
    np.random.seed(11)
    global_state = fitted(None).predict(x)
    np.random.seed(11)
    np.testing.assert_array_equal(global_state, fitted(None).predict(x))
