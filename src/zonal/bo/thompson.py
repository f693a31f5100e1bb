"""Thompson sampling from pathwise posterior draws, shallow and deep (seed 004 sec. 4.1.1).

``thompson_sampling(model)`` is BoTorch's ``PathwiseThompsonSampling`` for single-layer models
(exact GPs with a zonal kernel, ``SVGP``, ``SGPR``: zonal's draws are registered with BoTorch's
``draw_matheron_paths``) and ``DeepPathwiseThompsonSampling`` for ``DGP`` / ``ResidualDGP``.

A pathwise draw of a deep model is already one whole function :math:`F_s` (its inner layers drawn as
paths, ``zonal.sampling``), so a Thompson sample needs no choice of mixture component. BoTorch's
class treats a model with ``_is_ensemble`` as a batch of models and picks a member per draw from
the model's batch shape, which a deep zonal model does not have; the subclass keeps BoTorch's
draw-once, evaluate-many behaviour (one draw per q-batch point, fixed until ``redraw``) without
that selection.
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
from botorch.models.model import Model
from botorch.sampling.pathwise.posterior_samplers import get_matheron_path_model

import zonal.sampling  # noqa: F401  (registers zonal's paths with BoTorch)
from zonal.models import DGP


class DeepPathwiseThompsonSampling(PathwiseThompsonSampling):
    """``PathwiseThompsonSampling`` for deep zonal models: a value sums draw :math:`j` of the deep
    posterior at the :math:`j`-th point of each q-batch (BoTorch's convention), draws fixed until
    ``redraw``."""

    def redraw(self, batch_size: int) -> None:
        self.samples = get_matheron_path_model(
            model=self.model, sample_shape=torch.Size([batch_size])
        )

    def select_from_ensemble_models(self, values: torch.Tensor) -> torch.Tensor:
        """The values themselves: a deep draw is one function, with no ensemble to choose from."""
        return values


def thompson_sampling(model: Model, **kwargs: Any) -> PathwiseThompsonSampling:
    """Pathwise Thompson sampling on ``model`` (BoTorch's class, or the deep subclass for a
    ``DGP`` / ``ResidualDGP``); ``kwargs`` go to the acquisition (``objective``,
    ``posterior_transform``)."""
    family = DeepPathwiseThompsonSampling if isinstance(model, DGP) else PathwiseThompsonSampling
    return family(model, **kwargs)


__all__ = ["DeepPathwiseThompsonSampling", "thompson_sampling"]
