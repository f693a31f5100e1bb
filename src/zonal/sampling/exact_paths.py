r"""Pathwise posterior draws of the exact GP (``zonal.models.ExactZonalGP``) by Matheron's rule.

With training rows :math:`X` [n, D] (lifted by the model's input map), targets :math:`y`, constant
mean :math:`c`, noise :math:`\sigma^2`, :math:`K_y = K(X, X) + \sigma^2 I` and a prior path
:math:`f_0 = \psi(\cdot)\, w` (the kernel's harmonic features, ``prior_feature_map``;
:math:`w \sim \mathcal{N}(0, I)`), the draw

.. math::

    f(\cdot) = c + f_0(\cdot) + K(\cdot, X) K_y^{-1} (y - c - f_0(X) - \varepsilon), \qquad
    \varepsilon \sim \mathcal{N}(0, \sigma^2 I),

has the exact GP's posterior as its law when :math:`f_0` is an exact prior draw (Wilson et al.
2020, eq. 6; seed 004 sec. 2.2.2): the weights :math:`v = K_y^{-1} (y - c - f_0(X) - \varepsilon)`
[*S, n] are solved once per draw with the model's Cholesky factor, so a draw costs :math:`O(F + n)`
per point. The prior path is the truncated Karhunen-Loeve expansion, of covariance :math:`K - R`
with :math:`R` the dropped levels' part; the draws' covariance then differs from the posterior's by
:math:`\operatorname{Cov}_R(g(x) - a^\top g(X), g(x') - a'^\top g(X))` with
:math:`a = K_y^{-1} K(X, x)`, :math:`g \sim \mathcal{GP}(0, R)`, so by at most
:math:`m (r + \lvert a \rvert^\top r_X)(r' + \lvert a' \rvert^\top r_X)`, :math:`m` the
truncation's missing variance (``HarmonicTruncation.missing_variance``) and :math:`r` the radii of
the lifted points (:math:`r_X` the training rows'). The weights :math:`w` and :math:`v` are fixed
when the draw is made (no gradient reaches the hyperparameters through them); the features read
the model's kernel and input map when evaluated, so draw again after refitting. The draws are
differentiable in :math:`x`.
"""

from __future__ import annotations

import torch
from botorch.sampling.pathwise import GeneralizedLinearPath, MatheronPath
from botorch.sampling.pathwise.features import FeatureMap
from gpytorch.kernels import Kernel
from torch import Size, nn

from zonal.models import ExactZonalGP
from zonal.sampling.harmonic_features import PriorSettings, prior_feature_map


class TrainingCovarianceMap(FeatureMap):
    """x -> K(x, X) [..., N, n] for the exact GP's lifted training rows X [n, d]: the update's
    features."""

    rows: torch.Tensor  # buffer [n, d]

    def __init__(self, kernel: Kernel, rows: torch.Tensor) -> None:
        super().__init__()
        self.kernel = kernel
        self.register_buffer("rows", rows)
        self.input_transform = None
        self.output_transform = None

    @property
    def num_outputs(self) -> int:  # type: ignore[override]  # an attribute of botorch's FeatureMap
        return len(self.rows)

    @property
    def batch_shape(self) -> Size:  # type: ignore[override]  # an attribute of FeatureMap
        return Size()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernel(x, self.rows).to_dense()  # [..., N, n]


class ConstantMean(nn.Module):
    """x [..., N, d] -> c [..., N]: the exact GP's constant prior mean, fixed when drawn."""

    value: torch.Tensor  # buffer []

    def __init__(self, value: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("value", value.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.value.expand(x.shape[:-1])


def exact_matheron_path(
    model: ExactZonalGP, sample_shape: Size, *, settings: PriorSettings | None = None
) -> MatheronPath:
    """Draws f_s = c + f0_s + K(., X) v_s of the exact GP's posterior (module docstring) as a
    BoTorch ``MatheronPath`` on the model's raw inputs (checked and lifted, ``ExactZonalGP.lift``):
    x [..., N, D] -> [*S, ..., N]."""
    with torch.no_grad():
        lifted = model.input_map.lift(model.train_x)  # X [n, d]
        feature_map = prior_feature_map(model.kernel, settings, num_inputs=lifted.shape[-1])
        weight = torch.randn(
            *sample_shape, feature_map.num_outputs, dtype=lifted.dtype, device=lifted.device
        )  # w [*S, F]
        prior = GeneralizedLinearPath(feature_map, weight, bias_module=ConstantMean(model.constant))
        factor, _ = model._cached_factor()  # L [n, n], L L^T = K_y
        noise = model.noise.sqrt() * torch.randn(
            *sample_shape, len(lifted), dtype=lifted.dtype, device=lifted.device
        )  # eps [*S, n]
        residual = model.train_y - prior(lifted) - noise  # y - c - f0(X) - eps [*S, n]
        update_weight = torch.cholesky_solve(residual.unsqueeze(-1), factor).squeeze(-1)
    update = GeneralizedLinearPath(TrainingCovarianceMap(model.kernel, lifted), update_weight)
    return MatheronPath(prior, update, input_transform=model.lift)
