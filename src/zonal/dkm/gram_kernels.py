r"""Kernels as functions of a Gram matrix, :math:`K(G)` (seed 003 eqs. 2-4, 16).

A deep kernel machine carries Gram matrices :math:`G = F F^\top / N` between layers, never
features, so every kernel it uses must be computable from :math:`G` alone. Two families are:

* **arc-cosine** (the infinitely wide ReLU layer; Cho and Saul): with
  :math:`f \sim \mathcal{N}(0, G)` and the activation :math:`\operatorname{relu}^m` (the step
  function for :math:`m = 0`),

  .. math::

      K_m(G)_{ij} &= 2\, \mathbb{E}[\operatorname{relu}(f_i)^m \operatorname{relu}(f_j)^m]
      = \frac{J_m(0)}{\pi} (G_{ii} G_{jj})^{m/2} s_m(t_{ij}), \\
      t_{ij} &= G_{ij} / \sqrt{G_{ii} G_{jj}},

  with :math:`s_m = J_m(\arccos t) / J_m(0)` zonal's normalised arc-cosine shape
  (``zonal.kernels.arccos_shape``) and :math:`J_m(0) / \pi = 1,\ 1,\ 3`. For :math:`m = 1` (ReLU)
  the diagonal is kept, :math:`K(G)_{ii} = G_{ii}`: the factor 2 is He's initialisation, the
  :math:`\Omega(G)` of seed 003 eq. 16.
* **isotropic** kernels through the squared distance :math:`R_{ij} = G_{ii} - 2 G_{ij} + G_{jj}`
  (seed 003 eq. 2), e.g. the squared exponential
  :math:`K_{ij} = \mathtt{variance}\, \exp(-R_{ij} / (2\, \mathtt{lengthscale}^2))`.

A sparse DKM needs the kernel on three blocks: inducing-inducing (a full matrix), test/train-inducing
(a cross block, which needs the diagonals of both sides) and the test/train diagonal. Every kernel
here is therefore written once as an elementwise ``cross(G_xy, g_x, g_y)`` of a cross block and the
two diagonals, and ``diagonal(g)``; the full matrix is ``cross(G, diag G, diag G)``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import torch

from zonal.kernels import arccos_shape
from zonal.kernels.arccos import check_order

#: J_m(0) / pi for m = 0, 1, 2: the value 2 E[relu(f)^{2m}] / E[f^2]^m of Cho and Saul's kernel
_CHO_SAUL_DIAGONAL = (1.0, 1.0, 3.0)


class GramKernel(ABC):
    """:math:`K(G)`: a kernel evaluated from a Gram matrix (seed 003 eq. 3)."""

    @abstractmethod
    def cross(
        self, gram_cross: torch.Tensor, diag_rows: torch.Tensor, diag_cols: torch.Tensor
    ) -> torch.Tensor:
        """:math:`K_{xy}` [*b, n, m] from :math:`G_{xy}` [*b, n, m] and the diagonals
        :math:`G_{xx}` [*b, n], :math:`G_{yy}` [*b, m]."""

    @abstractmethod
    def diagonal(self, diag: torch.Tensor) -> torch.Tensor:
        """The diagonal :math:`K_{xx}` [*b, n] from the diagonal :math:`G_{xx}` [*b, n]."""

    def __call__(self, gram: torch.Tensor) -> torch.Tensor:
        """The full kernel matrix :math:`K(G)` [*b, n, n] of a Gram matrix :math:`G` [*b, n, n]."""
        diag = gram.diagonal(dim1=-2, dim2=-1)  # [*b, n]
        return self.cross(gram, diag, diag)


@dataclass(frozen=True)
class ArcCosineGram(GramKernel):
    """Arc-cosine kernel of order 0, 1 (ReLU) or 2 as a function of :math:`G` (module
    docstring)."""

    order: int = 1

    def __post_init__(self) -> None:
        check_order(self.order)

    def cross(
        self, gram_cross: torch.Tensor, diag_rows: torch.Tensor, diag_cols: torch.Tensor
    ) -> torch.Tensor:
        product = diag_rows.unsqueeze(-1) * diag_cols.unsqueeze(-2)  # [*b, n, m]
        # a vanishing norm (a zero patch) gives norms ~ 1e-154, cosine 0 and a finite gradient
        norms = product.clamp_min(torch.finfo(product.dtype).tiny).sqrt()
        cosine = gram_cross / norms  # [*b, n, m]
        shape = arccos_shape(cosine, self.order)  # [*b, n, m]
        return _CHO_SAUL_DIAGONAL[self.order] * norms**self.order * shape

    def diagonal(self, diag: torch.Tensor) -> torch.Tensor:
        return _CHO_SAUL_DIAGONAL[self.order] * diag.clamp_min(0) ** self.order


@dataclass(frozen=True)
class SquaredExponentialGram(GramKernel):
    r""":math:`\mathtt{variance} \cdot \exp(-R / (2\, \mathtt{lengthscale}^2))`,
    :math:`R_{ij} = G_{ii} - 2 G_{ij} + G_{jj}` (seed 003 eq. 2)."""

    lengthscale: float = 1.0
    variance: float = 1.0

    def __post_init__(self) -> None:
        for name in ("lengthscale", "variance"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"the squared exponential {name} must be > 0, got {value!r}")

    def cross(
        self, gram_cross: torch.Tensor, diag_rows: torch.Tensor, diag_cols: torch.Tensor
    ) -> torch.Tensor:
        distance = diag_rows.unsqueeze(-1) + diag_cols.unsqueeze(-2) - 2 * gram_cross  # [*b, n, m]
        return self.variance * torch.exp(-distance.clamp_min(0) / (2 * self.lengthscale**2))

    def diagonal(self, diag: torch.Tensor) -> torch.Tensor:
        return torch.full_like(diag, self.variance)


_NAMED: dict[str, Callable[[], GramKernel]] = {
    "relu": lambda: ArcCosineGram(1),
    "arccos-0": lambda: ArcCosineGram(0),
    "arccos-1": lambda: ArcCosineGram(1),
    "arccos-2": lambda: ArcCosineGram(2),
    "squared-exponential": SquaredExponentialGram,
}


def gram_kernel(name: str) -> GramKernel:
    """The Gram kernel called ``name``: relu (= arccos-1), arccos-0, arccos-2, squared-exponential."""
    if name not in _NAMED:
        raise ValueError(f"unknown Gram kernel {name!r}; choose one of {sorted(_NAMED)}")
    return _NAMED[name]()
