"""The ``svgp-points`` recipe: a minibatch SVGP whose inducing variables are the function's values
u = f(Z) at M learned inducing points (Hensman et al. 2013, 2015; seed 000 sec. 3.1's baseline
features, ``zonal.features.InducingPoints``), with a chordal kernel on the sphere embedding.

The kernel reads the lifted rows [s * x, b] (``zonal.geometry.SphereEmbedding``, learned input
scales s with ``ard``) homogeneously, k(x, x') = r r' k_S(z . z') with z = [s * x, b] / r: the
chordal squared exponential (the default), the chordal Matérn-5/2 or the first-order arc-cosine
kernel. As s -> 0 the chordal squared exponential of lengthscale l on z tends to the Euclidean one
of lengthscales l / s_d on x, so the recipe holds the RBF-ARD SVGP's model as a limit, while
keeping the homogeneous kernels' linear growth away from the data. The inducing points start at
the lifted values of ``num_inducing`` training rows drawn at random (all rows when there are fewer,
then ``num_inducing`` in the fitted spec is their count) and are learned with the kernel, the
input scales and q(u) by ``zonal.tabular.recipes.svgp``'s Adam schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from zonal.features import InducingPoints
from zonal.models import SVGP
from zonal.models.training import TrainingControl
from zonal.tabular.options import RECIPE_DEFAULTS, RECIPE_SUMMARIES
from zonal.tabular.recipes.parts import (
    build_kernel,
    input_embedding,
    make_likelihood,
    output_dim,
    prior_mean,
    start_outputscale,
)
from zonal.tabular.recipes.registry import Fit, Recipe, register
from zonal.tabular.recipes.svgp import train_built_svgp

#: the kernels of ``svgp-points`` (the first is its ``auto``)
POINTS_KERNELS = ("chordal-se", "chordal-matern", "arccos")


def build_points_svgp(spec: Mapping[str, Any], x: torch.Tensor | None = None) -> SVGP:
    """The untrained SVGP of ``spec`` with ``spec["num_inducing"]`` inducing points: the lifted
    values of that many rows of x [N, D] (at most N), drawn with ``spec["seed"]``; with x None
    (a checkpoint to load into, which brings the points), zeros. One latent GP per class for a
    softmax likelihood; the kernel variance starts at ``initial_outputscale`` when given."""
    input_dim = spec["input_dim"]
    kernel = start_outputscale(build_kernel(spec["kernel"], input_dim + 1, None), spec)
    embedding = input_embedding(spec)
    if x is None:
        raw = kernel.raw_outputscale  # the model's dtype and device
        points = torch.zeros(
            spec["num_inducing"], input_dim + 1, dtype=raw.dtype, device=raw.device
        )
    else:
        generator = torch.Generator().manual_seed(int(spec["seed"]))
        rows = torch.randperm(len(x), generator=generator)[: spec["num_inducing"]].to(x.device)
        with torch.no_grad():
            points = embedding.to(x.device).lift(x[rows].to(torch.float64))  # [M, D + 1]
    return SVGP(kernel, InducingPoints(points), input_dim, likelihood=make_likelihood(spec),
                input_map=embedding, num_outputs=output_dim(spec),
                mean_module=prior_mean(spec))  # fmt: skip


def train_points_svgp(
    spec: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, control: TrainingControl
) -> Fit:
    """``build_points_svgp`` on x [N, D] with min(``num_inducing``, N) points (the count the
    fitted spec keeps), trained as the harmonic SVGP is (``train_built_svgp``)."""
    fitted = {**spec, "num_inducing": min(int(spec["num_inducing"]), len(x))}
    return train_built_svgp(build_points_svgp(fitted, x), fitted, x, y, control)


register(
    Recipe(
        name="svgp-points",
        summary=RECIPE_SUMMARIES["svgp-points"],
        defaults=RECIPE_DEFAULTS["svgp-points"],
        kernels=POINTS_KERNELS,
        feature_kind="inducing points",
        build=build_points_svgp,
        train=train_points_svgp,
    )
)
