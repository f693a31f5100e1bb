"""The deep recipes: ``"adgp"``, the activated DGP (seed 000 sec. 5), trained as a network
(``zonal.tabular.recipes.network``: MSE, probit or softmax cross-entropy, the likelihood's own
loss) and then by the ELBO; ``"dgp"``, the DGP with inducing points and arc-cosine kernels (seed
000's DGP-L), by the ELBO. The experiments build their deep models through the same functions
(``build_activated_dgp``, ``build_inducing_point_dgp``), so ``zonal fit --model dgp`` and the
``uci-dgp`` experiment train the same DGP.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from gpytorch.likelihoods import Likelihood

from zonal.models import DGP, ActivatedDGP, fit_dgp, inducing_point_dgp
from zonal.models.training import TrainingControl
from zonal.tabular.options import RECIPE_DEFAULTS, RECIPE_SUMMARIES
from zonal.tabular.recipes.network import network_stage
from zonal.tabular.recipes.parts import (
    make_likelihood,
    output_dim,
    start_input_scales,
    tail_objective,
)
from zonal.tabular.recipes.registry import (
    TRUNCATION_LEVEL,
    Fit,
    Recipe,
    TrainingInterrupted,
    register,
)

#: output width of the hidden layers of the deep models (seed 000 sec. 5.2)
HIDDEN_WIDTH = 5
#: the activated DGP's ELBO stage stops at an evaluation finding its best validation score older
#: than this share of the stage's time (half the default ``PATIENCE_SHARE``): after the network is
#: copied in the ELBO steps (about 20 times a network step) rarely gain; on white wine
#: (``benchmarks/fit_default.py``, split 2) the stage ran 14 s for 0.002 nats per row
ADGP_ELBO_PATIENCE_SHARE = 0.1
#: the DGP's hidden layers start at q(v) = N(0, scale^2 I) (near-deterministic, ``uci-dgp``)
DGP_INNER_SCALE = 1e-2


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
    input_scales: bool | float | torch.Tensor = False,
    seed: int = 0,
) -> ActivatedDGP:
    """An ``ActivatedDGP`` with Softplus features and first-order arc-cosine kernels
    (``input_scales``: one learnt scale per input in the first layer's embedding, ARD, starting
    at 1 for True, else at the number or tensor [D] given)."""
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
            input_scales=start_input_scales(spec) if spec.get("ard", False) else False,
            seed=spec["seed"],
        )
    if x is None:  # rebuilding for a checkpoint: the points are loaded afterwards
        x = torch.zeros(0, spec["input_dim"], dtype=torch.float64)
    return build_inducing_point_dgp(x, spec["num_layers"], likelihood,
                                    num_inducing=spec["num_inducing"],
                                    output_dim=output_dim(spec), seed=spec["seed"])  # fmt: skip


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
    return Fit(model, dict(spec), tail_objective(losses))


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
