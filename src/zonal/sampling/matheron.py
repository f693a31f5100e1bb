r"""Matheron's rule for an inter-domain sparse GP as a BoTorch sample path (seed 004 eqs.
2.18-2.19).

With a prior path :math:`f_0 = \psi(\cdot)\, w` (``prior_feature_map``), its inducing variables
:math:`u_0 = T w` (``inducing_functional``, :math:`\operatorname{Cov}(u_0) = K_{uu}`,
:math:`\operatorname{Cov}(u_0, f_0(x)) = K_{uf}`) and :math:`u \sim q(u)`,

.. math::

    f(\cdot) = \mu(\cdot) + f_0(\cdot) + K_{fu}(\cdot) K_{uu}^{-1} (u - u_0)
    \qquad \text{(eq. 2.18)}

has, given :math:`u`, the conditional :math:`p(f \mid u)` of the prior, so averaging over
:math:`q(u)` gives :math:`q(f)`: mean :math:`K_{fu} K_{uu}^{-1} m_u` and covariance
:math:`K_{ff} - K_{fu} K_{uu}^{-1} K_{uf} + K_{fu} K_{uu}^{-1} S_u K_{uu}^{-1} K_{uf}`. With
:math:`L L^\top = K_{uu}` and the whitened :math:`v = L^{-1} u \sim q(v)`, the weights of the
update are

.. math::

    c = K_{uu}^{-1} (u - u_0) = L^{-\top} (v - L^{-1} u_0)

[*S, *b, M], computed once per draw, so evaluating a draw at :math:`N` points costs
:math:`O(N (F + M))`: one prior feature row and one row of :math:`K_{uf}` (for inter-domain
features :math:`K_{uf}` is used directly, never a point evaluation of :math:`f`). The draw is
frozen when it is made (no gradient reaches the variational parameters or the hyperparameters
through :math:`w` and :math:`c`); it stays differentiable in :math:`x`.
"""

from __future__ import annotations

from typing import cast

import torch
from botorch.sampling.pathwise import GeneralizedLinearPath, MatheronPath
from botorch.sampling.pathwise.features import FeatureMap
from gpytorch.kernels import Kernel
from gpytorch.means import Mean
from linear_operator.operators import DiagLinearOperator
from torch import Size, nn

from zonal.features import InducingFeatures, InducingPoints
from zonal.sampling.harmonic_features import PriorSettings, prior_feature_map
from zonal.sampling.inducing_functionals import inducing_functional, required_levels


class InducingCovarianceMap(FeatureMap):
    """x -> Cov(f(x), u) = Kuf(x)^T [..., N, M] (``features.kuf``), the update's features."""

    def __init__(self, features: InducingFeatures, kernel: Kernel) -> None:
        super().__init__()
        self.features = features
        self.kernel = kernel
        self.input_transform = None
        self.output_transform = None

    @property
    def num_outputs(self) -> int:  # type: ignore[override]  # an attribute of botorch's FeatureMap
        return self.features.num_inducing

    @property
    def batch_shape(self) -> Size:  # type: ignore[override]  # an attribute of FeatureMap
        return self.kernel.batch_shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features.kuf(self.kernel, x).mT  # [..., N, M]


class OutputMean(nn.Module):
    """The prior mean mu of a path: inputs [..., 1, N, d] of a P-output path are expanded to
    [..., P, N, d] (a layer's mean has one row per output), giving [..., P, N]."""

    def __init__(self, mean_module: Mean, num_outputs: int | None) -> None:
        super().__init__()
        self.mean_module = mean_module
        self.num_outputs = num_outputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.num_outputs is not None:
            x = x.expand(*x.shape[:-3], self.num_outputs, *x.shape[-2:])  # [..., P, N, d]
        return self.mean_module(x)


def solve_root(
    root: torch.Tensor | DiagLinearOperator, values: torch.Tensor, *, transpose: bool
) -> torch.Tensor:
    """L^{-1} v (or L^{-T} v) for the Kuu root L [*b, M, M] and vectors v [..., M]."""
    if isinstance(root, DiagLinearOperator):
        return values / root.diagonal()
    solved = torch.linalg.solve_triangular(
        root.mT if transpose else root, values.unsqueeze(-1), upper=transpose
    )
    return solved.squeeze(-1)


def kernel_input_dim(features: InducingFeatures) -> int:
    """The dimension of the kernel's inputs (for random Fourier features)."""
    if isinstance(features, InducingPoints):
        return int(features.points.shape[-1])
    return int(cast(int, features.ambient_dim))


def matheron_path(
    kernel: Kernel,
    features: InducingFeatures,
    whitened: torch.Tensor,
    kuu_root: torch.Tensor | DiagLinearOperator,
    *,
    mean_module: Mean | None = None,
    num_outputs: int | None = None,
    input_transform=None,
    settings: PriorSettings | None = None,
) -> MatheronPath:
    """Posterior draws f_s = mu + f0_s + Kfu c_s (module docstring) as a BoTorch ``MatheronPath``.

    Args:
        kernel: the prior covariance (of the kernel's inputs).
        features: the inducing features.
        whitened: draws of v = L^{-1} u from q, [*S, *b, M] (b: the outputs, () for one).
        kuu_root: L with L L^T = Kuu, [*b', M, M] (a ``DiagLinearOperator`` for a diagonal Kuu).
        mean_module: the prior mean mu on the kernel's inputs (None: zero).
        num_outputs: P for a path with P outputs (batch dimension b), None for one.
        input_transform: raw inputs -> the kernel's inputs (applied once, before both terms).
        settings: how the prior path is drawn (``PriorSettings``).

    The path follows BoTorch's conventions: inputs [..., N, d] give [*S, ..., N] (the sample
    dimensions broadcast against the inputs' batch dimensions from the right), with the P outputs
    as a batch dimension before N.
    """
    feature_map = prior_feature_map(
        kernel,
        settings,
        num_inputs=kernel_input_dim(features),
        required_levels=required_levels(features, kernel),
    )
    with torch.no_grad():
        transform = inducing_functional(features, kernel, feature_map)  # T [*b', M, F]
        batch = torch.broadcast_shapes(whitened.shape[:-1], feature_map.batch_shape)
        weight = torch.randn(
            *batch, feature_map.num_outputs, dtype=whitened.dtype, device=whitened.device
        )  # w [*S, *b, F]
        prior_inducing = (transform.to(weight) @ weight.unsqueeze(-1)).squeeze(-1)  # u0 [*S, *b, M]
        difference = whitened - solve_root(kuu_root, prior_inducing, transpose=False)
        update_weight = solve_root(kuu_root, difference, transpose=True)  # c [*S, *b, M]
    bias = None if mean_module is None else OutputMean(mean_module, num_outputs)
    prior = GeneralizedLinearPath(feature_map, weight, bias_module=bias)
    update = GeneralizedLinearPath(InducingCovarianceMap(features, kernel), update_weight)
    return MatheronPath(prior, update, input_transform=input_transform)
