"""Activated inducing features: the posterior mean becomes a neural-network layer (seed 000 sec. 4.3).

g_m(x) = sigma(w_m . x) with w_m on the sphere expands as sigma(w . x) = sum_n sigma_n Z_n(w . x)
(eq. 12, sigma_n the Funk-Hecke coefficients of the activation). Truncating it at level N-tilde and
keeping only levels where the kernel's eigenvalue lambda_n is non-zero (elsewhere g would not be in
the RKHS) gives, with u_m = <f, g~_m>_H (eq. 13),

    Kuf[m, i] = g~_m(x_i) = sum_{n <= N~, lambda_n != 0} sigma_n Z_n(w_m . x_i)          (eq. 14)
    Kuu[m, m'] = <g~_m, g~_m'>_H = sum_{n <= N~, lambda_n != 0} sigma_n^2 / lambda_n Z_n(w_m . w_m')  (eq. 15)

Activations: ``"relu"`` (closed-form sigma_n, seed 000 C.19-C.20), ``"softplus"`` (rescaled,
t -> log(1 + exp(beta t)) / beta with beta = 5, seed 000 footnote 1), or any callable on [-1, 1]
(sigma_n by Funk-Hecke quadrature; give its kinks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from gpytorch.kernels import Kernel
from torch import nn
from torch.nn import functional

from zonal._validation import check_ambient_dim, check_degree
from zonal.features.base import (
    InducingFeatures,
    kernel_eigenvalues,
    scale_by_radius,
    unit_and_radius,
)
from zonal.features.spherical_harmonic import ZERO_EIGENVALUE
from zonal.harmonics import funk_hecke, relu_coefficients
from zonal.kernels.mercer import mercer_sum

SOFTPLUS_BETA = 5.0


def softplus_activation(t: torch.Tensor, beta: float = SOFTPLUS_BETA) -> torch.Tensor:
    """log(1 + exp(beta t)) / beta: ~0 at t = -1 and ~1 at t = 1 for beta = 5."""
    return functional.softplus(t, beta=beta)


def relu_activation(t: torch.Tensor) -> torch.Tensor:
    """max(0, t)."""
    return t.clamp(min=0)


ACTIVATIONS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], tuple[float, ...]]] = {
    "relu": (relu_activation, (0.0,)),
    "softplus": (softplus_activation, ()),
}


def activation_coefficients(
    activation: str | Callable[[torch.Tensor], torch.Tensor],
    ambient_dim: int,
    truncation_level: int,
    kinks: Sequence[float] = (),
) -> torch.Tensor:
    """sigma_0..sigma_N~ of an activation on S^{d-1} (eq. 12): [N~ + 1], float64."""
    if activation == "relu":
        return relu_coefficients(ambient_dim, truncation_level)
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {activation!r}; use one of {sorted(ACTIVATIONS)} or a callable"
            )
        activation, kinks = ACTIVATIONS[activation]
    if not callable(activation):
        raise ValueError(f"activation must be a name or a callable, got {activation!r}")
    with torch.no_grad():
        return funk_hecke(activation, ambient_dim, truncation_level, kinks=kinks)


class ActivatedFeatures(InducingFeatures):
    """M activated features sigma(w_m . x), truncated at ``truncation_level`` (N-tilde).

    Args:
        ambient_dim: d.
        num_inducing: M (the hidden width of the equivalent network layer).
        activation: ``"relu"``, ``"softplus"`` or a callable on [-1, 1].
        truncation_level: N-tilde (seed 000 uses 10 to 25; seed 001 recommends 20 for Softplus).
        weights: initial directions [M, d] (normalised); random unit vectors from ``seed`` otherwise.
        learn_weights: make the directions trainable (default True).
        kinks: points where a callable activation is not smooth (for its quadrature).
    """

    def __init__(
        self,
        ambient_dim: int,
        num_inducing: int,
        *,
        activation: str | Callable[[torch.Tensor], torch.Tensor] = "relu",
        truncation_level: int = 20,
        weights: torch.Tensor | None = None,
        learn_weights: bool = True,
        kinks: Sequence[float] = (),
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.ambient_dim = check_ambient_dim(ambient_dim)
        self.truncation_level = check_degree(truncation_level, "truncation_level")
        num_inducing = check_degree(num_inducing, "num_inducing")
        if num_inducing < 1:
            raise ValueError("num_inducing must be >= 1")
        self.activation_name = activation if isinstance(activation, str) else "custom"
        self.register_buffer(
            "coefficients",
            activation_coefficients(activation, self.ambient_dim, self.truncation_level, kinks),
        )  # [N~ + 1]
        if weights is None:
            generator = torch.Generator().manual_seed(seed)
            weights = torch.randn(
                num_inducing, self.ambient_dim, generator=generator, dtype=torch.float64
            )
        if weights.shape != (num_inducing, self.ambient_dim):
            raise ValueError(
                f"weights must have shape [num_inducing, ambient_dim] = "
                f"[{num_inducing}, {self.ambient_dim}], got {tuple(weights.shape)}"
            )
        weights = weights / weights.norm(dim=-1, keepdim=True)
        if learn_weights:
            self.raw_weights = nn.Parameter(weights.clone())
        else:
            self.register_buffer("raw_weights", weights.clone())

    @property
    def num_inducing(self) -> int:
        return int(self.raw_weights.shape[0])

    @property
    def weights(self) -> torch.Tensor:
        """Unit directions w_m [M, d]."""
        return self.raw_weights / self.raw_weights.norm(dim=-1, keepdim=True)

    def _kernel_terms(self, kernel: Kernel) -> tuple[torch.Tensor, torch.Tensor]:
        """(lambda_n [*b, N~ + 1], mask of the levels kept [*b, N~ + 1])."""
        eigenvalues = kernel_eigenvalues(kernel, self.truncation_level)  # [*b, N~ + 1]
        cutoff = ZERO_EIGENVALUE * eigenvalues.detach().abs().amax(-1, keepdim=True)
        return eigenvalues, eigenvalues.detach() > cutoff

    def truncated_activation(self, kernel: Kernel, cosines: torch.Tensor) -> torch.Tensor:
        """g~(t) = sum_{n kept} sigma_n Z_n(t) at cosines t [*b, M, N] (eq. 14)."""
        _, kept = self._kernel_terms(kernel)
        coefficients = torch.where(kept, self.coefficients.to(cosines.dtype), 0.0)
        return mercer_sum(cosines, coefficients.unsqueeze(-2).unsqueeze(-2), self.ambient_dim)

    def kuu(self, kernel: Kernel) -> torch.Tensor:
        """sum_{n kept} sigma_n^2 / lambda_n Z_n(w_m . w_m') [*b, M, M] (eq. 15)."""
        eigenvalues, kept = self._kernel_terms(kernel)
        ratio = torch.where(kept, self.coefficients**2 / eigenvalues.where(kept, 1.0), 0.0)
        weights = self.weights
        cosines = (weights @ weights.T).clamp(-1, 1)  # [M, M]
        identity = torch.eye(len(weights), dtype=torch.bool, device=weights.device)
        cosines = cosines.masked_fill(identity, 1.0)
        return mercer_sum(cosines, ratio.unsqueeze(-2).unsqueeze(-2), self.ambient_dim)

    def kuf(self, kernel: Kernel, x: torch.Tensor) -> torch.Tensor:
        """g~_m(x_i) (times ||x_i|| for a homogeneous kernel): [*b, M, N] (eq. 14)."""
        unit, radius = unit_and_radius(kernel, x)
        cosines = (unit @ self.weights.to(unit.dtype).T).clamp(-1, 1)  # [*b, N, M]
        values = self.truncated_activation(kernel, cosines.transpose(-1, -2))  # [*b, M, N]
        return scale_by_radius(values, radius)

    def extra_repr(self) -> str:
        return (
            f"ambient_dim={self.ambient_dim}, num_inducing={self.num_inducing}, "
            f"activation={self.activation_name}, truncation_level={self.truncation_level}"
        )


__all__ = ["ACTIVATIONS", "ActivatedFeatures", "activation_coefficients"]
