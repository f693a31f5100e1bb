r"""Fixed function draws of zonal GPs: prior paths and pathwise posterior samples (seed 004
sec. 2.2.2).

A draw is a function: ``paths = draw_posterior_paths(model, torch.Size([S]))`` fixes :math:`S`
functions :math:`f_1, \dots, f_S`, and ``paths(x)`` evaluates all of them at any points, each point
on its own (a point's value does not depend on the other points in the batch), at
:math:`O(N (F + M))` per draw. Prior draws are the truncated Karhunen-Loeve expansion of the kernel
(``harmonic_features``); posterior draws add Matheron's update (``matheron``).

Shapes: ``paths(x)`` with :math:`x` [*b, N, D] returns [*S, *b, N] for one output and
[*S, *b, N, P] for :math:`P` outputs, where the sample dimensions S broadcast against the batch
dimensions *b from the right (BoTorch's convention): :math:`x` [N, D] evaluates every draw at the
same points, :math:`x` [S, N, D] draw :math:`s` at its own points :math:`x[s]` (how a deep model's
next layer reads this layer's draws, ``DeepPaths``).
``paths.path`` is the underlying BoTorch ``SamplePath`` (outputs as a batch dimension before N).

Sources: ``draw_layer_paths`` takes an ``InterDomainVariationalStrategy`` (inputs are the kernel's)
or a model / layer that owns one (``SVGP``, ``DGPLayer``: raw inputs, lifted by its input map);
``draw_posterior_paths`` also takes an ``SGPR`` (its implicit :math:`q(u)`, ``collapsed``), an
``ExactZonalGP`` (Matheron's rule on its training rows, ``exact_paths``) and a ``DGP`` (the layers'
draws chained).
"""

from __future__ import annotations

from functools import singledispatch
from typing import TYPE_CHECKING, cast

import torch
from botorch.sampling.pathwise import GeneralizedLinearPath, SamplePath
from gpytorch.kernels import Kernel
from torch import Size, nn

from zonal.geometry import InputMap
from zonal.models import DGP, SGPR, ExactZonalGP
from zonal.sampling.collapsed import collapsed_posterior, collapsed_whitened_samples
from zonal.sampling.exact_paths import exact_matheron_path
from zonal.sampling.harmonic_features import PriorSettings, prior_feature_map
from zonal.sampling.matheron import matheron_path, solve_root
from zonal.variational import InterDomainVariationalStrategy

if TYPE_CHECKING:
    from zonal.sampling.residual_paths import ResidualPaths

#: rows evaluated at a time by ``DrawnPaths`` (bounds the N x F feature matrix)
PATH_CHUNK = 4096


class DrawnPaths(nn.Module):
    r"""Fixed draws :math:`f_1, \dots, f_S` as one callable (module docstring for the shapes).

    Args:
        path: a BoTorch ``SamplePath`` whose outputs (:math:`P` of them) are a batch dimension
            before N.
        num_outputs: :math:`P`, or None for a single output.
        chunk_size: rows evaluated at a time.
    """

    def __init__(
        self, path: SamplePath, num_outputs: int | None, *, chunk_size: int = PATH_CHUNK
    ) -> None:
        super().__init__()
        self.path = path
        self.num_outputs = num_outputs
        self.chunk_size = int(chunk_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`f_s(x)`: [*S, *b, N] (one output) or [*S, *b, N, P] for inputs :math:`x`
        [*b, N, D]."""
        if not isinstance(x, torch.Tensor) or x.dim() < 2:
            raise ValueError("paths take inputs [N, D] (or [..., N, D])")
        if self.num_outputs is not None:
            x = x.unsqueeze(-3)  # [*b, 1, N, D]: the outputs' batch dimension
        values = torch.cat([self.path(rows) for rows in x.split(self.chunk_size, dim=-2)], -1)
        return values if self.num_outputs is None else values.transpose(-1, -2)


class DeepPaths(nn.Module):
    r"""The composition of layer draws :math:`h \mapsto f_L(\dots f_1(h))`: draw :math:`s` of each
    layer reads draw :math:`s` of the layer before (seed 004 sec. 2.3: hierarchical sampling of
    whole functions)."""

    def __init__(self, layers: list[DrawnPaths]) -> None:
        super().__init__()
        if not layers:
            raise ValueError("DeepPaths needs at least one layer")
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[*S, N] or [*S, N, P] for inputs :math:`x` [N, D]."""
        h = x
        for index, layer in enumerate(self.layers):
            h = layer(h)
            if layer.num_outputs is None and index < len(self.layers) - 1:
                h = h.unsqueeze(-1)  # a one-output hidden layer feeds one input dimension
        return h


def draw_prior_paths(
    kernel: Kernel,
    sample_shape: Size,
    *,
    num_inputs: int | None = None,
    settings: PriorSettings | None = None,
) -> DrawnPaths:
    r"""Draws of the zero-mean prior :math:`\mathcal{GP}(0, k)` on the kernel's inputs:
    :math:`f = \psi(\cdot)\, w`, :math:`w \sim \mathcal{N}(0, I)`.

    The exact harmonic expansion for a zonal kernel (its ``feature_map.truncation`` states the
    missing variance); BoTorch's random Fourier features otherwise (needs ``num_inputs``). One
    output per member of the kernel's batch (:math:`P` = batch size) for a batched kernel.
    """
    feature_map = prior_feature_map(kernel, settings, num_inputs=num_inputs)
    batch = feature_map.batch_shape
    if len(batch) > 1:
        raise ValueError(f"kernels with one batch dimension at most, got batch shape {batch}")
    weight = torch.randn(
        *sample_shape, *batch, feature_map.num_outputs, dtype=kernel.dtype, device=kernel.device
    )  # [*S, *b, F]
    return DrawnPaths(GeneralizedLinearPath(feature_map, weight), batch[0] if batch else None)


def draw_layer_paths(
    source: InterDomainVariationalStrategy | nn.Module,
    sample_shape: Size,
    *,
    settings: PriorSettings | None = None,
) -> DrawnPaths:
    """Posterior draws of one sparse layer (Matheron's rule, ``matheron``): one path per output.

    ``source`` is an ``InterDomainVariationalStrategy`` (inputs: the kernel's), or a model / layer
    with one as ``variational_strategy`` (or inside a multitask wrapper) and an ``input_map``
    (``SVGP``, ``DGPLayer``: raw inputs). :math:`q(u)` is sampled through the strategy's own
    family.
    """
    strategy, input_transform = _strategy_and_inputs(source)
    with torch.no_grad():
        root = strategy.kuu_root()  # L [*b, M, M]
        # q itself, not GPyTorch's memo of it (stale after an optimiser step in training mode)
        distribution = strategy._variational_distribution()
        draws = distribution.rsample(sample_shape)  # [*S, *b, M]
        whitened = draws if strategy.whiten else solve_root(root, draws, transpose=False)
    outputs = distribution.batch_shape
    num_outputs = outputs[-1] if len(outputs) else None
    path = matheron_path(
        strategy.model.covar_module,
        strategy.features,
        whitened,
        root,
        mean_module=getattr(strategy.model, "mean_module", None),
        num_outputs=num_outputs,
        input_transform=input_transform,
        settings=settings,
    )
    return DrawnPaths(path, num_outputs)


@singledispatch
def draw_posterior_paths(
    model: nn.Module, sample_shape: Size, *, settings: PriorSettings | None = None
) -> DrawnPaths | DeepPaths | ResidualPaths:
    """Pathwise posterior draws of a zonal model (module docstring): ``DrawnPaths`` for a
    single-layer model (``SVGP``, ``SGPR``, ``ExactZonalGP``: ``exact_paths``) or layer,
    ``DeepPaths`` for a ``DGP``, ``ResidualPaths`` for a ``ResidualDGP``
    (``zonal.sampling.residual_paths``). A model returned by ``condition_on_observations`` or
    ``fantasize`` is refused (``ConditionedPathsError``)."""
    refuse_undrawable(model)
    return draw_layer_paths(model, sample_shape, settings=settings)


class ConditionedPathsError(ValueError):
    """Pathwise draws of a conditioned (or fantasy) model: they would ignore the conditioning."""


class TransformedPathsError(ValueError):
    """Pathwise draws of a model with BoTorch input or outcome transforms: the paths act on the
    model's own (transformed) scale, so they would silently be draws in other units."""


def refuse_undrawable(model: nn.Module) -> None:
    """Raise ``ConditionedPathsError`` for a model made by ``condition_on_observations`` or
    ``fantasize`` (the paths read the stored statistics or q(u), not the update on the new rows,
    so they would silently be draws of the model before conditioning), and
    ``TransformedPathsError`` for a model with an input or outcome transform."""
    transforms = [name for name in ("input_transform", "outcome_transform")
                  if getattr(model, name, None) is not None]  # fmt: skip
    if transforms:
        raise TransformedPathsError(
            f"pathwise draws of a {type(model).__name__} with an {' and an '.join(transforms)} "
            "would be on its transformed scale; draw them from a model fitted without "
            "transforms (standardise the data first), or sample its posterior "
            "(model.posterior(X).rsample())"
        )
    if hasattr(model, "_conditioned_batch"):
        raise ConditionedPathsError(
            f"pathwise draws of a conditioned {type(model).__name__} would ignore the rows it was "
            "conditioned on; draw paths from the model before conditioning, or sample its "
            "posterior (model.posterior(X).rsample())"
        )


@draw_posterior_paths.register
def _(model: SGPR, sample_shape: Size, *, settings: PriorSettings | None = None) -> DrawnPaths:
    refuse_undrawable(model)
    mean, factor, root = collapsed_posterior(model)
    whitened = collapsed_whitened_samples(mean, factor, sample_shape)  # [*S, M]
    path = matheron_path(
        model.kernel, model.features, whitened, root, input_transform=model.lift, settings=settings
    )
    return DrawnPaths(path, None)


@draw_posterior_paths.register
def _(
    model: ExactZonalGP, sample_shape: Size, *, settings: PriorSettings | None = None
) -> DrawnPaths:
    refuse_undrawable(model)
    return DrawnPaths(exact_matheron_path(model, sample_shape, settings=settings), None)


@draw_posterior_paths.register
def _(model: DGP, sample_shape: Size, *, settings: PriorSettings | None = None) -> DeepPaths:
    refuse_undrawable(model)
    return DeepPaths(
        [draw_layer_paths(layer, sample_shape, settings=settings) for layer in model.layers]
    )


class _LayerInputs:
    """A layer's raw inputs [..., N, D_in] -> the kernel's inputs (checked dimension)."""

    def __init__(self, layer: nn.Module) -> None:
        self.layer = layer

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.layer.input_dims:
            raise ValueError(
                f"the layer expects inputs [..., N, {self.layer.input_dims}], got {tuple(x.shape)}"
            )
        return cast(InputMap, self.layer.input_map).lift(x)


def _strategy_and_inputs(source) -> tuple[InterDomainVariationalStrategy, object]:
    """(the inter-domain strategy, the map from the source's inputs to the kernel's, or None)."""
    if isinstance(source, InterDomainVariationalStrategy):
        return source, None
    strategy = getattr(source, "variational_strategy", None)
    strategy = getattr(strategy, "base_variational_strategy", strategy)
    if not isinstance(strategy, InterDomainVariationalStrategy):
        raise TypeError(
            f"{type(source).__name__} has no zonal InterDomainVariationalStrategy: pathwise "
            "sampling takes an SVGP, SGPR, DGP, DGPLayer or the strategy itself"
        )
    if hasattr(source, "lift"):
        return strategy, source.lift
    return strategy, _LayerInputs(source)
