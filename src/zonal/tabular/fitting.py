"""Fitting a user's table: read the target, hold out a validation split, train, choose, predict.

``fit_table`` reads the input and target columns of a table; ``fit_data`` (shared with
``zonal.tabular.sklearn``) does the rest:

1. **The task** (``zonal.tabular.targets.detect_target``): text labels or a few integer values are
   classes (Bernoulli or softmax likelihood), any other numeric target is regression.
2. **The validation split**: ``validation_fraction`` of the rows (stratified by class, seeded by
   ``seed``) is held out; inputs (and a regression target) are standardised with the training
   rows' statistics. Training keeps the state with the best validation log likelihood (early
   stopping, ``zonal.models.training.TrainingControl``: a stage ends after ``PATIENCE``
   evaluations without a gain, or at an evaluation that finds its best score older than
   ``PATIENCE_SHARE`` of the stage's time, so that a plateau ends it whatever its steps cost;
   under ``auto`` an SVGP classifier's stages run to their end, keeping the best state:
   ``zonal.tabular.candidates.stops_early``); the validation log likelihood then stacks or
   chooses the model (step 3).
3. **The model** (``model="auto"``): the candidates of ``zonal.tabular.recipes.auto_candidates`` for the
   training rows N and inputs D, trained one after the other within the wall-clock ``budget``
   (each candidate may use the time left divided by the candidates left; the one-pass SGPR comes
   first and uses little; the exact GP follows it up to 5,000 rows (``auto_offers_exact``) when,
   at its turn, its fit is predicted to take at most the share it then gets:
   ``zonal.tabular.candidates.fits_its_share``), then for regression the refinement of
   ``zonal.tabular.recipes.auto_refinement``
   (the harmonic SVGP with ARD, within a fifth of the budget, where the SGPR's validation score
   is close to the activated DGP's). The candidates are then **stacked** (``stack_fits``,
   ``zonal.models.stacking``; Yao et al. 2018): the model is the mixture sum_k w_k p_k(y | x)
   (for classifiers, of their class probabilities) whose weights maximise the mean validation
   log density, averaged over Bayesian-bootstrap replicates of the scoring rows
   (``STACKING_DRAWS``; for classifiers the posterior mean of the weights under a uniform
   Dirichlet prior), which is one candidate when the weights pick one; its SGPR, exact GP and
   SVGP components then condition on the validation rows too (``condition_on_all_rows``, at
   the learned hyperparameters: closed forms for regression, natural-gradient steps to the
   ELBO's optimum q(u) for an SVGP classifier). Without validation
   rows the candidates are compared by their training objective per row. A named model trains
   alone. Under ``auto``
   the SGPR, SVGP and activated DGP candidates learn one scale per input column (ARD,
   ``zonal.tabular.recipes.ARD_MODELS``), except the SGPR when a deep candidate follows it
   (``auto_uses_ard``: the scales would cost the deep model a third of the budget); for a
   regression of more than 500 training rows they start where a relevance screen puts them
   (``zonal.tabular.relevance``: the slopes of an RBF-ARD exact GP fitted to 500 of the training
   rows, within the budget; ``zonal.tabular.candidates.screened_start``), else at 1. On at most
   128 training rows its exact GP is fitted by type-II MAP (``zonal.models.Hyperpriors``) and
   learns input scales only where the Bayesian information criterion prefers them
   (``zonal.tabular.candidates.small_table_options``; session 40, docs/fit_evidence.md).

``predict_table`` / ``predict_data`` answer new rows: the predictive mean, variance and interval in
the target's units (regression), or one probability column per class (``prob_<label>``) and the
predicted ``class``. Ctrl-C during training keeps the best model so far (``interrupted``; the
candidates are then chosen between, not stacked).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch

from zonal.datasets import Standardizer
from zonal.tabular.candidates import (
    screened_start,
    small_table_options,
    train_candidates,
    train_refinement,
)
from zonal.tabular.checks import (
    check_magnitudes,
    check_regression_target,
    constant_columns,
    warn_about_few_scoring_rows,
    warn_about_inputs,
    warn_about_row_numbers,
)
from zonal.tabular.diagnostics import FitDiagnostics
from zonal.tabular.metrics import in_target_units, selection_key
from zonal.tabular.model import TabularModel, Trained
from zonal.tabular.options import (
    AUTO_BUDGET,
    DEFAULT_VALIDATION_FRACTION,
    default_budget,
)
from zonal.tabular.recipes import (
    auto_candidates,
    auto_refinement,
    exact_fits_budget,
    get_recipe,
)
from zonal.tabular.recipes.registry import ARD_BY_BIC_WITH_ARD, check_kernel
from zonal.tabular.split import Split, validation_roles, validation_split
from zonal.tabular.stacking import condition_on_all_rows, stack_fits
from zonal.tabular.tables import Table, TableError
from zonal.tabular.targets import (
    LabelError,
    Target,
    detect_target,
    encode_labels,
    label_texts,
)


def select_columns(
    table: Table, target: str, features: Sequence[str] | None = None
) -> tuple[str, ...]:
    """The input columns: ``features`` if given, else every column but ``target`` (the table's
    own names, ``Table.column_named``)."""
    (target,) = table.require([target], "target")
    if features is None:
        columns = tuple(name for name in table.columns if name != target)
    else:
        columns = table.require(features, "input")
        if target in columns:
            raise TableError(f"the target column {target!r} is also listed as an input column")
        if len(set(columns)) != len(columns):
            raise TableError(f"input columns listed twice: {', '.join(columns)}")
    if not columns:
        raise TableError(f"{table.path}: no input columns besides the target {target!r}")
    return columns


def table_target(table: Table, target: str, likelihood: str | None = None) -> Target:
    """The task of ``table``'s column ``target`` (``detect_target`` on its non-missing cells;
    ``likelihood`` forces it), with the reason, for the line that announces it."""
    (target,) = table.require([target], "target")
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
    (target,) = table.require([target], "target")
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


def budget_seconds(budget: float | str | None, target: Target, num_rows: int) -> float | None:
    """``fit_data``'s wall-clock seconds: ``budget`` itself (None: unlimited), or for ``"auto"``
    the ``default_budget`` of the target and the fit's ``num_rows`` rows (regression: 30 s from
    1,024 rows, less below; classification: 45 s per latent function)."""
    if isinstance(budget, str):
        if budget != AUTO_BUDGET:
            raise ValueError(f"the budget must be seconds, {AUTO_BUDGET!r} or None, got {budget!r}")
        return default_budget(target.likelihood, len(target.classes), num_rows)
    if budget is not None and not budget > 0:
        raise ValueError(f"the budget must be a positive number of seconds, got {budget!r}")
    return budget


def auto_offers_exact(x: torch.Tensor, target: Target) -> bool:
    """Whether the exact GP is among ``auto``'s candidates on training rows x [N, D]: for
    regression, up to ``EXACT_MAX_ROWS`` rows. Whether it then trains is decided at its turn,
    against the share of the budget it would get (``zonal.tabular.candidates.train_candidates``,
    ``exact_fits_budget``)."""
    return not target.is_classification and exact_fits_budget(x, None)


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
    budget: float | str | None = None,
    progress: bool = False,
    source: str = "",
    seed: int = 0,
    diagnostics: FitDiagnostics | None = None,
    **options: Any,
) -> TabularModel:
    """Fit inputs x [N, D] (float) and a target y [N] (numbers, or labels for classification):
    the module docstring's steps 1-3.

    ``target`` is the detected task (``detect_target`` runs on ``y`` when None, with
    ``likelihood``); ``model`` is ``"auto"`` or a recipe name; ``budget`` is wall-clock seconds
    for all training (None: unlimited; ``"auto"``: ``default_budget`` of the target and the
    rows, ``budget_seconds``); ``progress`` shows tqdm bars on stderr; ``options`` are
    those of ``zonal.tabular.recipes.resolve_spec`` (kernel, num_inducing, steps, learning_rate, ...).
    ``diagnostics`` (``model="auto"`` only; ``zonal.tabular.diagnostics``) receives every model
    trained, and those ``auto``'s rules left out, trained after the fit and outside its budget.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(y) != len(x) or x.shape[1] != len(feature_columns):
        raise ValueError(
            f"x must be [N, D] with D = {len(feature_columns)} named columns and y [N]; got "
            f"x {x.shape}, y of length {len(y)}"
        )
    check_magnitudes(x, feature_columns, source)
    num_rows = len(x)
    if num_rows < 2:
        raise TableError(f"{source or 'the data'}: {num_rows} row; fitting needs at least 2")
    if options.get("kernel") is not None:  # auto leaves out a kernel a recipe lacks: a typo first
        check_kernel(options["kernel"])
    if options.get("ard_by_bic") and options.get("ard") is not None:  # before anything trains
        raise ValueError(ARD_BY_BIC_WITH_ARD)
    if model != "auto":
        get_recipe(model)
        if diagnostics is not None:
            raise ValueError("diagnostics record the rules of model='auto' only")
    if target is None:
        texts, missing = label_texts(y)
        present = np.setdiff1d(np.arange(num_rows), missing)
        target = detect_target(texts[present], likelihood, "target")
    seconds = budget_seconds(budget, target, num_rows)
    if target.is_classification:
        codes = encode_labels(target, label_texts(y)[0], "the target")
    else:
        codes = np.asarray(y, dtype=np.float64)
        check_regression_target(codes, target_column, source)
    train_rows, valid_rows = validation_split(codes, target, validation_fraction, seed)
    constant = constant_columns(x[train_rows])  # [D]
    warn_about_inputs(feature_columns, constant, num_rows, source)
    if constant.any() and len(train_rows):  # the validation rows read at the training value,
        x = x.copy()  # as predictions will be (``predict.at_training_constants``)
        x[:, constant] = x[train_rows[0], constant]
    warn_about_row_numbers(x, feature_columns, source)
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
    deadline = None if seconds is None else time.monotonic() + seconds
    names = [model] if model != "auto" else \
        auto_candidates(len(train_rows), x.shape[1], target.likelihood,
                        exact=auto_offers_exact(split.x_train, target))  # fmt: skip
    scoring = validation_roles(split, model == "auto")[1]  # the rows that score the fits
    if model == "auto":
        if not target.is_classification:  # classifier stacks take the posterior weights
            warn_about_few_scoring_rows(len(scoring.y_valid), names, source)
        options = small_table_options(
            names, split, screened_start(names, split, target, seed, options)
        )
    fits, scores, interrupted = train_candidates(names, split, target, deadline, progress,
                                                  automatic=model == "auto", seed=seed,
                                                  options=options)  # fmt: skip
    time_left = None if deadline is None else deadline - time.monotonic()
    refinement = auto_refinement(scores, target.likelihood) if model == "auto" else None
    if refinement is not None and not interrupted:
        interrupted = train_refinement(refinement, fits, scores, split, target, deadline,
                                        seconds, progress, seed, options)  # fmt: skip
    chosen = max(fits, key=lambda name: selection_key(scores[name]))
    fit = fits[chosen]
    stackable = len(scoring.y_valid) > 0 and len(fits) > 1
    if model == "auto" and stackable and not interrupted:
        try:
            fit, scores = stack_fits(fits, scores, scoring, target, fallback=chosen, seed=seed)
            chosen = fit.spec["model"]
        except KeyboardInterrupt:  # while stacking: the chosen candidate is kept
            interrupted = True
    if diagnostics is not None and not interrupted:
        diagnostics.record(fits, scores, split, target, candidates=names, budget=seconds,
                           time_left=time_left, seed=seed)  # fmt: skip
        diagnostics.train_counterfactuals(split, seed, options)
    if len(valid_rows) and not interrupted:
        condition_on_all_rows(fit.model, split)  # a stack, or the one model chosen or named
        if diagnostics is not None:
            diagnostics.condition_all(split)
    trained = Trained(fit.spec, fit.model, fit.objective,
                      sum(score["seconds"] for score in scores.values()), fit.candidates)  # fmt: skip
    scores = {name: in_target_units(score, target, y_scaler) for name, score in scores.items()}
    validation = {key: value for key, value in scores[chosen].items()
                  if key not in ("seconds", "objective", "weight")}  # fmt: skip
    return TabularModel(trained, tuple(feature_columns), target_column, x_scaler, y_scaler,
                        num_rows, source, target, validation if len(valid_rows) else {},
                        scores, len(valid_rows), interrupted, len(scoring.y_valid),
                        tuple(name for name, flag in zip(feature_columns, constant, strict=True)
                              if flag))  # fmt: skip
