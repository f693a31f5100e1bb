"""The ``sgpr`` recipe: the collapsed SGPR with spherical-harmonic features (seed 000 sec. 3.3,
seed 002 sec. 5): one pass over the data for the sufficient statistics, then L-BFGS on the bound,
at a cost independent of N; ``kernel="auto"`` fits the first-order arc-cosine and the
polynomial-decay kernel and keeps the one with the larger bound. Gaussian only
(``UnsupportedLikelihoodError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from zonal.models import SGPR
from zonal.models.training import TrainingControl
from zonal.tabular.options import RECIPE_DEFAULTS, RECIPE_SUMMARIES
from zonal.tabular.recipes.parts import (
    AUTO_KERNELS,
    INITIAL_NOISE,
    best_kernel_fit,
    build_kernel,
    harmonic_features,
    input_embedding,
    kernel_names,
)
from zonal.tabular.recipes.registry import Fit, Recipe, register

#: ARD in SGPR (the alternating scheme of ``zonal.models.sgpr``): rows of the subsample whose
#: bound L-BFGS maximises over the input scales ...
ARD_SUBSAMPLE = 1024
#: ... and its L-BFGS iterations per pass of the alternating scheme
ARD_ITERATIONS = 30


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

    def fit_one(name: str, deadline: float | None) -> tuple[SGPR, float]:
        model = build_sgpr({**spec, "kernel": name})
        if spec.get("ard", False):
            model.fit_input_scales(x, y, subsample_size=ARD_SUBSAMPLE,
                                   max_iter=ARD_ITERATIONS, seed=spec["seed"])  # fmt: skip
        model.fit_statistics(x, y)
        model.fit(max_iter=spec["steps"], lr=spec["learning_rate"], deadline=deadline)
        with torch.no_grad():
            return model, float(model.elbo()) / float(model.stat_count)

    model, best, objective, candidates = best_kernel_fit(kernel_names(spec), control, fit_one)
    return Fit(model, {**spec, "kernel": best}, objective, candidates)


register(
    Recipe(
        name="sgpr",
        summary=RECIPE_SUMMARIES["sgpr"],
        defaults=RECIPE_DEFAULTS["sgpr"],
        kernels=("auto", *AUTO_KERNELS),
        feature_kind="spherical-harmonic features",
        build=build_sgpr,
        train=train_sgpr,
        likelihoods=("gaussian",),
        lbfgs=True,
    )
)
