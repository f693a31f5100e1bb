r"""The continuous-depth kernel: eigenvalues decaying polynomially with a learnable rate (seed 002).

Seed 002 eq. 15 defines
:math:`k(x, x') = \sum_l \frac{l + \alpha}{\alpha} l^{-\beta} C_l^\alpha(x \cdot x')`,
:math:`\beta > 0`: the decay rate :math:`\beta` stands in for depth (smaller :math:`\beta` ~ deeper
ReLU NTK, seed 002 fig. 1). zonal's version, truncated at :math:`L` = ``max_degree`` and with a
variance :math:`\sigma^2`:

.. math::

    \lambda_l &= \sigma^2 l^{-\beta} \qquad (l = 1, \dots, L), \\
    \lambda_0 &= \sigma^2 \qquad \text{(the constant level; 0 with include_constant=False)}, \\
    k(x, x') &= \sum_{l=0}^{L} \lambda_l Z_l(x \cdot x').

:math:`\lambda_0`: :math:`l^{-\beta}` is undefined at :math:`l = 0` (eq. 15 leaves it open). zonal
gives the constant level the weight of level 1, :math:`\lambda_0 = \lambda_1 = \sigma^2`,
independent of :math:`\beta`, so that :math:`\beta` only shapes the non-constant levels (seed 002
fig. 1 plots every level relative to :math:`l = 1`); drop it with ``include_constant=False`` (then
constants are outside the RKHS, use a mean function instead).

Prior variance: :math:`k(x, x) = \sigma^2 \big(1 + \sum_{l=1}^{L} N_l^d l^{-\beta}\big)`; the
untruncated sum is finite only for :math:`\beta > d - 1` (:math:`N_l^d` grows as :math:`l^{d-2}`),
so :math:`L` is part of the model.

Scale: like every zonal kernel it is meant to be wrapped in ``gpytorch.kernels.ScaleKernel``, whose
``outputscale`` multiplies every :math:`\lambda_l`. A learnable :math:`\sigma^2` beside it would
only ever enter as the product :math:`\mathrm{outputscale} \cdot \sigma^2`: a flat direction of
every objective (both parameters drift along it, and the Hessian is singular). So :math:`\sigma^2`
is a fixed buffer by default; ``learn_variance=True`` makes it a parameter, for use without
``ScaleKernel``.
"""

from __future__ import annotations

from typing import Any

import torch
from gpytorch.constraints import Positive

from zonal.kernels.base import ZonalKernel


def _positive_tensor(value: object, name: str, like: torch.Tensor) -> torch.Tensor:
    tensor = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    if not torch.isfinite(tensor).all() or (tensor <= 0).any():
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return tensor.expand_as(like)


class PolynomialDecayKernel(ZonalKernel):
    r"""Continuous-depth zonal kernel, :math:`\lambda_l = \sigma^2 l^{-\beta}` (seed 002 eq. 15).

    Args:
        ambient_dim: :math:`d`.
        max_degree: truncation :math:`L` (default 20).
        beta: decay rate, > 0 (learnable; default :math:`d`, the decay of the ReLU NTK).
        variance: :math:`\sigma^2 > 0` (fixed unless ``learn_variance``).
        learn_variance: make :math:`\sigma^2` a parameter; leave False under a ``ScaleKernel``
            (module docstring).
        include_constant: :math:`\lambda_0 = \sigma^2` (True) or 0 (False); see the module
            docstring.
    """

    def __init__(
        self,
        ambient_dim: int,
        max_degree: int = 20,
        *,
        beta: float | None = None,
        variance: float = 1.0,
        learn_variance: bool = False,
        include_constant: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(ambient_dim, max_degree=max_degree, **kwargs)
        self.include_constant = bool(include_constant)
        shape = (*self.batch_shape, 1)
        self.register_parameter(
            "raw_beta", torch.nn.Parameter(torch.zeros(shape, dtype=self.dtype))
        )
        self.register_constraint("raw_beta", Positive())
        self.learn_variance = bool(learn_variance)
        if self.learn_variance:
            self.register_parameter(
                "raw_variance", torch.nn.Parameter(torch.zeros(shape, dtype=self.dtype))
            )
            self.register_constraint("raw_variance", Positive())
        else:
            self.register_buffer("fixed_variance", torch.ones(shape, dtype=self.dtype))
        self.beta = float(self.ambient_dim) if beta is None else beta
        self.variance = variance

    @property
    def beta(self) -> torch.Tensor:
        r"""The decay rate :math:`\beta > 0`, [*batch_shape, 1]."""
        return self.raw_beta_constraint.transform(self.raw_beta)

    @beta.setter
    def beta(self, value: object) -> None:
        value = _positive_tensor(value, "beta", self.raw_beta)
        self.initialize(raw_beta=self.raw_beta_constraint.inverse_transform(value))

    @property
    def variance(self) -> torch.Tensor:
        r""":math:`\sigma^2 > 0`, [*batch_shape, 1]."""
        if self.learn_variance:
            return self.raw_variance_constraint.transform(self.raw_variance)
        return self.fixed_variance

    @variance.setter
    def variance(self, value: object) -> None:
        if self.learn_variance:
            value = _positive_tensor(value, "variance", self.raw_variance)
            self.initialize(raw_variance=self.raw_variance_constraint.inverse_transform(value))
        else:
            self.fixed_variance.copy_(_positive_tensor(value, "variance", self.fixed_variance))

    def spectrum_settings(self) -> tuple:
        return (*super().spectrum_settings(), self.include_constant, self.learn_variance)

    def _compute_eigenvalues(self, max_degree: int) -> torch.Tensor:
        levels = torch.arange(
            1, max_degree + 1, dtype=self.raw_beta.dtype, device=self.raw_beta.device
        )  # [L]
        decay = torch.exp(-self.beta * torch.log(levels))  # [*batch_shape, L]
        constant = (
            torch.ones_like(self.beta) if self.include_constant else torch.zeros_like(self.beta)
        )
        return self.variance * torch.cat([constant, decay], dim=-1)  # [*batch_shape, L + 1]
