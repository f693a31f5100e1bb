"""Recipes (zonal.recipes): the registry behind ``zonal fit``, the options each recipe uses, and
the deep models it shares with the ``uci-dgp`` experiment."""

from __future__ import annotations

import pytest
import torch

from zonal.cli import build_parser
from zonal.experiments import uci_dgp
from zonal.experiments._dgp_common import build_inducing_point_dgp
from zonal.tabular import recipes
from zonal.tabular.recipes import RECIPES, get_recipe, resolve_spec


def data(count: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 2, generator=generator, dtype=torch.float64)
    return x, torch.sin(2 * x[:, 0]) * x[:, 1]


def test_the_cli_offers_exactly_the_registered_recipes():
    parser = build_parser()
    fit = parser._subparsers._group_actions[0].choices["fit"]
    model_action = next(action for action in fit._actions if action.dest == "model")
    assert tuple(model_action.choices) == ("auto", *RECIPES)
    with pytest.raises(ValueError, match="unknown model 'nope'; choose one of sgpr, exact, svgp"):
        get_recipe("nope")
    with pytest.raises(ValueError, match="drop --kernel polynomial-decay"):
        resolve_spec(2, model="adgp", kernel="polynomial-decay")


@pytest.mark.parametrize("name", ["svgp", "svgp-activated", "adgp", "dgp"])
def test_the_learning_rate_given_is_the_one_adam_uses(name, monkeypatch):
    seen: list[float] = []
    adam = torch.optim.Adam

    def recording_adam(parameters, lr, **kwargs):
        seen.append(lr)
        return adam(parameters, lr=lr, **kwargs)

    monkeypatch.setattr(torch.optim, "Adam", recording_adam)
    x, y = data()
    spec = resolve_spec(2, model=name, num_inducing=8, steps=3, learning_rate=0.0123)
    recipes.train(spec, x, y)
    assert seen and seen[0] == pytest.approx(0.0123)
    # the later phases of the SVGP schedule are fixed fractions of the rate given
    assert all(rate <= 0.0123 + 1e-15 for rate in seen)
    default = resolve_spec(2, model=name)["learning_rate"]
    assert default == RECIPES[name].defaults["learning_rate"]


def test_fit_dgp_and_the_uci_dgp_experiment_build_the_same_dgp():
    """The recipe's DGP and the experiment's, from the same data, seed and settings, are the
    same model: identical parameters and identical predictions."""
    x, _ = data(30)
    spec = resolve_spec(2, model="dgp", num_inducing=8, num_layers=3, seed=4)
    from_recipe = get_recipe("dgp").build(spec, x)
    config = uci_dgp.QUICK
    from_experiment = build_inducing_point_dgp(
        x,
        3,
        recipes.gaussian_likelihood(),
        num_inducing=8,
        hidden_width=config["hidden_width"],
        mean=config["mean"],
        seed=4,
        inner_scale=config["dgp_inner_scale"],
    )
    ours, theirs = from_recipe.state_dict(), from_experiment.state_dict()
    assert ours.keys() == theirs.keys()
    for key in ours:
        torch.testing.assert_close(ours[key], theirs[key], atol=0, rtol=0)
    torch.testing.assert_close(from_recipe.predict(x[:5]), from_experiment.predict(x[:5]))


def test_the_network_stage_trains_in_float32_and_copies_the_network_in_float64(monkeypatch):
    """``recipes.network_stage`` trains the network in ``NETWORK_DTYPE`` (float32: its inputs,
    targets and parameters) and copies it into the float64 DGP, whose posterior mean is then the
    trained network to float32's rounding (and, to 1e-10, the float64 network with its weights
    and the exact activation coefficients); the noise starts at its training MSE."""
    from zonal.models import activated_dgp
    from zonal.models.training import TrainingControl
    from zonal.tabular.recipes import network as network_module

    assert torch.float32 == network_module.NETWORK_DTYPE
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(120, 3, dtype=torch.float64, generator=generator)
    y = torch.sin(2 * x[:, 0]) + 0.05 * torch.randn(120, dtype=torch.float64, generator=generator)
    spec = resolve_spec(3, model="adgp", steps=60, num_inducing=16, ard=True)
    model = recipes.build_deep(spec, x)
    seen, trained = [], []
    train = activated_dgp.train_network

    def recording(network, inputs, targets, **options):
        seen.append({p.dtype for p in network.parameters()} | {inputs.dtype, targets.dtype})
        trained.append(network)
        return train(network, inputs, targets, **options)

    monkeypatch.setattr(network_module, "train_network", recording)
    control = TrainingControl(validation=(x[:20], y[:20]))
    recipes.network_stage(model, spec, x[20:], y[20:], control)
    assert seen and all(dtypes == {torch.float32} for dtypes in seen)
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    network = model.to_torch_module()
    with torch.no_grad():
        mean = model.posterior_mean(x)  # [120], float64
        assert mean.dtype == torch.float64
        torch.testing.assert_close(mean, network(x), rtol=1e-10, atol=1e-10)
        float32_mean = trained[-1](x.float()).double()  # the network as it trained
        torch.testing.assert_close(mean, float32_mean, rtol=1e-5, atol=1e-5)
        training_mse = float(torch.mean((network(x[20:]) - y[20:]) ** 2))
        assert training_mse < 0.5 * float(y.var())  # it learnt something in 60 steps
    assert float(model.likelihood.noise) == pytest.approx(training_mse, rel=1e-4)
