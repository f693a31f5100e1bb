r"""Deep arc-cosine kernels and the ReLU neural tangent kernel (seed 002 eq. 3, seed 000 sec. 4.2).

Deep arc-cosine (Cho and Saul 2009, sec. 2.2): an infinitely wide ReLU network with :math:`L` hidden
layers and no biases has the correlation kernel obtained by composing the normalised shape
:math:`L` times,

.. math::

    s^{(L)} = s_m \circ s_m \circ \dots \circ s_m \quad (L \text{ times}), \qquad s^{(L)}(1) = 1,

which is seed 002 eq. 3 (that equation counts layers so that :math:`L` layers give :math:`L - 1`
compositions; here ``depth`` is the number of compositions, i.e. of hidden ReLU layers, as in
BoTorch's ``InfiniteWidthBNNKernel``).

ReLU NTK (Jacot et al. 2018; Bietti and Mairal 2019) of a network with ``depth`` = :math:`L` hidden
ReLU layers and no biases, on unit inputs, normalised so that :math:`k(x, x) = 1`:

.. math::

    \Sigma_0 &= t, \qquad \Theta_0 = t, \\
    \Sigma_h &= s_1(\Sigma_{h-1}), \qquad
    \Theta_h = \Theta_{h-1}\, s_0(\Sigma_{h-1}) + \Sigma_h \qquad (h = 1, \dots, L), \\
    k(t) &= \Theta_L(t) / (L + 1) \qquad (\Theta_L(1) = L + 1).

:math:`L = 1` is the two-layer network of Bietti and Mairal, :math:`\Theta_1 = t\, s_0(t) + s_1(t)`.
The eigenvalues of both kernels come from Funk-Hecke quadrature (``zonal.harmonics.funk_hecke``).
"""

from __future__ import annotations

from typing import Any

import torch

from zonal._validation import check_degree
from zonal.kernels.arccos import arccos_shape, arccos_values, check_order, relu_pair_values
from zonal.kernels.base import ZonalKernel
from zonal.kernels.tiles import CosineMap


def _check_depth(depth: object) -> int:
    depth = check_degree(depth, "depth")
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    return depth


def deep_arccos_shape(t: torch.Tensor, depth: int, order: int = 1) -> torch.Tensor:
    r""":math:`s_\text{order}` composed ``depth`` times, :math:`t` [...] -> [...]
    (seed 002 eq. 3)."""
    depth, order = _check_depth(depth), check_order(order)
    value = t
    for _ in range(depth):
        value = arccos_shape(value, order)
    return value


def relu_ntk_layer(state: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """One NTK layer without autograd: (Theta_{h-1}, Sigma_{h-1}) -> (Theta_h, Sigma_h), elementwise.

    Theta_h = Theta_{h-1} s_0(Sigma_{h-1}) + Sigma_h with Sigma_h = s_1(Sigma_{h-1}) (module
    docstring); one arccos gives both s_0 and s_1. Starting from (t, t), ``depth`` layers and a
    division by depth + 1 give ``relu_ntk_shape`` (``ReLUNTKernel.closed_form_map``).
    """
    theta, sigma = state[0], state[1].clamp(-1, 1)  # rounding must not leave arccos's domain
    slope, next_sigma = relu_pair_values(sigma)  # s_0(Sigma_{h-1}), s_1(Sigma_{h-1})
    return slope.mul_(theta).add_(next_sigma), next_sigma


def relu_ntk_shape(t: torch.Tensor, depth: int) -> torch.Tensor:
    r"""Normalised ReLU NTK :math:`\Theta_L(t) / (L + 1)` with :math:`L` = ``depth`` hidden layers
    (module docstring)."""
    depth = _check_depth(depth)
    sigma = t.clamp(-1, 1)  # Sigma_0
    theta = sigma  # Theta_0
    for _ in range(depth):
        next_sigma = arccos_shape(sigma, 1)
        theta = theta * arccos_shape(sigma, 0) + next_sigma
        sigma = next_sigma
    return theta / (depth + 1)


class DeepArcCosineKernel(ZonalKernel):
    r""":math:`k(x, x') = s^{(L)}(x \cdot x')`: the arc-cosine shape of ``order`` composed ``depth``
    times.

    ``depth = 1`` is ``ArcCosineKernel(order)``. For order 1 and ``homogeneous=True`` this equals
    BoTorch's ``InfiniteWidthBNNKernel(depth)`` with ``bias_var = 0``, up to the constant
    :math:`(w / D) (w / 2)^\text{depth}` where :math:`w` = ``weight_var`` and :math:`D` =
    ``ambient_dim`` (see the tests). Eigenvalues by Funk-Hecke quadrature.
    """

    def __init__(self, ambient_dim: int, depth: int = 2, order: int = 1, **kwargs: Any) -> None:
        self.depth = _check_depth(depth)
        self.order = check_order(order)
        super().__init__(ambient_dim, **kwargs)

    def shape(self, t: torch.Tensor) -> torch.Tensor:
        return deep_arccos_shape(t, self.depth, self.order)

    def closed_form_map(self, dtype: torch.dtype, device: torch.device) -> CosineMap:
        return CosineMap(arccos_values, (self.order,), repeat=self.depth)

    def spectrum_settings(self) -> tuple:
        return (*super().spectrum_settings(), self.depth, self.order)


class ReLUNTKernel(ZonalKernel):
    r"""The ReLU neural tangent kernel with ``depth`` hidden layers, normalised to
    :math:`k(x, x) = 1`.

    Recursion in the module docstring; eigenvalues by Funk-Hecke quadrature. Like the order-0
    arc-cosine kernel it behaves as :math:`1 - c \sqrt{1 - t}` at :math:`t = 1` (eigenvalues decay
    as :math:`n^{-d}`).
    """

    def __init__(self, ambient_dim: int, depth: int = 1, **kwargs: Any) -> None:
        self.depth = _check_depth(depth)
        super().__init__(ambient_dim, **kwargs)

    def shape(self, t: torch.Tensor) -> torch.Tensor:
        return relu_ntk_shape(t, self.depth)

    def closed_form_map(self, dtype: torch.dtype, device: torch.device) -> CosineMap:
        return CosineMap(relu_ntk_layer, repeat=self.depth, state=2, output_divisor=self.depth + 1)

    def spectrum_settings(self) -> tuple:
        return (*super().spectrum_settings(), self.depth)
