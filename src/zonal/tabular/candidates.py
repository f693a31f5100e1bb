"""Training the candidate recipes of ``zonal fit`` one after the other within the budget, each
within its share of the time left, and ``auto``'s refinement.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from zonal.models import ZonalModel
from zonal.models.training import TrainingControl
from zonal.tabular.metrics import validation_metrics, validation_score
from zonal.tabular.recipes import (
    ARD_MODELS,
    AUTO_REFINEMENT_SHARE,
    EXACT_ONLY_OPTIONS,
    RECIPES,
    START_MODELS,
    Fit,
    TrainingInterrupted,
    exact_fits_budget,
    resolve_spec,
    train,
)
from zonal.tabular.relevance import SCREEN_ROWS, screened_input_scales
from zonal.tabular.split import Split, validation_roles
from zonal.tabular.targets import (
    Target,
)

#: ``--model auto`` runs the Adam recipes for this many times their default steps (the budget
#: and early stopping end them sooner); the L-BFGS recipes (``Recipe.lbfgs``) keep theirs, which
#: they end on their own at convergence: the exact GP given ten times its 200 iterations ran to
#: the deadline of its share on servo (150 rows: 15 s where 200 iterations took 6.5-9 s) to the
#: same log p(y) / N, to 4 digits, and the same test MSE on 3 splits)
AUTO_STEP_FACTOR = 10


def train_candidates(
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
    monitored, scoring = validation_roles(split, automatic)
    has_validation = len(scoring.y_valid) > 0
    watch: Callable[[Any], float] | None = None
    if monitored is not None:
        watched_x, watched_y = monitored

        def watch(model: Any) -> float:
            return validation_score(cast(ZonalModel, model), target, watched_x, watched_y)

    for position, name in enumerate(names):
        spec = resolve_spec(split.x_train.shape[1], model=name, seed=seed,
                            likelihood=target.likelihood,
                            num_classes=len(target.classes) or None,
                            **recipe_options(name, options, automatic, names),
                            **(start_options(name, fits, target) if automatic else {}),
                            **(network_options(name, names, target) if automatic else {}))  # fmt: skip
        share_deadline = None
        if deadline is not None:
            share_deadline = time.monotonic() + (deadline - time.monotonic()) / (
                len(names) - position
            )
        try:
            admitted = not automatic or fits_its_share(name, split, share_deadline)
        except KeyboardInterrupt:  # while the exact GP's size rule timed it: keep what was trained
            if not fits:
                raise
            return fits, scores, True
        if not admitted:
            continue  # its time goes to the candidates after it
        control = TrainingControl(
            deadline=share_deadline,
            score=watch,
            validation=monitored,
            progress=progress,
            label=name,
            early_stopping=not automatic or stops_early(name, target),
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
                score.update(validation_metrics(fit.model, target, scoring.x_valid,
                                                scoring.y_valid))  # fmt: skip
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


def stops_early(name: str, target: Target) -> bool:
    """Whether ``auto``'s candidate ``name`` ends a training stage on a validation plateau (the
    patience of ``zonal.models.training.TrainingControl``): every candidate but an SVGP
    classifier (``START_MODELS`` with a Bernoulli or softmax likelihood), whose stages run to
    the end of their share of the budget or of their steps and keep their best validated state.

    Such a classifier's q(u) is replaced at the end by the ELBO's optimum on all rows
    (``zonal.tabular.stacking.condition_on_all_rows``), and on a few hundred watching rows the
    patience ended it on noise: ``svgp-points`` on banana's splits 3 and 7 (239 watching rows,
    a 15 s share) stopped after 11-13 s at test log likelihoods per row of -0.2532 and -0.2275,
    and ran to the end of the share, keeping its best validated state, to -0.2496 and -0.2184
    (docs/fit_evidence.md, session 36: adopted by a rule declared before its run; on the 9 development
    classification tables the mean test log likelihood rose 0.0013 nats a row and the accuracy
    0.0008, most on the tables of thousands of rows)."""
    return not (name in START_MODELS and target.is_classification)


def fits_its_share(name: str, split: Split, share_deadline: float | None) -> bool:
    """Whether ``auto`` trains candidate ``name`` now, with the time to ``share_deadline`` (None:
    no budget): the exact GP when its fit is predicted to take at most that
    (``exact_fits_budget``, timed on the table at its turn, so that the share is the one the
    candidate loop gives it: what the one-pass SGPR before it left, divided among the
    candidates left); every other recipe always."""
    if name != "exact" or share_deadline is None:
        return True
    return exact_fits_budget(split.x_train, max(0.0, share_deadline - time.monotonic()))


def train_refinement(
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
    """Train ``auto``'s refinement ``name`` (``zonal.tabular.recipes.auto_refinement``) within
    ``AUTO_REFINEMENT_SHARE`` of the budget and what is left of it, adding it to ``fits`` and
    ``scores``; skipped when less than half that share is left, or if it fails. Returns whether
    Ctrl-C interrupted it (what it trained until then is kept)."""
    if deadline is not None and budget is not None:
        share = AUTO_REFINEMENT_SHARE * budget
        if deadline - time.monotonic() < share / 2:
            return False
        deadline = min(deadline, time.monotonic() + share)
    try:
        more_fits, more_scores, interrupted = train_candidates(
            [name],
            split,
            target,
            deadline,
            progress,
            automatic=True,
            seed=seed,
            options={**options, **start_options(name, fits, target)},
        )
    except ValueError:  # a failed refinement leaves the candidates as they are
        return False
    except KeyboardInterrupt:  # while it was scored: the candidates are kept
        return True
    fits.update(more_fits)
    scores.update(more_scores)
    return interrupted


def start_options(name: str, fits: dict[str, Fit], target: Target) -> dict[str, Any]:
    """Where ``auto``'s SVGP candidate ``name`` starts: at the noise and kernel variance of the
    SGPR trained before it (the ``initial_noise`` and ``initial_outputscale`` of
    ``zonal.tabular.recipes.resolve_spec``), for regression; nothing when no SGPR was trained.

    The SGPR's L-BFGS on the collapsed bound finds them in a few seconds, while Adam from the
    defaults (noise 0.1, variance 1) gets 50-100 steps in the refinement's share of the default
    budget (about 0.12 s a step with 512 harmonic features) and early stopping kept the SVGP
    near its start: on a 16-input table of 2,000 rows whose SGPR reached noise 0.01 its noise
    stayed at 0.13, a validation log likelihood per row of -0.05 against the SGPR's 1.09."""
    sgpr = fits.get("sgpr")
    if name not in START_MODELS or sgpr is None or target.is_classification:
        return {}
    model: Any = sgpr.model
    return {"initial_noise": float(model.likelihood.noise.detach()),
            "initial_outputscale": float(model.kernel.outputscale.detach())}  # fmt: skip


def network_options(name: str, candidates: Sequence[str], target: Target) -> dict[str, Any]:
    """``network_early_stopping=False`` for ``auto``'s activated DGP in a regression where no
    exact GP is among the ``candidates`` (more than ``EXACT_MAX_ROWS`` training rows): there the
    activated DGP carries the fit alone, and its network's first phase runs to the end of its
    time share instead of stopping on a plateau (docs/fit_evidence.md, session 32: on puma32h split 0 the
    network's validation loss sat at 0.060 for 560 steps, then fell to 0.037; the patience had
    ended it on the plateau, test MSE 0.059 against 0.035 without it). Nothing otherwise."""
    if name != "adgp" or target.is_classification or "exact" in candidates:
        return {}
    return {"network_early_stopping": False}


def screened_start(
    names: Sequence[str], split: Split, target: Target, seed: int, options: dict[str, Any]
) -> dict[str, Any]:
    """``options`` with ``initial_input_scales``, the start of the input scales that ``auto``'s
    regression candidates learn (``auto_uses_ard``), from the relevance screen on the training
    rows (``zonal.tabular.relevance.screened_input_scales``), for a regression of more than
    ``SCREEN_ROWS`` training rows; as they are otherwise, when no candidate learns scales,
    ``ard=False`` turns them off, or the screen fails.

    The rules of docs/fit_evidence.md (session 30, before and after on the development suite): on the
    10 regression tables whose candidates train on more than ``SCREEN_ROWS`` rows the screen
    lowered the test MSE (geometric mean 0.981 of before, TLL +0.006) and raised it on the 10
    others (1.150: servo, cpu-performance and yacht, of 135-249 such rows, where the screen
    reads every row the exact GP then trains on); the held-out regression tables confirmed the
    threshold (0.948, TLL +0.013). On the two-class tables the screen lowered the TLL
    (-0.2159 -> -0.2235) and the accuracy (0.9241 -> 0.9168), so classifiers start at 1."""
    learned = options.get("ard") is not False and any(auto_uses_ard(name, names) for name in names)
    if target.is_classification or len(split.x_train) <= SCREEN_ROWS or not learned:
        return options
    scales = screened_input_scales(split.x_train, split.y_train, seed=seed)
    return options if scales is None else {**options, "initial_input_scales": scales}


#: ``auto``'s exact GP is fitted by MAP with input scales by BIC on at most this many training
#: rows (``small_table_options``): the fewest inducing features of its sparse candidates (the
#: activated DGP's 128 per layer), below which they save nothing over the exact GP
SMALL_TABLE_ROWS = 128


def small_table_options(
    names: Sequence[str], split: Split, options: dict[str, Any]
) -> dict[str, Any]:
    """``options`` with ``hyperpriors`` and ``ard_by_bic`` on (unless given: ``hyperpriors=False``
    or ``ard`` keep theirs) when ``auto``'s candidates include the exact GP and train on at most
    ``SMALL_TABLE_ROWS`` rows: its input scales fitted by maximum likelihood to a few dozen rows
    overfit (docs/fit_evidence.md, sessions 39-40: on 10-40 rows half of ``auto``'s units below a test log
    likelihood of -5 had chosen that exact GP); the other candidates and the stack are as
    above that size (``recipe_options`` gives the two options to the exact GP alone)."""
    if "exact" not in names or len(split.x_train) > SMALL_TABLE_ROWS:
        return options
    small = {"hyperpriors": True, **({"ard_by_bic": True} if options.get("ard") is None else {})}
    return {**small, **{key: value for key, value in options.items() if value is not None}}


def recipe_options(
    name: str, options: dict[str, Any], automatic: bool, candidates: Sequence[str] = ()
) -> dict[str, Any]:
    """The options a recipe takes: under ``auto`` a kernel, a layer count or a feature budget it
    does not use is left out (and a start of input scales, ``initial_input_scales``, for a
    recipe without them), the Adam recipes run ``AUTO_STEP_FACTOR`` times their default
    steps, ``hyperpriors`` and ``ard_by_bic`` go to the exact GP alone (which with
    ``ard_by_bic`` and no ``ard`` learns input scales where the BIC prefers them), and ARD
    (input scales) is on for the recipes that have it unless ``ard=False``, except for the
    ``sgpr`` fallback when a deep model is among the ``candidates`` (``auto_uses_ard``); a
    named model has ARD only with ``ard=True``."""
    recipe = RECIPES[name]
    chosen = {key: value for key, value in options.items() if value is not None}
    ard = chosen.pop("ard", None)
    chosen["ard"] = (
        bool(ard) if not automatic else ard is not False and auto_uses_ard(name, candidates)
    )
    if not chosen["ard"] and not (name == "exact" and chosen.get("ard_by_bic")):
        chosen.pop("initial_input_scales", None)  # a start of scales the recipe does not learn
    if automatic:
        if chosen.get("kernel") not in (None, "auto", *recipe.kernels):
            chosen.pop("kernel")
        if not recipe.layered:
            chosen.pop("num_layers", None)
        if name == "exact":  # every training row is its inducing point
            chosen.pop("num_inducing", None)
            if chosen.get("ard_by_bic") and ard is None:  # the BIC decides the scales
                chosen["ard"] = False  # its fit with scales starts at initial_input_scales
        else:
            for option in EXACT_ONLY_OPTIONS:
                chosen.pop(option, None)
        if "steps" not in chosen and not recipe.lbfgs:
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
