"""Fitting a user's table: read the target, hold out a validation split, train, choose, predict.

``fit_table`` reads the input and target columns of a table; ``fit_data`` (shared with
``zonal.sklearn``) does the rest:

1. **The task** (``zonal.targets.detect_target``): text labels or a few integer values are
   classes (Bernoulli or softmax likelihood), any other numeric target is regression.
2. **The validation split**: ``validation_fraction`` of the rows (stratified by class, seeded by
   ``seed``) is held out; inputs (and a regression target) are standardised with the training
   rows' statistics. Training keeps the state with the best validation log likelihood (early
   stopping, ``zonal.models.training.TrainingControl``: a stage ends after ``PATIENCE``
   evaluations without a gain, or at an evaluation that finds its best score older than
   ``PATIENCE_SHARE`` of the stage's time, so that a plateau ends it whatever its steps cost); the
   validation log likelihood then stacks or chooses the model (step 3).
3. **The model** (``model="auto"``): the candidates of ``zonal.recipes.auto_candidates`` for the
   training rows N and inputs D, trained one after the other within the wall-clock ``budget``
   (each candidate may use the time left divided by the candidates left; the one-pass SGPR comes
   first and uses little), then for regression the refinement of ``zonal.recipes.auto_refinement``
   (the harmonic SVGP with ARD, within a fifth of the budget, where the SGPR's validation score
   is close to the activated DGP's). Regression candidates are then **stacked** (``stack_fits``,
   ``zonal.models.stacking``; Yao et al. 2018): the model is the mixture sum_k w_k p_k(y | x)
   whose weights maximise the mean validation log density, which is one candidate when the
   weights pick one; its SGPR and SVGP components then condition on the validation rows too
   (``condition_on_all_rows``: closed forms at the learned hyperparameters). Classification
   candidates are compared by validation log likelihood (by their training objective per row when
   there is no validation split, as for regression). A named model trains alone. Under ``auto``
   the SGPR, SVGP and activated DGP candidates learn one scale per input column (ARD,
   ``zonal.recipes.ARD_MODELS``), except the SGPR when a deep candidate follows it
   (``auto_uses_ard``: the scales would cost the deep model a third of the budget).

``predict_table`` / ``predict_data`` answer new rows: the predictive mean, variance and interval in
the target's units (regression), or one probability column per class (``prob_<label>``) and the
predicted ``class``. Ctrl-C during training keeps the best model so far (``interrupted``; the
candidates are then chosen between, not stacked).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, cast

import numpy as np
import torch
from gpytorch.likelihoods import GaussianLikelihood

from zonal.datasets import Standardizer
from zonal.fit_options import DEFAULT_VALIDATION_FRACTION
from zonal.models import SGPR, SVGP, ZonalModel
from zonal.models.stacking import StackedModel, quantize_weights, stacking_weights
from zonal.models.training import TrainingControl
from zonal.recipes import (
    ARD_MODELS,
    AUTO_REFINEMENT_SHARE,
    OPTIMAL_Q_MAX_ENTRIES,
    RECIPES,
    Fit,
    TrainingInterrupted,
    auto_candidates,
    auto_refinement,
    get_recipe,
    resolve_spec,
    train,
)
from zonal.tabular import Table, TableError, name_list
from zonal.targets import (
    REGRESSION,
    LabelError,
    Target,
    detect_target,
    encode_labels,
    label_texts,
)

#: ``--model auto`` runs the Adam recipes for this many times their default steps (the budget
#: and early stopping end them sooner)
AUTO_STEP_FACTOR = 10
#: validation rows scored during training (all of them score the final models)
MONITORED_VALIDATION_ROWS = 2000
#: Monte Carlo draws of the latent GPs per component for softmax class probabilities
SOFTMAX_DRAWS = 256
#: rows per chunk when class probabilities are computed
PROBABILITY_CHUNK = 512
#: the model name of a stacked mixture of ``auto``'s regression candidates (``stack_fits``)
STACKED = "stacked"


@dataclass
class Trained:
    """A trained model on the standardised scale and how it got there."""

    spec: dict[str, Any]
    model: ZonalModel
    objective: float  # the bound (SGPR) or the ELBO (SVGP, DGP) per data point at the end
    seconds: float
    candidates: dict[str, float] = field(default_factory=dict)  # kernel -> bound, for "auto"


@dataclass
class TabularModel:
    """A trained model with what it needs to read and answer a user's table.

    ``validation`` holds the chosen model's validation metrics in the target's units
    (``log_likelihood`` per row, and ``mse`` or ``accuracy``); ``scores`` every candidate's, with
    its training ``seconds``.
    """

    trained: Trained
    feature_columns: tuple[str, ...]
    target_column: str
    x_scaler: Standardizer
    y_scaler: Standardizer
    num_rows: int
    source: str = ""
    target: Target = REGRESSION
    validation: dict[str, float] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    num_validation_rows: int = 0
    interrupted: bool = False

    @property
    def spec(self) -> dict[str, Any]:
        """The resolved options (concrete kernel)."""
        return self.trained.spec

    def describe(self) -> str:
        """One line: model, kernel, number of features (and layers for deep models); for a stacked
        model its weights and components."""
        return describe_model(self.spec, self.trained.model)


def describe_model(spec: dict[str, Any], model: ZonalModel) -> str:
    """``TabularModel.describe`` for a resolved ``spec`` and its model."""
    if spec["model"] == STACKED:
        members = cast(list[ZonalModel], model.components)
        parts = [f"{weight:.2f} {describe_model(component, member)}" for weight, component, member
                 in zip(spec["weights"], spec["components"], members, strict=True)]  # fmt: skip
        return f"stacked ({' + '.join(parts)})"
    features = getattr(model, "features", None)
    size = getattr(features, "num_inducing", spec["num_inducing"])
    kind = get_recipe(spec["model"]).feature_kind
    layers = getattr(model, "layers", None)
    depth = f", {len(layers)} layers" if layers is not None else ""
    return f"{spec['model']} ({spec['kernel']} kernel, {size} {kind}{depth})"


# ------------------------------------------------------------------------------------ tables


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


def table_target(table: Table, target: str, likelihood: str | None = None) -> Target:
    """The task of ``table``'s column ``target`` (``detect_target`` on its non-missing cells;
    ``likelihood`` forces it), with the reason, for the line that announces it."""
    table.require([target], "target")
    labels, missing = label_texts(table.cells[target])
    present = np.setdiff1d(np.arange(table.num_rows), missing)
    return detect_target(labels[present], likelihood, f"target {target!r}")


def fit_table(
    table: Table,
    target: str,
    *,
    features: Sequence[str] | None = None,
    likelihood: str | None = None,
    **options: Any,
) -> TabularModel:
    """Read the inputs and the target of ``table`` and fit them (``fit_data``, whose keyword
    options these are)."""
    columns = select_columns(table, target, features)
    labels, missing = label_texts(table.cells[target])
    kind = table_target(table, target, likelihood)
    if kind.is_classification:
        x = table.numeric(columns)  # [N, D]
        if len(missing):
            shown = ", ".join(table.row_label(int(row)) for row in missing[:5])
            raise LabelError(f"{table.path}: missing labels in the target {target!r} at {shown}")
        y: np.ndarray = labels
    else:
        values = table.numeric([*columns, target])  # [N, D + 1]: one report for every bad cell
        x, y = values[:, :-1], values[:, -1]  # [N, D], [N]
    return fit_data(x, y, feature_columns=columns, target_column=target, target=kind,
                    source=str(table.path), **options)  # fmt: skip


def fit_data(
    x: np.ndarray,
    y: np.ndarray,
    *,
    feature_columns: Sequence[str],
    target_column: str = "y",
    target: Target | None = None,
    likelihood: str | None = None,
    model: str = "auto",
    validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
    budget: float | None = None,
    progress: bool = False,
    source: str = "",
    seed: int = 0,
    **options: Any,
) -> TabularModel:
    """Fit inputs x [N, D] (float) and a target y [N] (numbers, or labels for classification):
    the module docstring's steps 1-3.

    ``target`` is the detected task (``detect_target`` runs on ``y`` when None, with
    ``likelihood``); ``model`` is ``"auto"`` or a recipe name; ``budget`` is wall-clock seconds
    for all training (None: unlimited); ``progress`` shows tqdm bars on stderr; ``options`` are
    those of ``zonal.recipes.resolve_spec`` (kernel, num_inducing, steps, learning_rate, ...).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(y) != len(x) or x.shape[1] != len(feature_columns):
        raise ValueError(
            f"x must be [N, D] with D = {len(feature_columns)} named columns and y [N]; got "
            f"x {x.shape}, y of length {len(y)}"
        )
    num_rows = len(x)
    if num_rows < 2:
        raise TableError(f"{source or 'the data'}: {num_rows} row; fitting needs at least 2")
    if model != "auto":
        get_recipe(model)
    if budget is not None and not budget > 0:
        raise ValueError(f"the budget must be a positive number of seconds, got {budget!r}")
    if target is None:
        texts, missing = label_texts(y)
        present = np.setdiff1d(np.arange(num_rows), missing)
        target = detect_target(texts[present], likelihood, "target")
    if target.is_classification:
        codes = encode_labels(target, label_texts(y)[0], "the target")
    else:
        codes = np.asarray(y, dtype=np.float64)
    train_rows, valid_rows = validation_split(codes, target, validation_fraction, seed)
    x_scaler = Standardizer.fit(x[train_rows])
    y_scaler = Standardizer(
        mean=cast(np.ndarray, np.float64(0.0)), std=cast(np.ndarray, np.float64(1.0))
    )
    if not target.is_classification:
        y_scaler = Standardizer.fit(codes[train_rows])
        with np.errstate(over="ignore"):
            variance_scale = np.asarray(y_scaler.std, dtype=np.float64) ** 2
        if not np.isfinite(variance_scale).all():
            raise TableError(
                f"{source or 'the data'}: the target {target_column!r} spreads over "
                f"{float(y_scaler.std):.3g} units: its predictive variances would overflow "
                "float64; rescale the column"
            )
    inputs = torch.from_numpy(x_scaler.transform(x))  # [N, D]
    targets = torch.from_numpy(codes if target.is_classification else y_scaler.transform(codes))
    split = Split(inputs[train_rows], targets[train_rows], inputs[valid_rows], targets[valid_rows])
    deadline = None if budget is None else time.monotonic() + budget
    names = auto_candidates(len(train_rows), x.shape[1], target.likelihood) if model == "auto" \
        else [model]  # fmt: skip
    fits, scores, interrupted = _train_candidates(names, split, target, deadline, progress,
                                                  automatic=model == "auto", seed=seed,
                                                  options=options)  # fmt: skip
    refinement = auto_refinement(scores, target.likelihood) if model == "auto" else None
    if refinement is not None and not interrupted:
        interrupted = _train_refinement(refinement, fits, scores, split, target, deadline,
                                        budget, progress, seed, options)  # fmt: skip
    chosen = max(fits, key=lambda name: _selection_key(scores[name]))
    fit = fits[chosen]
    stackable = not target.is_classification and len(valid_rows) > 0 and len(fits) > 1
    if model == "auto" and stackable and not interrupted:
        try:
            fit, scores = stack_fits(fits, scores, split, fallback=chosen)
            chosen = fit.spec["model"]
        except KeyboardInterrupt:  # while stacking: the chosen candidate is kept
            interrupted = True
    if not target.is_classification and len(valid_rows) and not interrupted:
        condition_on_all_rows(fit.model, split)  # a stack, or the one model chosen or named
    trained = Trained(fit.spec, fit.model, fit.objective,
                      sum(score["seconds"] for score in scores.values()), fit.candidates)  # fmt: skip
    scores = {name: _in_target_units(score, target, y_scaler) for name, score in scores.items()}
    validation = {key: value for key, value in scores[chosen].items()
                  if key not in ("seconds", "objective")}  # fmt: skip
    return TabularModel(trained, tuple(feature_columns), target_column, x_scaler, y_scaler,
                        num_rows, source, target, validation if len(valid_rows) else {},
                        scores, len(valid_rows), interrupted)  # fmt: skip


@dataclass(frozen=True)
class Split:
    """Standardised training and validation tensors (targets: values or class indices)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_valid: torch.Tensor
    y_valid: torch.Tensor


def validation_split(
    codes: np.ndarray, target: Target, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, validation rows): ``round(fraction * n)`` rows of each class (of all rows
    for regression) drawn with ``seed``, leaving every class at least one training row. A
    ``TableError`` when a positive fraction leaves no validation row."""
    if not (isinstance(fraction, int | float) and 0 <= fraction < 1):
        raise ValueError(f"the validation fraction must lie in [0, 1), got {fraction!r}")
    num_rows = len(codes)
    rng = np.random.default_rng(seed)
    groups = (
        [np.flatnonzero(codes == c) for c in range(len(target.classes))]
        if target.is_classification
        else [np.arange(num_rows)]
    )
    valid: list[np.ndarray] = []
    for rows in groups:
        count = min(round(fraction * len(rows)), len(rows) - 1)
        valid.append(rng.permutation(rows)[:count])
    valid_rows = np.sort(np.concatenate(valid)).astype(np.int64)
    if fraction > 0 and len(valid_rows) == 0:
        raise TableError(
            f"the validation split is empty: {fraction:g} of {num_rows} rows rounds to no row; "
            "use more rows, a larger --validation-fraction, or --validation-fraction 0 (no early "
            "stopping, the model chosen by its training objective)"
        )
    train_rows = np.setdiff1d(np.arange(num_rows), valid_rows)
    return train_rows, valid_rows


def _train_candidates(
    names: list[str],
    split: Split,
    target: Target,
    deadline: float | None,
    progress: bool,
    *,
    automatic: bool,
    seed: int,
    options: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, dict[str, float]], bool]:
    """Train each named recipe within its share of the time left; (fits, scores, interrupted).
    A failing candidate of ``auto`` is skipped while another succeeds; Ctrl-C keeps what was
    trained (the interrupted candidate in its best state) and stops."""
    fits: dict[str, Any] = {}
    scores: dict[str, dict[str, float]] = {}
    failures: list[ValueError] = []
    has_validation = len(split.y_valid) > 0
    monitored = (split.x_valid[:MONITORED_VALIDATION_ROWS],
                 split.y_valid[:MONITORED_VALIDATION_ROWS])  # fmt: skip
    for position, name in enumerate(names):
        spec = resolve_spec(split.x_train.shape[1], model=name, seed=seed,
                            likelihood=target.likelihood,
                            num_classes=len(target.classes) or None,
                            **_recipe_options(name, options, automatic, names))  # fmt: skip
        share_deadline = None
        if deadline is not None:
            share_deadline = time.monotonic() + (deadline - time.monotonic()) / (
                len(names) - position
            )
        control = TrainingControl(
            deadline=share_deadline,
            score=(lambda model: validation_score(cast(ZonalModel, model), target, *monitored))
            if has_validation
            else None,
            validation=monitored if has_validation else None,
            progress=progress,
            label=name,
        )
        started = time.perf_counter()
        stop = False
        try:
            try:
                fit, _ = train(spec, split.x_train, split.y_train, control)
            except TrainingInterrupted as interrupt:
                fit, stop = interrupt.fit, True
            score = {"seconds": time.perf_counter() - started, "objective": fit.objective}
            if has_validation:
                score.update(validation_metrics(fit.model, target, split.x_valid, split.y_valid))
        except KeyboardInterrupt:  # in SGPR's pass or L-BFGS, or while scoring: this one is lost
            if not fits:
                raise
            return fits, scores, True
        except ValueError as error:
            if not automatic:
                raise
            failures.append(error)
            continue
        fits[name], scores[name] = fit, score
        if stop:
            return fits, scores, True
    if not fits:
        raise failures[0]
    return fits, scores, False


def _train_refinement(
    name: str,
    fits: dict[str, Any],
    scores: dict[str, dict[str, float]],
    split: Split,
    target: Target,
    deadline: float | None,
    budget: float | None,
    progress: bool,
    seed: int,
    options: dict[str, Any],
) -> bool:
    """Train ``auto``'s refinement ``name`` (``zonal.recipes.auto_refinement``) within
    ``AUTO_REFINEMENT_SHARE`` of the budget and what is left of it, adding it to ``fits`` and
    ``scores``; skipped when less than half that share is left, or if it fails. Returns whether
    Ctrl-C interrupted it (what it trained until then is kept)."""
    if deadline is not None and budget is not None:
        share = AUTO_REFINEMENT_SHARE * budget
        if deadline - time.monotonic() < share / 2:
            return False
        deadline = min(deadline, time.monotonic() + share)
    try:
        more_fits, more_scores, interrupted = _train_candidates(
            [name], split, target, deadline, progress, automatic=True, seed=seed, options=options
        )
    except ValueError:  # a failed refinement leaves the candidates as they are
        return False
    except KeyboardInterrupt:  # while it was scored: the candidates are kept
        return True
    fits.update(more_fits)
    scores.update(more_scores)
    return interrupted


def stack_fits(
    fits: dict[str, Any], scores: dict[str, dict[str, float]], split: Split, *, fallback: str
) -> tuple[Any, dict[str, dict[str, float]]]:
    """Stack the regression candidates ``fits`` (``zonal.models.stacking``): the weights on the
    simplex that maximise the mean validation log density of the mixture, rounded to multiples of
    1 / ``WEIGHT_RESOLUTION``. Returns (the fit, the scores with each candidate's ``weight``): the
    single candidate when the weights pick one, else a ``StackedModel`` of the candidates of
    positive weight (spec ``{"model": "stacked", "components": [specs], "weights": [w]}``; its
    objective is the weighted mean of theirs, a summary, not a bound for the mixture) with a
    ``stacked`` entry in the scores (its validation metrics are optimistic: the weights were
    fitted to those rows). A candidate with a NaN density on any row is broken and gets weight
    0; when no candidate gives any row a positive density the ``fallback`` candidate is returned
    as it is."""
    started = time.perf_counter()
    names = list(fits)
    log_densities = torch.stack(
        [fits[name].model.log_predictive_density(split.x_valid, split.y_valid) for name in names],
        dim=1,
    )  # [n_valid, K]
    broken = log_densities.isnan().any(0)  # [K]
    log_densities = log_densities.masked_fill(broken, -math.inf)
    if not torch.isfinite(log_densities).any():
        return fits[fallback], scores
    weights = dict(zip(names, quantize_weights(stacking_weights(log_densities)).tolist(),
                       strict=True))  # fmt: skip
    scores = {name: {**scores[name], "weight": weights[name]} for name in names}
    kept = [name for name in names if weights[name] > 0]
    if len(kept) == 1:
        return fits[kept[0]], scores
    spec = {
        "model": STACKED,
        "input_dim": fits[kept[0]].spec["input_dim"],
        "likelihood": "gaussian",
        "num_classes": 0,
        "components": [dict(fits[name].spec) for name in kept],
        "weights": [weights[name] for name in kept],
    }
    model = StackedModel([fits[name].model for name in kept], spec["weights"])
    objective = sum(weights[name] * fits[name].objective for name in kept)
    candidates = {kernel: bound for name in kept for kernel, bound in fits[name].candidates.items()}
    columns = [names.index(name) for name in kept]
    log_weights = log_densities.new_tensor(spec["weights"]).log()  # [K']
    mixture = torch.logsumexp(log_densities[:, columns] + log_weights, dim=1)  # [n_valid]
    mean, _ = model.predict(split.x_valid)
    score = {
        "seconds": time.perf_counter() - started,
        "objective": objective,
        "log_likelihood": float(mixture.mean()),
        "mse": float(torch.mean((mean - split.y_valid) ** 2)),
    }
    return Fit(model, spec, objective, candidates), {**scores, STACKED: score}


@torch.no_grad()
def condition_on_all_rows(model: ZonalModel, split: Split) -> None:
    """Once the validation rows have chosen (and, under ``auto``, weighted) the candidates, let
    the shallow models' posteriors condition on them too, at the learned hyperparameters (closed
    forms, one pass), whichever model was chosen or named:
    an SGPR recomputes its statistics over the training and validation rows, a Gaussian SVGP sets
    q(u) to its optimum there (Titsias, 2009; when N x M fits ``OPTIMAL_Q_MAX_ENTRIES``); a
    stack does so for each component; other models (the deep ones) are left as they are. The
    validation metrics reported were measured before."""
    x = torch.cat([split.x_train, split.x_valid])  # [N, D]
    y = torch.cat([split.y_train, split.y_valid])  # [N]
    members = model.components if isinstance(model, StackedModel) else [model]
    for member in members:
        if isinstance(member, SGPR):
            member.fit_statistics(x, y)
        elif (
            isinstance(member, SVGP)
            and member.num_outputs == 1
            and isinstance(member.likelihood, GaussianLikelihood)
            and len(x) * member.features.num_inducing <= OPTIMAL_Q_MAX_ENTRIES
        ):
            member.set_optimal_variational_distribution(x, y)


def build_model(spec: dict[str, Any]) -> ZonalModel:
    """The untrained model a resolved ``spec`` describes (a recipe's ``build``, or a
    ``StackedModel`` of its components for a ``stacked`` spec), for loading a state dict into."""
    if spec["model"] == STACKED:
        return StackedModel([build_model(component) for component in spec["components"]],
                            spec["weights"])  # fmt: skip
    return get_recipe(spec["model"]).build(spec, None)


def _recipe_options(
    name: str, options: dict[str, Any], automatic: bool, candidates: Sequence[str] = ()
) -> dict[str, Any]:
    """The options a recipe takes: under ``auto`` a kernel or a layer count it does not use is
    left out, the Adam recipes run ``AUTO_STEP_FACTOR`` times their default steps, and ARD (input
    scales) is on for the recipes that have it unless ``ard=False``, except for the ``sgpr``
    fallback when a deep model is among the ``candidates`` (``auto_uses_ard``); a named model has
    ARD only with ``ard=True``."""
    recipe = RECIPES[name]
    chosen = {key: value for key, value in options.items() if value is not None}
    ard = chosen.pop("ard", None)
    chosen["ard"] = (
        bool(ard) if not automatic else ard is not False and auto_uses_ard(name, candidates)
    )
    if automatic:
        if chosen.get("kernel") not in (None, "auto", *recipe.kernels):
            chosen.pop("kernel")
        if not recipe.layered:
            chosen.pop("num_layers", None)
        if "steps" not in chosen and name != "sgpr":
            chosen["steps"] = AUTO_STEP_FACTOR * recipe.defaults["steps"]
    return chosen


def auto_uses_ard(name: str, candidates: Sequence[str]) -> bool:
    """Whether ``auto``'s candidate ``name`` learns input scales: the recipes of ``ARD_MODELS``
    (the activated DGP in its first layer), but not the one-pass ``sgpr`` when a deep (layered)
    recipe follows it.

    The SGPR's scales (L-BFGS on ``recipes.ARD_SUBSAMPLE`` rows, harmonic features re-evaluated
    at every step) took 10-35 s on the 5-21 input tables of ``benchmarks/fit_default.py``, up to
    half of the default budget, that the deep model (which won the validation choice there) uses
    to train longer. The activated DGP's scales slow its network steps by about a quarter; since
    early stopping ends a stage on a plateau (``zonal.models.training.PATIENCE_SHARE``) that time
    is there, and on the benchmark's splits 0-2 they lowered the activated DGP's mean test MSE
    (standardised) on compactiv from 0.0180 to 0.0171 and on grid-stability from 0.030 to 0.026,
    while white wine stayed within its run-to-run noise (0.606-0.619 without, 0.615 with)."""
    if name not in ARD_MODELS:
        return False
    return name != "sgpr" or not any(RECIPES[other].layered for other in candidates)


def _selection_key(score: dict[str, float]) -> float:
    """Validation log likelihood, or the training objective per row without a validation split."""
    value = score.get("log_likelihood", score["objective"])
    return value if math.isfinite(value) else -math.inf


# ------------------------------------------------------------------------------------ metrics


@torch.no_grad()
def class_probabilities(
    model: ZonalModel,
    x: torch.Tensor,
    target: Target,
    *,
    seed: int = 0,
    draws: int = SOFTMAX_DRAWS,
) -> torch.Tensor:
    """p(class | x) [N, C] under the model's predictive distribution.

    Bernoulli (probit): P(y = 1) = Phi(mu / sqrt(1 + sigma^2)), exact per Gaussian component;
    softmax: E softmax(f) with f ~ N(mu, diag sigma^2) (independent latent GPs) by ``draws``
    Monte Carlo draws f = mu + sigma eps, the same standard normal eps [draws, C] (from ``seed``)
    for every row, so that a row's probabilities do not depend on the other rows. Deep models
    average their mixture components (their inner-layer draws come from the model's
    ``posterior_seed``).
    """
    model.eval()
    x = model.check_inputs(x)
    generator = torch.Generator(device=x.device).manual_seed(seed)
    num_classes = len(target.classes)
    noise = torch.randn((draws, num_classes), generator=generator, dtype=x.dtype, device=x.device)
    chunks = []
    for start in range(0, len(x), PROBABILITY_CHUNK):
        distribution = model.latent_distribution(x[start : start + PROBABILITY_CHUNK])
        mean, variance = distribution.mean, distribution.variance.clamp(min=0)
        if target.likelihood == "bernoulli":  # mean [(S,) n]
            positive = torch.special.ndtr(mean / torch.sqrt(1 + variance))  # [(S,) n]
            probabilities = torch.stack([1 - positive, positive], dim=-1)  # [(S,) n, 2]
        else:  # mean [(S,) n, C]
            shared = noise.reshape(draws, *[1] * (mean.dim() - 1), num_classes)  # [K, 1.., C]
            logits = mean + variance.sqrt() * shared  # [K, (S,) n, C]
            probabilities = torch.softmax(logits, dim=-1).mean(0)  # [(S,) n, C]
        if model._is_ensemble:
            probabilities = probabilities.mean(0)  # [n, C]
        chunks.append(probabilities)
    return torch.cat(chunks)  # [N, C]


@torch.no_grad()
def validation_score(
    model: ZonalModel, target: Target, x_valid: torch.Tensor, y_valid: torch.Tensor
) -> float:
    """Mean log predictive density of the validation rows (standardised units): what early
    stopping and the model choice maximise."""
    if target.is_classification:
        probabilities = class_probabilities(model, x_valid, target)  # [N, C]
        return _mean_log_probability(probabilities, y_valid)
    return float(model.log_predictive_density(x_valid, y_valid).mean())


def _mean_log_probability(probabilities: torch.Tensor, labels: torch.Tensor) -> float:
    """mean_i log p_i(y_i) for probabilities [N, C] and class indices [N]."""
    picked = probabilities.gather(-1, labels.long().unsqueeze(-1)).squeeze(-1)  # [N]
    return float(torch.log(picked).mean())


@torch.no_grad()
def validation_metrics(
    model: ZonalModel, target: Target, x_valid: torch.Tensor, y_valid: torch.Tensor
) -> dict[str, float]:
    """``log_likelihood`` (mean log p(y | x)) and ``mse`` (regression, of the predictive mean) or
    ``accuracy`` (classification, of the most probable class), in standardised units."""
    if target.is_classification:
        probabilities = class_probabilities(model, x_valid, target)  # [N, C]
        accuracy = (probabilities.argmax(-1) == y_valid).double().mean()
        return {"log_likelihood": _mean_log_probability(probabilities, y_valid),
                "accuracy": float(accuracy)}  # fmt: skip
    mean, _ = model.predict(x_valid)
    return {
        "log_likelihood": validation_score(model, target, x_valid, y_valid),
        "mse": float(torch.mean((mean - y_valid) ** 2)),
    }


def _in_target_units(
    score: dict[str, float], target: Target, y_scaler: Standardizer
) -> dict[str, float]:
    """Regression metrics back in the target's units: mse * std^2, log likelihood - log std."""
    if target.is_classification:
        return dict(score)
    scale = float(y_scaler.std)
    converted = dict(score)
    if "mse" in score:
        converted["mse"] = score["mse"] * scale**2
        converted["log_likelihood"] = score["log_likelihood"] - math.log(scale)
    return converted


# ------------------------------------------------------------------------------------ predict


def predict_table(
    fitted: TabularModel,
    table: Table,
    *,
    include_noise: bool = True,
    level: float = 0.95,
    samples: int | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """``predict_data`` on the model's input columns of ``table``; for a classifier, a target
    column in the table must hold only classes the model knows (a ``LabelError`` otherwise)."""
    missing = [name for name in fitted.feature_columns if name not in table.cells]
    if missing:
        raise TableError(
            f"{table.path}: the model was fitted on {len(fitted.feature_columns)} columns "
            f"({name_list(fitted.feature_columns)}) but this table lacks {len(missing)} of them "
            f"({name_list(missing)}); its {len(table.columns)} columns are "
            f"{name_list(table.columns)}"
        )
    if fitted.target.is_classification and fitted.target_column in table.cells:
        labels, absent = label_texts(table.cells[fitted.target_column])
        present = np.setdiff1d(np.arange(table.num_rows), absent)
        encode_labels(fitted.target, labels[present],
                      f"{table.path}: the column {fitted.target_column!r}")  # fmt: skip
    x = table.numeric(fitted.feature_columns)
    return predict_data(fitted, x, include_noise=include_noise, level=level, samples=samples,
                        seed=seed)  # fmt: skip


def predict_data(
    fitted: TabularModel,
    x: np.ndarray,
    *,
    include_noise: bool = True,
    level: float = 0.95,
    samples: int | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Predictions for inputs x [N, D] in the model's column order.

    Regression: ``mean``, ``variance``, ``lower``, ``upper`` in the target's units; the variance
    is that of a new observation (``include_noise``) or of the latent function, the interval the
    central ``level`` interval of the Gaussian predictive (mean +- 1.96 sd at 95%).
    Classification: ``prob_<label>`` per class (``class_probabilities``) and the most probable
    ``class``. A deep model averages ``samples`` draws of its inner layers (default: its own
    number) from ``seed``; softmax probabilities draw from ``seed`` too.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    model = fitted.trained.model
    if model._is_ensemble and getattr(model, "draws_samples", True):  # a deep model's draws
        setattr(model, "posterior_seed", seed)  # noqa: B010 (a plain attribute, not a Module)
        if samples is not None:
            if samples < 1:
                raise TableError(f"--samples must be a positive integer, got {samples}")
            setattr(model, "num_posterior_samples", samples)  # noqa: B010
    elif samples is not None:
        raise TableError(f"{fitted.spec['model']} draws no samples: drop --samples")
    inputs = torch.from_numpy(fitted.x_scaler.transform(np.asarray(x, dtype=np.float64)))
    if fitted.target.is_classification:
        probabilities = class_probabilities(model, inputs, fitted.target, seed=seed).cpu().numpy()
        columns = {f"prob_{label}": probabilities[:, c]
                   for c, label in enumerate(fitted.target.classes)}  # fmt: skip
        columns["class"] = np.array(fitted.target.classes)[probabilities.argmax(-1)]
        return columns
    latent_mean, latent_variance = model.predict(inputs, include_noise=include_noise)
    mean = fitted.y_scaler.inverse_transform(latent_mean.cpu().numpy())
    variance = fitted.y_scaler.inverse_transform_variance(latent_variance.cpu().numpy())
    half_width = NormalDist().inv_cdf(0.5 + level / 2) * np.sqrt(variance)
    return {"mean": mean, "variance": variance, "lower": mean - half_width,
            "upper": mean + half_width}  # fmt: skip
