r"""The inducing-feature interface: :math:`K_{uu}` and :math:`K_{uf}`, defined once per (feature,
kernel) pair.

Inter-domain inducing variables follow the RKHS convention of docs/conventions.md (seed 000 eq. 13,
seed 002 eq. 16): :math:`u_m = \langle f, g_m \rangle_\mathcal{H}`, so that
:math:`K_{uf}[m, i] = g_m(x_i)` by the reproducing property and
:math:`K_{uu}[m, m'] = \langle g_m, g_{m'} \rangle_\mathcal{H}`. A homogeneous kernel
(``kernel.homogeneous``) is the 1-homogeneous extension :math:`f(x) = \|x\|\, g(x / \|x\|)` of a GP
:math:`g` on the sphere (seed 000 eq. 7), so its :math:`K_{uf}` picks up the factor :math:`\|x\|`:
:math:`K_{uf}[m, i] = \|x_i\|\, g_m(x_i / \|x_i\|)`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from gpytorch.kernels import Kernel, ScaleKernel
from linear_operator.operators import DiagLinearOperator
from torch import nn

from zonal._validation import check_finite, check_unit_vectors


class NonFiniteCovarianceError(ValueError):
    r""":math:`K_{uu}` holds an infinite or NaN entry: a level the features use has a zero (or
    underflowing) eigenvalue for this kernel, so its :math:`1 / \lambda_n` is infinite."""


class InducingFeatures(nn.Module, ABC):
    """Base class: ``kuu(kernel)`` [*b, M, M] and ``kuf(kernel, x)`` [*b, M, N]."""

    @property
    @abstractmethod
    def num_inducing(self) -> int:
        """:math:`M`, the number of inducing variables."""

    @abstractmethod
    def kuu(self, kernel: Kernel) -> torch.Tensor | DiagLinearOperator:
        r""":math:`\operatorname{Cov}(u, u)` [*b, M, M]: a ``DiagLinearOperator`` where it is
        diagonal, else dense."""

    @abstractmethod
    def kuf(self, kernel: Kernel, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\operatorname{Cov}(u, f(x))` [*b, M, N] for inputs :math:`x` [*b, N, d]."""

    def __len__(self) -> int:
        return self.num_inducing


def base_zonal_kernel(kernel: Kernel) -> tuple[Kernel, torch.Tensor | None]:
    """(the zonal kernel inside, its ScaleKernel outputscale [*b] or None)."""
    from zonal.kernels import ZonalKernel

    outputscale = None
    if isinstance(kernel, ScaleKernel):
        outputscale = kernel.outputscale
        kernel = kernel.base_kernel
    if not isinstance(kernel, ZonalKernel):
        raise ValueError(
            f"this inducing feature needs a zonal kernel (zonal.kernels.ZonalKernel, optionally in "
            f"a ScaleKernel), got {type(kernel).__name__}"
        )
    return kernel, outputscale


def kernel_eigenvalues(kernel: Kernel, max_degree: int) -> torch.Tensor:
    r""":math:`\lambda_0, \dots, \lambda_L` of a zonal kernel, times the outputscale of a
    ScaleKernel: [*b, L + 1]."""
    zonal, outputscale = base_zonal_kernel(kernel)
    eigenvalues = zonal.eigenvalues(max_degree)  # [*b, L + 1]
    if outputscale is not None:
        eigenvalues = eigenvalues * outputscale.unsqueeze(-1)
    return eigenvalues


def unit_and_radius(kernel: Kernel, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Split inputs [*b, N, d] into unit vectors and radii [*b, N] (None if not homogeneous)."""
    zonal, _ = base_zonal_kernel(kernel)
    if getattr(zonal, "homogeneous", False):
        if x.shape[-1] != zonal.ambient_dim:
            raise ValueError(
                f"inputs must have last dimension ambient_dim={zonal.ambient_dim}, "
                f"got shape {tuple(x.shape)}"
            )
        check_finite(x, "x")
        radius = x.norm(dim=-1)  # [*b, N]
        if (radius == 0).any():
            raise ValueError("a homogeneous kernel needs non-zero input vectors")
        return x / radius.unsqueeze(-1), radius
    check_unit_vectors(x, zonal.ambient_dim)
    return x, None


def inverse_spectrum(spectrum: torch.Tensor, levels: torch.Tensor) -> DiagLinearOperator:
    """Kuu = diag(1 / lambda_{n(m)}) [*b, M, M] from the spectrum [*b, M] of features of degrees
    ``levels`` [M] (seed 002 eq. 18); ``NonFiniteCovarianceError`` naming the degrees where it is
    infinite."""
    diagonal = spectrum.reciprocal()  # [*b, M]
    finite = torch.isfinite(diagonal).reshape(-1, diagonal.shape[-1]).all(0)  # [M]
    if not bool(finite.all()):
        degrees = sorted(set(levels[~finite].tolist()))
        raise NonFiniteCovarianceError(
            f"Kuu = diag(1 / lambda_n) is infinite at degree(s) {degrees}: the kernel's eigenvalue "
            "is zero there. Build the features with kernel=<this kernel> so that levels without "
            "RKHS mass are left out."
        )
    return DiagLinearOperator(diagonal)


def scale_by_radius(kuf: torch.Tensor, radius: torch.Tensor | None) -> torch.Tensor:
    """Kuf [*b, M, N] times ||x_i|| per column (the homogeneous extension)."""
    return kuf if radius is None else kuf * radius.unsqueeze(-2)
