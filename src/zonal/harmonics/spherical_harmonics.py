"""Orthonormal spherical harmonics of all degrees 0..max_degree on S^{d-1}, in any dimension.

Seed 001 theorems 3-4: with a fundamental system eta_1..eta_N of degree n and the Cholesky factor
L L^T = G, G_ij = Z_n(eta_i . eta_j), the functions

    phi_{n,j}(x) = sum_i (L^{-1})_{j,i} Z_n(eta_i . x),   Z_n = (n + alpha) / alpha C_n^alpha,

are an orthonormal basis of the degree-n harmonics in L2 of the normalised surface measure
(seed 000 eq. B.1), since <Z_n(eta_i . ), Z_n(eta_j . )> = Z_n(eta_i . eta_j) (reproducing property).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from zonal._validation import check_ambient_dim, check_degree, check_unit_vectors
from zonal.harmonics.counts import gegenbauer_alpha, num_harmonics
from zonal.harmonics.fundamental_system import gram_matrix, load_fundamental_system


def zonal_by_level(cosines: torch.Tensor, level_sizes: list[int], ambient_dim: int) -> torch.Tensor:
    """Z_{n(m)}(t_m) for columns grouped by degree: t [..., M] -> [..., M].

    Column block k (of ``level_sizes[k]`` columns, possibly 0) gets degree k. Without autograd each
    block runs its own recurrence in place (about 2x faster); with autograd one out-of-place
    recurrence runs over the columns still needed (a suffix: those of degree >= k).
    """
    alpha = gegenbauer_alpha(ambient_dim)
    if torch.is_grad_enabled() and cosines.requires_grad:
        return _zonal_by_level_differentiable(cosines, level_sizes, alpha)
    blocks = [
        _zonal_of_degree_inplace(block.clone(), degree, alpha)
        for degree, block in enumerate(cosines.split(level_sizes, dim=-1))
    ]
    return torch.cat(blocks, dim=-1)


def _zonal_of_degree_inplace(t: torch.Tensor, degree: int, alpha: float) -> torch.Tensor:
    """Z_degree(t), overwriting buffers of the shape of t (no autograd)."""
    if degree == 0:
        return torch.ones_like(t)
    previous = torch.ones_like(t)
    current = t.clone() if alpha == 0 else t * (2 * alpha)  # T_1 or C_1
    for k in range(2, degree + 1):
        if alpha == 0:  # T_k = 2 t T_{k-1} - T_{k-2}
            previous.mul_(-1).addcmul_(t, current, value=2.0)
        else:  # k C_k = 2 (k + alpha - 1) t C_{k-1} - (k + 2 alpha - 2) C_{k-2}
            previous.mul_(-(k + 2 * alpha - 2) / k).addcmul_(
                t, current, value=2 * (k + alpha - 1) / k
            )
        previous, current = current, previous
    return current.mul_(2.0 if alpha == 0 else (degree + alpha) / alpha)  # Z = 2 T (d = 2)


def _zonal_by_level_differentiable(
    cosines: torch.Tensor, level_sizes: list[int], alpha: float
) -> torch.Tensor:
    """``zonal_by_level`` by one shrinking out-of-place recurrence (autograd-friendly)."""
    t = cosines
    previous = torch.ones_like(t)  # C_0 (T_0 for d = 2)
    current = t if alpha == 0 else 2 * alpha * t  # C_1 (T_1 for d = 2)
    blocks = [previous[..., : level_sizes[0]]]  # Z_0 = 1
    for k in range(1, len(level_sizes)):
        drop = level_sizes[k - 1]
        t, previous, current = t[..., drop:], previous[..., drop:], current[..., drop:]
        if k >= 2 and alpha == 0:  # T_k = 2 t T_{k-1} - T_{k-2}
            previous, current = current, torch.addcmul(-previous, t, current, value=2.0)
        elif k >= 2:  # k C_k = 2 (k + alpha - 1) t C_{k-1} - (k + 2 alpha - 2) C_{k-2}
            previous, current = (
                current,
                torch.addcmul(
                    previous * (-(k + 2 * alpha - 2) / k), t, current, value=2 * (k + alpha - 1) / k
                ),
            )
        scale = 2.0 if alpha == 0 else (k + alpha) / alpha  # Z_k = 2 T_k for d = 2
        blocks.append(scale * current[..., : level_sizes[k]])
    return torch.cat(blocks, dim=-1)


class SphericalHarmonics(nn.Module):
    """phi(x): unit vectors [..., d] -> orthonormal harmonics [..., M], ordered by degree.

    Args:
        ambient_dim: d, the sphere is S^{d-1} subset R^d (d >= 2).
        max_degree: highest degree included; M = sum_{n <= max_degree} N_n^d columns.
        cache_dir: where missing fundamental systems are cached (default: the user cache folder).
        dtype: float64 by default; the Cholesky factors are always computed in float64.

    Attributes:
        levels: LongTensor [M], the degree of each column.
        num_harmonics_per_level: list with N_n^d for n = 0..max_degree.
    """

    CHUNK_ROWS = 512

    def __init__(
        self,
        ambient_dim: int,
        max_degree: int,
        *,
        cache_dir: str | Path | None = None,
        dtype: torch.dtype = torch.float64,
        progress: bool = True,
    ) -> None:
        super().__init__()
        self.ambient_dim = check_ambient_dim(ambient_dim)
        self.max_degree = check_degree(max_degree)
        self.alpha = gegenbauer_alpha(self.ambient_dim)
        self.num_harmonics_per_level = [
            num_harmonics(self.ambient_dim, n) for n in range(self.max_degree + 1)
        ]
        points, inverse_factors = [], []
        for n in range(self.max_degree + 1):
            eta = load_fundamental_system(
                self.ambient_dim, n, cache_dir=cache_dir, progress=progress
            )  # [N_n, d]
            factor = np.linalg.cholesky(gram_matrix(eta, n))  # [N_n, N_n], lower
            inverse = np.linalg.solve(factor, np.eye(len(eta)))  # L^{-1}
            points.append(torch.from_numpy(eta))
            inverse_factors.append(torch.from_numpy(inverse))
        self.register_buffer("points", torch.cat(points).to(dtype))  # [M, d]
        levels = torch.repeat_interleave(
            torch.arange(self.max_degree + 1), torch.tensor(self.num_harmonics_per_level)
        )
        self.register_buffer("levels", levels)  # [M]
        for n, inverse in enumerate(inverse_factors):
            self.register_buffer(f"inverse_cholesky_{n}", inverse.to(dtype))

    @property
    def num_features(self) -> int:
        """M, the total number of harmonics."""
        return int(self.levels.numel())

    def inverse_cholesky(self, degree: int) -> torch.Tensor:
        """L_n^{-1} [N_n, N_n]: maps Z_n(eta . x) to the orthonormal harmonics of degree n."""
        return getattr(self, f"inverse_cholesky_{degree}")

    def zonal_at_points(self, x: torch.Tensor) -> torch.Tensor:
        """Z_{level(m)}(eta_m . x) for every column m: [..., M]."""
        cosines = (x @ self.points.T).clamp(-1, 1)  # [..., M]
        return zonal_by_level(cosines, self.num_harmonics_per_level, self.ambient_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Orthonormal spherical harmonics at unit vectors x [..., d]: [..., M].

        Rows are processed in chunks of ``CHUNK_ROWS`` so that the recurrence's temporaries stay
        small (a 4-5x speed-up over one pass on 10k points).
        """
        check_unit_vectors(x, self.ambient_dim)
        flat = x.to(self.points.dtype).reshape(-1, self.ambient_dim)  # [N, d]
        chunks = [self._evaluate(rows) for rows in flat.split(self.CHUNK_ROWS)]
        if not chunks:
            return flat.new_zeros(*x.shape[:-1], self.num_features)
        return torch.cat(chunks).reshape(*x.shape[:-1], self.num_features)

    def _evaluate(self, x: torch.Tensor) -> torch.Tensor:
        """Harmonics of a chunk of unit vectors [n, d]: [n, M]."""
        zonal = self.zonal_at_points(x)  # [n, M]
        blocks = zonal.split(self.num_harmonics_per_level, dim=-1)
        harmonics = [
            block @ self.inverse_cholesky(n).T for n, block in enumerate(blocks)
        ]  # each [n, N_n]
        return torch.cat(harmonics, dim=-1)

    def extra_repr(self) -> str:
        return (
            f"ambient_dim={self.ambient_dim}, max_degree={self.max_degree}, "
            f"num_features={self.num_features}"
        )
