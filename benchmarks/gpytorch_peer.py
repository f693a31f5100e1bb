"""GPyTorch's documented deep GP, the peer of zonal's deep models in the benchmarks: layers of
SVGPs with learned inducing points, a constant mean and an ARD kernel, then a Gaussian likelihood.

The one copy lives in the package (``zonal.experiments._baselines``), where the ``main-benchmark``
experiment uses it too; it answers zonal's model contract (``posterior``, ``predict``,
``log_predictive_density``). The names here are the ones the benchmarks import.
"""

from __future__ import annotations

from zonal.experiments._baselines import DEEP_KERNELS as KERNELS
from zonal.experiments._baselines import GPyTorchDeepGP as PeerDeepGP
from zonal.experiments._baselines import GPyTorchDeepGPLayer as PeerLayer
from zonal.experiments._baselines import gpytorch_deep_gp

__all__ = ["KERNELS", "PeerDeepGP", "PeerLayer", "gpytorch_deep_gp"]
