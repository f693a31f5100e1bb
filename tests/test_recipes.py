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
