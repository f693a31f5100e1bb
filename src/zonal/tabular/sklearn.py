"""scikit-learn estimators over ``zonal fit``: ``ZonalRegressor`` and ``ZonalClassifier``.

Optional extra: ``pip install zonal[sklearn]``. Both estimators run the same fitting code as the
command line (``zonal.tabular.fitting.fit_data`` / ``predict_data``): a seeded validation split for early
stopping and the model choice, ``model="auto"`` within a wall-clock ``budget``, inputs (and a
regression target) standardised with the training rows. They follow scikit-learn's conventions:
the constructor stores its parameters, ``fit`` sets ``n_features_in_`` (and ``classes_``),
``get_params`` / ``set_params`` come from ``BaseEstimator``, ``score`` is R^2 / accuracy, so they
drop into pipelines, grid searches and cross-validation::

    from sklearn.model_selection import cross_val_score
    from zonal.tabular.sklearn import ZonalClassifier

    cross_val_score(ZonalClassifier(budget=20), X, y, cv=5)

A fit with a ``budget`` is not reproducible to the bit: the wall clock decides where it stops
(the deadline, and with a validation split early stopping's intervals and patience in time,
``zonal.models.training.StageWatch``); pass ``budget=None`` for a fit that ``random_state``
reproduces.

scikit-learn's ``check_estimator`` (scikit-learn 1.9) passes every check for both estimators with
``validation_fraction=0`` (``check_array_api_input`` is skipped without ``SCIPY_ARRAY_API``). With
the default ``validation_fraction=0.1`` the classifier fails the checks that fit 10 to 15 rows of
3 classes, where 10% of each class rounds to no validation row and ``fit`` refuses the empty split
by name (``expected_failed_checks`` lists them, for ``parametrize_with_checks``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.utils import check_random_state
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError as error:  # pragma: no cover - the optional extra is missing
    raise ImportError(
        "zonal.tabular.sklearn needs scikit-learn: pip install 'zonal[sklearn]'"
    ) from error

from zonal.tabular.fitting import fit_data
from zonal.tabular.model import TabularModel
from zonal.tabular.options import AUTO_BUDGET, DEFAULT_VALIDATION_FRACTION
from zonal.tabular.predict import predict_data
from zonal.tabular.targets import REGRESSION, Target


def expected_failed_checks(estimator: BaseEstimator) -> dict[str, str]:
    """The scikit-learn checks ``estimator`` fails by design, with the reason (module docstring)."""
    if not isinstance(estimator, ZonalClassifier) or estimator.validation_fraction == 0:
        return {}
    reason = (
        "fits 3 classes of 3 to 5 rows: 10% of each class rounds to no validation row, and an "
        "empty validation split is refused by name"
    )
    return {"check_n_features_in_after_fitting": reason, "check_estimators_nan_inf": reason}


class _ZonalEstimator(BaseEstimator):
    """Parameters shared by both estimators (see ``zonal fit --help``).

    Args:
        model: ``"auto"`` or a recipe name (``sgpr``, ``exact``, ``svgp``, ``svgp-activated``,
            ``svgp-points``, ``adgp``, ``dgp``; ``sgpr`` and ``exact`` regress only).
        budget: wall-clock seconds for all training of one ``fit``; ``"auto"``: by the task and
            the rows (``zonal.tabular.options.default_budget``: regression 30 s from 1,024 rows,
            less below; classification 45 s per latent function); None: unlimited.
        validation_fraction: rows held out for early stopping and the model choice (0: none).
        num_inducing, steps, learning_rate, batch_size, num_layers, kernel: the recipe options
            (None: the recipe's defaults).
        hyperpriors: fit the exact GP by type-II MAP under log-normal hyperpriors (True; the
            exact GP or ``auto`` only) or by maximum likelihood (False); None (the default):
            as ``zonal fit``, MAP for ``auto``'s exact GP on at most 128 training rows
            (``zonal.tabular.candidates.small_table_options``), maximum likelihood otherwise.
        random_state: seed of the split, the initialisation and the minibatches: an int (0 by
            default), a ``numpy.random.RandomState`` (a seed is drawn from it), or None (a seed
            drawn from numpy's global random state, as scikit-learn reads None).
        verbose: progress bars on stderr.
    """

    def __init__(
        self,
        model: str = "auto",
        *,
        budget: float | str | None = AUTO_BUDGET,
        validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
        num_inducing: int | None = None,
        steps: int | None = None,
        learning_rate: float | None = None,
        batch_size: int = 1024,
        num_layers: int | None = None,
        kernel: str = "auto",
        hyperpriors: bool | None = None,
        random_state: int | None = 0,
        verbose: bool = False,
    ) -> None:
        self.model = model
        self.budget = budget
        self.validation_fraction = validation_fraction
        self.num_inducing = num_inducing
        self.steps = steps
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.num_layers = num_layers
        self.kernel = kernel
        self.hyperpriors = hyperpriors
        self.random_state = random_state
        self.verbose = verbose

    def _fit_arrays(self, x: np.ndarray, y: np.ndarray, target: Target) -> None:
        seed = self.random_state
        if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
            seed = int(check_random_state(seed).randint(2**31 - 1))  # None: numpy's global state
        self.fitted_: TabularModel = fit_data(
            x,
            y,
            feature_columns=[f"x{j}" for j in range(x.shape[1])],
            target=target,
            model=self.model,
            validation_fraction=self.validation_fraction,
            budget=self.budget,
            progress=self.verbose,
            seed=int(seed),
            kernel=self.kernel,
            num_inducing=self.num_inducing,
            steps=self.steps,
            learning_rate=self.learning_rate,
            batch_size=self.batch_size,
            num_layers=self.num_layers,
            hyperpriors=self.hyperpriors,
        )
        if self.fitted_.interrupted:
            warnings.warn(
                f"fit interrupted (Ctrl-C): kept the best {self.fitted_.spec['model']} so far",
                RuntimeWarning,
                stacklevel=3,
            )

    def _predict_columns(self, X: Any) -> dict[str, np.ndarray]:
        check_is_fitted(self, "fitted_")
        x = validate_data(self, X, reset=False, dtype=np.float64)
        return predict_data(self.fitted_, x)

    @property
    def validation_(self) -> dict[str, float]:
        """The chosen model's validation metrics (``log_likelihood``, ``mse`` or ``accuracy``)."""
        check_is_fitted(self, "fitted_")
        return dict(self.fitted_.validation)

    @property
    def model_(self) -> str:
        """The recipe that was fitted (the choice of ``model="auto"``; ``"stacked"`` for a mixture
        of its candidates, ``zonal.tabular.stacking.stack_fits``)."""
        check_is_fitted(self, "fitted_")
        return str(self.fitted_.spec["model"])


class ZonalRegressor(RegressorMixin, _ZonalEstimator):
    """GP regression by ``zonal fit`` (Gaussian likelihood); ``predict(X, return_std=True)`` also
    gives the predictive standard deviation of a new observation."""

    def fit(self, X: Any, y: Any) -> ZonalRegressor:
        """Fit inputs X [N, D] and real targets y [N]."""
        x, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True, ensure_min_samples=2)
        self._fit_arrays(x, np.asarray(y, dtype=np.float64), REGRESSION)
        return self

    def predict(self, X: Any, return_std: bool = False) -> np.ndarray | tuple[np.ndarray, ...]:
        """Predictive means [N] (and standard deviations [N] with ``return_std``)."""
        columns = self._predict_columns(X)
        if return_std:
            return columns["mean"], np.sqrt(columns["variance"])
        return columns["mean"]


class ZonalClassifier(ClassifierMixin, _ZonalEstimator):
    """GP classification by ``zonal fit``: a Bernoulli (probit) likelihood for two classes, a
    softmax over one latent GP per class for more. ``classes_`` are the sorted labels."""

    def fit(self, X: Any, y: Any) -> ZonalClassifier:
        """Fit inputs X [N, D] and class labels y [N] (any sortable labels)."""
        x, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        count = len(self.classes_)
        if count < 2:
            raise ValueError(
                f"the labels have a single class ({self.classes_[0]!r}): a classifier needs at "
                "least two classes"
            )
        target = Target("bernoulli" if count == 2 else "softmax", tuple(map(str, range(count))))
        self._fit_arrays(x, codes.astype(np.float64), target)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities [N, C], columns in the order of ``classes_``."""
        columns = self._predict_columns(X)
        return np.stack([columns[f"prob_{c}"] for c in range(len(self.classes_))], axis=1)

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row [N]."""
        probabilities = self.predict_proba(X)  # [N, C]
        return self.classes_[np.argmax(probabilities, axis=1)]


__all__ = ["ZonalClassifier", "ZonalRegressor", "expected_failed_checks"]
