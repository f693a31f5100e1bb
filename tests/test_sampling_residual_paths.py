"""Whole-function posterior draws of deep models (zonal.sampling.residual_paths and the deep
registration in botorch_registration): pathwise draws of a residual DGP have, point by point, the
marginal moments of the model's own hierarchical posterior (independent Monte Carlo through the
layers' marginals, zonal.models.ResidualDGP.latent_distribution); BoTorch's draw_matheron_paths on
a DGP or ResidualDGP gives zonal's draws (same random stream, same values); a draw is one function
of each point alone; ensemble-as-batch and multi-output deep draws are refused by name."""

from __future__ import annotations

import pytest
import torch
from botorch.sampling.pathwise import draw_matheron_paths

from zonal.bo import fit_deep_gp, residual_deep_gp, sobol_sphere
from zonal.models import inducing_point_dgp
from zonal.sampling import ResidualPaths, draw_posterior_paths

DRAWS = 3000


@pytest.fixture(scope="module")
def residual():
    torch.manual_seed(0)
    x = sobol_sphere(30, 3, seed=1)
    y = torch.sin(3 * x[:, 0]) * x[:, 2]
    model = residual_deep_gp(3, num_hidden_layers=2, num_inducing=16)
    for field in model.fields:  # hidden fields far enough from the identity to matter
        field.variational_strategy.set_variational_scale(0.5, zero_mean=True)
    return fit_deep_gp(model, x, y, num_steps=10, lr=0.03)


def test_pathwise_draws_have_the_marginal_moments_of_the_hierarchical_posterior(residual):
    x = sobol_sphere(4, 3, seed=2)
    torch.manual_seed(1)
    with torch.no_grad():
        draws = draw_posterior_paths(residual, torch.Size([DRAWS]))(x)  # [S, 4]
        residual.num_posterior_samples, residual.posterior_seed = DRAWS, 5
        mean, variance = residual.predict(x)  # mixture moments over DRAWS inner draws
    residual.num_posterior_samples, residual.posterior_seed = 32, 0
    spread = 2 / DRAWS  # both sides are Monte Carlo with DRAWS samples
    assert ((draws.mean(0) - mean).abs() <= 5 * (variance * spread).sqrt()).all()
    fourth = ((draws - draws.mean(0)) ** 4).mean(0)  # the variance estimate's own spread
    assert ((draws.var(0) - variance).abs() <= 5 * (fourth * spread).sqrt()).all()


def test_a_draw_is_a_function_of_each_point_alone(residual):
    paths = draw_posterior_paths(residual, torch.Size([3]))
    assert isinstance(paths, ResidualPaths)
    x = sobol_sphere(5, 3, seed=3)
    with torch.no_grad():
        together = paths(x)  # [3, 5]
        alone = torch.cat([paths(x[i : i + 1]) for i in range(5)], dim=-1)
    torch.testing.assert_close(together, alone, atol=1e-12, rtol=0)


def test_botorch_draw_matheron_paths_gives_zonals_deep_draws(residual):
    x = sobol_sphere(3, 3, seed=4)
    dgp = inducing_point_dgp(x, [3, 2, 1], num_inducing=3)
    for model in (residual, dgp):
        torch.manual_seed(7)
        botorch_paths = draw_matheron_paths(model, torch.Size([4]))
        torch.manual_seed(7)
        zonal_paths = draw_posterior_paths(model, torch.Size([4]))
        with torch.no_grad():
            torch.testing.assert_close(botorch_paths(x), zonal_paths(x), atol=0, rtol=0)
        with pytest.raises(ValueError, match="no ensemble dimension"):
            botorch_paths.set_ensemble_as_batch(True)
    two_outputs = inducing_point_dgp(x, [3, 2], num_inducing=3)
    with pytest.raises(ValueError, match="one output"):
        draw_matheron_paths(two_outputs, torch.Size([2]))
