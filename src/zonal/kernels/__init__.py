r"""Zonal kernels on :math:`\mathbb{S}^{d-1}` as GPyTorch kernels: shape functions, exact spectra,
Mercer sums.

Every kernel here is a ``ZonalKernel``: :math:`k(x, x') = s(x \cdot x')` for unit vectors
:math:`x, x' \in \mathbb{R}^d`, with the eigenvalue sequence ``eigenvalues(max_degree)`` of its
Mercer / addition-theorem expansion :math:`k = \sum_n \lambda_n Z_n(x \cdot x')` (seed 000 eq. 10).

Large Gram matrices are filled by compiled elementwise functions; ``ZONAL_COMPILE=0`` or
``compile_settings(enabled=False)`` keeps them in eager PyTorch (``zonal.kernels.compile``).
"""

from zonal.kernels.arccos import ArcCosineKernel, arccos_kernel_eigenvalues, arccos_shape
from zonal.kernels.base import ZonalKernel
from zonal.kernels.chordal import ChordalMaternKernel, ChordalRBFKernel, chordal_distance
from zonal.kernels.compile import CompileSettings, compile_settings
from zonal.kernels.deep import (
    DeepArcCosineKernel,
    ReLUNTKernel,
    deep_arccos_shape,
    relu_ntk_shape,
)
from zonal.kernels.intrinsic import (
    IntrinsicHeatKernel,
    IntrinsicMaternKernel,
    laplace_beltrami_eigenvalues,
)
from zonal.kernels.mercer import gegenbauer_series, mercer_sum
from zonal.kernels.polynomial_decay import PolynomialDecayKernel
from zonal.kernels.spectral import SpectralZonalKernel

__all__ = [
    "ArcCosineKernel",
    "ChordalMaternKernel",
    "ChordalRBFKernel",
    "CompileSettings",
    "DeepArcCosineKernel",
    "IntrinsicHeatKernel",
    "IntrinsicMaternKernel",
    "PolynomialDecayKernel",
    "ReLUNTKernel",
    "SpectralZonalKernel",
    "ZonalKernel",
    "arccos_kernel_eigenvalues",
    "arccos_shape",
    "chordal_distance",
    "compile_settings",
    "deep_arccos_shape",
    "gegenbauer_series",
    "laplace_beltrami_eigenvalues",
    "mercer_sum",
    "relu_ntk_shape",
]
