"""zonal in BoTorch's pathwise machinery (``botorch.sampling.pathwise``), registered on import.

* ``gen_kernel_features`` on a ``ZonalKernel`` returns the exact ``HarmonicFeatureMap`` instead of
  random Fourier features, so ``draw_matheron_paths(SingleTaskGP(..., covar_module=zonal kernel))``
  (and BoTorch's ``ScaleKernel`` handler around it) draws exact truncated-KL priors. BoTorch passes
  its ``num_features`` (1024 by default) as ``num_outputs``: here the budget of harmonics, filled
  only as far as the default tolerance (``truncation.DEFAULT_TOLERANCE``) needs.
* ``draw_matheron_paths`` on zonal's ``SVGP`` and ``SGPR`` returns zonal's own Matheron paths
  (``paths.draw_posterior_paths(...).path``): BoTorch's handler for approximate GPs reads
  ``variational_strategy.inducing_points`` and evaluates the prior there, which is wrong for
  inter-domain features (u is not f(Z)), and SGPR is no GPyTorch GP at all. The ``prior_sampler``
  and ``update_strategy`` arguments are therefore not used for these models. With this,
  ``get_matheron_path_model`` and ``PathwiseThompsonSampling`` take zonal models unchanged.
"""

from __future__ import annotations

from botorch.sampling.pathwise import SamplePath
from botorch.sampling.pathwise.features.generators import GenKernelFeatures
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths
from torch import Size

from zonal.kernels import ZonalKernel
from zonal.models import SGPR, SVGP
from zonal.sampling.harmonic_features import HarmonicFeatureMap
from zonal.sampling.paths import draw_posterior_paths
from zonal.sampling.truncation import choose_truncation


@GenKernelFeatures.register(ZonalKernel)
def _harmonic_kernel_features(
    kernel: ZonalKernel, *, num_inputs: int, num_outputs: int
) -> HarmonicFeatureMap:
    if num_inputs != kernel.ambient_dim:
        raise ValueError(
            f"the zonal kernel acts on vectors of dimension ambient_dim={kernel.ambient_dim}, "
            f"but BoTorch gives inputs of dimension {num_inputs}"
        )
    return HarmonicFeatureMap(kernel, choose_truncation(kernel, max_features=num_outputs))


@DrawMatheronPaths.register((SVGP, SGPR))
def _zonal_matheron_paths(model, *, sample_shape: Size, **unused) -> SamplePath:
    return draw_posterior_paths(model, sample_shape).path
