r"""The kernelised convolution :math:`\Gamma` and its inter-domain inducing blocks (seed 003
eqs. 12-27, appendix B).

A convolutional layer :math:`F_{ir,l} = \sum_{d \in D} \sum_\mu H_{i(r+d),\mu} W_{d \mu l}` with
IID weights :math:`\mathcal{N}(0, 1 / (\lvert D \rvert N))` has the feature covariance (eq. 15)

.. math::

    \Gamma_{ir,js}(\Omega) = \frac{1}{\lvert D \rvert} \sum_d \Omega_{i(r+d), j(s+d)}, \qquad
    \Omega = H H^\top / N.

Inducing points carry no spatial structure: learned mixing matrices :math:`C_d` [M, M'] (one per
filter offset :math:`d`, stored as a conv2d weight [M, M', kh, kw]) turn the :math:`M'` inducing
inputs of the layer below into :math:`M` artificial patches (eq. 25), which gives the blocks
(eqs. 26-27, 53, 59)

.. math::

    \Gamma_{ii} &= \frac{1}{\lvert D \rvert} \sum_d C_d \Omega_{ii} C_d^\top, \\
    \Gamma_{i,js} &= \frac{1}{\lvert D \rvert} \sum_d \sum_{i'} C_{d,i i'} \Omega_{i', j(s+d)}
    \qquad \text{(a conv2d of } \Omega_{ti} \text{)},

and only the diagonal of the test/train block is kept (appendix E.2, eq. 66):
:math:`\Gamma_{js,js} = \frac{1}{\lvert D \rvert} \sum_d \Omega_{j(s+d), j(s+d)}`, an average pool.
Zero padding pads the features with zeros, so :math:`\Omega` is zero there and every patch is
divided by :math:`\lvert D \rvert` (average pooling that counts the padding). In the first layer the
inducing inputs are patches :math:`Z` [M, C, kh, kw] of the input images themselves (seed 003
sec. 5 initialises them at random training patches):
:math:`\Gamma_{ii} = \langle Z_i, Z_j \rangle / (\lvert D \rvert C)`,
:math:`\Gamma_{i,js} = \langle Z_i, X_j \text{ patch at } s \rangle / (\lvert D \rvert C)`.

Layout: a cross block :math:`G_{ti}` is [P, H, W, M] (test/train images, locations, inducing
points), the
test/train diagonal [P, H, W], an inducing block [M, M].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as functional


@dataclass(frozen=True)
class ConvGeometry:
    r"""Filter size :math:`(\mathit{kh}, \mathit{kw})`, stride and zero padding of a kernelised
    convolution."""

    kernel_size: tuple[int, int] = (3, 3)
    stride: int = 1
    padding: int = 1

    def __post_init__(self) -> None:
        size = self.kernel_size
        if len(size) != 2 or any(
            isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in size
        ):
            raise ValueError(f"kernel_size must be two positive ints, got {size!r}")
        if isinstance(self.stride, bool) or not isinstance(self.stride, int) or self.stride < 1:
            raise ValueError(f"stride must be a positive int, got {self.stride!r}")
        if isinstance(self.padding, bool) or not isinstance(self.padding, int) or self.padding < 0:
            raise ValueError(f"padding must be an int >= 0, got {self.padding!r}")

    @property
    def patch_size(self) -> int:
        r""":math:`\lvert D \rvert`, the number of offsets in a filter."""
        return self.kernel_size[0] * self.kernel_size[1]

    def output_shape(self, height: int, width: int) -> tuple[int, int]:
        r"""The spatial size of the output for an input of size
        :math:`\mathtt{height} \times \mathtt{width}`."""
        out_h = (height + 2 * self.padding - self.kernel_size[0]) // self.stride + 1
        out_w = (width + 2 * self.padding - self.kernel_size[1]) // self.stride + 1
        if out_h < 1 or out_w < 1:
            raise ValueError(
                f"a {self.kernel_size} filter with padding {self.padding} does not fit a "
                f"{height} x {width} feature map"
            )
        return out_h, out_w


def convolve_inducing(gram_ii: torch.Tensor, mixing: torch.Tensor) -> torch.Tensor:
    """Gamma_ii = (1 / |D|) sum_d C_d Omega_ii C_d^T [M, M] (eq. 53); mixing [M, M', kh, kw]."""
    offsets = mixing.flatten(2).permute(2, 0, 1)  # C_d [|D|, M, M']
    return (offsets @ gram_ii @ offsets.mT).mean(0)


def convolve_cross(
    cross: torch.Tensor, mixing: torch.Tensor, geometry: ConvGeometry
) -> torch.Tensor:
    """Gamma_ti [P, H', W', M] of Omega_ti [P, H, W, M'] (eq. 59): a conv2d with weights C / |D|."""
    images = cross.permute(0, 3, 1, 2)  # [P, M', H, W]
    output = functional.conv2d(
        images, mixing / geometry.patch_size, stride=geometry.stride, padding=geometry.padding
    )  # [P, M, H', W']
    return output.permute(0, 2, 3, 1)


def convolve_diagonal(diagonal: torch.Tensor, geometry: ConvGeometry) -> torch.Tensor:
    """diag Gamma_tt [P, H', W'] of diag Omega_tt [P, H, W] (eq. 66): an average pool that counts
    the zero padding (a conv2d with the filter 1 / |D|, which allows any padding)."""
    average = diagonal.new_full((1, 1, *geometry.kernel_size), 1 / geometry.patch_size)
    pooled = functional.conv2d(
        diagonal.unsqueeze(1), average, stride=geometry.stride, padding=geometry.padding
    )  # [P, 1, H', W']
    return pooled.squeeze(1)


def input_patch_blocks(
    images: torch.Tensor, patches: torch.Tensor, geometry: ConvGeometry
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """First-layer blocks (Gamma_ii [M, M], Gamma_ti [P, H', W', M], diag Gamma_tt [P, H', W'])
    of images X [P, C, H, W] with inducing patches Z [M, C, kh, kw] (Omega^0 = X X^T / C)."""
    channels = images.shape[1]
    scale = geometry.patch_size * channels
    flat = patches.flatten(1)  # [M, C kh kw]
    gram_ii = flat @ flat.mT / scale
    cross = functional.conv2d(
        images, patches / scale, stride=geometry.stride, padding=geometry.padding
    )
    diagonal = convolve_diagonal(images.square().sum(1) / channels, geometry)
    return gram_ii, cross.permute(0, 2, 3, 1), diagonal
