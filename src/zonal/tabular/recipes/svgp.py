"""The ``svgp`` and ``svgp-activated`` recipes: minibatch SVGPs.

``"svgp"`` takes the harmonic features of ``sgpr`` (with learned phases when phase-truncated) and
its kernel (arc-cosine for ``"auto"``); ``"svgp-activated"`` takes activated Softplus features
(seed 000 sec. 4.3) and the arc-cosine kernel: its posterior mean is a one-hidden-layer Softplus
network. Both start from the optimal q(u) for the initial hyperparameters (Gaussian likelihood;
Titsias, 2009; skipped when N x M exceeds ``OPTIMAL_Q_MAX_ENTRIES``) and are trained by Adam in
the three phases of ``SCHEDULE``: the full learning rate for 60% of the steps, then 1/5 of it for
25% and 1/25 for the last 15%, each phase within its fraction of the time left. A classifier's
q(u) moves by natural-gradient steps instead (``CLASSIFIER_NATURAL_STEP`` times the phase's
factor) while Adam moves its hyperparameters alone (docs/fit_evidence.md, session 34: 9 classification
tables, test log likelihood +0.0010 nats a row on average).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from zonal.features import ActivatedFeatures, InducingFeatures
from zonal.models import SVGP, ZonalModel, fit_svgp
from zonal.models.training import TrainingControl
from zonal.tabular.options import RECIPE_DEFAULTS, RECIPE_SUMMARIES
from zonal.tabular.recipes.parts import (
    SCHEDULE,
    build_kernel,
    harmonic_features,
    input_embedding,
    make_likelihood,
    output_dim,
    prior_mean,
    start_outputscale,
    tail_objective,
)
from zonal.tabular.recipes.registry import Fit, Recipe, TrainingInterrupted, register

#: a classifier's q(u) moves by natural-gradient steps of this size (times the phase's factor of
#: ``SCHEDULE``) while Adam moves its hyperparameters alone (``fit_svgp(natural_gradient=...)``;
#: Salimbeni, Eleftheriadis & Hensman 2018; the rule of docs/fit_evidence.md, session 34)
CLASSIFIER_NATURAL_STEP = 0.3
#: the largest N x M (x outputs) for which q(u) is set to its optimum (Kuf is held in memory)
OPTIMAL_Q_MAX_ENTRIES = 20_000_000


def optimal_q_fits(model: SVGP, num_rows: int) -> bool:
    """Whether q(u)'s optimum on ``num_rows`` rows is computed: N x M x outputs at most
    ``OPTIMAL_Q_MAX_ENTRIES``."""
    return num_rows * model.features.num_inducing * model.num_outputs <= OPTIMAL_Q_MAX_ENTRIES


def build_svgp(spec: Mapping[str, Any], x: torch.Tensor | None = None) -> SVGP:
    """SVGP with harmonic features (``"svgp"``, learned phases when phase-truncated) or activated
    Softplus features, one latent GP per class for a softmax likelihood; its kernel variance
    starts at the spec's ``initial_outputscale`` when given, else 1."""
    ambient_dim = spec["input_dim"] + 1
    kernel = start_outputscale(
        build_kernel(spec["kernel"], ambient_dim, spec["num_inducing"]), spec
    )
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
                input_map=input_embedding(spec), num_outputs=output_dim(spec),
                mean_module=prior_mean(spec))  # fmt: skip


def train_svgp(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """The Titsias optimum (Gaussian likelihood, when Kuf fits in memory), then Adam in the
    phases of ``SCHEDULE`` (a classifier's q(u) by natural-gradient steps)."""
    return train_built_svgp(build_svgp(spec, x), spec, x, y, control)


def train_built_svgp(
    model: SVGP, spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """Train the untrained SVGP ``model`` of ``spec`` on x [N, D], y [N]: q(u) at the Titsias
    optimum (Gaussian likelihood, when Kuf fits in memory), then Adam in the phases of
    ``SCHEDULE``; a classifier's q(u) moves by natural-gradient steps of size
    ``CLASSIFIER_NATURAL_STEP`` times the phase's factor instead, Adam its hyperparameters."""
    classifier = spec.get("likelihood", "gaussian") != "gaussian"
    if not classifier and optimal_q_fits(model, len(x)):
        model.set_optimal_variational_distribution(x, y)
    natural = CLASSIFIER_NATURAL_STEP if classifier else None
    losses: list[float] = []
    try:
        scheduled_adam(model, x, y, steps=spec["steps"], batch_size=spec["batch_size"],
                       learning_rate=spec["learning_rate"], seed=spec["seed"], control=control,
                       losses=losses, natural_gradient=natural)  # fmt: skip
    except KeyboardInterrupt as interrupt:
        raise TrainingInterrupted(
            Fit(model, dict(spec), tail_objective(losses or [math.nan]))
        ) from interrupt
    return Fit(model, dict(spec), tail_objective(losses))


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
    natural_gradient: float | None = None,
) -> list[float]:
    """Adam on a single-layer model's minibatch ELBO with the three-phase schedule
    ``SCHEDULE``; the loss per step (appended to ``losses`` as the phases end).

    Under a ``control`` with a deadline each phase may use its fraction of the time left, so a
    fit cut by the budget still lowers its learning rate; with a validation score every phase
    starts from the previous phase's best state and ends in its own. ``natural_gradient`` (an
    SVGP's step size, scaled by each phase's factor as the learning rate is): q(u) moves by
    natural-gradient steps and Adam moves the rest (``fit_svgp``)."""
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
                natural_gradient=None if natural_gradient is None else natural_gradient * factor,
            )
        done += count
    return losses


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
