r"""Intrinsic Matérn and heat kernels of :math:`\mathbb{S}^{d-1}` (Borovitskiy et al. 2020; seed 004
sec. 2.4 eq. 2.24).

The Laplace-Beltrami operator of :math:`\mathbb{S}^{d-1}` has the eigenvalue :math:`n (n + d - 2)`
on the harmonics of degree :math:`n`, so eq. 2.24 (with the sphere's own dimension :math:`d - 1` in
the exponent) is a zonal kernel

.. math::

    k(x, x') &= \sum_{n=0}^{L} \lambda_n Z_n(x \cdot x'), \qquad \lambda_n = \Phi(n) / C, \\
    \text{Matérn:} \quad \Phi(n)
    &= \big(2 \nu / \kappa^2 + n (n + d - 2)\big)^{-\nu - (d - 1)/2}, \\
    \text{heat:} \quad \Phi(n) &= \exp\big(-\kappa^2 / 2 \cdot n (n + d - 2)\big), \\
    C &= \sum_{n=0}^{L} N_n^d \Phi(n),

where :math:`\kappa` is the GPyTorch ``lengthscale`` and :math:`C` normalises the truncated kernel
to unit prior variance: :math:`k(x, x) = \sum_n \lambda_n Z_n(1) = \sum_n \lambda_n N_n^d = 1`. The
kernel is defined by the truncated sum (truncation ``max_degree`` = :math:`L`), so it is exactly
positive definite; there is no closed form. Computed in log space (the normalisation is a
log-sum-exp).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from zonal.harmonics import num_harmonics
from zonal.kernels.base import ZonalKernel


def laplace_beltrami_eigenvalues(
    ambient_dim: int, max_degree: int, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    r""":math:`n (n + d - 2)` for :math:`n = 0, \dots, L`: the (negated) Laplace-Beltrami spectrum
    of :math:`\mathbb{S}^{d-1}`, [L + 1]."""
    n = torch.arange(max_degree + 1, dtype=dtype)
    return n * (n + ambient_dim - 2)


class _IntrinsicKernel(ZonalKernel):
    """Shared normalisation: lambda_n = Phi(n) / sum_m N_m Phi(m) from log Phi."""

    has_lengthscale = True

    def _log_spectrum(self, laplacian: torch.Tensor, kappa: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _compute_eigenvalues(self, max_degree: int) -> torch.Tensor:
        """lambda_0..lambda_{max_degree}, normalised over the kernel's own truncation 0..L (the
        kernel is the truncated sum whatever number of levels is asked for; levels above L are
        zero, set by ``eigenvalues``)."""
        requested, max_degree = max_degree, max(max_degree, self.max_degree)
        dtype = self.raw_lengthscale.dtype
        device = self.raw_lengthscale.device
        laplacian = laplace_beltrami_eigenvalues(self.ambient_dim, max_degree, dtype).to(device)
        kappa = self.lengthscale.squeeze(-1)  # [*batch_shape, 1]
        log_phi = self._log_spectrum(laplacian, kappa)  # [*batch_shape, L + 1]
        log_counts = torch.tensor(
            [math.log(num_harmonics(self.ambient_dim, n)) for n in range(max_degree + 1)],
            dtype=dtype,
            device=device,
        )  # [L + 1]
        own = slice(0, self.max_degree + 1)  # the levels of the defining sum
        log_norm = torch.logsumexp(
            log_phi[..., own] + log_counts[own], dim=-1, keepdim=True
        )  # [*batch, 1]
        return torch.exp(log_phi - log_norm)[..., : requested + 1]


class IntrinsicMaternKernel(_IntrinsicKernel):
    r"""Matérn-:math:`\nu` kernel of the sphere :math:`\mathbb{S}^{d-1}` (seed 004 eq. 2.24), unit
    prior variance.

    Args:
        ambient_dim: :math:`d`.
        nu: smoothness, any :math:`\nu > 0` (fixed).
        max_degree: truncation :math:`L` of the defining sum (default 30).
    """

    def __init__(self, ambient_dim: int, nu: float = 1.5, **kwargs: Any) -> None:
        if isinstance(nu, bool) or not isinstance(nu, int | float) or not 0 < nu < math.inf:
            raise ValueError(f"nu must be a finite number > 0, got {nu!r}")
        self.nu = float(nu)
        super().__init__(ambient_dim, **kwargs)

    def _log_spectrum(self, laplacian: torch.Tensor, kappa: torch.Tensor) -> torch.Tensor:
        exponent = -self.nu - (self.ambient_dim - 1) / 2
        return exponent * torch.log(2 * self.nu / kappa**2 + laplacian)

    def spectrum_settings(self) -> tuple:
        return (*super().spectrum_settings(), self.nu)


class IntrinsicHeatKernel(_IntrinsicKernel):
    r"""Heat (intrinsic squared-exponential, :math:`\nu \to \infty`) kernel of
    :math:`\mathbb{S}^{d-1}`, unit prior variance.

    :math:`\Phi(n) = \exp\big(-\kappa^2 / 2 \cdot n (n + d - 2)\big)` (seed 004 eq. 2.24): the heat
    semigroup at time :math:`\kappa^2 / 2`. ``max_degree`` is the truncation :math:`L` (default 30).
    """

    def _log_spectrum(self, laplacian: torch.Tensor, kappa: torch.Tensor) -> torch.Tensor:
        return -(kappa**2) / 2 * laplacian
