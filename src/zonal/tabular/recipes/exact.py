"""The ``exact`` recipe: exact GP regression with a zonal kernel on the sphere embedding
(``zonal.models.ExactZonalGP``), L-BFGS on the exact marginal likelihood (type-II maximum
likelihood; with ``hyperpriors: True`` in the spec, type-II MAP under the log-normal priors of
``zonal.models.hyperpriors``: ``auto``'s exact GP on at most 128 training rows, by session 40's
declared check, ``zonal.tabular.candidates.small_table_options``; docs/fit_evidence.md). Every training
row is its own inducing point: O(N^3) time per evaluation, for tables of a few thousand rows,
where it carries neither the harmonic features' truncation nor a variational gap. Gaussian
only.

``kernel="auto"`` stacks kernel families by their leave-one-out predictive densities (Yao et
al. 2018, with the exact GP's closed-form LOO of Rasmussen & Williams 2006, eqs. 5.10-5.12):
each family of ``EXACT_AUTO_KERNELS`` is fitted by type-II maximum likelihood (or MAP), and the mixture
sum_k w_k p_k(y | x) takes the weights w on the simplex that maximise the mean LOO log density
``sum_i log sum_k w_k p_k(y_i | y_{-i}) / N`` (``zonal.models.stacking.stacking_weights``, rounded to
1/20). Families of weight 0 are dropped; one family left is that exact GP, more a
``StackedModel`` of them (spec ``kernel: "stacked"`` with its ``kernels`` and
``kernel_weights``). Up to ``EXACT_PROBE_ROWS`` rows every family is fitted on all rows; above,
on the same random subsample of that size (``EXACT_EVALUATIONS`` L-BFGS iterations), whose LOO
weights choose the families that continue on all rows from the hyperparameters they reached,
and the LOO densities of all rows weight those (``stack_on_subsample``).

With ``ard_by_bic: True`` in the spec (``choose_input_scales``) the recipe fits the exact GP twice,
without learned input scales and with them (ARD), and keeps the fit whose best kernel family has
the larger Bayesian information criterion log p(y | theta_hat) - (k / 2) log N (Schwarz 1978):
the D input scales cost (D / 2) log N nats (``zonal fit --ard-by-bic``): on a few dozen rows, D
scales fitted by maximum likelihood or MAP overfit. ``auto`` sets it, with MAP, for its exact GP
on at most 128 training rows (``zonal.tabular.candidates.small_table_options``; adopted in
session 40 by a rule declared before its run, docs/fit_evidence.md).

``exact_fits_budget`` is ``auto``'s size rule for it: the exact GP is a candidate when its fit is
predicted to fit in its share of the budget: ``EXACT_EVALUATIONS`` evaluations of log p(y) and
its gradient per kernel at N rows (above ``EXACT_PROBE_ROWS`` rows: per kernel at the subsample's
size, then of the costlier kernel at N), from the timed cost of one evaluation on subsamples of
the table in hand (doubled until the N^2 and N^3 extrapolations agree, or the subsample is the
table).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from zonal.models import ExactZonalGP, Hyperpriors
from zonal.models.stacking import StackedModel, quantize_weights, stacking_weights
from zonal.models.training import TrainingControl
from zonal.tabular.options import RECIPE_DEFAULTS, RECIPE_SUMMARIES
from zonal.tabular.recipes.parts import (
    AUTO_KERNELS,
    CHORDAL_KERNELS,
    INITIAL_NOISE,
    build_kernel,
    fit_each_kernel,
    input_embedding,
)
from zonal.tabular.recipes.registry import Fit, Recipe, TrainingInterrupted, register

#: L-BFGS evaluations of log p(y) that an exact GP's fit is given room for by ``auto``: with
#: strong Wolfe line searches, 20-40 evaluations bring log p(y) / N within 1e-3 of its plateau
#: on the tables of tests/test_fit_exact.py
EXACT_EVALUATIONS = 30
#: the rows of the subsample whose evaluation is timed
EXACT_PROBE_ROWS = 512
#: the most training rows the exact GP takes (its N x N matrices, a few of them alive at once
#: in the gradient, in float64: 200 MB each at this size)
EXACT_MAX_ROWS = 5000
#: the kernel families ``kernel="auto"`` stacks (module docstring)
EXACT_AUTO_KERNELS = (*AUTO_KERNELS, *CHORDAL_KERNELS)
#: the ``kernel`` of a spec whose exact GP is a stack of kernel families
STACKED_KERNELS = "stacked"


def exact_gp(spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor) -> ExactZonalGP:
    """The untrained exact GP of ``spec`` (a concrete kernel) on rows x [N, D] with targets
    y [N]."""
    kernel = build_kernel(spec["kernel"], spec["input_dim"] + 1, None)
    return ExactZonalGP(kernel, x, y, input_map=input_embedding(spec), noise=INITIAL_NOISE)


def build_exact(
    spec: Mapping[str, Any], x: torch.Tensor | None = None
) -> ExactZonalGP | StackedModel:
    """The exact GP of ``spec`` (a ``StackedModel`` of one per kernel for a stacked spec) on the
    rows x [N, D] with zero targets (none: a float64 CPU model with no rows, to load a checkpoint
    into, which brings its rows and targets)."""
    rows = torch.zeros(0, spec["input_dim"], dtype=torch.float64) if x is None else x
    targets = torch.zeros(len(rows), dtype=rows.dtype, device=rows.device)
    if spec["kernel"] != STACKED_KERNELS:
        return exact_gp(spec, rows, targets)
    components = [exact_gp(component, rows, targets) for component in kernel_components(spec)]
    return StackedModel(components, spec["kernel_weights"])


def kernel_components(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The exact GP spec of each kernel of a stacked spec, in order."""
    plain = {key: value for key, value in spec.items() if key not in ("kernels", "kernel_weights")}
    return [{**plain, "kernel": kernel} for kernel in spec["kernels"]]


def train_exact(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """L-BFGS (``steps`` iterations at most) on log p(y) / N (plus log p(theta) / N under
    ``spec["hyperpriors"]``, ``spec_priors``), stopped at ``control``'s deadline
    (the parameters are the best reached); the objective is log p(y) / N at the end (for a stack,
    its weighted mean over the kernels, a summary). ``"auto"`` fits every family of
    ``EXACT_AUTO_KERNELS``, each within its share of the time left, and stacks them by their
    leave-one-out densities (module docstring); above ``EXACT_PROBE_ROWS`` rows the families
    are weighted on a subsample first (``stack_on_subsample``)."""
    if len(x) > EXACT_MAX_ROWS:
        raise ValueError(
            f"the exact GP takes at most {EXACT_MAX_ROWS} training rows (O(N^2) memory, O(N^3) "
            f"time), got {len(x)}; use sgpr or svgp"
        )
    if spec.get("ard_by_bic", False):
        return choose_input_scales(spec, x, y, control)
    if spec["kernel"] != "auto":
        model, objective = fitted_exact_gp(spec, spec["kernel"], x, y, spec["steps"],
                                           control.deadline)  # fmt: skip
        return Fit(model, dict(spec), objective, {spec["kernel"]: objective})
    if len(x) > EXACT_PROBE_ROWS:
        return stack_on_subsample(spec, x, y, control)

    def fit_one(name: str, deadline: float | None) -> tuple[ExactZonalGP, float]:
        return fitted_exact_gp(spec, name, x, y, spec["steps"], deadline)

    fits = fit_each_kernel(EXACT_AUTO_KERNELS, control, fit_one)
    return stacked_fit(spec, {name: model for name, (model, _) in fits.items()})


def choose_input_scales(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """``train_exact`` of ``spec`` (``ard_by_bic``) on rows x [N, D], y [N]: fitted without input
    scales, then with them (each within its share of ``control``'s time), the fit kept whose best
    kernel family has the larger BIC (``information_criterion`` of N max_k log p(y | theta_k) / N),
    where the fit with input scales has one parameter more per column that varies on the rows
    (the scale of a constant column, 0 once standardised, changes nothing; the fit without scales
    has none: its embedding [x, 1] / ||[x, 1]|| is fixed). The fit's spec holds the choice as
    ``ard``. When the first fit leaves no time (past ``control``'s deadline), the fit with scales
    is not trained and the first is kept, with a warning: a fit stopped at its start would lose
    by the clock, not by the criterion. A fit that fails (``ValueError``) leaves the other; both
    failing raise the first error. Ctrl-C during the fit with scales raises
    ``TrainingInterrupted`` carrying the fit without them. The scales start at the spec's
    ``initial_input_scales`` when given (``auto``'s relevance screen, with ``--ard-by-bic`` given
    above 500 rows)."""
    plain = {key: value for key, value in spec.items() if key != "ard_by_bic"}
    specs = {  # the fit with scales starts at the spec's initial_input_scales, when given
        False: {key: value for key, value in plain.items() if key != "initial_input_scales"},
        True: {**plain, "ard": True},
    }
    fits: dict[bool, Fit] = {}
    failures: list[ValueError] = []
    for position, ard in enumerate((False, True)):
        if fits and control.remaining() <= 0:
            warnings.warn(
                "ard_by_bic: the fit without input scales used all the time given; the fit with "
                "them was not trained, so the one without is kept (a larger budget compares both)",
                UserWarning,
                stacklevel=2,
            )
            break
        share = dataclasses.replace(control, deadline=control.share_deadline(1 / (2 - position)))
        try:
            fits[ard] = train_exact(specs[ard], x, y, share)
        except ValueError as error:
            failures.append(error)
        except KeyboardInterrupt as interrupt:  # in the fit with scales: the one without is kept
            if not fits:
                raise
            raise TrainingInterrupted(fits[False]) from interrupt
    if not fits:
        raise failures[0]
    count = len(y)
    varying = int((x != x[:1]).any(0).sum())  # the columns whose scales can change the fit

    def criterion(ard: bool) -> float:
        log_likelihood = count * max(fits[ard].candidates.values())
        return information_criterion(log_likelihood, varying if ard else 0, count)

    return fits[max(fits, key=criterion)]


def information_criterion(log_likelihood: float, parameters: int, rows: int) -> float:
    """Schwarz's (1978) Bayesian information criterion in nats, log p(y | theta_hat) - (k / 2)
    log N for k parameters more than a reference fit on N rows (larger is better)."""
    return log_likelihood - 0.5 * parameters * math.log(rows)


def leave_one_out_weights(models: Mapping[str, ExactZonalGP]) -> dict[str, float]:
    """The stacking weights of exact GPs on the same rows: those on the simplex maximising the
    mean log density of the mixture over their leave-one-out densities L [N, K]
    (``ExactZonalGP.leave_one_out_log_density``), rounded to multiples of 1/20 (one model: 1).
    A model with a non-finite LOO density on some row gets weight 0; when every model has one,
    the model of the largest log p(y) gets weight 1."""
    names = list(models)
    if len(names) == 1:
        return {names[0]: 1.0}
    densities = torch.stack(
        [models[name].leave_one_out_log_density() for name in names], dim=1
    )  # [N, K]
    broken = ~torch.isfinite(densities).all(0)  # [K]
    if broken.all():
        best = max(names, key=lambda name: per_row_log_likelihood(models[name]))
        return {name: float(name == best) for name in names}
    densities = densities.masked_fill(broken, -math.inf)
    weights = quantize_weights(stacking_weights(densities))  # [K]
    return dict(zip(names, weights.tolist(), strict=True))


def stacked_fit(spec: Mapping[str, Any], models: Mapping[str, ExactZonalGP]) -> Fit:
    """The fit of exact GPs of several kernels on the same rows (``models``, by kernel): the one
    model when the LOO weights (``leave_one_out_weights``) keep one, else their
    ``StackedModel``; ``candidates`` holds each kernel's log p(y) per row."""
    objectives = {name: per_row_log_likelihood(model) for name, model in models.items()}
    weights = leave_one_out_weights(models)
    kept = [name for name in models if weights[name] > 0]
    if len(kept) == 1:
        name = kept[0]
        return Fit(models[name], {**spec, "kernel": name}, objectives[name], objectives)
    stacked = {**spec, "kernel": STACKED_KERNELS, "kernels": kept,
               "kernel_weights": [weights[name] for name in kept]}  # fmt: skip
    model = StackedModel([models[name] for name in kept], stacked["kernel_weights"])
    objective = sum(weights[name] * objectives[name] for name in kept)
    return Fit(model, stacked, objective, objectives)


def per_row_log_likelihood(model: ExactZonalGP) -> float:
    """log p(y) / N of the model's stored rows at its current parameters."""
    with torch.no_grad():
        return float(model.marginal_log_likelihood()) / len(model.train_y)


def spec_priors(spec: Mapping[str, Any]) -> Hyperpriors | None:
    """The hyperpriors of the exact GP's MAP fit (``Hyperpriors.default`` of the spec's inputs)
    where ``spec["hyperpriors"]`` is True, else None (type-II maximum likelihood)."""
    return Hyperpriors.default(spec["input_dim"]) if spec.get("hyperpriors", False) else None


def fitted_exact_gp(
    spec: Mapping[str, Any],
    kernel: str,
    x: torch.Tensor,
    y: torch.Tensor,
    max_iter: int,
    deadline: float | None,
) -> tuple[ExactZonalGP, float]:
    """The exact GP of ``spec`` with ``kernel`` on rows x [n, D], y [n] after L-BFGS (``max_iter``
    iterations, stopped at ``deadline``), and its log p(y) / n."""
    model = exact_gp({**spec, "kernel": kernel}, x, y)
    model.fit(max_iter=max_iter, lr=spec["learning_rate"], deadline=deadline,
              priors=spec_priors(spec))  # fmt: skip
    return model, per_row_log_likelihood(model)


def stack_on_subsample(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """``train_exact`` with ``kernel="auto"`` above ``EXACT_PROBE_ROWS`` rows x [N, D], y [N]:
    each family of ``EXACT_AUTO_KERNELS`` fitted on the same random ``EXACT_PROBE_ROWS`` rows
    (seeded by ``spec["seed"]``; at most ``EXACT_EVALUATIONS`` L-BFGS iterations, within its
    share of ``control``'s time), the families of positive LOO weight there continued on all N
    rows from the hyperparameters they reached (``steps`` iterations, each within its share of
    the time to ``control``'s deadline), then stacked by their LOO densities on all rows
    (``stacked_fit``). One family kept costs O(N^3) per evaluation instead of one per family."""
    generator = torch.Generator().manual_seed(int(spec["seed"]))
    rows = torch.randperm(len(x), generator=generator)[:EXACT_PROBE_ROWS].sort().values
    rows = rows.to(x.device)

    def fit_one(name: str, deadline: float | None) -> tuple[ExactZonalGP, float]:
        return fitted_exact_gp(spec, name, x[rows], y[rows], EXACT_EVALUATIONS, deadline)

    fits = fit_each_kernel(EXACT_AUTO_KERNELS, control, fit_one)
    models = {name: model for name, (model, _) in fits.items()}
    weights = leave_one_out_weights(models)
    kept = [name for name in models if weights[name] > 0]
    for position, name in enumerate(kept):
        models[name].set_training_data(x, y)
        models[name].fit(max_iter=spec["steps"], lr=spec["learning_rate"],
                         deadline=control.share_deadline(1 / (len(kept) - position)),
                         priors=spec_priors(spec))  # fmt: skip
    return stacked_fit(spec, {name: models[name] for name in kept})


def evaluation_seconds(
    x: torch.Tensor, rows: int = EXACT_PROBE_ROWS, kernels: Sequence[str] = EXACT_AUTO_KERNELS
) -> tuple[list[float], int]:
    """(seconds of one evaluation of log p(y) and its gradient, with input scales, for each of
    ``kernels``, on the first ``rows`` rows of x [N, D] (all when fewer), that row count); the
    targets are zeros (the cost does not depend on them). Each kernel's time is the faster of
    two evaluations: the first in a process carries one-time costs (on one thread at 512 rows,
    0.1 s against 0.04 s)."""
    probe = x[:rows]
    seconds = []
    for kernel in kernels:
        spec = {"kernel": kernel, "input_dim": x.shape[1], "ard": True}
        model = exact_gp(spec, probe, torch.zeros(len(probe), dtype=x.dtype, device=x.device))
        model.train()
        timings = []
        for _ in range(2):
            started = time.perf_counter()
            (-model.marginal_log_likelihood()).backward()
            timings.append(time.perf_counter() - started)
        seconds.append(min(timings))
    return seconds, len(probe)


def exact_fits_budget(x: torch.Tensor, share: float | None) -> bool:
    """``auto``'s size rule (module docstring): whether the exact GP's fit at the N rows of x is
    predicted to take at most ``share`` seconds (None: no budget, only ``EXACT_MAX_ROWS``
    binds): ``EXACT_EVALUATIONS`` evaluations of each kernel of ``EXACT_AUTO_KERNELS`` at N rows, or
    above ``EXACT_PROBE_ROWS`` rows (``stack_on_subsample``) that many of each kernel at
    ``EXACT_PROBE_ROWS`` rows, for the choice, plus that many of the costlier kernel at N.

    An evaluation's cost grows between N^2 (the kernel matrix) and N^3 (its factor), so a timing
    on n rows bounds the cost at N between (N / n)^2 and (N / n)^3 times it. The rule times n =
    ``EXACT_PROBE_ROWS`` rows and decides when both bounds agree; otherwise it doubles n (at
    most to N, where the timing is the cost itself) and times again. The probes cost at most
    about twice the last one, which the lower bound kept below ``share / EXACT_EVALUATIONS``
    before it ran."""
    count = len(x)
    if count > EXACT_MAX_ROWS:
        return False
    if share is None:
        return True
    rows = min(count, EXACT_PROBE_ROWS)
    choice = 0.0  # the subsample's fits of every kernel, above EXACT_PROBE_ROWS rows
    while True:
        seconds, rows = evaluation_seconds(x, rows)
        if count <= EXACT_PROBE_ROWS:
            per_evaluation = sum(seconds)
        else:
            choice = choice or sum(seconds) * EXACT_EVALUATIONS  # timed at the subsample's size
            per_evaluation = max(seconds)
        left = share - choice
        if per_evaluation * (count / rows) ** 3 * EXACT_EVALUATIONS <= left:
            return True
        if per_evaluation * (count / rows) ** 2 * EXACT_EVALUATIONS > left or rows == count:
            return False
        rows = min(count, 2 * rows)


register(
    Recipe(
        name="exact",
        summary=RECIPE_SUMMARIES["exact"],
        defaults=RECIPE_DEFAULTS["exact"],
        kernels=("auto", *EXACT_AUTO_KERNELS),
        feature_kind="training rows",
        build=build_exact,
        train=train_exact,
        likelihoods=("gaussian",),
        lbfgs=True,
    )
)
