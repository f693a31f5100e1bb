"""Pathwise draws refuse conditioned models by name (they would silently ignore the new rows)."""

from __future__ import annotations

import pytest
import torch
from botorch.sampling.pathwise import draw_matheron_paths

from test_contract import dgp, sgpr, svgp_harmonic, training_data
from zonal.sampling import ConditionedPathsError, draw_posterior_paths


@pytest.mark.parametrize("build", [sgpr, svgp_harmonic, dgp])
def test_paths_of_a_conditioned_model_are_refused_and_of_the_base_model_drawn(build):
    x, y = training_data(40)
    model = build(x[:30], y[:30])
    draw_posterior_paths(model, torch.Size([2]))  # the model before conditioning: fine
    conditioned = model.condition_on_observations(x[30:], y[30:].unsqueeze(-1))
    with pytest.raises(ConditionedPathsError, match="would ignore the rows it was conditioned"):
        draw_posterior_paths(conditioned, torch.Size([2]))
    with pytest.raises(ConditionedPathsError):
        draw_matheron_paths(conditioned, sample_shape=torch.Size([2]))
