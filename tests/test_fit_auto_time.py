"""How ``zonal fit --model auto`` spends its budget: the ``sgpr`` fallback skips the input scales
when a deep candidate follows (``zonal.fitting.auto_uses_ard``) while the activated DGP learns
them, and the activated DGP's network
stage (three phases of falling learning rate) may use ``zonal.tabular.recipes.NETWORK_SHARE`` of its
time."""

from __future__ import annotations

import time

import numpy as np
import torch

from zonal.models.stacking import StackedModel
from zonal.models.training import TrainingControl
from zonal.tabular import candidates, fitting, recipes
from zonal.tabular.candidates import auto_uses_ard
from zonal.tabular.fitting import fit_data
from zonal.tabular.recipes import network


def test_the_sgpr_fallback_learns_input_scales_only_without_a_deep_candidate():
    assert not auto_uses_ard("sgpr", ["sgpr", "adgp"])
    assert not auto_uses_ard("sgpr", ["sgpr", "dgp"])
    assert auto_uses_ard("sgpr", ["sgpr", "svgp-activated"])
    assert auto_uses_ard("sgpr", ["sgpr", "svgp"])
    assert auto_uses_ard("svgp-activated", ["svgp-activated", "adgp"])
    # the activated DGP learns them in its first layer; the inducing-point DGP has none
    assert auto_uses_ard("adgp", ["sgpr", "adgp"])
    assert not auto_uses_ard("dgp", ["sgpr", "dgp"])


def test_auto_multiplies_the_adam_steps_and_keeps_the_lbfgs_iterations():
    """Under auto the Adam recipes run ``AUTO_STEP_FACTOR`` times their default steps (early
    stopping and the budget end them); the L-BFGS recipes (the SGPR, the exact GP) keep theirs,
    since L-BFGS stops at convergence and ten times as many iterations only ran the exact GP to
    its share's deadline; a named model, and steps the user gives, are left as they are."""
    for name, recipe in recipes.RECIPES.items():
        chosen = candidates.recipe_options(name, {}, automatic=True)
        if recipe.lbfgs:
            assert "steps" not in chosen, name
        else:
            assert chosen["steps"] == candidates.AUTO_STEP_FACTOR * recipe.defaults["steps"], name
    assert {name for name, recipe in recipes.RECIPES.items() if recipe.lbfgs} == {"sgpr", "exact"}
    assert candidates.recipe_options("exact", {"steps": 7}, automatic=True)["steps"] == 7
    assert "steps" not in candidates.recipe_options("svgp", {}, automatic=False)


def test_auto_trains_the_sgpr_without_scales_before_the_activated_dgp_with_them(monkeypatch):
    """On 150 rows auto's candidates are sgpr, the exact GP and adgp, and its refinement (forced
    here) svgp: although ARD is on by default under auto, the sgpr it trains has a plain
    embedding (no input scales); the exact GP, the adgp and the svgp train after it with one
    learnt scale per input (the adgp's in its first layer's embedding, moved from 1 by
    training)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(150, 3))
    y = np.sin(2 * x[:, 0]) + 0.05 * rng.normal(size=150)
    trained: dict[str, tuple[bool, object]] = {}
    train = candidates.train

    def recording_train(spec, *args, **kwargs):
        fit, seconds = train(spec, *args, **kwargs)
        model = fit.model
        if isinstance(model, StackedModel):  # the exact GP's kernels, one embedding each
            model = model.components[0]
        embedding = model.layers[0].input_map if spec["model"] == "adgp" else model.input_map
        trained[spec["model"]] = (spec["ard"], embedding)
        return fit, seconds

    monkeypatch.setattr(candidates, "train", recording_train)
    monkeypatch.setattr(fitting, "auto_refinement", lambda scores, likelihood: "svgp")
    fit_data(x, y, feature_columns=list("abc"), num_inducing=16, steps=10)
    assert list(trained) == ["sgpr", "exact", "adgp", "svgp"]
    ard, embedding = trained["sgpr"]
    assert not ard and embedding.input_scales is None
    ard, embedding = trained["exact"]
    scales = embedding.input_scales.detach()
    assert ard and scales.shape == (3,) and not torch.allclose(scales, torch.ones(3).double())
    ard, embedding = trained["svgp"]  # its 10 steps may not beat its start on validation
    assert ard and embedding.input_scales.shape == (3,)
    ard, embedding = trained["adgp"]
    scales = embedding.input_scales.detach()
    assert ard and scales.shape == (3,) and not torch.allclose(scales, torch.ones(3).double())


def test_the_network_stage_uses_its_share_of_the_activated_dgps_budget(monkeypatch):
    """adgp with far more steps than a 2 s budget allows and no validation (no early stopping):
    the network's three phases (learning rate 0.01, then 1/5 and 1/25 of it) end together at
    ``NETWORK_SHARE`` of the budget, the ELBO stage at its end."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 2, generator=generator, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0])
    phases: list[tuple[float, int, float]] = []  # (learning rate, steps asked, end time)
    train_network = network.train_network

    def timed_network(*args, **kwargs):
        losses = train_network(*args, **kwargs)
        phases.append((kwargs["lr"], kwargs["num_steps"], time.monotonic()))
        return losses

    monkeypatch.setattr(network, "train_network", timed_network)
    budget, steps = 2.0, 10**6
    spec = recipes.resolve_spec(2, model="adgp", num_inducing=8, steps=steps, batch_size=32,
                                learning_rate=0.01)  # fmt: skip
    started = time.monotonic()
    recipes.train(spec, x, y, TrainingControl(deadline=started + budget))
    ended = time.monotonic()
    rates = [rate for rate, _, _ in phases]
    np.testing.assert_allclose(rates, [0.01, 0.002, 0.0004], rtol=1e-12)
    assert sum(count for _, count, _ in phases) == steps
    network_seconds = phases[-1][2] - started
    assert abs(network_seconds - recipes.NETWORK_SHARE * budget) < 0.1 * budget
    assert abs(ended - started - budget) < 0.1 * budget
