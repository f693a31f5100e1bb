"""zonal in BoTorch's pathwise machinery (``botorch.sampling.pathwise``), registered on import.

* ``gen_kernel_features`` on a ``ZonalKernel`` returns the exact ``HarmonicFeatureMap`` instead of
  random Fourier features, so ``draw_matheron_paths(SingleTaskGP(..., covar_module=zonal kernel))``
  (and BoTorch's ``ScaleKernel`` handler around it) draws exact truncated-KL priors. BoTorch passes
  its ``num_features`` (1024 by default) as ``num_outputs``: here the budget of harmonics, filled
  only as far as the default tolerance (``truncation.DEFAULT_TOLERANCE``) needs.
* ``draw_matheron_paths`` on zonal's ``SVGP``, ``SGPR`` and ``ExactZonalGP`` returns zonal's own
  Matheron paths (``paths.draw_posterior_paths(...).path``): BoTorch's handler for approximate GPs
  reads ``variational_strategy.inducing_points`` and evaluates the prior there, which is wrong for
  inter-domain features (:math:`u` is not :math:`f(Z)`), and SGPR and ``ExactZonalGP`` are no
  GPyTorch GPs at all (the exact GP's paths: ``exact_paths``). The ``prior_sampler`` and
  ``update_strategy`` arguments are therefore not used for these models. With this,
  ``get_matheron_path_model`` and ``PathwiseThompsonSampling`` take zonal models unchanged.
* ``draw_matheron_paths`` on zonal's ``DGP`` and ``ResidualDGP`` (one output) returns whole-function
  draws of the deep model (``DeepPaths``, ``residual_paths.ResidualPaths``) as a ``DeepSamplePath``.
  A draw is one function, with no ensemble dimension; BoTorch's ``PathwiseThompsonSampling`` still
  treats the model as an ensemble (``_is_ensemble``) and indexes a model batch it does not have, so
  Thompson sampling on deep models goes through ``zonal.bo.DeepPathwiseThompsonSampling``.
"""

from __future__ import annotations

from typing import cast

import torch
from botorch.sampling.pathwise import SamplePath
from botorch.sampling.pathwise.features.generators import GenKernelFeatures
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths
from torch import Size, nn

from zonal.kernels import ZonalKernel
from zonal.models import DGP, SGPR, SVGP, ExactZonalGP
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


@DrawMatheronPaths.register((SVGP, SGPR, ExactZonalGP))
def _zonal_matheron_paths(model, *, sample_shape: Size, **unused) -> SamplePath:
    return cast(SamplePath, draw_posterior_paths(model, sample_shape).path)


class DeepSamplePath(SamplePath):
    """Whole-function draws of a deep zonal model as a BoTorch ``SamplePath``: inputs
    [*b, N, D] -> [*S, *b, N] (``DeepPaths`` or ``ResidualPaths``, one output)."""

    def __init__(self, draws: nn.Module) -> None:
        super().__init__()
        self.draws = draws

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """F_s(x) [*S, *b, N] at inputs x [*b, N, D], draw s of every layer reading draw s of
        the layer before."""
        return self.draws(x)

    def set_ensemble_as_batch(self, ensemble_as_batch: bool) -> None:
        """BoTorch's switch for ensemble models; only ``False`` (the default) is meaningful here,
        ``True`` is a ``ValueError``."""
        if ensemble_as_batch:
            raise ValueError(
                "a pathwise draw of a deep zonal model is one function: it has no ensemble "
                "dimension to treat as a batch"
            )


@DrawMatheronPaths.register(DGP)
def _deep_matheron_paths(model, *, sample_shape: Size, **unused) -> SamplePath:
    if model.num_outputs != 1:
        raise ValueError(
            f"pathwise draws through BoTorch take deep models with one output, the model has "
            f"{model.num_outputs}; use zonal.sampling.draw_posterior_paths"
        )
    return DeepSamplePath(draw_posterior_paths(model, sample_shape))
