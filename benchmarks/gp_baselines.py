"""The GPyTorch and scikit-learn baselines of ``fit_default.py`` and ``fit_suite.py`` (one copy).

All GPs take standardised inputs (and, for regression, a standardised target) as float64 tensors:

* ``svgp_regression`` / ``svgp_classifier``: GPyTorch's SVGP with an RBF-ARD kernel
  (``zonal.experiments._baselines.InducingPointSVGP``: whitened full q(u) at M learned inducing
  points started at random training rows, constant mean,
  ``ScaleKernel(RBFKernel(ard_num_dims=D))``),
  trained by ``zonal.tabular.recipes.scheduled_adam`` (Adam, lr for 60% of the steps, then 1/5 and 1/25;
  minibatches). A Gaussian likelihood for regression, Bernoulli (probit) for two classes, softmax
  over one latent GP per class (``MulticlassSVGP``, shared inducing inputs) for more;
* ``exact_gp_regression``: GPyTorch's exact GP, constant mean, RBF-ARD, Gaussian likelihood,
  trained by Adam on the exact marginal likelihood (for tables of a few thousand rows), by
  Cholesky factors up to ``EXACT_CHOLESKY_ROWS`` rows (GPyTorch's default switches to conjugate
  gradients and stochastic trace estimates above 800);
* ``hist_gradient_boosting``: scikit-learn's ``HistGradientBoostingRegressor`` / ``Classifier``
  with its defaults, for context (no predictive variance: regression has no log likelihood).

Each returns the predictions of the test rows and the training ``seconds``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import gpytorch
import numpy as np
import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import BernoulliLikelihood, SoftmaxLikelihood

from zonal.experiments._baselines import InducingPointSVGP, inducing_point_model
from zonal.models import ZonalModel
from zonal.tabular.metrics import class_probabilities
from zonal.tabular.recipes import gaussian_likelihood, scheduled_adam
from zonal.tabular.targets import Target

#: the exact GP uses Cholesky factors (not GPyTorch's iterative solves) up to this many rows
EXACT_CHOLESKY_ROWS = 5000


def gaussian_scores(mean: np.ndarray, variance: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(MSE, mean log N(y | mean, variance)) of predictions [n] against targets [n]."""
    log_density = -0.5 * (np.log(2 * math.pi * variance) + (y - mean) ** 2 / variance)
    return float(np.mean((mean - y) ** 2)), float(np.mean(log_density))


def class_scores(probabilities: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(accuracy, mean log p(label)) of class probabilities [n, C] against labels [n]."""
    picked = probabilities[np.arange(len(labels)), labels]
    accuracy = float(np.mean(probabilities.argmax(-1) == labels))
    return accuracy, float(np.mean(np.log(np.maximum(picked, np.finfo(np.float64).tiny))))


class MulticlassSVGP(gpytorch.models.ApproximateGP, ZonalModel):
    """GPyTorch's SVGP with one independent latent GP per class (batched q(u), whitened, full
    covariance) at shared learned inducing inputs, RBF-ARD kernels and a softmax likelihood."""

    def __init__(self, inducing_points: torch.Tensor, num_classes: int) -> None:
        points = inducing_points.to(torch.float64).clone()
        batch = torch.Size([num_classes])
        distribution = gpytorch.variational.CholeskyVariationalDistribution(
            len(points), batch_shape=batch
        )
        strategy = gpytorch.variational.IndependentMultitaskVariationalStrategy(
            gpytorch.variational.VariationalStrategy(
                self, points, distribution, learn_inducing_locations=True
            ),
            num_tasks=num_classes,
        )
        super().__init__(strategy)
        self.input_dim = points.shape[1]
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=batch)
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(ard_num_dims=self.input_dim, batch_shape=batch),
            batch_shape=batch,
        )
        self.likelihood = SoftmaxLikelihood(
            num_features=num_classes, num_classes=num_classes, mixing_weights=False
        )
        self.double()

    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        """q(f(X)): a multitask normal, mean [q, C]."""
        return self(X)

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """The prior of each class's latent GP, batched [C, q]."""
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _inducing_rows(x_train: torch.Tensor, num_inducing: int) -> torch.Tensor:
    """``num_inducing`` random training rows (all when there are fewer), from torch's seed."""
    size = min(num_inducing, len(x_train))
    return x_train[torch.randperm(len(x_train))[:size]]


def svgp_regression(
    x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, *, num_inducing: int,
    steps: int, batch_size: int, learning_rate: float, seed: int,
) -> dict[str, Any]:  # fmt: skip
    """The RBF-ARD SVGP on standardised rows: predictive ``mean``, ``variance`` (with noise)."""
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = inducing_point_model("rbf", _inducing_rows(x_train, num_inducing))
        scheduled_adam(model, x_train, y_train, steps=steps, batch_size=batch_size,
                       learning_rate=learning_rate, seed=seed)  # fmt: skip
    seconds = time.perf_counter() - started
    with torch.no_grad():
        mean, variance = model.predict(x_test, include_noise=True)
    return {"mean": mean.numpy(), "variance": variance.numpy(), "seconds": seconds}


def svgp_classifier(
    x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, *, num_classes: int,
    num_inducing: int, steps: int, batch_size: int, learning_rate: float, seed: int,
) -> dict[str, Any]:  # fmt: skip
    """The RBF-ARD SVGP classifier (probit for 2 classes, softmax otherwise) on standardised
    inputs and class indices: ``probabilities`` [n, C] of the test rows."""
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        points = _inducing_rows(x_train, num_inducing)
        if num_classes == 2:
            model: ZonalModel = InducingPointSVGP(points, "rbf")
            model.likelihood = BernoulliLikelihood()
        else:
            model = MulticlassSVGP(points, num_classes)
        scheduled_adam(model, x_train, y_train, steps=steps, batch_size=batch_size,
                       learning_rate=learning_rate, seed=seed)  # fmt: skip
    seconds = time.perf_counter() - started
    target = Target("bernoulli" if num_classes == 2 else "softmax",
                    tuple(str(c) for c in range(num_classes)))  # fmt: skip
    probabilities = class_probabilities(model, x_test, target, seed=seed)
    return {"probabilities": probabilities.numpy(), "seconds": seconds}


class ExactRBFGP(gpytorch.models.ExactGP):
    """GPyTorch's exact GP: constant mean, ``ScaleKernel(RBFKernel(ard_num_dims=D))``."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        super().__init__(x, y, gaussian_likelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(ard_num_dims=x.shape[1])
        )
        self.double()

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """The prior p(f(x))."""
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))


def exact_gp_regression(
    x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, *, steps: int,
    learning_rate: float,
) -> dict[str, Any]:  # fmt: skip
    """The exact RBF-ARD GP, Adam on the exact marginal likelihood for ``steps`` full-batch
    steps; predictive ``mean``, ``variance`` (with noise) of the test rows."""
    started = time.perf_counter()
    model = ExactRBFGP(x_train, y_train)
    model.train()
    objective = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    with gpytorch.settings.max_cholesky_size(EXACT_CHOLESKY_ROWS):
        for _ in range(steps):
            optimizer.zero_grad()
            loss = -objective(model(x_train), y_train)
            loss.backward()
            optimizer.step()
        seconds = time.perf_counter() - started
        model.eval()
        with torch.no_grad(), gpytorch.settings.fast_pred_var(False):
            predictive = model.likelihood(model(x_test))
    return {"mean": predictive.mean.numpy(), "variance": predictive.variance.numpy(),
            "seconds": seconds}  # fmt: skip


def hist_gradient_boosting(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *, classify: bool,
    num_classes: int, seed: int,
) -> dict[str, Any]:  # fmt: skip
    """scikit-learn's histogram gradient boosting with its defaults: the test ``mean``
    (regression) or ``probabilities`` [n, C] (classification; classes absent from the training
    rows get probability 0)."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    started = time.perf_counter()
    if not classify:
        regressor = HistGradientBoostingRegressor(random_state=seed).fit(x_train, y_train)
        seconds = time.perf_counter() - started
        return {"mean": regressor.predict(x_test), "seconds": seconds}
    classifier = HistGradientBoostingClassifier(random_state=seed).fit(x_train, y_train)
    seconds = time.perf_counter() - started
    probabilities = np.zeros((len(x_test), num_classes))
    probabilities[:, classifier.classes_] = classifier.predict_proba(x_test)
    return {"probabilities": probabilities, "seconds": seconds}
