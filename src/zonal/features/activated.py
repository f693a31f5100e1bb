r"""Activated inducing features: the posterior mean becomes a neural-network layer
(seed 000 sec. 4.3).

:math:`g_m(x) = \sigma(w_m \cdot x)` with :math:`w_m` on the sphere expands as
:math:`\sigma(w \cdot x) = \sum_n \sigma_n Z_n(w \cdot x)` (eq. 12, :math:`\sigma_n` the Funk-Hecke
coefficients of the activation). Truncating it at level :math:`\tilde N` and keeping only the levels
:math:`\mathcal{K}` where the kernel's eigenvalue :math:`\lambda_n` is non-zero (elsewhere :math:`g`
would not be in the RKHS) gives, with :math:`u_m = \langle f, \tilde g_m \rangle_\mathcal{H}`
(eq. 13),

.. math::

    K_{uf}[m, i] &= \tilde g_m(x_i) = \sum_{n \in \mathcal{K}} \sigma_n Z_n(w_m \cdot x_i)
    \qquad \text{(eq. 14)} \\
    K_{uu}[m, m'] &= \langle \tilde g_m, \tilde g_{m'} \rangle_\mathcal{H}
    = \sum_{n \in \mathcal{K}} \frac{\sigma_n^2}{\lambda_n} Z_n(w_m \cdot w_{m'})
    \qquad \text{(eq. 15)}

The kept set :math:`\mathcal{K}` is part of the features, fixed when they are built
(``zonal.features.levels``), so :math:`K_{uu}`, :math:`K_{uf}` and the ELBO are continuous in the
kernel's hyperparameters: with ``kernel=`` :math:`\mathcal{K}` holds the levels whose eigenvalue
exceeds 1e-9 times the largest for that kernel; without, :math:`\mathcal{K}` is every level
:math:`0, \dots, \tilde N`. Levels whose eigenvalue is exactly zero at a call (structural zeros: the
arc-cosine kernel's odd levels, a truncated spectrum) are always left out, which is the projection
of :math:`\tilde g` onto the RKHS. A level in :math:`\mathcal{K}` whose eigenvalue underflows makes
:math:`K_{uu}` infinite: ``NonFiniteCovarianceError``.

Activations: ``"relu"`` (closed-form :math:`\sigma_n`, seed 000 C.19-C.20), ``"softplus"``
(rescaled, :math:`t \mapsto \log(1 + \exp(\beta t)) / \beta` with :math:`\beta = 5`, seed 000
footnote 1), or any callable on :math:`[-1, 1]` (:math:`\sigma_n` by Funk-Hecke quadrature; give its
kinks).
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
    NonFiniteCovarianceError,
    kernel_eigenvalues,
    scale_by_radius,
    unit_and_radius,
)
from zonal.features.levels import check_kernel_dim, kept_level_mask
from zonal.harmonics import funk_hecke, relu_coefficients
from zonal.kernels.mercer import mercer_sum

SOFTPLUS_BETA = 5.0


def softplus_activation(t: torch.Tensor, beta: float = SOFTPLUS_BETA) -> torch.Tensor:
    """log(1 + exp(beta t)) / beta: ~0 at t = -1 and ~1 at t = 1 for beta = 5."""
    return functional.softplus(t, beta=beta)


def relu_activation(t: torch.Tensor) -> torch.Tensor:
    """max(0, t)."""
    return t.clamp(min=0)


#: activation name -> (the function, the kinks its Funk-Hecke quadrature splits at)
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
    r""":math:`\sigma_0, \dots, \sigma_{\tilde N}` of an activation on :math:`\mathbb{S}^{d-1}`
    (eq. 12): [N~ + 1], float64."""
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
    r""":math:`M` activated features :math:`\sigma(w_m \cdot x)`, truncated at ``truncation_level``
    (:math:`\tilde N`).

    Args:
        ambient_dim: :math:`d`.
        num_inducing: :math:`M` (the hidden width of the equivalent network layer).
        activation: ``"relu"``, ``"softplus"`` or a callable on :math:`[-1, 1]`.
        truncation_level: :math:`\tilde N` (seed 000 uses 10 to 25; seed 001 recommends 20 for
            Softplus).
        weights: initial directions [M, d] (normalised); random unit vectors from ``seed`` otherwise.
        learn_weights: make the directions trainable (default True).
        kinks: points where a callable activation is not smooth (for its quadrature).
        kernel: if given, the levels whose eigenvalue for it is below 1e-9 times the largest are
            left out for good (recommended for fast-decaying spectra: RBF, heat, polynomial decay
            with a large :math:`\beta`); otherwise every level :math:`0, \dots, \tilde N` is used
            where the eigenvalue is not exactly zero. The kernel is only read here, not stored.

    Attributes:
        coefficients: :math:`\sigma_0, \dots, \sigma_{\tilde N}` [N~ + 1].
        level_mask: BoolTensor [N~ + 1], the levels the features were built to use (the kept set
            :math:`\mathcal{K}` before the exact zeros of the kernel at hand are removed; see
            ``kept_levels``).
    """

    coefficients: torch.Tensor  # buffers
    level_mask: torch.Tensor

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
        kernel: Kernel | None = None,
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
        if kernel is None:
            level_mask = torch.ones(self.truncation_level + 1, dtype=torch.bool)
        else:
            check_kernel_dim(kernel, self.ambient_dim)
            level_mask = kept_level_mask(kernel, self.truncation_level).cpu()
        self.register_buffer("level_mask", level_mask)  # [N~ + 1]
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
        """Unit directions :math:`w_m` [M, d]."""
        return self.raw_weights / self.raw_weights.norm(dim=-1, keepdim=True)

    def _kernel_terms(self, kernel: Kernel) -> tuple[torch.Tensor, torch.Tensor]:
        """(lambda_n [*b, N~ + 1], the kept levels K [N~ + 1]); see ``kept_levels``."""
        eigenvalues = kernel_eigenvalues(kernel, self.truncation_level)  # [*b, N~ + 1]
        nonzero = (eigenvalues.detach() != 0).reshape(-1, self.truncation_level + 1)  # [B, N~ + 1]
        return eigenvalues, self.level_mask & nonzero.any(0).to(self.level_mask.device)

    def kept_levels(self, kernel: Kernel) -> torch.Tensor:
        r"""The levels :math:`\mathcal{K}` of the sums in eqs. 14-15 for ``kernel``: BoolTensor
        [N~ + 1].

        ``level_mask`` (fixed when the features were built) minus the levels whose eigenvalue is
        exactly zero for every member of the kernel's batch.
        """
        return self._kernel_terms(kernel)[1]

    def kept_coefficients(self, kernel: Kernel) -> torch.Tensor:
        r""":math:`\sigma_n` on the kept levels :math:`\mathcal{K}` and 0 elsewhere, detached:
        [N~ + 1]. The activation of the equivalent network layer is
        :math:`t \mapsto \sum_n \mathtt{kept\_coefficients}[n]\, Z_n(t)`."""
        return torch.where(self.kept_levels(kernel), self.coefficients, 0.0).detach()

    def truncated_activation(self, kernel: Kernel, cosines: torch.Tensor) -> torch.Tensor:
        r""":math:`\tilde g(t) = \sum_{n \in \mathcal{K}} \sigma_n Z_n(t)` at cosines :math:`t`
        [*b, M, N] (eq. 14)."""
        kept = self.kept_levels(kernel).to(cosines.device)  # [N~ + 1]
        coefficients = torch.where(kept, self.coefficients.to(cosines.dtype), 0.0)  # [N~ + 1]
        return mercer_sum(cosines, coefficients.unsqueeze(-2).unsqueeze(-2), self.ambient_dim)

    def kuu(self, kernel: Kernel, weights: torch.Tensor | None = None) -> torch.Tensor:
        r""":math:`\sum_{n \in \mathcal{K}} \frac{\sigma_n^2}{\lambda_n} Z_n(w_m \cdot w_{m'})`
        [*b, M, M] (eq. 15), at the features' own directions or at ``weights`` [M, d] (unit rows,
        e.g. an equivalent network layer's, differentiably).

        Raises ``NonFiniteCovarianceError`` where a kept level's eigenvalue is zero or underflows.
        """
        eigenvalues, kept = self._kernel_terms(kernel)  # [*b, N~ + 1], [N~ + 1]
        squares = self.coefficients.to(eigenvalues.dtype) ** 2  # [N~ + 1]
        used = kept & (squares != 0)  # a level with sigma_n = 0 adds nothing, whatever lambda_n
        ratio = torch.where(used, squares / eigenvalues.where(used, 1.0), 0.0)  # [*b, N~ + 1]
        finite = torch.isfinite(ratio).reshape(-1, ratio.shape[-1]).all(0)  # [N~ + 1]
        if not bool(finite.all()):
            levels = torch.nonzero(~finite).squeeze(-1).tolist()
            raise NonFiniteCovarianceError(
                f"Kuu of the activated features is not finite: sigma_n^2 / lambda_n overflows at "
                f"level(s) {levels}, where the kernel's eigenvalue is zero or underflows. Build "
                "the features with kernel=<this kernel> (or a lower truncation_level) so that "
                "those levels are left out."
            )
        weights = (self.weights if weights is None else weights).to(eigenvalues.dtype)  # [M, d]
        cosines = (weights @ weights.mT).clamp(-1, 1)  # [M, M]
        identity = torch.eye(len(weights), dtype=torch.bool, device=weights.device)  # [M, M]
        cosines = cosines.masked_fill(identity, 1.0)
        return mercer_sum(cosines, ratio.unsqueeze(-2).unsqueeze(-2), self.ambient_dim)

    def kuf(self, kernel: Kernel, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\tilde g_m(x_i)` (times :math:`\|x_i\|` for a homogeneous kernel): [*b, M, N]
        (eq. 14)."""
        unit, radius = unit_and_radius(kernel, x)
        cosines = (unit @ self.weights.to(unit.dtype).T).clamp(-1, 1)  # [*b, N, M]
        values = self.truncated_activation(kernel, cosines.transpose(-1, -2))  # [*b, M, N]
        return scale_by_radius(values, radius)

    def extra_repr(self) -> str:
        return (
            f"ambient_dim={self.ambient_dim}, num_inducing={self.num_inducing}, "
            f"activation={self.activation_name}, truncation_level={self.truncation_level}, "
            f"levels={torch.nonzero(self.level_mask).squeeze(-1).tolist()}"
        )


__all__ = ["ACTIVATIONS", "ActivatedFeatures", "activation_coefficients"]
