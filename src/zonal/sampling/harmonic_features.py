r"""The exact feature map of a zonal kernel: its Karhunen-Loeve (Mercer) features, no random
features.

For :math:`k(x, x') = \sum_n \lambda_n \sum_j \phi_{nj}(x) \phi_{nj}(x')` (the addition theorem,
harmonics orthonormal for the normalised surface measure), the features

.. math::

    \psi_{nj}(x) = \sqrt{\lambda_n}\, \phi_{nj}(x) \qquad
    (\text{times } \|x\|, \ \phi \text{ at } x / \|x\|, \text{ for a homogeneous kernel})

over the levels of a ``HarmonicTruncation`` give :math:`k_L(x, x') = \psi(x) \cdot \psi(x')`
exactly, and :math:`f = \psi(\cdot)\, w` with :math:`w \sim \mathcal{N}(0, I)` is an exact draw of
the truncated prior (seed 004 sec. 2.2.2, eqs. 2.16-2.17). The map is a BoTorch ``FeatureMap``:
``forward`` returns the radius times the harmonics and ``output_transform`` multiplies each column
by :math:`\sqrt{\lambda_n}`, so BoTorch's ``ScaleKernel`` handler can chain its outputscale after
it. The eigenvalues are read once, when the map is built: the map is a fixed function of :math:`x`.

Kernels that are not zonal fall back to BoTorch's random Fourier features (``prior_feature_map``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from botorch.sampling.pathwise.features import FeatureMap, gen_kernel_features
from botorch.sampling.pathwise.utils import FeatureSelector, TensorTransform
from gpytorch.kernels import Kernel
from torch import Size

from zonal._validation import check_finite
from zonal.features.base import base_zonal_kernel
from zonal.harmonics import SphericalHarmonics
from zonal.harmonics.fundamental_system import check_fundamental_systems
from zonal.kernels import ZonalKernel
from zonal.sampling.truncation import (
    DEFAULT_MAX_FEATURES,
    DEFAULT_TOLERANCE,
    HarmonicTruncation,
    choose_truncation,
    spectrum,
)

#: random Fourier features drawn for a kernel that is not zonal
DEFAULT_RANDOM_FEATURES = 1024


class ColumnScale(TensorTransform):
    """values [..., N, F] -> values * scale, scale [*b, F] broadcast over the N rows."""

    scale: torch.Tensor  # buffer

    def __init__(self, scale: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("scale", scale)

    def forward(self, values: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        return values * self.scale.unsqueeze(-2)  # [..., N, F]


class HarmonicFeatureMap(FeatureMap):
    r""":math:`x \mapsto \sqrt{\lambda_n}\, \phi_{nj}(x)` over the kept levels (module docstring):
    [..., N, F].

    Args:
        kernel: a ``ZonalKernel``, optionally in a ``ScaleKernel`` (its outputscale then scales
            the eigenvalues).
        truncation: the levels to keep; ``choose_truncation(kernel)`` if None.

    Attributes:
        truncation: the ``HarmonicTruncation`` (its ``missing_variance`` bounds the error).
        harmonics: the orthonormal basis ``SphericalHarmonics(d, L)``.
        columns: LongTensor [F], the basis columns kept; ``column_levels`` their degrees.
        eigenvalues: :math:`\lambda` of each column [*b, F], read when the map was built.
    """

    harmonics: SphericalHarmonics
    columns: torch.Tensor  # buffers
    column_levels: torch.Tensor
    eigenvalues: torch.Tensor

    def __init__(self, kernel: Kernel, truncation: HarmonicTruncation | None = None) -> None:
        super().__init__()
        zonal, _ = base_zonal_kernel(kernel)
        self.truncation = choose_truncation(kernel) if truncation is None else truncation
        self.homogeneous = zonal.homogeneous
        self.ambient_dim = zonal.ambient_dim
        eigenvalues = spectrum(kernel, self.truncation.max_degree).detach()  # [*b, L + 1]
        check_fundamental_systems(self.ambient_dim, range(self.truncation.max_degree + 1))
        self.harmonics = SphericalHarmonics(
            self.ambient_dim, self.truncation.max_degree, dtype=eigenvalues.dtype
        ).to(eigenvalues.device)
        all_levels = self.harmonics.levels  # [M_all]
        kept = torch.isin(
            all_levels, torch.tensor(self.truncation.levels, device=all_levels.device)
        )
        self.register_buffer("columns", torch.nonzero(kept).squeeze(-1))  # [F]
        self.register_buffer("column_levels", all_levels[self.columns])  # [F]
        self.register_buffer("eigenvalues", eigenvalues[..., self.column_levels])  # [*b, F]
        self._batch_shape = Size(eigenvalues.shape[:-1])
        active_dims = kernel.active_dims
        self.input_transform = None if active_dims is None else FeatureSelector(active_dims)
        self.output_transform = ColumnScale(self.eigenvalues.clamp_min(0).sqrt())

    @property
    def num_outputs(self) -> int:  # type: ignore[override]  # an attribute of botorch's FeatureMap
        """:math:`F`, the number of features."""
        return int(self.columns.numel())

    @property
    def batch_shape(self) -> Size:  # type: ignore[override]  # an attribute of FeatureMap
        """The kernel's batch shape."""
        return self._batch_shape

    def basis(self, unit: torch.Tensor) -> torch.Tensor:
        r"""The orthonormal harmonics :math:`\phi` of the kept columns at unit vectors [..., N, d]:
        [..., N, F]."""
        return self.harmonics(unit)[..., self.columns]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\phi(x)` (:math:`\|x\|\, \phi(x / \|x\|)` for a homogeneous kernel), before the
        :math:`\sqrt{\lambda}` scale."""
        if not self.homogeneous:
            return self.basis(x)  # checks that x holds unit vectors of dimension d
        if x.shape[-1] != self.ambient_dim:
            raise ValueError(
                f"inputs must have last dimension ambient_dim={self.ambient_dim}, "
                f"got shape {tuple(x.shape)}"
            )
        check_finite(x, "x")
        radius = x.norm(dim=-1, keepdim=True)  # [..., N, 1]
        if (radius == 0).any():
            raise ValueError("a homogeneous kernel's features need non-zero input vectors")
        return radius * self.basis(x / radius)  # [..., N, F]


@dataclass(frozen=True)
class PriorSettings:
    """How prior paths are drawn.

    Attributes:
        tolerance: zonal kernels: the largest missing prior variance, as a fraction of
            :math:`k(1)` (``choose_truncation``).
        max_features: zonal kernels: the budget of harmonics.
        num_random_features: other kernels: the number of BoTorch random Fourier features.
    """

    tolerance: float = DEFAULT_TOLERANCE
    max_features: int = DEFAULT_MAX_FEATURES
    num_random_features: int = DEFAULT_RANDOM_FEATURES


def prior_feature_map(
    kernel: Kernel,
    settings: PriorSettings | None = None,
    *,
    num_inputs: int | None = None,
    required_levels: tuple[int, ...] = (),
) -> FeatureMap:
    r"""A feature map :math:`\psi` with :math:`k(x, x') \approx \psi(x) \cdot \psi(x')` for drawing
    prior paths :math:`f = \psi(\cdot)\, w`.

    A zonal kernel (optionally in a ``ScaleKernel``) gets the exact ``HarmonicFeatureMap`` of
    ``choose_truncation`` with the settings' tolerance and budget and the ``required_levels``; any
    other kernel BoTorch's random Fourier features (``gen_kernel_features``) on inputs of dimension
    ``num_inputs``.
    """
    settings = PriorSettings() if settings is None else settings
    base = getattr(kernel, "base_kernel", kernel)
    if isinstance(base, ZonalKernel):
        truncation = choose_truncation(
            kernel,
            tolerance=settings.tolerance,
            max_features=settings.max_features,
            required_levels=required_levels,
        )
        return HarmonicFeatureMap(kernel, truncation)
    if num_inputs is None:
        raise ValueError(
            f"{type(base).__name__} is not a zonal kernel: its random Fourier features need "
            "num_inputs, the dimension of the kernel's inputs"
        )
    return gen_kernel_features(
        kernel, num_inputs=num_inputs, num_outputs=settings.num_random_features
    )
