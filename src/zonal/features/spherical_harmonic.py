r"""Spherical-harmonic inducing features (VISH; seed 000 sec. 3.3, seed 002 sec. 5.1,
seed 001 ch. 3).

:math:`u_{n,j} = \langle f, \phi_{n,j} \rangle_\mathcal{H}` gives (seed 002 eqs. 17-18)

.. math::

    K_{uf}[(n, j), i] = \phi_{n,j}(x_i), \qquad K_{uu} = \operatorname{diag}(1 / \lambda_n),

so :math:`K_{uu}` is diagonal and no :math:`M^3` operation is ever needed. Levels whose eigenvalue
is zero (odd levels >= 3 of the first-order arc-cosine kernel) carry no RKHS mass: built with
``kernel=`` the features leave them out (``zonal.features.levels``); built without, such a level
makes :math:`K_{uu}` infinite and ``kuu`` raises ``NonFiniteCovarianceError``.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from linear_operator.operators import DiagLinearOperator

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
from zonal.harmonics import SphericalHarmonics, num_harmonics, total_harmonics
from zonal.harmonics.fundamental_system import check_fundamental_systems

MAX_DEGREE = 400  # beyond any budget that fits in memory for d >= 3


def max_degree_for_budget(ambient_dim: int, num_inducing: int, kernel: Kernel | None = None) -> int:
    r"""Largest :math:`L` such that the levels :math:`0, \dots, L` fit in ``num_inducing`` features.

    With a ``kernel``, levels whose eigenvalue is zero (``nonzero_levels``) cost nothing, so
    :math:`L` can exceed the complete-levels degree (by at most a factor two for the arc-cosine
    kernel's odd levels), and :math:`L` is the last *kept* level: a trailing zero level is never
    returned, so no fundamental system is built for a level that is then dropped.
    """
    d = check_ambient_dim(ambient_dim)

    def degree_within(levels: set[int] | None, limit: int) -> int:
        total, degree = 0, -1
        for level in range(limit + 1):
            size = num_harmonics(d, level) if levels is None or level in levels else 0
            if total + size > num_inducing:
                break
            total, degree = total + size, level
        return degree

    complete = degree_within(None, MAX_DEGREE)
    if complete < 0:
        raise ValueError(
            f"a budget of {num_inducing} features is smaller than one level "
            f"(degree 0 alone has {num_harmonics(d, 0)} harmonic)"
        )
    if kernel is None:
        return complete
    limit = min(2 * complete + 2, MAX_DEGREE)
    kept = set(nonzero_levels(kernel, limit))
    degree = degree_within(kept, limit)
    within = [level for level in kept if level <= degree]
    if not within:
        raise ValueError(
            f"a budget of {num_inducing} features is smaller than the kernel's first non-zero "
            f"level (degree {min(kept, default=limit)})"
        )
    return max(within)


class SphericalHarmonicFeatures(InducingFeatures):
    r"""All spherical harmonics of degrees 0..max_degree (minus zero-eigenvalue levels of
    ``kernel``).

    Args:
        ambient_dim: :math:`d`; inputs live on :math:`\mathbb{S}^{d-1}` (or in :math:`\mathbb{R}^d`
            with a homogeneous kernel).
        max_degree: highest degree; or give ``num_inducing`` instead, a budget :math:`M`, and get
            the largest complete set of levels that fits (a budget smaller than one level is an
            error).
        kernel: if given, levels whose eigenvalue is zero for it are left out (and do not count
            towards the budget); the highest degree is then the last kept level. The kernel is
            only read here, not stored.

    Attributes:
        max_degree: the highest degree of any feature.
        kept_levels: the degrees that have features, ascending (a tuple of ints).
        levels: LongTensor [M], the degree of each feature.

    Fundamental systems that are neither shipped nor cached are estimated before any is built; one
    that cannot be built raises ``FundamentalSystemTooLargeError``.
    """

    columns: torch.Tensor  # buffers: [M] columns of ``harmonics`` kept, [M] their degrees
    levels: torch.Tensor

    def __init__(
        self,
        ambient_dim: int,
        max_degree: int | None = None,
        *,
        num_inducing: int | None = None,
        kernel: Kernel | None = None,
    ) -> None:
        super().__init__()
        self.ambient_dim = check_ambient_dim(ambient_dim)
        if (max_degree is None) == (num_inducing is None):
            raise ValueError("give exactly one of max_degree and num_inducing")
        if kernel is not None:
            check_kernel_dim(kernel, self.ambient_dim)
        if num_inducing is not None:
            max_degree = max_degree_for_budget(self.ambient_dim, int(num_inducing), kernel)
        max_degree = check_degree(max_degree)
        kept = list(range(max_degree + 1)) if kernel is None else nonzero_levels(kernel, max_degree)
        if not kept:
            raise ValueError(f"the kernel has no non-zero eigenvalue at degrees 0..{max_degree}")
        self.max_degree = kept[-1]
        self.kept_levels = tuple(kept)
        check_fundamental_systems(self.ambient_dim, range(self.max_degree + 1))
        self.harmonics = SphericalHarmonics(self.ambient_dim, self.max_degree)
        keep = torch.isin(
            self.harmonics.levels, torch.tensor(kept, device=self.harmonics.levels.device)
        )  # [M_all]
        self.register_buffer("columns", torch.nonzero(keep).squeeze(-1))  # [M]
        self.register_buffer("levels", self.harmonics.levels[self.columns])  # [M]
        self.level_sizes = [
            size if n in self.kept_levels else 0
            for n, size in enumerate(self.harmonics.num_harmonics_per_level)
        ]

    @property
    def num_inducing(self) -> int:
        return int(self.columns.numel())

    def spectrum(self, kernel: Kernel) -> torch.Tensor:
        r""":math:`\lambda_{n(m)}` of each feature, the reciprocal of :math:`K_{uu}`'s diagonal:
        [*b, M]."""
        eigenvalues = kernel_eigenvalues(kernel, self.max_degree)  # [*b, L + 1]
        return eigenvalues[..., self.levels.to(eigenvalues.device)]

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        r"""The orthonormal harmonics :math:`\phi_m` at unit vectors :math:`x` [..., N, d]:
        [..., N, M]."""
        check_unit_vectors(x, self.ambient_dim)
        zonal = self.zonal_basis(x.to(self.harmonics.points.dtype))  # [..., N, M]
        return apply_level_factors(zonal, self.basis_factors())

    def zonal_basis(self, x: torch.Tensor, **options: torch.Tensor | None) -> torch.Tensor:
        r""":math:`Z_{n(m)}(\eta_m \cdot x)` at unit vectors :math:`x` [..., N, d] (not checked), in
        x's dtype: [..., N, M]. ``basis(x)`` is this times ``basis_factors``; ``options``
        (``row_scale``, ``out``) as for ``zonal.features.zonal_basis.zonal_columns``."""
        directions = self.harmonics.points[self.columns]  # [M, d]
        return zonal_columns(x, directions, self.level_sizes, self.ambient_dim, **options)

    def basis_factors(self) -> list[torch.Tensor]:
        r""":math:`F_n = L_n^{-1}` [N_n, N_n] of each kept level, ascending:
        :math:`\phi = Z \operatorname{blockdiag}(F_n)^\top`."""
        return [self.harmonics.inverse_cholesky(n) for n in self.kept_levels]

    def kuu(self, kernel: Kernel) -> DiagLinearOperator:
        r""":math:`\operatorname{diag}(1 / \lambda_{n(m)})` [*b, M, M]; ``NonFiniteCovarianceError``
        at a zero eigenvalue."""
        return inverse_spectrum(self.spectrum(kernel), self.levels)

    def kuf(self, kernel: Kernel, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\phi_m(x_i)` (times :math:`\|x_i\|` for a homogeneous kernel): [*b, M, N]."""
        unit, radius = unit_and_radius(kernel, x)
        return scale_by_radius(self.basis(unit).mT, radius)

    def extra_repr(self) -> str:
        return (
            f"ambient_dim={self.ambient_dim}, max_degree={self.max_degree}, "
            f"num_inducing={self.num_inducing} (of {total_harmonics(self.ambient_dim, self.max_degree)})"
        )
