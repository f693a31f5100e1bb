"""Regression models with sensible defaults: build, train and predict (behind ``zonal fit``).

Three models, all on standardised inputs and targets, with a Gaussian likelihood (regression only;
classification is not offered here yet):

- ``"sgpr"`` (default): the collapsed SGPR with spherical-harmonic features (seed 000 sec. 3.3,
  seed 002 sec. 5): one pass over the data for the sufficient statistics, then L-BFGS on the bound,
  at a cost independent of N. The features are all harmonics of the levels that fit the budget M
  (default 512, the seed's inducing-variable count). ``kernel="auto"`` fits the first-order
  arc-cosine and the polynomial-decay kernel and keeps the one with the larger bound.
- ``"svgp"``: the same features and kernel (arc-cosine for ``"auto"``) in a minibatch SVGP.
- ``"svgp-activated"``: SVGP with activated Softplus features (seed 000 sec. 4.3, N-tilde = 10) and
  the arc-cosine kernel: its posterior mean is a one-hidden-layer Softplus network.

SVGPs start from the optimal q(u) for the initial hyperparameters (Titsias, 2009; closed form for
a Gaussian likelihood, skipped when N x M exceeds ``OPTIMAL_Q_MAX_ENTRIES``) and are trained by
Adam (``zonal.models.fit_svgp``) in three phases: the full learning rate for 60% of the steps, then
1/5 of it for 25% and 1/25 for the last 15% (a fixed stand-in for the seed's reduce-on-plateau
schedule), which settles the minibatch noise at the end.

The resolved options (``resolve_spec``) are a plain dict: the same dict rebuilds the model
(``build_model``) when a checkpoint is loaded.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import torch
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood
from torch import nn

from zonal.datasets import Standardizer
from zonal.features import ActivatedFeatures, InducingPoints, SphericalHarmonicFeatures
from zonal.features.spherical_harmonic import max_degree_for_budget
from zonal.kernels import ArcCosineKernel, PolynomialDecayKernel
from zonal.models import (
    DGP,
    SGPR,
    SVGP,
    ActivatedDGP,
    DGPLayer,
    fit_dgp,
    fit_svgp,
    two_stage_fit,
)
from zonal.tabular import Table, TableError

MODELS = ("sgpr", "svgp", "svgp-activated", "adgp", "dgp")
DEEP_MODELS = ("adgp", "dgp")
KERNELS = ("auto", "arccos", "polynomial-decay")
DEFAULTS: dict[str, dict[str, Any]] = {
    "sgpr": {"num_inducing": 512, "steps": 200},
    "svgp": {"num_inducing": 512, "steps": 1000},
    "svgp-activated": {"num_inducing": 128, "steps": 1000},
    "adgp": {"num_inducing": 128, "steps": 1000},
    "dgp": {"num_inducing": 128, "steps": 1000},
}
#: output width of the hidden layers of the deep models (seed 000 sec. 5.2)
HIDDEN_WIDTH = 5
#: Monte Carlo samples for deep-model predictions
PREDICTION_SAMPLES = 32
BATCH_SIZE = 1024
LEARNING_RATE = 0.05
TRUNCATION_LEVEL = 10
INITIAL_NOISE = 0.1
#: arc-cosine variance of the activated DGP's layers when the network is copied in (``uci-dgp``)
ADGP_KERNEL_VARIANCE = 1e-3
#: (fraction of the steps, learning-rate factor) of the SVGP schedule
SCHEDULE = ((0.6, 1.0), (0.25, 0.2), (0.15, 0.04))
#: levels of the polynomial-decay kernel beyond those of the features (their mass enters the bound)
EXTRA_KERNEL_LEVELS = 4
#: the highest harmonic degree used as a feature (binds only for one or two input columns)
MAX_FEATURE_DEGREE = 40
#: the largest N x M for which q(u) starts at its closed-form optimum (Kuf is held in memory)
OPTIMAL_Q_MAX_ENTRIES = 20_000_000
#: rows predicted at a time
PREDICTION_CHUNK = 4096


def resolve_spec(
    input_dim: int,
    *,
    model: str = "sgpr",
    kernel: str = "auto",
    num_inducing: int | None = None,
    steps: int | None = None,
    batch_size: int = BATCH_SIZE,
    learning_rate: float = LEARNING_RATE,
    truncation_level: int = TRUNCATION_LEVEL,
    num_layers: int = 2,
    seed: int = 0,
) -> dict[str, Any]:
    """The checked options of a model for ``input_dim`` input columns, defaults filled in."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {', '.join(KERNELS)}")
    if model in ("svgp-activated", *DEEP_MODELS) and kernel == "polynomial-decay":
        raise ValueError(f"{model} uses the arc-cosine kernel (seed 000 sec. 5); drop --kernel")
    _check_positive(num_layers, "num_layers")
    _check_positive(input_dim, "the number of input columns")
    num_inducing = DEFAULTS[model]["num_inducing"] if num_inducing is None else num_inducing
    steps = DEFAULTS[model]["steps"] if steps is None else steps
    for value, name in [(num_inducing, "num_inducing"), (steps, "steps"),
                        (batch_size, "batch_size"), (truncation_level, "truncation_level")]:  # fmt: skip
        _check_positive(value, name)
    if not (isinstance(learning_rate, int | float) and learning_rate > 0):
        raise ValueError(f"learning_rate must be > 0, got {learning_rate!r}")
    return {
        "model": model,
        "kernel": "arccos" if kernel == "auto" and model != "sgpr" else kernel,
        "input_dim": int(input_dim),
        "num_inducing": int(num_inducing),
        "steps": int(steps),
        "batch_size": int(batch_size),
        "learning_rate": float(learning_rate),
        "truncation_level": int(truncation_level),
        "num_layers": int(num_layers),
        "seed": int(seed),
    }


def _check_positive(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


# ------------------------------------------------------------------------------------ models


def build_kernel(name: str, ambient_dim: int, num_inducing: int) -> ScaleKernel:
    """A homogeneous zonal kernel on R^{ambient_dim} in a ``ScaleKernel`` (learned variance)."""
    if name == "arccos":
        base = ArcCosineKernel(ambient_dim, order=1, homogeneous=True)
    elif name == "polynomial-decay":
        degree = min(max_degree_for_budget(ambient_dim, num_inducing), MAX_FEATURE_DEGREE)
        base = PolynomialDecayKernel(
            ambient_dim, max_degree=degree + EXTRA_KERNEL_LEVELS, homogeneous=True
        )
    else:
        raise ValueError(f"no kernel {name!r} to build (resolve 'auto' first)")
    return ScaleKernel(base).double()


def harmonic_features(
    kernel: ScaleKernel, ambient_dim: int, num_inducing: int
) -> SphericalHarmonicFeatures:
    """All spherical harmonics of the kernel's non-zero levels that fit in ``num_inducing``
    (degree at most ``MAX_FEATURE_DEGREE``)."""
    degree = min(max_degree_for_budget(ambient_dim, num_inducing, kernel), MAX_FEATURE_DEGREE)
    return SphericalHarmonicFeatures(ambient_dim, degree, kernel=kernel)


def build_model(spec: Mapping[str, Any]) -> tuple[nn.Module, GaussianLikelihood]:
    """The untrained model and its likelihood for a resolved ``spec`` with a concrete kernel."""
    input_dim, budget = spec["input_dim"], spec["num_inducing"]
    ambient_dim = input_dim + 1
    kernel = build_kernel(spec["kernel"], ambient_dim, budget)
    if spec["model"] == "sgpr":
        features = harmonic_features(kernel, ambient_dim, budget)
        model = SGPR(kernel, features, input_dim, noise=INITIAL_NOISE)
        return model, model.likelihood
    if spec["model"] in DEEP_MODELS:
        return build_deep_model(spec)
    if spec["model"] == "svgp":
        features = harmonic_features(kernel, ambient_dim, budget)
    elif spec["model"] == "svgp-activated":
        features = ActivatedFeatures(
            ambient_dim,
            budget,
            activation="softplus",
            truncation_level=spec["truncation_level"],
            seed=spec["seed"],
        )
    else:
        raise ValueError(f"unknown model {spec['model']!r}; choose one of {', '.join(MODELS)}")
    likelihood = GaussianLikelihood().double()
    likelihood.noise = torch.tensor(INITIAL_NOISE, dtype=torch.float64)
    return SVGP(kernel, features, input_dim), likelihood


def build_deep_model(spec: Mapping[str, Any]) -> tuple[DGP, GaussianLikelihood]:
    """An activated DGP (Softplus features, arc-cosine kernels) or a standard DGP (inducing points,
    arc-cosine kernels), ``num_layers`` layers with hidden width ``HIDDEN_WIDTH``, constant means."""
    likelihood = GaussianLikelihood().double()
    likelihood.noise = torch.tensor(INITIAL_NOISE, dtype=torch.float64)
    hidden = [HIDDEN_WIDTH] * (spec.get("num_layers", 2) - 1)
    if spec["model"] == "adgp":
        model = ActivatedDGP(
            spec["input_dim"],
            hidden,
            likelihood,
            num_inducing=spec["num_inducing"],
            truncation_level=spec["truncation_level"],
            mean="constant",
            seed=spec["seed"],
        )
        return model, likelihood
    widths = [spec["input_dim"], *hidden, 1]
    generator = torch.Generator().manual_seed(spec["seed"])
    layers = []
    for index, (width_in, width_out) in enumerate(itertools.pairwise(widths)):
        kernel = ScaleKernel(ArcCosineKernel(width_in + 1, homogeneous=True)).double()
        points = torch.randn(
            spec["num_inducing"], width_in + 1, generator=generator, dtype=torch.float64
        )
        last = index == len(widths) - 2
        layers.append(
            DGPLayer(
                kernel,
                InducingPoints(points),
                width_in,
                None if last else width_out,
                mean="constant",
            )
        )
    return DGP(layers, likelihood), likelihood


def train_svgp(
    model: nn.Module,
    likelihood: GaussianLikelihood,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int = 0,
) -> list[float]:
    """Adam on the minibatch ELBO with the three-phase schedule ``SCHEDULE``; the loss per step.

    ``model`` is any GPyTorch ``ApproximateGP`` with a ``lift(x)`` input check (``zonal.models.SVGP``
    or a baseline), ``x`` [N, D] and ``y`` [N] standardised.
    """
    losses: list[float] = []
    done = 0
    for phase, (fraction, factor) in enumerate(SCHEDULE):
        count = steps - done if phase == len(SCHEDULE) - 1 else round(fraction * steps)
        if count <= 0:
            continue
        losses += fit_svgp(
            model,
            likelihood,
            x,
            y,
            num_steps=count,
            batch_size=batch_size,
            lr=learning_rate * factor,
            seed=seed + phase,
        )
        done += count
    return losses


@dataclass
class Trained:
    """A trained model on the standardised scale and how it got there."""

    spec: dict[str, Any]
    model: nn.Module
    likelihood: GaussianLikelihood
    objective: float  # the bound (SGPR) or the ELBO (SVGP) per data point at the end
    seconds: float
    candidates: dict[str, float] = field(default_factory=dict)  # kernel -> bound, for "auto"


def train(spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor) -> Trained:
    """Build and train the model of ``spec`` on standardised x [N, D], y [N] (float64)."""
    started = time.perf_counter()
    if spec["model"] == "sgpr":
        kernels = ["arccos", "polynomial-decay"] if spec["kernel"] == "auto" else [spec["kernel"]]
        fits, failures = {}, []
        for name in kernels:
            try:
                fits[name] = _train_sgpr({**spec, "kernel": name}, x, y)
            except ValueError as error:  # e.g. a Cholesky failure: the other kernel may do
                failures.append(error)
        if not fits:
            raise failures[0]
        best = max(fits, key=lambda name: fits[name][2])
        model, likelihood, objective = fits[best]
        candidates = {name: fit[2] for name, fit in fits.items()}
        return Trained({**spec, "kernel": best}, model, likelihood, objective,
                       time.perf_counter() - started, candidates)  # fmt: skip
    if spec["model"] in DEEP_MODELS:
        return _train_deep(spec, x, y, started)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec["seed"])
        model, likelihood = build_model(spec)
        if len(x) * model.features.num_inducing <= OPTIMAL_Q_MAX_ENTRIES:
            model.set_optimal_variational_distribution(x, y, likelihood.noise.detach())
        losses = train_svgp(
            model,
            likelihood,
            x,
            y,
            steps=spec["steps"],
            batch_size=spec["batch_size"],
            learning_rate=spec["learning_rate"],
            seed=spec["seed"],
        )
    tail = losses[-max(1, len(losses) // 20) :]
    return Trained(dict(spec), model, likelihood, -float(np.mean(tail)),
                   time.perf_counter() - started)  # fmt: skip


def _train_deep(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, started: float
) -> Trained:
    """ADGP: the two-stage recipe (network, then ELBO); DGP: the ELBO from the start."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec["seed"])
        model, likelihood = build_model(spec)
        options = {"batch_size": spec["batch_size"], "lr": 0.01, "seed": spec["seed"]}
        if spec["model"] == "adgp":
            losses = two_stage_fit(
                model,
                x,
                y,
                network_steps=spec["steps"],
                elbo_steps=spec["steps"],
                kernel_variance=ADGP_KERNEL_VARIANCE,
                **options,
            )["elbo"]
        else:
            losses = fit_dgp(model, x, y, num_steps=spec["steps"], **options)
    tail = losses[-max(1, len(losses) // 20) :]
    return Trained(dict(spec), model, likelihood, -float(np.mean(tail)),
                   time.perf_counter() - started)  # fmt: skip


def _train_sgpr(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor
) -> tuple[SGPR, GaussianLikelihood, float]:
    model, likelihood = build_model(spec)
    model.fit_statistics(x, y)
    trace = model.fit(max_iter=spec["steps"])
    with torch.no_grad():
        objective = float(model.elbo() / model.stat_count)
    if not math.isfinite(objective):
        raise ValueError(f"SGPR with the {spec['kernel']} kernel diverged (bound {trace[-1:]})")
    return model, likelihood, objective


@torch.no_grad()
def predict_standardised(
    model: nn.Module,
    likelihood: GaussianLikelihood,
    x: torch.Tensor,
    *,
    include_noise: bool = True,
    chunk_size: int = PREDICTION_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Predictive mean and variance [N] on the standardised scale (of y, or of f without noise),
    computed ``chunk_size`` rows at a time."""
    if not isinstance(model, SGPR):
        model.eval()
        likelihood.eval()
    means, variances = [], []
    for start in range(0, len(x), chunk_size):
        chunk = x[start : start + chunk_size]  # [n, D]
        if isinstance(model, SGPR):
            mean, variance = model.predict(chunk, include_noise=include_noise)
        elif isinstance(model, DGP):
            mean, variance = model.predict(chunk, num_samples=PREDICTION_SAMPLES)
            if include_noise:
                variance = variance + likelihood.noise.reshape(())
        else:
            latent = model(chunk)
            mean, variance = latent.mean, latent.variance
            if include_noise:
                variance = variance + likelihood.noise.reshape(())
        means.append(mean)
        variances.append(variance)
    return torch.cat(means), torch.cat(variances)


def gaussian_log_density(
    mean: torch.Tensor, variance: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """log N(y_i | mean_i, variance_i) per point [N]."""
    return -0.5 * (torch.log(2 * math.pi * variance) + (y - mean) ** 2 / variance)


# ------------------------------------------------------------------------------------ tables


@dataclass
class TabularModel:
    """A trained model with what it needs to read and answer a user's table."""

    trained: Trained
    feature_columns: tuple[str, ...]
    target_column: str
    x_scaler: Standardizer
    y_scaler: Standardizer
    num_rows: int
    source: str = ""

    @property
    def spec(self) -> dict[str, Any]:
        """The resolved options (concrete kernel)."""
        return self.trained.spec

    def describe(self) -> str:
        """One line: model, kernel, number of features."""
        spec = self.spec
        features = getattr(self.trained.model, "features", None)
        size = getattr(features, "num_inducing", spec["num_inducing"])
        kind = {
            "svgp-activated": "activated Softplus features",
            "adgp": f"activated Softplus features per layer, {spec.get('num_layers', 2)} layers",
            "dgp": f"inducing points per layer, {spec.get('num_layers', 2)} layers",
        }.get(spec["model"], "spherical-harmonic features")
        return f"{spec['model']} ({spec['kernel']} kernel, {size} {kind})"


def select_columns(
    table: Table, target: str, features: Sequence[str] | None = None
) -> tuple[str, ...]:
    """The input columns: ``features`` if given, else every column but ``target``."""
    table.require([target], "target")
    if features is None:
        columns = tuple(name for name in table.columns if name != target)
    else:
        columns = tuple(features)
        if target in columns:
            raise TableError(f"the target column {target!r} is also listed as an input column")
        if len(set(columns)) != len(columns):
            raise TableError(f"input columns listed twice: {', '.join(columns)}")
        table.require(columns, "input")
    if not columns:
        raise TableError(f"{table.path}: no input columns besides the target {target!r}")
    return columns


def fit_table(
    table: Table, target: str, *, features: Sequence[str] | None = None, **options: Any
) -> TabularModel:
    """Standardise the table's inputs and target (training statistics) and train a model.

    ``options`` are those of ``resolve_spec`` (model, kernel, num_inducing, steps, seed, ...).
    """
    columns = select_columns(table, target, features)
    values = table.numeric([*columns, target])  # [N, D + 1]: one report for every bad cell
    x, y = values[:, :-1], values[:, -1]  # [N, D], [N]
    if table.num_rows < 2:
        raise TableError(f"{table.path}: {table.num_rows} row; fitting needs at least 2")
    spec = resolve_spec(len(columns), **options)
    x_scaler, y_scaler = Standardizer.fit(x), Standardizer.fit(y)
    trained = train(
        spec,
        torch.from_numpy(x_scaler.transform(x)),
        torch.from_numpy(y_scaler.transform(y)),
    )
    return TabularModel(trained, columns, target, x_scaler, y_scaler, table.num_rows,
                        str(table.path))  # fmt: skip


def predict_table(
    fitted: TabularModel, table: Table, *, include_noise: bool = True, level: float = 0.95
) -> dict[str, np.ndarray]:
    """Columns ``mean``, ``variance``, ``lower``, ``upper`` in the target's units, one row per row.

    The variance is that of a new observation (``include_noise``) or of the latent function; the
    interval is the central ``level`` interval of the Gaussian predictive (mean +- 1.96 sd).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    missing = [name for name in fitted.feature_columns if name not in table.cells]
    if missing:
        raise TableError(
            f"{table.path}: the model was fitted on columns "
            f"{', '.join(map(repr, fitted.feature_columns))} but this table lacks "
            f"{', '.join(map(repr, missing))}; its columns are {', '.join(map(repr, table.columns))}"
        )
    x = torch.from_numpy(fitted.x_scaler.transform(table.numeric(fitted.feature_columns)))
    mean, variance = predict_standardised(
        fitted.trained.model, fitted.trained.likelihood, x, include_noise=include_noise
    )
    mean = fitted.y_scaler.inverse_transform(mean.numpy())
    variance = fitted.y_scaler.inverse_transform_variance(variance.numpy())
    half_width = NormalDist().inv_cdf(0.5 + level / 2) * np.sqrt(variance)
    return {"mean": mean, "variance": variance, "lower": mean - half_width,
            "upper": mean + half_width}  # fmt: skip
