"""The SVGP classifiers' learned constant prior mean per latent function
(``zonal.tabular.recipes.parts.prior_mean``, spec ``prior_mean: "constant"``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zonal.tabular.fitting import fit_data
from zonal.tabular.recipes import build_points_svgp, build_svgp, resolve_spec
from zonal.tabular.saved import load_model, save_model


def rows(count: int, dim: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(count, dim, generator=generator, dtype=torch.float64)


@pytest.mark.parametrize("model", ["svgp", "svgp-activated", "svgp-points"])
@pytest.mark.parametrize(("likelihood", "classes"), [("bernoulli", 2), ("softmax", 3)])
def test_a_classifier_spec_asks_for_a_constant_mean_and_a_regression_spec_does_not(
    model, likelihood, classes
):
    spec = resolve_spec(3, model=model, likelihood=likelihood, num_classes=classes)
    assert spec["prior_mean"] == "constant"
    assert "prior_mean" not in resolve_spec(3, model=model)  # Gaussian: standardised targets
    assert "prior_mean" not in resolve_spec(3, model="adgp", likelihood=likelihood,
                                            num_classes=classes)  # fmt: skip


@pytest.mark.parametrize("build", [build_svgp, build_points_svgp])
def test_where_q_u_is_zero_each_latent_mean_is_its_constant(build):
    """Whitened q(u) with mean 0: the predictive mean of latent function c is the prior's,
    m_c, at every input, one constant per class for a softmax likelihood."""
    name = "svgp" if build is build_svgp else "svgp-points"
    spec = resolve_spec(3, model=name, likelihood="softmax", num_classes=3, num_inducing=16)
    model = build(spec, rows(40, 3))
    constants = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    with torch.no_grad():
        model.mean_module.constant.copy_(constants)
        model.inducing_strategy.set_variational_scale(1.0, zero_mean=True)  # q(v) = N(0, I)
        mean = model.latent_distribution(rows(5, 3, seed=1)).mean  # [5, 3]
    torch.testing.assert_close(mean, constants.expand(5, 3), rtol=0, atol=1e-12)


def test_a_spec_saved_without_the_key_keeps_the_zero_mean():
    spec = resolve_spec(2, model="svgp-points", likelihood="bernoulli", num_inducing=8)
    del spec["prior_mean"]  # a model fitted before the constant mean
    assert build_points_svgp(spec, rows(20, 2)).mean_module is None


def test_the_learned_constants_follow_the_class_frequencies_and_survive_a_checkpoint(tmp_path):
    """Inputs that say nothing about the label, classes drawn with frequencies 0.7, 0.2, 0.1:
    the fit can only learn the base rates, and they land in the constants (largest for the
    commonest class); the saved model predicts the same."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 2))
    labels = rng.choice(["a", "b", "c"], size=300, p=[0.7, 0.2, 0.1])
    fitted = fit_data(x, labels, feature_columns=["p", "q"], model="svgp-points",
                      num_inducing=8, steps=300, validation_fraction=0.0)  # fmt: skip
    constants = fitted.trained.model.mean_module.constant.detach()  # [3]
    assert constants.argmax().item() == 0 and constants.argmin().item() == 2
    path = tmp_path / "model.pt"
    save_model(fitted, path)
    loaded = load_model(path)
    torch.testing.assert_close(loaded.trained.model.mean_module.constant.detach(), constants)
