"""Phase-truncated sparse spherical-harmonic features (seed 002 sec. 5.2).

Per degree n keep at most m-hat directions v_{n,1..m} on the sphere (learnable "phases"). At every
evaluation they are orthogonalised within the level: with L L^T = G, G_ij = Z_n(v_i . v_j),

    psi_{n,j}(x) = sum_i (L^{-1})_{j,i} Z_n(v_i . x)

are L2-orthonormal harmonics of degree n (<Z_n(v_i . ), Z_n(v_j . )> = Z_n(v_i . v_j)). As
elements of the degree-n eigenspace they keep the diagonal structure of VISH:

    Kuf[(n, j), i] = psi_{n,j}(x_i),      Kuu = diag(1 / lambda_n),

so the frequency truncation can go much higher for the same M. The only cubic cost is the
Cholesky of each level's m x m Gram matrix (m <= m-hat).
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from linear_operator.operators import DiagLinearOperator
from torch import nn

from zonal._validation import check_ambient_dim, check_degree
from zonal.features.base import (
    InducingFeatures,
    kernel_eigenvalues,
    scale_by_radius,
    unit_and_radius,
)
from zonal.harmonics import load_fundamental_system, num_harmonics
from zonal.harmonics.spherical_harmonics import zonal_by_level
from zonal.linalg import cholesky


class SparseSphericalHarmonicFeatures(InducingFeatures):
    """At most ``max_phases`` learnable directions per degree 0..max_degree.

    Args:
        ambient_dim: d.
        max_degree: frequency truncation l-hat.
        max_phases: phase truncation m-hat; a level keeps min(m-hat, N_n^d) directions. Levels with
            N_n^d <= m-hat are complete (their span is the full eigenspace).
        learn_phases: make the directions trainable (default True).
        seed: initial directions are the first points of the degree's fundamental system for
            complete levels and random unit vectors (from this seed) otherwise.
    """

    def __init__(
        self,
        ambient_dim: int,
        max_degree: int,
        max_phases: int,
        *,
        learn_phases: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.ambient_dim = check_ambient_dim(ambient_dim)
        self.max_degree = check_degree(max_degree)
        self.max_phases = check_degree(max_phases, "max_phases")
        if self.max_phases < 1:
            raise ValueError("max_phases must be >= 1")
        generator = torch.Generator().manual_seed(seed)
        directions = []
        self.level_sizes = []
        for n in range(self.max_degree + 1):
            size = min(self.max_phases, num_harmonics(self.ambient_dim, n))
            if size == num_harmonics(self.ambient_dim, n):
                start = torch.from_numpy(load_fundamental_system(self.ambient_dim, n))
            else:
                start = torch.randn(
                    size, self.ambient_dim, generator=generator, dtype=torch.float64
                )
            directions.append(start / start.norm(dim=-1, keepdim=True))
            self.level_sizes.append(size)
        stacked = torch.cat(directions)  # [M, d]
        if learn_phases:
            self.raw_directions = nn.Parameter(stacked)
        else:
            self.register_buffer("raw_directions", stacked)
        levels = torch.repeat_interleave(
            torch.arange(self.max_degree + 1), torch.tensor(self.level_sizes)
        )
        self.register_buffer("levels", levels)  # [M]

    @property
    def num_inducing(self) -> int:
        return int(self.levels.numel())

    @property
    def directions(self) -> torch.Tensor:
        """Unit directions v [M, d], grouped by degree."""
        return self.raw_directions / self.raw_directions.norm(dim=-1, keepdim=True)

    def _inverse_factors(self, directions: torch.Tensor) -> list[torch.Tensor]:
        """L_n^{-1} per degree, from the Gram matrices Z_n(V_n V_n^T)."""
        factors = []
        for n, block in enumerate(directions.split(self.level_sizes)):
            cosines = (block @ block.T).clamp(-1, 1)  # [m, m]
            gram = zonal_by_level(
                cosines.reshape(1, -1), [0] * n + [cosines.numel()], self.ambient_dim
            ).reshape(cosines.shape)  # Z_n(V V^T)
            factor = cholesky(gram, name=f"Gram matrix of the degree-{n} phases")
            identity = torch.eye(len(block), dtype=block.dtype, device=block.device)
            factors.append(torch.linalg.solve_triangular(factor, identity, upper=False))
        return factors

    def kuu(self, kernel: Kernel) -> DiagLinearOperator:
        """diag(1 / lambda_{n(m)}) [*b, M, M]."""
        eigenvalues = kernel_eigenvalues(kernel, self.max_degree)  # [*b, L + 1]
        return DiagLinearOperator(1.0 / eigenvalues[..., self.levels])

    def kuf(self, kernel: Kernel, x: torch.Tensor) -> torch.Tensor:
        """psi_m(x_i) (times ||x_i|| for a homogeneous kernel): [*b, M, N]."""
        unit, radius = unit_and_radius(kernel, x)
        directions = self.directions.to(unit.dtype)  # [M, d]
        zonal = zonal_by_level(
            (unit @ directions.T).clamp(-1, 1), self.level_sizes, self.ambient_dim
        )  # [*b, N, M]
        blocks = zonal.split(self.level_sizes, dim=-1)
        inverses = self._inverse_factors(directions)
        features = torch.cat(
            [block @ inverse.T for block, inverse in zip(blocks, inverses, strict=True)], dim=-1
        )  # [*b, N, M]
        return scale_by_radius(features.transpose(-1, -2), radius)

    def extra_repr(self) -> str:
        return (
            f"ambient_dim={self.ambient_dim}, max_degree={self.max_degree}, "
            f"max_phases={self.max_phases}, num_inducing={self.num_inducing}"
        )
