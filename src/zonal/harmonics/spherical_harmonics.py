r"""Orthonormal spherical harmonics of all degrees 0..max_degree on :math:`\mathbb{S}^{d-1}`, in any
dimension.

Seed 001 theorems 3-4: with a fundamental system :math:`\eta_1, \dots, \eta_N` of degree :math:`n`
and the Cholesky factor :math:`L L^\top = G`, :math:`G_{ij} = Z_n(\eta_i \cdot \eta_j)`, the
functions

.. math::

    \phi_{n,j}(x) = \sum_i (L^{-1})_{j,i} Z_n(\eta_i \cdot x), \qquad
    Z_n = \frac{n + \alpha}{\alpha} C_n^\alpha,

are an orthonormal basis of the degree-:math:`n` harmonics in :math:`L^2` of the normalised surface
measure (seed 000 eq. B.1), since
:math:`\langle Z_n(\eta_i \cdot\,), Z_n(\eta_j \cdot\,) \rangle = Z_n(\eta_i \cdot \eta_j)`
(reproducing property).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from zonal._validation import check_ambient_dim, check_degree, check_unit_vectors
from zonal.harmonics.counts import gegenbauer_alpha, num_harmonics
from zonal.harmonics.fundamental_system import (
    check_fundamental_systems,
    gram_matrix,
    load_fundamental_system,
)
from zonal.harmonics.recurrence import zonal_by_level

__all__ = ["SphericalHarmonics", "zonal_by_level"]


class SphericalHarmonics(nn.Module):
    r""":math:`\phi(x)`: unit vectors [..., d] -> orthonormal harmonics [..., M], ordered by degree.

    Args:
        ambient_dim: :math:`d`, the sphere is :math:`\mathbb{S}^{d-1} \subset \mathbb{R}^d`
            (:math:`d \ge 2`).
        max_degree: highest degree included;
            :math:`M = \sum_{n \le \mathtt{max\_degree}} N_n^d` columns.
        cache_dir: where missing fundamental systems are cached (default: the user cache folder).
        dtype: float64 by default; the Cholesky factors are always computed in float64.

    Attributes:
        levels: LongTensor [M], the degree of each column.
        num_harmonics_per_level: list with :math:`N_n^d` for
            :math:`n = 0, \dots, \mathtt{max\_degree}`.
    """

    CHUNK_ROWS = 512
    points: torch.Tensor  # buffers: [M, d] fundamental-system points, [M] degrees
    levels: torch.Tensor

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
        # every missing system refused before any is built (a degree too large for the machine
        # must not cost the smaller degrees' builds first)
        check_fundamental_systems(self.ambient_dim, range(self.max_degree + 1), cache_dir=cache_dir)
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
        for n, factor_inverse in enumerate(inverse_factors):
            self.register_buffer(f"inverse_cholesky_{n}", factor_inverse.to(dtype))

    @property
    def num_features(self) -> int:
        """:math:`M`, the total number of harmonics."""
        return int(self.levels.numel())

    def inverse_cholesky(self, degree: int) -> torch.Tensor:
        r""":math:`L_n^{-1}` [N_n, N_n]: maps :math:`Z_n(\eta \cdot x)` to the orthonormal harmonics
        of degree :math:`n`."""
        return getattr(self, f"inverse_cholesky_{degree}")

    def zonal_at_points(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`Z_{\operatorname{level}(m)}(\eta_m \cdot x)` for every column :math:`m`:
        [..., M]."""
        cosines = (x @ self.points.T).clamp(-1, 1)  # [..., M]
        return zonal_by_level(cosines, self.num_harmonics_per_level, self.ambient_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Orthonormal spherical harmonics at unit vectors :math:`x` [..., d]: [..., M].

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
