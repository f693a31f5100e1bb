"""The registry of recipes: the presets behind ``zonal fit`` (name, defaults, build, train).

A ``Recipe`` names a model family; the family modules (``sgpr``, ``svgp``, ``deep``) register
theirs in ``RECIPES`` when ``zonal.tabular.recipes`` is imported. ``resolve_spec`` checks a
recipe's options and fills in its defaults (a plain dict, saved in checkpoints); ``train`` builds
and trains the model of a resolved spec.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from zonal.models import ZonalModel
from zonal.models.training import TrainingControl
from zonal.tabular.options import BATCH_SIZE, KERNELS, LIKELIHOODS, RECIPE_SUMMARIES

#: the Funk-Hecke truncation level of the activated features of the recipes
TRUNCATION_LEVEL = 10
#: recipes whose input embedding can learn per-input scales (``--ard``; the activated DGP's in its
#: first layer)
ARD_MODELS = ("sgpr", "exact", "svgp", "svgp-activated", "svgp-points", "adgp")
#: why a recipe trains a Gaussian likelihood only (the message of ``UnsupportedLikelihoodError``)
GAUSSIAN_ONLY = {
    "sgpr": "is the collapsed bound of a Gaussian likelihood",
    "exact": "is the closed-form posterior of a Gaussian likelihood",
}
#: recipes whose noise and kernel variance may start at given values (``initial_noise``, ...)
START_MODELS = ("svgp", "svgp-activated", "svgp-points")
#: the options only the exact GP's fit reads (``resolve_spec`` refuses them for another recipe;
#: ``auto`` gives them to its exact GP alone)
EXACT_ONLY_OPTIONS = ("hyperpriors", "ard_by_bic")
#: the classifiers that learn a constant prior mean per latent function (spec ``prior_mean``:
#: ``zonal.tabular.recipes.parts.prior_mean``)
CONSTANT_MEAN_MODELS = START_MODELS


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
    ``num_layers``; ``likelihoods`` are those it can train; ``lbfgs`` recipes count their
    ``steps`` in L-BFGS iterations, which stop on their own at convergence (the others in Adam
    steps, which early stopping ends)."""

    name: str
    summary: str
    defaults: Mapping[str, Any]
    kernels: tuple[str, ...]
    feature_kind: str
    build: Callable[[Mapping[str, Any], torch.Tensor | None], ZonalModel]
    train: Callable[[Mapping[str, Any], torch.Tensor, torch.Tensor, TrainingControl], Fit]
    layered: bool = False
    likelihoods: tuple[str, ...] = LIKELIHOODS
    lbfgs: bool = False


#: the recipes of ``zonal fit --model`` by name (filled by the recipe modules)
RECIPES: dict[str, Recipe] = {}


def register(recipe: Recipe) -> Recipe:
    """Add ``recipe`` to ``RECIPES`` (names are unique, each with its line in
    ``zonal.tabular.options.RECIPE_SUMMARIES``, which the command line's help shows)."""
    if recipe.name not in RECIPE_SUMMARIES:
        raise ValueError(f"recipe {recipe.name!r} has no summary in zonal.tabular.options")
    if recipe.name in RECIPES:
        raise ValueError(f"a recipe named {recipe.name!r} is already registered")
    RECIPES[recipe.name] = recipe
    ordered = {name: RECIPES[name] for name in RECIPE_SUMMARIES if name in RECIPES}
    RECIPES.clear()
    RECIPES.update(ordered)  # the order of the summaries, whichever family registers first
    return recipe


def get_recipe(name: str) -> Recipe:
    """The recipe ``name``; a ``ValueError`` listing the known ones otherwise."""
    if name not in RECIPES:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(RECIPES)}")
    return RECIPES[name]


def check_kernel(kernel: str) -> None:
    """A ``ValueError`` for a kernel name no recipe knows (``KERNELS``)."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {', '.join(KERNELS)}")


#: the error of ``ard_by_bic`` given with ``ard``
ARD_BY_BIC_WITH_ARD = (
    "ard_by_bic (--ard-by-bic) chooses the exact GP's input scales itself: "
    "drop ard (--ard or --no-ard)"
)


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
    initial_noise: float | None = None,
    initial_outputscale: float | None = None,
    initial_input_scales: Sequence[float] | None = None,
    network_early_stopping: bool = True,
    hyperpriors: bool | None = None,
    ard_by_bic: bool = False,
) -> dict[str, Any]:
    """The checked options of recipe ``model`` for ``input_dim`` input columns, with the recipe's
    defaults filled in (``num_layers`` 2 for layered recipes; refused for the others).

    ``likelihood`` is one of ``LIKELIHOODS``; ``num_classes`` is 2 for ``"bernoulli"`` (the
    default), at least 2 for ``"softmax"`` (required) and unused (0) for ``"gaussian"``. ``ard``
    gives the sphere embedding one learned scale per input column (``ARD_MODELS`` only).
    A classifier of ``CONSTANT_MEAN_MODELS`` gets ``prior_mean: "constant"`` (a learned constant
    prior mean per latent function; specs without the key, saved before it, keep the zero mean).
    ``initial_noise`` and ``initial_outputscale`` (positive; in the spec only when given) start
    an SVGP's Gaussian noise variance and kernel variance elsewhere than at ``INITIAL_NOISE`` and
    1: ``auto`` starts its SVGPs where its SGPR ended (``zonal.tabular.candidates.start_options``).
    ``initial_input_scales`` (D positive numbers, with ``ard`` or ``ard_by_bic`` only; in the
    spec only when given) start the learned input scales elsewhere than at 1: ``auto`` starts
    them at its relevance screen's (``zonal.tabular.relevance``).
    ``network_early_stopping=False`` (the activated DGP only; in the spec only when False) runs
    the first phase of its network stage to the end of its time share: ``auto`` sets it where no
    exact GP is offered
    (``zonal.tabular.candidates.network_options``). ``hyperpriors=True`` (the exact GP only:
    refused for another recipe; in the spec only then) fits it by type-II MAP under
    ``zonal.models.Hyperpriors.default`` instead of type-II maximum likelihood
    (``zonal.tabular.recipes.exact``). ``ard_by_bic=True`` (the exact GP only, without ``ard``;
    in the spec only then) fits it both without and with input scales and keeps the one that the
    Bayesian information criterion prefers (``zonal.tabular.recipes.exact.choose_input_scales``;
    the trained spec holds the choice as ``ard``).
    """
    recipe = get_recipe(model)
    if likelihood not in LIKELIHOODS:
        raise ValueError(
            f"unknown likelihood {likelihood!r}; choose one of {', '.join(LIKELIHOODS)}"
        )
    if likelihood not in recipe.likelihoods:
        raise UnsupportedLikelihoodError(
            f"{model} {GAUSSIAN_ONLY.get(model, 'is Gaussian only')} and cannot train a "
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
    check_kernel(kernel)
    if kernel != "auto" and kernel not in recipe.kernels:
        raise ValueError(
            f"{model} uses the {' or '.join(recipe.kernels)} kernel (seed 000 sec. 5); "
            f"drop --kernel {kernel}"
        )
    if model == "exact" and num_inducing is not None:
        raise ValueError("the exact GP uses every training row: drop --num-inducing")
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
    start = {"initial_noise": initial_noise, "initial_outputscale": initial_outputscale}
    for name, value in start.items():
        if value is not None and (
            model not in START_MODELS or likelihood != "gaussian" or not 0 < value < math.inf
        ):
            raise ValueError(
                f"{name} is a positive start of a Gaussian {' or '.join(START_MODELS)}; got "
                f"{value!r} for {model} with a {likelihood} likelihood"
            )
    scales = _check_input_scales(initial_input_scales, input_dim, ard or ard_by_bic)
    if not network_early_stopping and model != "adgp":
        raise ValueError(f"network_early_stopping is for adgp's network stage, not {model}")
    if hyperpriors and model != "exact":
        raise ValueError(f"hyperpriors is for the exact GP's fit, not {model}'s: drop it")
    if ard_by_bic and model != "exact":
        raise ValueError(f"ard_by_bic (--ard-by-bic) is for the exact GP's fit, not {model}'s")
    if ard_by_bic and ard:
        raise ValueError(ARD_BY_BIC_WITH_ARD)
    return {
        **({} if network_early_stopping else {"network_early_stopping": False}),
        **({"hyperpriors": True} if hyperpriors else {}),
        **({"ard_by_bic": True} if ard_by_bic else {}),
        **{name: float(value) for name, value in start.items() if value is not None},
        **({"initial_input_scales": scales} if scales is not None else {}),
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
    } | (
        {"prior_mean": "constant"}
        if likelihood != "gaussian" and model in CONSTANT_MEAN_MODELS
        else {}
    )


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


def _check_input_scales(
    scales: Sequence[float] | None, input_dim: int, learned: bool
) -> list[float] | None:
    """``initial_input_scales`` as a list of D floats, checked: given with learned scales only
    (``learned``: ``ard``, or ``ard_by_bic``, whose fit with scales starts there), one positive
    finite number per input column."""
    if scales is None:
        return None
    if not learned:
        raise ValueError(
            "initial_input_scales start learned input scales: give them with ard or ard_by_bic"
        )
    values = [float(value) for value in scales]
    if len(values) != input_dim:
        raise ValueError(
            f"initial_input_scales has {len(values)} values for {input_dim} input columns"
        )
    wrong = [index for index, value in enumerate(values) if not 0 < value < math.inf]
    if wrong:
        raise ValueError(
            f"initial_input_scales must be positive and finite; column {wrong[0]} has "
            f"{values[wrong[0]]!r}"
        )
    return values


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
    plain ``KeyboardInterrupt``, unless the exact GP's ``ard_by_bic`` fit without input scales is
    done: it is then the fit kept, ``exact.choose_input_scales``)."""
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec["seed"])
        fit = get_recipe(spec["model"]).train(spec, x, y, control or TrainingControl())
    return fit, time.perf_counter() - started
