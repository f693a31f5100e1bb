r"""Pathwise posterior draws of a residual deep GP (seed 004 secs. 2.3 and 3.1.2).

A draw of :math:`F = g \circ (\exp \circ v^{L-1}) \circ \dots \circ (\exp \circ v^1)` is a whole
function: each hidden vector field :math:`v^l = A(x)\, c^l(x)` is drawn as a path of its component
GP :math:`c^l` (Matheron's rule, ``paths.draw_layer_paths``), the output GP :math:`g` likewise, and
a point moves as

.. math::

    h_1 = z, \qquad h_{l+1} = \exp_{h_l}\big(A(h_l)\, c^l_s(h_l)\big), \qquad
    F_s(x) = r\, g_s(h_L)

(:math:`r` the radius of a ``SphereEmbedding``, 1 for ``OnSphere`` inputs). Draw :math:`s` of each
layer reads draw :math:`s` of the one before, as ``DeepPaths`` does for a ``DGP``; a point's value
does not depend on the other points, so the draws are deterministic, differentiable functions
(Thompson sampling).
"""

from __future__ import annotations

import torch
from torch import Size, nn

from zonal.geometry import exp_map
from zonal.models import ResidualDGP
from zonal.sampling.harmonic_features import PriorSettings
from zonal.sampling.paths import (
    DrawnPaths,
    draw_layer_paths,
    draw_posterior_paths,
    refuse_undrawable,
)


class ResidualPaths(nn.Module):
    """:math:`S` fixed draws of a residual DGP as one callable: inputs :math:`x` [*b, N, D] ->
    [*S, *b, N] (or [*S, *b, N, P]), the sample dimensions broadcast against *b from the right."""

    def __init__(self, model: ResidualDGP, fields: list[DrawnPaths], output: DrawnPaths) -> None:
        super().__init__()
        if len(fields) != len(model.fields):
            raise ValueError(f"the model has {len(model.fields)} fields, got {len(fields)} draws")
        self.field_paths = nn.ModuleList(fields)
        self.output_path = output
        # plain references (not submodules): the model's geometry, not its parameters
        self._vector_fields = list(model.fields)
        self._to_sphere = model.to_sphere

    def hidden_points(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(:math:`h_L` [*S, *b, N, d], the radii [*b, N] or None) for inputs :math:`x`
        [*b, N, D]."""
        h, radius = self._to_sphere(x)  # [*b, N, d]
        for field, components in zip(self._vector_fields, self.field_paths, strict=True):
            c = components(h)  # [*S, *b, N, P]
            h = exp_map(h, field.tangent_vectors(h, c))  # [*S, *b, N, d]
        return h, radius

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`F_s(x)`: [*S, *b, N] (one output) or [*S, *b, N, P]."""
        h, radius = self.hidden_points(x)
        values = self.output_path(h)
        if radius is None:
            return values
        return values * (radius if self.output_path.num_outputs is None else radius.unsqueeze(-1))


@draw_posterior_paths.register
def _(
    model: ResidualDGP, sample_shape: Size, *, settings: PriorSettings | None = None
) -> ResidualPaths:
    refuse_undrawable(model)
    fields = [draw_layer_paths(field.gp, sample_shape, settings=settings) for field in model.fields]
    output = draw_layer_paths(model.output_layer, sample_shape, settings=settings)
    return ResidualPaths(model, fields, output)


__all__ = ["ResidualPaths"]
