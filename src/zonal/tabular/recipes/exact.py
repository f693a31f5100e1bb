"""The ``exact`` recipe: exact GP regression with a zonal kernel on the sphere embedding
(``zonal.models.ExactZonalGP``), L-BFGS on the exact marginal likelihood; ``kernel="auto"`` fits
the first-order arc-cosine and the polynomial-decay kernel (20 levels, decay learnt) and keeps
the larger log p(y): on all rows up to ``EXACT_PROBE_ROWS`` of them, above on a random subsample
of that size, the kept family then continuing on all rows from the hyperparameters it reached
there (``choose_kernel_on_subsample``). Every training row is its own inducing point: O(N^3)
time per evaluation, for tables of a few thousand rows, where it carries neither the harmonic
features' truncation nor a variational gap. Gaussian only.

``exact_fits_budget`` is ``auto``'s size rule for it: the exact GP is a candidate when its fit is
predicted to fit in its share of the budget: ``EXACT_EVALUATIONS`` evaluations of log p(y) and
its gradient per kernel at N rows (above ``EXACT_PROBE_ROWS`` rows: per kernel at the subsample's
size, then of the costlier kernel at N), from the timed cost of one evaluation on subsamples of
the table in hand (doubled until the N^2 and N^3 extrapolations agree, or the subsample is the
table).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from zonal.models import ExactZonalGP
from zonal.models.training import TrainingControl
from zonal.tabular.options import RECIPE_DEFAULTS, RECIPE_SUMMARIES
from zonal.tabular.recipes.parts import (
    AUTO_KERNELS,
    INITIAL_NOISE,
    best_kernel_fit,
    build_kernel,
    input_embedding,
    kernel_names,
)
from zonal.tabular.recipes.registry import Fit, Recipe, register

#: L-BFGS evaluations of log p(y) that an exact GP's fit is given room for by ``auto``: with
#: strong Wolfe line searches, 20-40 evaluations bring log p(y) / N within 1e-3 of its plateau
#: on the tables of tests/test_fit_exact.py
EXACT_EVALUATIONS = 30
#: the rows of the subsample whose evaluation is timed
EXACT_PROBE_ROWS = 512
#: the most training rows the exact GP takes (its N x N matrices, a few of them alive at once
#: in the gradient, in float64: 200 MB each at this size)
EXACT_MAX_ROWS = 5000


def exact_gp(spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor) -> ExactZonalGP:
    """The untrained exact GP of ``spec`` (a concrete kernel) on rows x [N, D] with targets
    y [N]."""
    kernel = build_kernel(spec["kernel"], spec["input_dim"] + 1, None)
    return ExactZonalGP(kernel, x, y, input_map=input_embedding(spec), noise=INITIAL_NOISE)


def build_exact(spec: Mapping[str, Any], x: torch.Tensor | None = None) -> ExactZonalGP:
    """The exact GP of ``spec`` on the rows x [N, D] with zero targets (none: a float64 CPU model
    with no rows, to load a checkpoint into, which brings its rows and targets)."""
    rows = torch.zeros(0, spec["input_dim"], dtype=torch.float64) if x is None else x
    return exact_gp(spec, rows, torch.zeros(len(rows), dtype=rows.dtype, device=rows.device))


def train_exact(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """L-BFGS (``steps`` iterations at most) on log p(y) / N, stopped at ``control``'s deadline
    (the parameters are the best reached); the objective is log p(y) / N at the end. ``"auto"``
    fits the arc-cosine and the polynomial-decay kernel, each within its share of the time
    left, and keeps the larger log p(y) (type-II maximum likelihood over the two families, as
    the ``sgpr`` recipe keeps the larger bound); above ``EXACT_PROBE_ROWS`` rows it compares
    them on a subsample and fits the kept one on all rows (``choose_kernel_on_subsample``)."""
    if len(x) > EXACT_MAX_ROWS:
        raise ValueError(
            f"the exact GP takes at most {EXACT_MAX_ROWS} training rows (O(N^2) memory, O(N^3) "
            f"time), got {len(x)}; use sgpr or svgp"
        )

    names = kernel_names(spec)
    if len(names) > 1 and len(x) > EXACT_PROBE_ROWS:
        return choose_kernel_on_subsample(spec, x, y, control, names)

    def fit_one(name: str, deadline: float | None) -> tuple[ExactZonalGP, float]:
        return fitted_exact_gp(spec, name, x, y, spec["steps"], deadline)

    model, best, objective, candidates = best_kernel_fit(names, control, fit_one)
    return Fit(model, {**spec, "kernel": best}, objective, candidates)


def per_row_log_likelihood(model: ExactZonalGP) -> float:
    """log p(y) / N of the model's stored rows at its current parameters."""
    with torch.no_grad():
        return float(model.marginal_log_likelihood()) / len(model.train_y)


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
    model.fit(max_iter=max_iter, lr=spec["learning_rate"], deadline=deadline)
    return model, per_row_log_likelihood(model)


def choose_kernel_on_subsample(
    spec: Mapping[str, Any],
    x: torch.Tensor,
    y: torch.Tensor,
    control: TrainingControl,
    names: Sequence[str],
) -> Fit:
    """``train_exact`` above ``EXACT_PROBE_ROWS`` rows x [N, D], y [N]: each family in ``names``
    fitted on the same random ``EXACT_PROBE_ROWS`` rows (seeded by ``spec["seed"]``; at most
    ``EXACT_EVALUATIONS`` L-BFGS iterations, within its share of ``control``'s time), the one with
    the larger log p(y) per row there kept and fitted on all N rows from the hyperparameters it
    reached (``steps`` iterations, to ``control``'s deadline). One family costs O(N^3) per
    evaluation instead of two; ``candidates`` holds each family's log p(y) per row on the
    subsample, ``objective`` the kept one's on all rows."""
    generator = torch.Generator().manual_seed(int(spec["seed"]))
    rows = torch.randperm(len(x), generator=generator)[:EXACT_PROBE_ROWS].sort().values
    rows = rows.to(x.device)

    def fit_one(name: str, deadline: float | None) -> tuple[ExactZonalGP, float]:
        return fitted_exact_gp(spec, name, x[rows], y[rows], EXACT_EVALUATIONS, deadline)

    model, best, _, candidates = best_kernel_fit(names, control, fit_one)
    model.set_training_data(x, y)
    model.fit(max_iter=spec["steps"], lr=spec["learning_rate"], deadline=control.deadline)
    return Fit(model, {**spec, "kernel": best}, per_row_log_likelihood(model), candidates)


def evaluation_seconds(
    x: torch.Tensor, rows: int = EXACT_PROBE_ROWS, kernels: Sequence[str] = AUTO_KERNELS
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
        model = build_exact(spec, probe)
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
    binds): ``EXACT_EVALUATIONS`` evaluations of each kernel of ``AUTO_KERNELS`` at N rows, or
    above ``EXACT_PROBE_ROWS`` rows (``choose_kernel_on_subsample``) that many of each kernel at
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
        kernels=("auto", *AUTO_KERNELS),
        feature_kind="training rows",
        build=build_exact,
        train=train_exact,
        likelihoods=("gaussian",),
        lbfgs=True,
    )
)
