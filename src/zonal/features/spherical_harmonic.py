"""Spherical-harmonic inducing features (VISH; seed 000 sec. 3.3, seed 002 sec. 5.1, seed 001 ch. 3).

u_{n,j} = <f, phi_{n,j}>_H gives (seed 002 eqs. 17-18)

    Kuf[(n, j), i] = phi_{n,j}(x_i),      Kuu = diag(1 / lambda_n),

so Kuu is diagonal and no M^3 operation is ever needed. Levels whose eigenvalue is zero (odd levels
>= 3 of the first-order arc-cosine kernel) carry no RKHS mass and are left out.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from linear_operator.operators import DiagLinearOperator

from zonal._validation import check_ambient_dim, check_degree
from zonal.features.base import (
    InducingFeatures,
    kernel_eigenvalues,
    scale_by_radius,
    unit_and_radius,
)
from zonal.harmonics import SphericalHarmonics, num_harmonics, total_harmonics

MAX_DEGREE = 400  # beyond any budget that fits in memory for d >= 3
ZERO_EIGENVALUE = 1e-9  # relative to the largest eigenvalue, as in seed 000 tables C.1-C.2


def nonzero_levels(
    kernel: Kernel, max_degree: int, threshold: float = ZERO_EIGENVALUE
) -> list[int]:
    """Degrees n <= max_degree whose eigenvalue exceeds ``threshold`` * max eigenvalue."""
    eigenvalues = kernel_eigenvalues(kernel, max_degree).detach()  # [*b, L + 1]
    eigenvalues = eigenvalues.reshape(-1, max_degree + 1).abs().amax(0)  # [L + 1]
    cutoff = threshold * float(eigenvalues.max())
    return [n for n in range(max_degree + 1) if float(eigenvalues[n]) > cutoff]


def max_degree_for_budget(ambient_dim: int, num_inducing: int, kernel: Kernel | None = None) -> int:
    """Largest L such that the levels 0..L fit in ``num_inducing`` features; with a ``kernel``,
    levels whose eigenvalue is zero cost nothing (so L can exceed the complete-levels degree, by at
    most a factor two for the arc-cosine kernel's odd levels)."""
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
    levels = set(nonzero_levels(kernel, limit))
    return min(degree_within(levels, limit), max(levels))  # no trailing zero levels


class SphericalHarmonicFeatures(InducingFeatures):
    """All spherical harmonics of degrees 0..max_degree (minus zero-eigenvalue levels of ``kernel``).

    Args:
        ambient_dim: d; inputs live on S^{d-1} (or in R^d with a homogeneous kernel).
        max_degree: highest degree; or give ``num_inducing`` instead, a budget M, and get the largest
            complete set of levels that fits (a budget smaller than one level is an error).
        kernel: if given, levels whose eigenvalue is zero for it are left out (and do not count
            towards the budget).
    """

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
        if num_inducing is not None:
            max_degree = max_degree_for_budget(self.ambient_dim, int(num_inducing), kernel)
        self.max_degree = check_degree(max_degree)
        levels = (
            list(range(self.max_degree + 1))
            if kernel is None
            else nonzero_levels(kernel, self.max_degree)
        )
        self.harmonics = SphericalHarmonics(self.ambient_dim, self.max_degree)
        keep = torch.isin(self.harmonics.levels, torch.tensor(levels))
        self.register_buffer("columns", torch.nonzero(keep).squeeze(-1))  # [M]
        self.register_buffer("levels", self.harmonics.levels[self.columns])  # [M]

    @property
    def num_inducing(self) -> int:
        return int(self.columns.numel())

    def kuu(self, kernel: Kernel) -> DiagLinearOperator:
        """diag(1 / lambda_{n(m)}) [*b, M, M]."""
        eigenvalues = kernel_eigenvalues(kernel, self.max_degree)  # [*b, L + 1]
        return DiagLinearOperator(1.0 / eigenvalues[..., self.levels])

    def kuf(self, kernel: Kernel, x: torch.Tensor) -> torch.Tensor:
        """phi_m(x_i) (times ||x_i|| for a homogeneous kernel): [*b, M, N]."""
        unit, radius = unit_and_radius(kernel, x)
        values = self.harmonics(unit)[..., self.columns]  # [*b, N, M]
        return scale_by_radius(values.transpose(-1, -2), radius)

    def extra_repr(self) -> str:
        return (
            f"ambient_dim={self.ambient_dim}, max_degree={self.max_degree}, "
            f"num_inducing={self.num_inducing} (of {total_harmonics(self.ambient_dim, self.max_degree)})"
        )
