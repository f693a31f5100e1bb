"""BoTorch's data conventions in zonal's fitters: targets [N, 1] (BoTorch's) give exactly the fit
of targets [N], for SVGP, the deep models and SGPR alike."""

from __future__ import annotations

import pytest
import torch

from test_contract import INPUT_DIM, activated_dgp, arccos, sgpr, training_data
from zonal.features import SphericalHarmonicFeatures
from zonal.models import SVGP, fit_dgp, fit_svgp


def svgp_model():
    kernel = arccos()
    return SVGP(kernel, SphericalHarmonicFeatures(INPUT_DIM + 1, 4, kernel=kernel), INPUT_DIM)


def fitted_svgp(y):
    torch.manual_seed(0)
    model = svgp_model()
    fit_svgp(model, training_data(30)[0], y, num_steps=4, batch_size=10, seed=0)
    return model


def fitted_dgp(y):
    x = training_data(30)[0]
    torch.manual_seed(0)
    model = activated_dgp(x, training_data(30)[1])  # built (and briefly fitted) the same way
    torch.manual_seed(1)
    fit_dgp(model, x, y, num_steps=3, batch_size=10, seed=0)
    return model


@pytest.mark.parametrize("fit", [fitted_svgp, fitted_dgp])
def test_fitters_take_targets_n_by_1_as_targets_n(fit):
    _, y = training_data(30)
    column, flat = fit(y.unsqueeze(-1)), fit(y)
    for (name, a), (_, b) in zip(
        column.state_dict().items(), flat.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)


def test_sgpr_takes_targets_n_by_1_as_targets_n():
    x, y = training_data(30)
    column, flat = sgpr(x, y.unsqueeze(-1)), sgpr(x, y)
    torch.testing.assert_close(column.elbo(), flat.elbo(), atol=0, rtol=0)


def test_targets_of_other_shapes_are_refused_by_name():
    x, y = training_data(30)
    with pytest.raises(ValueError, match=r"targets \[N\]"):
        fit_svgp(svgp_model(), x, torch.stack([y, y], -1), num_steps=1)
