"""Inducing points :math:`u = f(z)` (the baseline; seed 000 sec. 3.1): :math:`K_{uu} = k(Z, Z)`,
:math:`K_{uf} = k(Z, X)`."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from torch import nn

from zonal._validation import check_finite
from zonal.features.base import InducingFeatures


class InducingPoints(InducingFeatures):
    """Inducing inputs :math:`Z` [M, d] (learnable by default), for any GPyTorch kernel."""

    def __init__(self, points: torch.Tensor, *, learn_points: bool = True) -> None:
        super().__init__()
        if not isinstance(points, torch.Tensor) or points.dim() != 2:
            raise ValueError("points must be a tensor [M, d]")
        check_finite(points, "inducing points")
        if learn_points:
            self.points = nn.Parameter(points.clone())
        else:
            self.register_buffer("points", points.clone())

    @property
    def num_inducing(self) -> int:
        return int(self.points.shape[-2])

    def kuu(self, kernel: Kernel) -> torch.Tensor:
        """:math:`k(Z, Z)` [*b, M, M]."""
        return kernel(self.points).to_dense()

    def kuf(self, kernel: Kernel, x: torch.Tensor) -> torch.Tensor:
        """:math:`k(Z, X)` [*b, M, N]."""
        return kernel(self.points, x).to_dense()
