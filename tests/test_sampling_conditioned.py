"""Pathwise draws refuse conditioned models by name (they would silently ignore the new rows), and
models with BoTorch transforms (they would be draws on the transformed scale)."""

from __future__ import annotations

import pytest
import torch
from botorch.models.transforms import Normalize, Standardize
from botorch.sampling.pathwise import draw_matheron_paths

from test_contract import dgp, exact, sgpr, svgp_harmonic, training_data
from zonal.sampling import ConditionedPathsError, TransformedPathsError, draw_posterior_paths


@pytest.mark.parametrize("build", [sgpr, svgp_harmonic, exact, dgp])
def test_paths_of_a_conditioned_model_are_refused_and_of_the_base_model_drawn(build):
    x, y = training_data(40)
    model = build(x[:30], y[:30])
    draw_posterior_paths(model, torch.Size([2]))  # the model before conditioning: fine
    conditioned = model.condition_on_observations(x[30:], y[30:].unsqueeze(-1))
    with pytest.raises(ConditionedPathsError, match="would ignore the rows it was conditioned"):
        draw_posterior_paths(conditioned, torch.Size([2]))
    with pytest.raises(ConditionedPathsError):
        draw_matheron_paths(conditioned, sample_shape=torch.Size([2]))


@pytest.mark.parametrize("build", [sgpr, exact])
def test_paths_of_a_model_with_transforms_are_refused(build):
    x, y = training_data(30)
    model = build(x, y)
    model.set_transforms(Normalize(x.shape[-1]), Standardize(1))
    with pytest.raises(TransformedPathsError, match="an input_transform and an outcome_transform"):
        draw_posterior_paths(model, torch.Size([2]))
    with pytest.raises(TransformedPathsError):
        draw_matheron_paths(model, sample_shape=torch.Size([2]))
