"""Stacking ``auto``'s candidates (``zonal.models.stacking``; Yao et al. 2018) and
letting the chosen model condition on the validation rows too.
"""

from __future__ import annotations

import math
import time
from typing import Any, cast

import torch
from gpytorch.likelihoods import GaussianLikelihood

from zonal.kernels import compile_settings
from zonal.models import SGPR, SVGP, ExactZonalGP, ZonalModel
from zonal.models.stacking import (
    StackedModel,
    bootstrap_stacking_weights,
    posterior_stacking_weights,
    quantize_weights,
    stacking_weights,
)
from zonal.tabular.metrics import row_log_densities, validation_metrics
from zonal.tabular.model import STACKED
from zonal.tabular.recipes import (
    STACKED_KERNELS,
    Fit,
    kernel_components,
    optimal_q_fits,
)
from zonal.tabular.split import Split
from zonal.tabular.targets import Target


def stack_fits(
    fits: dict[str, Any],
    scores: dict[str, dict[str, float]],
    split: Split,
    target: Target,
    *,
    fallback: str,
    seed: int = 0,
) -> tuple[Any, dict[str, dict[str, float]]]:
    """Stack the candidates ``fits`` (regression models, or classifiers;
    ``zonal.models.stacking``): the weights on the simplex that maximise the mean validation log
    density of the mixture (of the true classes' probabilities for classifiers,
    ``row_log_densities``), averaged over ``STACKING_DRAWS`` Bayesian-bootstrap replicates of the
    validation rows (``seed``; ``validation_weights``); for classifiers the posterior mean of the
    mixture weights under the Dirichlet(``CLASSIFIER_CONCENTRATION``) prior instead
    (``posterior_stacking_weights``), which keeps weight on every candidate when a few scoring
    rows cannot tell an overconfident one from the others; rounded to multiples of 1 /
    ``WEIGHT_RESOLUTION``. Returns (the fit, the scores with each candidate's ``weight``): the
    single candidate when the weights pick one, else a ``StackedModel`` of the candidates of
    positive weight (a stacked exact GP enters as its kernels, each weighted by the product of
    the two weights and rounded again: ``mixture_members``; spec ``{"model": "stacked",
    "components": [specs], "weights": [w]}``; its objective is the weighted mean of theirs, a
    summary, not a bound for the mixture) with a
    ``stacked`` entry in the scores (its validation metrics are optimistic: the weights were
    fitted to those rows). A candidate with a NaN density on any row is broken and gets weight 0;
    when no candidate gives any row a positive density the ``fallback`` candidate is returned as
    it is."""
    started = time.perf_counter()
    names = list(fits)
    log_densities = torch.stack(
        [
            row_log_densities(fits[name].model, target, split.x_valid, split.y_valid)
            for name in names
        ],
        dim=1,
    )  # [n_valid, K]
    concentration = CLASSIFIER_CONCENTRATION if target.is_classification else None
    found = validation_weights(log_densities, seed=seed, concentration=concentration)
    if found is None:
        return fits[fallback], scores
    weights = dict(zip(names, found.tolist(), strict=True))
    scores = {name: {**scores[name], "weight": weights[name]} for name in names}
    kept = [name for name in names if weights[name] > 0]
    if len(kept) == 1:
        return fits[kept[0]], scores
    members = [(spec, model, weights[name] * share)
               for name in kept for spec, model, share in mixture_members(fits[name])]  # fmt: skip
    rounded = quantize_weights([share for _, _, share in members]).tolist()
    members = [(spec, model, share) for (spec, model, _), share
               in zip(members, rounded, strict=True) if share > 0]  # fmt: skip
    spec = {
        "model": STACKED,
        "input_dim": fits[kept[0]].spec["input_dim"],
        "likelihood": target.likelihood,
        "num_classes": len(target.classes),
        "components": [component for component, _, _ in members],
        "weights": [share for _, _, share in members],
    }
    model = StackedModel([member for _, member, _ in members], spec["weights"])
    objective = sum(weights[name] * fits[name].objective for name in kept)
    candidates = {kernel: bound for name in kept for kernel, bound in fits[name].candidates.items()}
    score = {
        "seconds": time.perf_counter() - started,
        "objective": objective,
        **validation_metrics(model, target, split.x_valid, split.y_valid),
    }
    return Fit(model, spec, objective, candidates), {**scores, STACKED: score}


def mixture_members(fit: Fit) -> list[tuple[dict[str, Any], ZonalModel, float]]:
    """(spec, model, weight) of each component a candidate brings to ``auto``'s stack: the
    kernels of a stacked exact GP (``zonal.tabular.recipes.exact``) with their weights, so that
    the stack stays one mixture of plain models, else the candidate itself with weight 1."""
    if fit.spec.get("kernel") != STACKED_KERNELS:
        return [(dict(fit.spec), fit.model, 1.0)]
    members = cast(list[ZonalModel], list(cast(StackedModel, fit.model).components))
    return list(zip(kernel_components(fit.spec), members, fit.spec["kernel_weights"],
                    strict=True))  # fmt: skip


#: Bayesian-bootstrap replicates of ``auto``'s stacking weights: a Monte Carlo size (each
#: weight's standard error at most 0.5 / sqrt(draws) = 0.035, below the rounding to 1 / 20), not
#: a constant fitted to tables. Where a few validation rows decide the weights, the replicates'
#: mean keeps weight on every candidate that wins some of them: on the development suite's
#: small tables (8-33 scoring rows) the plain weights put 0.85-1.0 on a candidate that the test
#: rows did not favour (docs/fit_evidence.md)
STACKING_DRAWS = 200
#: the Dirichlet concentration of the posterior-mean weights of classifier stacks: the uniform
#: prior on the simplex, not a constant fitted to tables. Adopted by its rule on the 6 held-out
#: two-class tables (mean test TLL -0.357 -> -0.310, accuracy level; an activated DGP that won
#: every scoring row of wisconsin's split 0 had taken weight 1 and scored -1.05); regression
#: stacks keep the bootstrap weights (the posterior failed there: docs/fit_evidence.md)
CLASSIFIER_CONCENTRATION = 1.0


def validation_weights(
    log_densities: torch.Tensor,
    *,
    draws: int = STACKING_DRAWS,
    seed: int = 0,
    concentration: float | None = None,
) -> torch.Tensor | None:
    """The stacking weights [K] of candidates with validation log densities [n_valid, K]: the
    mean of ``draws`` Bayesian-bootstrap replicates (``bootstrap_stacking_weights`` from
    ``seed``; 0 draws: ``stacking_weights`` on the rows as they are), or with a ``concentration``
    a the posterior mean of the mixture weights under the Dirichlet(a, ..., a) prior
    (``posterior_stacking_weights`` from ``seed``; ``draws`` unused), rounded by
    ``quantize_weights``. A column with a NaN anywhere is a broken candidate and gets weight 0;
    None when no candidate gives any row a finite density."""
    broken = log_densities.isnan().any(0)  # [K]
    log_densities = log_densities.masked_fill(broken, -math.inf)
    if not torch.isfinite(log_densities).any():
        return None
    if concentration is not None:
        weights = posterior_stacking_weights(log_densities, concentration=concentration, seed=seed)
        return quantize_weights(weights)
    if draws == 0:
        return quantize_weights(stacking_weights(log_densities))
    return quantize_weights(bootstrap_stacking_weights(log_densities, draws, seed=seed))


@torch.no_grad()
def condition_on_all_rows(model: ZonalModel, split: Split) -> None:
    """Once the validation rows have chosen (and, under ``auto``, weighted) the candidates, let
    the shallow models' posteriors condition on them too, at the learned hyperparameters (closed
    forms, or a few natural-gradient steps for a classifier), whichever model was chosen or named:
    an SGPR recomputes its statistics over the training and validation rows, the exact GP takes
    them as its training rows, a Gaussian SVGP sets
    q(u) to its optimum there (Titsias, 2009) and an SVGP classifier (probit or softmax) to
    the ELBO's optimum there by natural-gradient steps (``SVGP.set_natural_gradient_optimum``;
    both when ``optimal_q_fits``); a stack does so for each component; other
    models (the deep ones) are left as they are. The validation metrics reported were measured
    before.

    The kernels' Gram matrices are filled by eager PyTorch here (``compile_settings(enabled=
    False)``): each is built once over all rows, where compiling its tile function (for matrices
    of 2^22 entries or more, ``zonal.kernels.compile``) costs seconds that one use does not win
    back (magic, 17,118 rows and 256 inducing points: 4.4 s of compiling in a 4.7 s conditioning,
    0.7 s without)."""
    x = torch.cat([split.x_train, split.x_valid])  # [N, D]
    y = torch.cat([split.y_train, split.y_valid])  # [N]
    members = model.components if isinstance(model, StackedModel) else [model]
    with compile_settings(enabled=False):
        for member in members:
            condition_member(member, x, y)


def condition_member(member: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    """``condition_on_all_rows`` for one model on rows x [N, D], y [N]."""
    if isinstance(member, SGPR):
        member.fit_statistics(x, y)
    elif isinstance(member, ExactZonalGP):
        member.set_training_data(x, y)
    elif isinstance(member, SVGP) and optimal_q_fits(member, len(x)):
        if isinstance(member.likelihood, GaussianLikelihood) and member.num_outputs == 1:
            member.set_optimal_variational_distribution(x, y)
        elif not isinstance(member.likelihood, GaussianLikelihood):  # a classifier
            member.set_natural_gradient_optimum(x, y)
