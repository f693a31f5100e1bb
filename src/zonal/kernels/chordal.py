r"""Euclidean Matérn and squared-exponential kernels restricted to :math:`\mathbb{S}^{d-1}`
(seed 000 sec. 4.2, 5.3).

On the sphere the chordal distance is a function of the cosine,
:math:`\|x - x'\|^2 = 2 (1 - x \cdot x')`, so a stationary kernel of :math:`\mathbb{R}^d` restricted
to :math:`\mathbb{S}^{d-1}` is zonal with shape :math:`s(t) = m(r)`, :math:`r = \sqrt{2 (1 - t)}`:

.. math::

    \nu = 1/2: \quad & m(r) = \exp(-r / \rho) \\
    \nu = 3/2: \quad & m(r) = (1 + \sqrt{3}\, r / \rho) \exp(-\sqrt{3}\, r / \rho) \\
    \nu = 5/2: \quad & m(r) = \big(1 + \sqrt{5}\, r / \rho + 5 r^2 / (3 \rho^2)\big)
    \exp(-\sqrt{5}\, r / \rho) \\
    \text{SE}: \quad & m(r) = \exp\big(-r^2 / (2 \rho^2)\big) = \exp\big(-(1 - t) / \rho^2\big)

with :math:`\rho` the GPyTorch ``lengthscale``. (Seed 000 sec. 5.3 prints the Matérn-5/2 shape with
:math:`t` in place of :math:`r`; with :math:`t` it would not even be maximal at :math:`t = 1`. The
chordal distance is what is meant.) Positive definite on the sphere because they are on
:math:`\mathbb{R}^d`. Eigenvalues by Funk-Hecke quadrature.

Numerics: :math:`r = \sqrt{2 (1 - t)}` has an infinite slope at :math:`t = 1`; it is computed with a
masked square root so that gradients stay finite (the :math:`t`-derivative at exactly :math:`t = 1`
is taken as 0; for :math:`\nu = 3/2, 5/2` the true one-sided value is finite, but every tangential
derivative at coincident points is 0).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from zonal.kernels.base import ZonalKernel
from zonal.kernels.tiles import CosineMap

SUPPORTED_NU = (0.5, 1.5, 2.5)


def chordal_distance(t: torch.Tensor) -> torch.Tensor:
    r""":math:`r = \sqrt{2 (1 - t)} = \|x - x'\|` for unit vectors, with a finite gradient at
    :math:`t = 1`."""
    gap = (1 - t).clamp_min(0)  # 1 - t in [0, 2]
    positive = gap > 0
    safe = torch.where(positive, gap, torch.ones_like(gap))
    return torch.where(positive, (2 * safe).sqrt(), torch.zeros_like(gap))


def matern_values(t: torch.Tensor, rate: torch.Tensor, nu: float) -> torch.Tensor:
    """m_nu(r) at r = sqrt(2 (1 - t)) with rate = sqrt(2 nu) / rho, without autograd.

    In place on fresh buffers (t is not modified); ``rate`` [*batch_shape, 1, 1] broadcasts.
    """
    scaled = torch.sub(1, t).clamp_min_(0).mul_(2).sqrt_()  # r = sqrt(2 (1 - t))
    if torch.broadcast_shapes(scaled.shape, rate.shape) == scaled.shape:
        scaled.mul_(rate)  # sqrt(2 nu) r / rho
    else:
        scaled = scaled * rate
    decay = torch.neg(scaled).exp_()
    if nu == 0.5:
        return decay
    if nu == 1.5:
        return scaled.add_(1).mul_(decay)
    return torch.mul(scaled, scaled).div_(3).add_(scaled).add_(1).mul_(decay)


def rbf_values(t: torch.Tensor, inverse_square: torch.Tensor) -> torch.Tensor:
    """exp(-(1 - t) / rho^2) with inverse_square = 1 / rho^2 [*batch_shape, 1, 1], no autograd."""
    exponent = t.clamp(-1, 1).sub_(1)  # t - 1 in [-2, 0] (a fresh tensor: in place is safe)
    if torch.broadcast_shapes(exponent.shape, inverse_square.shape) == exponent.shape:
        return exponent.mul_(inverse_square).exp_()
    return (exponent * inverse_square).exp_()


def _check_nu(nu: object) -> float:
    if isinstance(nu, bool) or not isinstance(nu, int | float) or float(nu) not in SUPPORTED_NU:
        raise ValueError(f"chordal Matérn needs nu in {SUPPORTED_NU}, got {nu!r}")
    return float(nu)


class ChordalMaternKernel(ZonalKernel):
    r"""Matérn-:math:`\nu` (:math:`\nu = 1/2, 3/2, 5/2`) of :math:`\mathbb{R}^d` restricted to
    :math:`\mathbb{S}^{d-1}`: :math:`s(t) = m_\nu\big(\sqrt{2 (1 - t)}\big)`.

    :math:`k(x, x) = 1`; scale with ``gpytorch.kernels.ScaleKernel``. ``lengthscale`` is
    :math:`\rho`.
    """

    has_lengthscale = True

    def __init__(self, ambient_dim: int, nu: float = 2.5, **kwargs: Any) -> None:
        self.nu = _check_nu(nu)
        super().__init__(ambient_dim, **kwargs)

    def shape(self, t: torch.Tensor) -> torch.Tensor:
        rate = math.sqrt(2 * self.nu) / self.lengthscale  # [*batch_shape, 1, 1]
        if not torch.is_grad_enabled():
            return matern_values(t, rate, self.nu)
        scaled = chordal_distance(t) * rate  # sqrt(2 nu) r / rho: [..., N, M]
        decay = torch.exp(-scaled)
        if self.nu == 0.5:
            return decay
        if self.nu == 1.5:
            return (1 + scaled) * decay
        return (1 + scaled + scaled**2 / 3) * decay

    def closed_form_map(self, dtype: torch.dtype, device: torch.device) -> CosineMap:
        rate = math.sqrt(2 * self.nu) / self.lengthscale.detach()  # [*batch_shape, 1, 1]
        return CosineMap(matern_values, (rate.to(dtype=dtype, device=device), self.nu))

    def spectrum_settings(self) -> tuple:
        return (*super().spectrum_settings(), self.nu)


class ChordalRBFKernel(ZonalKernel):
    r"""Squared exponential of :math:`\mathbb{R}^d` restricted to :math:`\mathbb{S}^{d-1}`:
    :math:`s(t) = \exp(-(1 - t) / \rho^2)`.

    Its eigenvalues have the closed form
    :math:`\exp(-1/\rho^2)\, \Gamma(d/2)\, (2 \rho^2)^\alpha I_{n+\alpha}(1/\rho^2)` (modified
    Bessel :math:`I`; used as the test oracle), computed here by Funk-Hecke quadrature.
    """

    has_lengthscale = True

    def shape(self, t: torch.Tensor) -> torch.Tensor:
        inverse_square = self.lengthscale**-2  # 1 / rho^2: [*batch_shape, 1, 1]
        return (t.clamp(-1, 1) - 1).mul(inverse_square).exp()

    def closed_form_map(self, dtype: torch.dtype, device: torch.device) -> CosineMap:
        inverse_square = self.lengthscale.detach() ** -2  # [*batch_shape, 1, 1]
        return CosineMap(rbf_values, (inverse_square.to(dtype=dtype, device=device),))
