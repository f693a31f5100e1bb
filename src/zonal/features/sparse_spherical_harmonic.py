r"""Phase-truncated sparse spherical-harmonic features (seed 002 sec. 5.2).

Per degree :math:`n` keep at most :math:`\hat m` directions :math:`v_{n,1}, \dots, v_{n,m}` on the
sphere (learnable "phases"). At every evaluation they are orthogonalised within the level: with
:math:`L L^\top = G`, :math:`G_{ij} = Z_n(v_i \cdot v_j)`,

.. math::

    \psi_{n,j}(x) = \sum_i (L^{-1})_{j,i} Z_n(v_i \cdot x)

are :math:`L^2`-orthonormal harmonics of degree :math:`n`
(:math:`\langle Z_n(v_i \cdot\,), Z_n(v_j \cdot\,) \rangle = Z_n(v_i \cdot v_j)`). As elements of
the degree-:math:`n` eigenspace they keep the diagonal structure of VISH:

.. math::

    K_{uf}[(n, j), i] = \psi_{n,j}(x_i), \qquad K_{uu} = \operatorname{diag}(1 / \lambda_n),

so the frequency truncation can go much higher for the same :math:`M`. The only cubic cost is the
Cholesky of each level's :math:`m \times m` Gram matrix (:math:`m \le \hat m`). Built with
``kernel=``, levels whose eigenvalue is zero for it get no directions (``zonal.features.levels``);
built without, such a level makes :math:`K_{uu}` infinite and ``kuu`` raises
``NonFiniteCovarianceError``.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from linear_operator.operators import DiagLinearOperator
from torch import nn

from zonal._validation import check_ambient_dim, check_degree, check_unit_vectors
from zonal.features.base import (
    InducingFeatures,
    inverse_spectrum,
    kernel_eigenvalues,
    scale_by_radius,
    unit_and_radius,
)
from zonal.features.levels import check_kernel_dim, nonzero_levels
from zonal.features.zonal_basis import apply_level_factors, zonal_columns
from zonal.harmonics import load_fundamental_system, num_harmonics
from zonal.harmonics.fundamental_system import check_fundamental_systems
from zonal.harmonics.recurrence import zonal_by_level
from zonal.linalg import cholesky


class SparseSphericalHarmonicFeatures(InducingFeatures):
    r"""At most ``max_phases`` learnable directions per degree 0..max_degree.

    Args:
        ambient_dim: :math:`d`.
        max_degree: frequency truncation :math:`\hat l`.
        max_phases: phase truncation :math:`\hat m`; a level keeps :math:`\min(\hat m, N_n^d)`
            directions. Levels with :math:`N_n^d \le \hat m` are complete (their span is the full
            eigenspace).
        kernel: if given, levels whose eigenvalue is zero for it get no directions, and the
            frequency truncation becomes the last kept level. The kernel is only read here.
        learn_phases: make the directions trainable (default True).
        seed: initial directions are the first points of the degree's fundamental system for
            complete levels and random unit vectors (from this seed) otherwise.

    Attributes:
        max_degree: the highest degree of any feature.
        kept_levels: the degrees that have features, ascending (a tuple of ints).
        level_sizes: number of directions of each degree 0..max_degree (0 for a dropped level).
        levels: LongTensor [M], the degree of each feature.
    """

    levels: torch.Tensor  # buffer

    def __init__(
        self,
        ambient_dim: int,
        max_degree: int,
        max_phases: int,
        *,
        kernel: Kernel | None = None,
        learn_phases: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.ambient_dim = check_ambient_dim(ambient_dim)
        max_degree = check_degree(max_degree)
        self.max_phases = check_degree(max_phases, "max_phases")
        if self.max_phases < 1:
            raise ValueError("max_phases must be >= 1")
        if kernel is not None:
            check_kernel_dim(kernel, self.ambient_dim)
        kept = list(range(max_degree + 1)) if kernel is None else nonzero_levels(kernel, max_degree)
        if not kept:
            raise ValueError(f"the kernel has no non-zero eigenvalue at degrees 0..{max_degree}")
        self.max_degree = kept[-1]
        self.kept_levels = tuple(kept)
        self.level_sizes = [
            min(self.max_phases, num_harmonics(self.ambient_dim, n)) if n in kept else 0
            for n in range(self.max_degree + 1)
        ]
        complete = [
            n
            for n, size in enumerate(self.level_sizes)
            if size and size == num_harmonics(self.ambient_dim, n)
        ]
        check_fundamental_systems(self.ambient_dim, complete)
        generator = torch.Generator().manual_seed(seed)
        directions = []
        for n, size in enumerate(self.level_sizes):
            if n in complete:
                start = torch.from_numpy(load_fundamental_system(self.ambient_dim, n))
            elif size:
                start = torch.randn(
                    size, self.ambient_dim, generator=generator, dtype=torch.float64
                )
            else:
                continue
            directions.append(start / start.norm(dim=-1, keepdim=True))
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
        """Unit directions :math:`v` [M, d], grouped by degree."""
        return self.raw_directions / self.raw_directions.norm(dim=-1, keepdim=True)

    def _inverse_factors(self, directions: torch.Tensor) -> list[torch.Tensor]:
        """L_n^{-1} [m_n, m_n] per degree 0..max_degree, from the Gram matrices Z_n(V_n V_n^T)."""
        factors = []
        for n, block in enumerate(directions.split(self.level_sizes)):
            if not len(block):
                factors.append(block.new_zeros(0, 0))
                continue
            cosines = (block @ block.mT).clamp(-1, 1)  # [m, m]
            gram = zonal_by_level(
                cosines.reshape(1, -1), [0] * n + [cosines.numel()], self.ambient_dim
            ).reshape(cosines.shape)  # Z_n(V V^T): [m, m]
            factor = cholesky(gram, name=f"Gram matrix of the degree-{n} phases")
            identity = torch.eye(len(block), dtype=block.dtype, device=block.device)  # [m, m]
            factors.append(torch.linalg.solve_triangular(factor, identity, upper=False))
        return factors

    def spectrum(self, kernel: Kernel) -> torch.Tensor:
        r""":math:`\lambda_{n(m)}` of each feature, the reciprocal of :math:`K_{uu}`'s diagonal:
        [*b, M]."""
        eigenvalues = kernel_eigenvalues(kernel, self.max_degree)  # [*b, L + 1]
        return eigenvalues[..., self.levels.to(eigenvalues.device)]

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        r"""The orthonormalised harmonics :math:`\psi_m` at unit vectors :math:`x` [..., N, d]:
        [..., N, M]."""
        check_unit_vectors(x, self.ambient_dim)
        return apply_level_factors(self.zonal_basis(x), self.basis_factors())

    def zonal_basis(self, x: torch.Tensor, **options: torch.Tensor | None) -> torch.Tensor:
        r""":math:`Z_{n(m)}(v_m \cdot x)` at unit vectors :math:`x` [..., N, d] (not checked), in
        x's dtype: [..., N, M]. ``basis(x)`` is this times ``basis_factors``; ``options``
        (``row_scale``, ``out``) as for ``zonal.features.zonal_basis.zonal_columns``."""
        return zonal_columns(x, self.directions, self.level_sizes, self.ambient_dim, **options)

    def basis_factors(self) -> list[torch.Tensor]:
        r""":math:`F_n = L_n^{-1}` [m_n, m_n] of each level with directions, ascending:
        :math:`\psi = Z F^\top`."""
        directions = self.directions  # [M, d]
        return [factor for factor in self._inverse_factors(directions) if len(factor)]

    def kuu(self, kernel: Kernel) -> DiagLinearOperator:
        r""":math:`\operatorname{diag}(1 / \lambda_{n(m)})` [*b, M, M]; ``NonFiniteCovarianceError``
        at a zero eigenvalue."""
        return inverse_spectrum(self.spectrum(kernel), self.levels)

    def kuf(self, kernel: Kernel, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\psi_m(x_i)` (times :math:`\|x_i\|` for a homogeneous kernel): [*b, M, N]."""
        unit, radius = unit_and_radius(kernel, x)
        return scale_by_radius(self.basis(unit).mT, radius)

    def extra_repr(self) -> str:
        return (
            f"ambient_dim={self.ambient_dim}, max_degree={self.max_degree}, "
            f"max_phases={self.max_phases}, num_inducing={self.num_inducing}"
        )
