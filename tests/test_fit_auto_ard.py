"""Input scales (ARD) in the activated DGP's first layer: the network copy carries them exactly
(``zonal.nn.ActivatedLayer``, ``ActivatedDGP.from_torch_module``), the network stage learns them
towards the relevant inputs, and ``zonal fit --model adgp --ard`` saves and reloads them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zonal.models import ActivatedDGP
from zonal.models.activated_dgp import train_network
from zonal.tabular.fitting import fit_data
from zonal.tabular.predict import predict_data
from zonal.tabular.recipes import gaussian_likelihood
from zonal.tabular.saved import load_model, save_model


def _scaled_dgp(input_dim: int = 3, seed: int = 0) -> ActivatedDGP:
    return ActivatedDGP(input_dim, [4], gaussian_likelihood(), num_inducing=8, mean="constant",
                        input_scales=True, seed=seed)  # fmt: skip


def test_the_dgp_mean_is_the_network_with_its_input_scales():
    """After ``from_torch_module`` the DGP's posterior mean equals the network (scales 0.3, 2, 0.05
    in the first layer) to rounding, ``to_torch_module`` gives that network back, and the same
    network with all scales 1 is a different function (the scales are not ignored)."""
    model = _scaled_dgp()
    network = model.network_like(seed=1)
    np.testing.assert_array_equal(network[0].input_scales.detach().numpy(), np.ones(3))
    assert network[1].input_scales is None  # only the first layer reads the data
    scales = torch.tensor([0.3, 2.0, 0.05], dtype=torch.float64)
    with torch.no_grad():
        network[0].raw_input_scales.copy_(
            network[0].input_scales_constraint.inverse_transform(scales)
        )
    x = torch.randn(25, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    model.from_torch_module(network)
    with torch.no_grad():
        expected = network(x)  # [25]
        torch.testing.assert_close(model.posterior_mean(x), expected, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(model.to_torch_module()(x), expected, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(model.layers[0].input_map.input_scales, scales)
        network[0].raw_input_scales.copy_(
            network[0].input_scales_constraint.inverse_transform(torch.ones(3, dtype=torch.float64))
        )
        assert (network(x) - expected).abs().max() > 1e-2


def test_a_network_without_scales_does_not_fit_a_dgp_with_them():
    plain = ActivatedDGP(3, [4], gaussian_likelihood(), num_inducing=8, mean="constant")
    with pytest.raises(ValueError, match="layer 0: the network lacks input scales"):
        _scaled_dgp().from_torch_module(plain.network_like())
    with pytest.raises(ValueError, match="layer 0: the network has input scales"):
        plain.from_torch_module(_scaled_dgp().network_like())


def test_the_network_stage_shrinks_the_scales_of_irrelevant_inputs():
    """y = sin(2 x0) + x1 / 2 on four standard normal inputs: after 300 Adam steps on the MSE the
    scales of x2 and x3 (which y ignores) are below those of x0 and x1 (measured: 1.70, 0.52
    against 0.36, 0.42, from 1 each)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(300, 4, generator=generator, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0]) + 0.5 * x[:, 1] + 0.05 * torch.randn(300, generator=generator,
                                                                     dtype=torch.float64)  # fmt: skip
    network = _scaled_dgp(input_dim=4).network_like(seed=0)
    train_network(network, x, y, num_steps=300, batch_size=300, lr=0.03, seed=0)
    scales = network[0].input_scales.detach()
    assert scales[2:].max() < scales[:2].min()


def test_adgp_with_ard_is_saved_and_reloaded_with_its_scales(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 3))
    y = np.sin(2 * x[:, 0]) + 0.05 * rng.normal(size=120)
    fitted = fit_data(x, y, feature_columns=list("abc"), model="adgp", ard=True, num_inducing=8,
                      steps=20, validation_fraction=0)  # fmt: skip
    scales = fitted.trained.model.layers[0].input_map.input_scales.detach().numpy()
    assert fitted.spec["ard"] and not np.allclose(scales, 1.0)  # learnt, not the start
    save_model(fitted, tmp_path / "model.pt")
    loaded = load_model(tmp_path / "model.pt")
    np.testing.assert_array_equal(
        loaded.trained.model.layers[0].input_map.input_scales.detach().numpy(), scales
    )
    before, after = predict_data(fitted, x[:5]), predict_data(loaded, x[:5])
    np.testing.assert_allclose(after["mean"], before["mean"], rtol=1e-12, atol=1e-12)
