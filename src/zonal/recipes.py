"""Recipes: the presets behind ``zonal fit`` (name, defaults, build, train), tensors in and out.

A recipe builds a model of the contract (``zonal.models.ZonalModel``) for standardised inputs
[N, D] and trains it; the CLI reads its choices from ``RECIPES``, and the experiments build their
deep models through the same functions (``build_activated_dgp``, ``build_inducing_point_dgp``), so
``zonal fit --model dgp`` and the ``uci-dgp`` experiment train the same DGP. Every option a recipe
reads is in its resolved ``spec`` (a plain dict, saved in checkpoints), and the learning rate in
the spec is the one the optimiser uses.

Recipes (standardised data; a Gaussian likelihood for regression, Bernoulli (probit) or softmax
over one latent GP per class for classification, ``LIKELIHOODS``):

- ``"sgpr"``: the collapsed SGPR with spherical-harmonic features (seed 000 sec. 3.3, seed 002
  sec. 5): one pass over the data for the sufficient statistics, then L-BFGS on the bound, at a cost
  independent of N; ``kernel="auto"`` fits the first-order arc-cosine and the polynomial-decay
  kernel and keeps the one with the larger bound. Gaussian only (``UnsupportedLikelihoodError``).
- ``"svgp"``: the same features (with learned phases when phase-truncated) and kernel (arc-cosine
  for ``"auto"``) in a minibatch SVGP.
- ``"svgp-activated"``: SVGP with activated Softplus features (seed 000 sec. 4.3), arc-cosine
  kernel: its posterior mean is a one-hidden-layer Softplus network.
- ``"adgp"``: the activated DGP (seed 000 sec. 5), trained as a network (MSE, probit or softmax
  cross-entropy: the likelihood's own loss) and then by the ELBO.
- ``"dgp"``: the DGP with inducing points and arc-cosine kernels (seed 000's DGP-L), by the ELBO.

Harmonic features take all harmonics of each level while those reach degree
``MIN_COMPLETE_DEGREE`` within the budget, else phase-truncated levels up to ``SPARSE_MAX_DEGREE``
(seed 002 sec. 5.2; ``harmonic_layout``). SVGPs start from the optimal q(u) for the initial
hyperparameters (Gaussian likelihood; Titsias, 2009; skipped when N x M exceeds
``OPTIMAL_Q_MAX_ENTRIES``) and are trained by Adam in three phases: the full learning rate for 60%
of the steps, then 1/5 of it for 25% and 1/25 for the last 15%.

Training runs under a ``zonal.models.training.TrainingControl``: a wall-clock deadline (each SVGP
phase may use its fraction of the time left, the activated DGP's network stage
``NETWORK_SHARE``), a validation score that keeps the best state (early stopping), a progress bar;
Ctrl-C raises ``TrainingInterrupted`` carrying the best model so far. ``auto_candidates`` is the
rule of ``zonal fit --model auto``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import (
    BernoulliLikelihood,
    GaussianLikelihood,
    Likelihood,
    SoftmaxLikelihood,
)

from zonal.features import (
    ActivatedFeatures,
    InducingFeatures,
    SparseSphericalHarmonicFeatures,
    SphericalHarmonicFeatures,
)
from zonal.features.levels import nonzero_levels
from zonal.features.spherical_harmonic import max_degree_for_budget
from zonal.fit_options import KERNELS, LIKELIHOODS, RECIPE_DEFAULTS, RECIPE_SUMMARIES
from zonal.geometry import SphereEmbedding
from zonal.harmonics import num_harmonics
from zonal.kernels import ArcCosineKernel, PolynomialDecayKernel
from zonal.models import (
    DGP,
    SGPR,
    SVGP,
    ActivatedDGP,
    ZonalModel,
    fit_dgp,
    fit_svgp,
    inducing_point_dgp,
)
from zonal.models.activated_dgp import LOSSES, noise_from_network, train_network
from zonal.models.training import TrainingControl

#: output width of the hidden layers of the deep models (seed 000 sec. 5.2)
HIDDEN_WIDTH = 5
BATCH_SIZE = 1024
TRUNCATION_LEVEL = 10
INITIAL_NOISE = 0.1
#: arc-cosine variance of the activated DGP's layers when the network is copied in (``uci-dgp``)
ADGP_KERNEL_VARIANCE = 1e-3
#: q(u) covariance scale of the activated DGP's layers when the network is copied in
ADGP_INITIAL_SCALE = 1e-2
#: share of an activated DGP's time budget that its network stage may use (the rest goes to
#: the ELBO stage, whose steps cost about ten times a network step). Under ``zonal fit``'s budget
#: the network decides the predictive mean: on airfoil (45 s) a share of 3/4 reached validation
#: log likelihood -0.13 where 1/3 reached -0.21 (the ELBO stage then kept its starting state);
#: a network that stops improving ends its stage early and leaves the time to the ELBO
NETWORK_SHARE = 0.8
#: the activated DGP's ELBO stage stops at an evaluation finding its best validation score older
#: than this share of the stage's time (half the default ``PATIENCE_SHARE``): after the network is
#: copied in the ELBO steps (about 20 times a network step) rarely gain; on white wine
#: (``benchmarks/fit_default.py``, split 2) the stage ran 14 s for 0.002 nats per row
ADGP_ELBO_PATIENCE_SHARE = 0.1
#: the DGP's hidden layers start at q(v) = N(0, scale^2 I) (near-deterministic, ``uci-dgp``)
DGP_INNER_SCALE = 1e-2
#: (fraction of the steps, learning-rate factor) of the SVGP schedule
SCHEDULE = ((0.6, 1.0), (0.25, 0.2), (0.15, 0.04))
#: levels of the polynomial-decay kernel beyond those of the features (their mass enters the bound)
EXTRA_KERNEL_LEVELS = 4
#: the highest harmonic degree used as a feature (binds only for one or two input columns)
MAX_FEATURE_DEGREE = 40
#: complete harmonic levels are used when they reach this degree within the feature budget;
#: otherwise (about D > 11 inputs for 512 features) levels are phase-truncated (seed 002 sec. 5.2)
MIN_COMPLETE_DEGREE = 3
#: the highest degree of phase-truncated harmonic features
SPARSE_MAX_DEGREE = 6
#: ARD in SGPR (the alternating scheme of ``zonal.models.sgpr``): rows of the subsample whose
#: bound L-BFGS maximises over the input scales, and its iterations
ARD_SUBSAMPLE = 1024
ARD_ITERATIONS = 30
#: recipes whose input embedding can learn per-input scales (``--ard``; the activated DGP's in its
#: first layer)
ARD_MODELS = ("sgpr", "svgp", "svgp-activated", "adgp")
#: the largest N x M for which q(u) starts at its closed-form optimum (Kuf is held in memory)
OPTIMAL_Q_MAX_ENTRIES = 20_000_000


class UnsupportedLikelihoodError(ValueError):
    """A recipe asked for a likelihood it cannot train (the collapsed SGPR is Gaussian only)."""


class TrainingInterrupted(Exception):  # noqa: N818 (a signal carrying the fit)
    """Ctrl-C during training: ``fit`` is the model in its best state so far, complete (the
    activated DGP interrupted in its network stage holds that network)."""

    def __init__(self, fit: Fit) -> None:
        super().__init__("training interrupted")
        self.fit = fit


@dataclass
class Fit:
    """What a recipe's training returns: the model, the spec it ended with (a concrete kernel for
    ``"auto"``), the final objective per data point and, for ``"auto"``, each kernel's bound."""

    model: ZonalModel
    spec: dict[str, Any]
    objective: float
    candidates: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Recipe:
    """A named preset: ``build(spec, x)`` makes the untrained model (``x`` None when a checkpoint
    is loaded), ``train(spec, x, y, control)`` builds and trains it; ``layered`` recipes read
    ``num_layers``; ``likelihoods`` are those it can train."""

    name: str
    summary: str
    defaults: Mapping[str, Any]
    kernels: tuple[str, ...]
    feature_kind: str
    build: Callable[[Mapping[str, Any], torch.Tensor | None], ZonalModel]
    train: Callable[[Mapping[str, Any], torch.Tensor, torch.Tensor, TrainingControl], Fit]
    layered: bool = False
    likelihoods: tuple[str, ...] = LIKELIHOODS


RECIPES: dict[str, Recipe] = {}


def register(recipe: Recipe) -> Recipe:
    """Add ``recipe`` to ``RECIPES`` (names are unique, each with its line in
    ``zonal.fit_options.RECIPE_SUMMARIES``, which the command line's help shows)."""
    if recipe.name not in RECIPE_SUMMARIES:
        raise ValueError(f"recipe {recipe.name!r} has no summary in zonal.fit_options")
    if recipe.name in RECIPES:
        raise ValueError(f"a recipe named {recipe.name!r} is already registered")
    RECIPES[recipe.name] = recipe
    return recipe


def get_recipe(name: str) -> Recipe:
    """The recipe ``name``; a ``ValueError`` listing the known ones otherwise."""
    if name not in RECIPES:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(RECIPES)}")
    return RECIPES[name]


# ------------------------------------------------------------------------------------ specs
def resolve_spec(
    input_dim: int,
    *,
    model: str = "sgpr",
    kernel: str = "auto",
    num_inducing: int | None = None,
    steps: int | None = None,
    batch_size: int = BATCH_SIZE,
    learning_rate: float | None = None,
    truncation_level: int = TRUNCATION_LEVEL,
    num_layers: int | None = None,
    likelihood: str = "gaussian",
    num_classes: int | None = None,
    ard: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """The checked options of recipe ``model`` for ``input_dim`` input columns, with the recipe's
    defaults filled in (``num_layers`` 2 for layered recipes; refused for the others).

    ``likelihood`` is one of ``LIKELIHOODS``; ``num_classes`` is 2 for ``"bernoulli"`` (the
    default), at least 2 for ``"softmax"`` (required) and unused (0) for ``"gaussian"``. ``ard``
    gives the sphere embedding one learned scale per input column (``ARD_MODELS`` only).
    """
    recipe = get_recipe(model)
    if likelihood not in LIKELIHOODS:
        raise ValueError(
            f"unknown likelihood {likelihood!r}; choose one of {', '.join(LIKELIHOODS)}"
        )
    if likelihood not in recipe.likelihoods:
        raise UnsupportedLikelihoodError(
            f"{model} is the collapsed bound of a Gaussian likelihood and cannot train a "
            f"{likelihood} likelihood (classification); use one of "
            f"{', '.join(name for name, other in RECIPES.items() if likelihood in other.likelihoods)}"
        )
    num_classes = _resolve_num_classes(likelihood, num_classes)
    if ard and model not in ARD_MODELS:
        raise ValueError(
            f"{model} builds its own layer embeddings without input scales: --ard is for "
            f"{', '.join(ARD_MODELS)}"
        )
    if num_layers is not None and not recipe.layered:
        raise ValueError(f"{model} has one layer: --layers is for adgp and dgp")
    num_layers = 2 if num_layers is None else num_layers
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {', '.join(KERNELS)}")
    if kernel != "auto" and kernel not in recipe.kernels:
        raise ValueError(
            f"{model} uses the {' or '.join(recipe.kernels)} kernel (seed 000 sec. 5); "
            f"drop --kernel {kernel}"
        )
    defaults = recipe.defaults
    num_inducing = defaults["num_inducing"] if num_inducing is None else num_inducing
    steps = defaults["steps"] if steps is None else steps
    learning_rate = defaults["learning_rate"] if learning_rate is None else learning_rate
    for value, name in [(input_dim, "the number of input columns"), (num_layers, "num_layers"),
                        (num_inducing, "num_inducing"), (steps, "steps"),
                        (batch_size, "batch_size"), (truncation_level, "truncation_level")]:  # fmt: skip
        _check_positive(value, name)
    if isinstance(learning_rate, bool) or not (
        isinstance(learning_rate, int | float) and learning_rate > 0
    ):
        raise ValueError(f"learning_rate must be > 0, got {learning_rate!r}")
    return {
        "model": model,
        "kernel": recipe.kernels[0]
        if kernel == "auto" and "auto" not in recipe.kernels
        else kernel,
        "input_dim": int(input_dim),
        "num_inducing": int(num_inducing),
        "steps": int(steps),
        "batch_size": int(batch_size),
        "learning_rate": float(learning_rate),
        "truncation_level": int(truncation_level),
        "num_layers": int(num_layers),
        "likelihood": likelihood,
        "num_classes": num_classes,
        "ard": bool(ard),
        "seed": int(seed),
    }


def _resolve_num_classes(likelihood: str, num_classes: int | None) -> int:
    if likelihood == "gaussian":
        return 0
    if likelihood == "bernoulli":
        if num_classes not in (None, 2):
            raise ValueError(f"a Bernoulli likelihood has 2 classes, got num_classes={num_classes}")
        return 2
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"a softmax likelihood needs num_classes >= 2, got {num_classes!r}")
    return num_classes


def _check_positive(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def train(
    spec: Mapping[str, Any],
    x: torch.Tensor,
    y: torch.Tensor,
    control: TrainingControl | None = None,
) -> tuple[Fit, float]:
    """Build and train the model of ``spec`` on standardised x [N, D] (float64) and targets y [N]
    (standardised values, or class indices 0..C-1), under ``spec["seed"]``; returns the fit and
    the training seconds. ``control`` sets the deadline, the validation score that keeps the best
    state, and the progress bar (default: none of them). Ctrl-C raises ``TrainingInterrupted``
    with the best model so far (except during SGPR's statistics pass or L-BFGS, where it is a
    plain ``KeyboardInterrupt``)."""
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec["seed"])
        fit = get_recipe(spec["model"]).train(spec, x, y, control or TrainingControl())
    return fit, time.perf_counter() - started


def gaussian_likelihood(noise: float = INITIAL_NOISE) -> GaussianLikelihood:
    """A float64 Gaussian likelihood with noise variance ``noise``."""
    likelihood = GaussianLikelihood().to(torch.float64)
    likelihood.noise = torch.tensor(noise, dtype=torch.float64)
    return likelihood


def make_likelihood(spec: Mapping[str, Any]) -> Likelihood:
    """The spec's likelihood in float64: Gaussian (noise ``INITIAL_NOISE``), Bernoulli (probit
    link) or softmax over ``num_classes`` latent GPs without mixing weights (the softmax of the
    last layer's C outputs, as in the activated DGP's network)."""
    name = spec.get("likelihood", "gaussian")
    if name == "gaussian":
        return gaussian_likelihood()
    if name == "bernoulli":
        return BernoulliLikelihood().to(torch.float64)
    return SoftmaxLikelihood(num_classes=spec["num_classes"], mixing_weights=False).double()


def output_dim(spec: Mapping[str, Any]) -> int:
    """Latent outputs of the spec's model: C for a softmax likelihood, else 1."""
    return spec["num_classes"] if spec.get("likelihood", "gaussian") == "softmax" else 1


def _tail_objective(losses: list[float]) -> float:
    """Minus the mean loss over the last 5% of the steps (the ELBO per point at the end)."""
    return -float(np.mean(losses[-max(1, len(losses) // 20) :]))


# ------------------------------------------------------------------------------------ kernels
def build_kernel(name: str, ambient_dim: int, num_inducing: int) -> ScaleKernel:
    """A homogeneous zonal kernel on R^{ambient_dim} in a ``ScaleKernel`` (learned variance); the
    polynomial-decay kernel keeps ``EXTRA_KERNEL_LEVELS`` levels beyond the features' degree."""
    if name == "arccos":
        base = ArcCosineKernel(ambient_dim, order=1, homogeneous=True)
    elif name == "polynomial-decay":
        degree, _ = harmonic_layout(ambient_dim, num_inducing)
        base = PolynomialDecayKernel(
            ambient_dim, max_degree=degree + EXTRA_KERNEL_LEVELS, homogeneous=True
        )
    else:
        raise ValueError(f"no kernel {name!r} to build (resolve 'auto' first)")
    return ScaleKernel(base).double()


def harmonic_layout(
    ambient_dim: int, num_inducing: int, kernel: ScaleKernel | None = None
) -> tuple[int, int | None]:
    """(max_degree, max_phases) of the harmonic features within ``num_inducing``.

    Complete levels (``max_phases`` None) when they reach degree ``MIN_COMPLETE_DEGREE`` (levels
    whose eigenvalue is zero for ``kernel`` cost nothing); otherwise phase-truncated levels up to
    ``SPARSE_MAX_DEGREE`` with the most directions per level that fit (seed 002 sec. 5.2): on
    S^32 (32 inputs) and 512 features, complete levels stop at degree 1, phase-truncated ones
    reach degree 6.
    """
    complete = min(max_degree_for_budget(ambient_dim, num_inducing, kernel), MAX_FEATURE_DEGREE)
    if complete >= MIN_COMPLETE_DEGREE:
        return complete, None
    levels = (
        nonzero_levels(kernel, SPARSE_MAX_DEGREE)
        if kernel is not None
        else list(range(SPARSE_MAX_DEGREE + 1))
    )
    sizes = [num_harmonics(ambient_dim, n) for n in levels]
    phases = 0
    while phases < max(sizes) and sum(min(phases + 1, size) for size in sizes) <= num_inducing:
        phases += 1
    if phases < 1:
        return complete, None
    return levels[-1], phases


def harmonic_features(
    kernel: ScaleKernel,
    ambient_dim: int,
    num_inducing: int,
    *,
    learn_phases: bool = False,
    seed: int = 0,
) -> SphericalHarmonicFeatures | SparseSphericalHarmonicFeatures:
    """Harmonic features of the kernel's non-zero levels within ``num_inducing``
    (``harmonic_layout``): all harmonics of each level, or phase-truncated levels (learned phases
    with ``learn_phases``) when complete levels would stop below degree ``MIN_COMPLETE_DEGREE``."""
    degree, phases = harmonic_layout(ambient_dim, num_inducing, kernel)
    if phases is None:
        return SphericalHarmonicFeatures(ambient_dim, degree, kernel=kernel)
    return SparseSphericalHarmonicFeatures(
        ambient_dim, degree, phases, kernel=kernel, learn_phases=learn_phases, seed=seed
    )


def input_embedding(spec: Mapping[str, Any]) -> SphereEmbedding:
    """The sphere embedding [x, b] / ||[x, b]|| (bias 1), with learned per-input scales s (all 1
    to start: [s * x, b]) when ``spec["ard"]``."""
    if spec.get("ard", False):
        return SphereEmbedding(1.0, input_scales=1.0, input_dim=spec["input_dim"])
    return SphereEmbedding(1.0)


# ------------------------------------------------------------------------------------ sgpr
def build_sgpr(spec: Mapping[str, Any], x: torch.Tensor | None = None) -> SGPR:
    """SGPR with the harmonics of the kernel's levels within the budget (fixed phases)."""
    ambient_dim = spec["input_dim"] + 1
    kernel = build_kernel(spec["kernel"], ambient_dim, spec["num_inducing"])
    features = harmonic_features(kernel, ambient_dim, spec["num_inducing"], seed=spec["seed"])
    return SGPR(kernel, features, spec["input_dim"], input_map=input_embedding(spec),
                noise=INITIAL_NOISE)  # fmt: skip


def train_sgpr(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """One statistics pass, then L-BFGS (``steps`` iterations) on the bound; ``"auto"`` keeps the
    kernel with the larger bound (a kernel whose fit fails is skipped if the other succeeds).
    With ``ard`` the input scales are learnt first on the bound of ``ARD_SUBSAMPLE`` rows
    (``ARD_ITERATIONS`` L-BFGS iterations, O(n M^2 + M^3) each), then the pass runs at them
    (``SGPR.fit_input_scales``). The L-BFGS iterations stop at ``control``'s deadline (each
    kernel of ``"auto"`` may use its share of the time left; the second is not started after the
    deadline); the scales and the pass run to their end."""
    names = ["arccos", "polynomial-decay"] if spec["kernel"] == "auto" else [spec["kernel"]]
    fits: dict[str, tuple[SGPR, float]] = {}
    failures: list[ValueError] = []
    for position, name in enumerate(names):
        remaining = control.remaining()
        if fits and remaining <= 0:
            break
        deadline = None if math.isinf(remaining) else \
            time.monotonic() + remaining / (len(names) - position)  # fmt: skip
        try:
            model = build_sgpr({**spec, "kernel": name})
            if spec.get("ard", False):
                model.fit_input_scales(x, y, subsample_size=ARD_SUBSAMPLE,
                                       max_iter=ARD_ITERATIONS, seed=spec["seed"])  # fmt: skip
            model.fit_statistics(x, y)
            trace = model.fit(max_iter=spec["steps"], lr=spec["learning_rate"], deadline=deadline)
            with torch.no_grad():
                objective = float(model.elbo()) / float(cast(torch.Tensor, model.stat_count))
            if not math.isfinite(objective):
                raise ValueError(f"SGPR with the {name} kernel diverged (bound {trace[-1:]})")
            fits[name] = (model, objective)
        except ValueError as error:  # e.g. a Cholesky failure: the other kernel may do
            failures.append(error)
    if not fits:
        raise failures[0]
    best = max(fits, key=lambda name: fits[name][1])
    candidates = {name: fit[1] for name, fit in fits.items()}
    return Fit(fits[best][0], {**spec, "kernel": best}, fits[best][1], candidates)


# ------------------------------------------------------------------------------------ svgp
def build_svgp(spec: Mapping[str, Any], x: torch.Tensor | None = None) -> SVGP:
    """SVGP with harmonic features (``"svgp"``, learned phases when phase-truncated) or activated
    Softplus features, one latent GP per class for a softmax likelihood."""
    ambient_dim = spec["input_dim"] + 1
    kernel = build_kernel(spec["kernel"], ambient_dim, spec["num_inducing"])
    features: InducingFeatures
    if spec["model"] == "svgp-activated":
        features = ActivatedFeatures(
            ambient_dim,
            spec["num_inducing"],
            kernel=kernel,
            activation="softplus",
            truncation_level=spec["truncation_level"],
            seed=spec["seed"],
        )
    else:
        features = harmonic_features(
            kernel, ambient_dim, spec["num_inducing"], learn_phases=True, seed=spec["seed"]
        )
    return SVGP(kernel, features, spec["input_dim"], likelihood=make_likelihood(spec),
                input_map=input_embedding(spec), num_outputs=output_dim(spec))  # fmt: skip


def train_svgp(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """The Titsias optimum (Gaussian likelihood, when Kuf fits in memory), then Adam in the
    phases of ``SCHEDULE``."""
    model = build_svgp(spec, x)
    if (
        spec.get("likelihood", "gaussian") == "gaussian"
        and len(x) * model.features.num_inducing <= OPTIMAL_Q_MAX_ENTRIES
    ):
        model.set_optimal_variational_distribution(x, y)
    losses: list[float] = []
    try:
        scheduled_adam(model, x, y, steps=spec["steps"], batch_size=spec["batch_size"],
                       learning_rate=spec["learning_rate"], seed=spec["seed"], control=control,
                       losses=losses)  # fmt: skip
    except KeyboardInterrupt as interrupt:
        raise TrainingInterrupted(
            Fit(model, dict(spec), _tail_objective(losses or [math.nan]))
        ) from interrupt
    return Fit(model, dict(spec), _tail_objective(losses))


def scheduled_adam(
    model: ZonalModel,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int = 0,
    control: TrainingControl | None = None,
    losses: list[float] | None = None,
) -> list[float]:
    """Adam on a single-layer model's minibatch ELBO with the three-phase schedule
    ``SCHEDULE``; the loss per step (appended to ``losses`` as the phases end).

    Under a ``control`` with a deadline each phase may use its fraction of the time left, so a
    fit cut by the budget still lowers its learning rate; with a validation score every phase
    starts from the previous phase's best state and ends in its own."""
    control = control or TrainingControl()
    losses = [] if losses is None else losses
    done = 0
    for phase, (fraction, factor) in enumerate(SCHEDULE):
        count = steps - done if phase == len(SCHEDULE) - 1 else round(fraction * steps)
        if count <= 0:
            continue
        share = fraction / sum(later for later, _ in SCHEDULE[phase:])
        with control.watch(model, count, stage=f"phase {phase + 1}", share=share) as watch:
            losses += fit_svgp(
                model,
                x,
                y,
                num_steps=count,
                batch_size=batch_size,
                lr=learning_rate * factor,
                seed=seed + phase,
                callback=watch,
            )
        done += count
    return losses


# ------------------------------------------------------------------------------------ deep
def layer_widths(
    input_dim: int, num_layers: int, hidden_width: int, output_dim: int = 1
) -> list[int]:
    """[D, w, ..., w, P]: ``num_layers`` GP layers, the hidden ones with ``hidden_width`` outputs."""
    return [input_dim, *([hidden_width] * (num_layers - 1)), output_dim]


def build_activated_dgp(
    input_dim: int,
    num_layers: int,
    likelihood: Likelihood,
    *,
    num_inducing: int,
    hidden_width: int = HIDDEN_WIDTH,
    truncation_level: int = TRUNCATION_LEVEL,
    mean: str = "constant",
    output_dim: int = 1,
    input_scales: bool = False,
    seed: int = 0,
) -> ActivatedDGP:
    """An ``ActivatedDGP`` with Softplus features and first-order arc-cosine kernels
    (``input_scales``: one learnt scale per input in the first layer's embedding, ARD)."""
    return ActivatedDGP(
        input_dim,
        layer_widths(input_dim, num_layers, hidden_width)[1:-1],
        likelihood,
        output_dim=output_dim,
        num_inducing=num_inducing,
        activation="softplus",
        truncation_level=truncation_level,
        mean=mean,
        input_scales=input_scales,
        seed=seed,
    )


def build_inducing_point_dgp(
    x_train: torch.Tensor | None,
    num_layers: int,
    likelihood: Likelihood,
    *,
    num_inducing: int,
    hidden_width: int = HIDDEN_WIDTH,
    mean: str = "constant",
    output_dim: int = 1,
    seed: int = 0,
    inner_scale: float = DGP_INNER_SCALE,
) -> DGP:
    """Seed 000's DGP-L (``zonal.models.inducing_point_dgp``); first-layer inducing points are
    training inputs (standard normal points when ``x_train`` is None, e.g. before loading)."""
    if x_train is None:
        raise ValueError("build_inducing_point_dgp needs the training inputs (or [0, D] rows)")
    widths = layer_widths(x_train.shape[-1], num_layers, hidden_width, output_dim)
    return inducing_point_dgp(
        x_train,
        widths,
        likelihood,
        num_inducing=num_inducing,
        mean=mean,
        seed=seed,
        inner_scale=inner_scale,
    )


def build_deep(spec: Mapping[str, Any], x: torch.Tensor | None = None) -> DGP:
    """The activated DGP (``"adgp"``) or the inducing-point DGP (``"dgp"``) of ``num_layers``,
    with C outputs under a softmax likelihood."""
    likelihood = make_likelihood(spec)
    if spec["model"] == "adgp":
        return build_activated_dgp(
            spec["input_dim"],
            spec["num_layers"],
            likelihood,
            num_inducing=spec["num_inducing"],
            truncation_level=spec["truncation_level"],
            output_dim=output_dim(spec),
            input_scales=spec.get("ard", False),
            seed=spec["seed"],
        )
    if x is None:  # rebuilding for a checkpoint: the points are loaded afterwards
        x = torch.zeros(0, spec["input_dim"], dtype=torch.float64)
    return build_inducing_point_dgp(x, spec["num_layers"], likelihood,
                                    num_inducing=spec["num_inducing"],
                                    output_dim=output_dim(spec), seed=spec["seed"])  # fmt: skip


#: the network loss of the activated DGP's first stage under each likelihood: MSE, the probit
#: cross-entropy of GPyTorch's BernoulliLikelihood, the softmax cross-entropy
NETWORK_LOSSES = {"gaussian": "mse", "bernoulli": "bce", "softmax": "ce"}


def train_deep(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """ADGP: the two stages of seed 000 sec. 5 (a network of the DGP's architecture trained by
    the likelihood's loss, ``NETWORK_LOSSES``, copied into the DGP, then everything by the ELBO;
    ``steps`` each, the network stage within ``NETWORK_SHARE`` of the time left); DGP: the ELBO."""
    model = build_deep(spec, x)
    options = {"batch_size": spec["batch_size"], "lr": spec["learning_rate"], "seed": spec["seed"]}
    losses: list[float] = []
    if spec["model"] == "adgp":
        network_stage(model, spec, x, y, control)
    try:
        patience = ADGP_ELBO_PATIENCE_SHARE if spec["model"] == "adgp" else None
        with control.watch(model, spec["steps"], stage="ELBO", patience_share=patience) as watch:
            losses = fit_dgp(model, x, y, num_steps=spec["steps"], callback=watch, **options)
    except KeyboardInterrupt as interrupt:
        raise TrainingInterrupted(Fit(model, dict(spec), math.nan)) from interrupt
    return Fit(model, dict(spec), _tail_objective(losses))


def network_stage(
    model: ActivatedDGP,
    spec: Mapping[str, Any],
    x: torch.Tensor,
    y: torch.Tensor,
    control: TrainingControl,
) -> None:
    """Train a network of the activated DGP's architecture (``steps`` Adam steps on the loss of
    ``NETWORK_LOSSES`` in the phases of ``SCHEDULE``: the learning rate, then 1/5 and 1/25 of it,
    each phase starting from the previous phase's best validation state and keeping its own),
    then copy it in: the DGP's posterior mean is then the network
    (``ActivatedDGP.from_torch_module``), its layers' arc-cosine variances
    ``ADGP_KERNEL_VARIANCE`` and q covariances ``ADGP_INITIAL_SCALE``^2 I, and a Gaussian noise
    the network's training MSE. The phases together may use ``NETWORK_SHARE`` of the time left,
    each its fraction of the network's time left. Ctrl-C copies the best network so far in and
    raises ``TrainingInterrupted``.

    The phases: at the full rate the validation loss plateaus and early stopping ends the stage
    (airfoil and compactiv at 60 s ended there whatever the share); the lower rates go on from the
    best state (validation log likelihood -1.99 against -2.02 on airfoil, -2.28 against -2.29 on
    compactiv, in target units, ``benchmarks/fit_default.py`` split 0)."""
    loss = NETWORK_LOSSES[spec.get("likelihood", "gaussian")]
    network = model.network_like(spec["seed"])
    score = None
    if control.validation is not None:
        x_valid, y_valid = control.validation

        def score(module: torch.nn.Module) -> float:
            with torch.no_grad():
                return -float(LOSSES[loss](module(x_valid), y_valid))

    interrupted = None
    network_end = time.monotonic() + NETWORK_SHARE * control.remaining()  # inf: no deadline
    done = 0
    try:
        for phase, (fraction, factor) in enumerate(SCHEDULE):
            last = phase == len(SCHEDULE) - 1
            count = spec["steps"] - done if last else round(fraction * spec["steps"])
            if count <= 0:
                continue
            remaining = control.remaining()
            share = fraction / sum(later for later, _ in SCHEDULE[phase:])
            if math.isfinite(remaining) and remaining > 0:
                share *= max(0.0, min(1.0, (network_end - time.monotonic()) / remaining))
            with control.watch(network, count, stage=f"network {phase + 1}", share=share,
                               score=score) as watch:  # fmt: skip
                train_network(network, x, y, loss=loss, num_steps=count,
                              batch_size=spec["batch_size"], lr=spec["learning_rate"] * factor,
                              seed=spec["seed"] + phase, callback=watch)  # fmt: skip
            done += count
    except KeyboardInterrupt as error:
        interrupted = error
    model.from_torch_module(
        network, kernel_variance=ADGP_KERNEL_VARIANCE, variational_scale=ADGP_INITIAL_SCALE
    )
    if loss == "mse":
        noise_from_network(model.likelihood, network, x, y)
    if interrupted is not None:
        raise TrainingInterrupted(Fit(model, dict(spec), math.nan)) from interrupted


# ------------------------------------------------------------------------------------ auto
#: the activated DGP is a candidate of ``--model auto`` up to this many training rows
AUTO_DEEP_MAX_ROWS = 20_000
#: ``auto``'s regression refinement (``auto_refinement``): the harmonic SVGP with ARD, trained after
#: the activated DGP within this share of the budget (9 s of the default 45: on white wine the
#: stack's test MSE was the same with 11 s, 0.6027-0.6029 over 3 splits, ``benchmarks/fit_default.py``) ...
AUTO_REFINEMENT_SHARE = 0.2
#: ... when the one-pass SGPR's validation log likelihood per row is within this many nats of the
#: DGP's: shallow models then compete and stacking gains from them (white wine, 0.01-0.03 nats;
#: airfoil, compactiv and grid-stability, where they got weight <= 0.1, 0.19-0.64)
AUTO_REFINEMENT_GAP = 0.1


def auto_candidates(num_rows: int, input_dim: int, likelihood: str) -> list[str]:
    """The recipes ``--model auto`` trains, in order, for N training rows of D inputs.

    Regression: the one-pass ``sgpr`` first, then the accurate activated DGP (``adgp``) for N up
    to ``AUTO_DEEP_MAX_ROWS``; above, a minibatch SVGP: ``svgp`` with learned phase-truncated
    harmonics where 512 complete levels would stop below degree 3 (about D > 11,
    ``harmonic_layout``), else ``svgp-activated`` (128 features: steps cost O(M^3) for 128, not
    512); ``auto_refinement`` may add one more, and ``zonal.fitting`` stacks them (weights that
    maximise the validation log density, ``zonal.models.stacking``). Classification (no SGPR):
    ``svgp-activated`` (C latent GPs), then ``adgp`` for N up to ``AUTO_DEEP_MAX_ROWS``; the
    validation log likelihood picks one.
    """
    deep = ["adgp"] if num_rows <= AUTO_DEEP_MAX_ROWS else []
    if likelihood != "gaussian":
        return ["svgp-activated", *deep]
    truncated = harmonic_layout(input_dim + 1, RECIPES["svgp"].defaults["num_inducing"])[1]
    shallow = "svgp" if truncated is not None else "svgp-activated"
    return ["sgpr", *(deep or [shallow])]


def auto_refinement(scores: Mapping[str, Mapping[str, float]], likelihood: str) -> str | None:
    """The recipe ``auto`` trains after its candidates (within ``AUTO_REFINEMENT_SHARE`` of the
    budget), or None: the harmonic ``svgp`` with ARD, for regression, when the ``sgpr`` and
    ``adgp`` candidates were scored on validation rows and the SGPR's log likelihood per row is
    within ``AUTO_REFINEMENT_GAP`` of the DGP's. The SVGP refines the SGPR (the same harmonic
    features, with learned input scales and minibatch training); where the one-pass model is far
    behind the deep one the refinement cannot close the gap and its time is not spent."""
    if likelihood != "gaussian":
        return None
    shallow = scores.get("sgpr", {}).get("log_likelihood", math.nan)
    deep = scores.get("adgp", {}).get("log_likelihood", math.nan)
    if not (math.isfinite(shallow) and math.isfinite(deep)):
        return None
    return "svgp" if deep - shallow < AUTO_REFINEMENT_GAP else None


register(
    Recipe(
        name="sgpr",
        summary=RECIPE_SUMMARIES["sgpr"],
        defaults=RECIPE_DEFAULTS["sgpr"],
        kernels=("auto", "arccos", "polynomial-decay"),
        feature_kind="spherical-harmonic features",
        build=build_sgpr,
        train=train_sgpr,
        likelihoods=("gaussian",),
    )
)
register(
    Recipe(
        name="svgp",
        summary=RECIPE_SUMMARIES["svgp"],
        defaults=RECIPE_DEFAULTS["svgp"],
        kernels=("arccos", "polynomial-decay"),
        feature_kind="spherical-harmonic features",
        build=build_svgp,
        train=train_svgp,
    )
)
register(
    Recipe(
        name="svgp-activated",
        summary=RECIPE_SUMMARIES["svgp-activated"],
        defaults=RECIPE_DEFAULTS["svgp-activated"],
        kernels=("arccos",),
        feature_kind="activated Softplus features",
        build=build_svgp,
        train=train_svgp,
    )
)
register(
    Recipe(
        name="adgp",
        summary=RECIPE_SUMMARIES["adgp"],
        defaults=RECIPE_DEFAULTS["adgp"],
        kernels=("arccos",),
        feature_kind="activated Softplus features per layer",
        build=build_deep,
        train=train_deep,
        layered=True,
    )
)
register(
    Recipe(
        name="dgp",
        summary=RECIPE_SUMMARIES["dgp"],
        defaults=RECIPE_DEFAULTS["dgp"],
        kernels=("arccos",),
        feature_kind="inducing points per layer",
        build=build_deep,
        train=train_deep,
        layered=True,
    )
)
