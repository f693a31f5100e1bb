"""The activated DGP's network stage without early stopping in its first phase (``auto``'s choice
where no exact GP is offered, docs/fit_evidence.md session 32): the spec key is checked, ``auto`` sets it
only for its regression activated DGP above the exact GP's rows, and the network stage's first
phase is the one that takes it (the watch without early stopping: tests/test_fit_validation.py)."""

from __future__ import annotations

import time

import pytest
import torch

from zonal.models.training import TrainingControl
from zonal.tabular import recipes
from zonal.tabular.candidates import network_options
from zonal.tabular.targets import Target


def test_the_spec_takes_it_for_the_activated_dgp_only():
    spec = recipes.resolve_spec(3, model="adgp", network_early_stopping=False)
    assert spec["network_early_stopping"] is False
    assert "network_early_stopping" not in recipes.resolve_spec(3, model="adgp")
    with pytest.raises(ValueError, match="network_early_stopping is for adgp"):
        recipes.resolve_spec(3, model="svgp", network_early_stopping=False)


def test_auto_turns_it_off_for_its_regression_activated_dgp_where_no_exact_gp_is_offered():
    gaussian, classes = Target("gaussian"), Target("bernoulli", ("a", "b"))
    assert network_options("adgp", ["sgpr", "adgp"], gaussian) == {"network_early_stopping": False}
    assert network_options("adgp", ["sgpr", "exact", "adgp"], gaussian) == {}
    assert network_options("sgpr", ["sgpr", "adgp"], gaussian) == {}
    assert network_options("adgp", ["svgp", "svgp-points", "adgp"], classes) == {}


def test_only_the_first_network_phase_runs_without_early_stopping():
    seen = {}
    watch = TrainingControl.watch

    def recording(self, module, steps, *, stage, **options):
        seen[stage] = options.get("early_stopping", True)
        return watch(self, module, steps, stage=stage, **options)

    x = torch.randn(40, 2, dtype=torch.float64)
    for flag in (True, False):
        spec = recipes.resolve_spec(2, model="adgp", num_inducing=8, steps=8, batch_size=20,
                                    network_early_stopping=flag)  # fmt: skip
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(TrainingControl, "watch", recording)
            recipes.train(spec, x, x[:, 0], TrainingControl(deadline=time.monotonic() + 30.0))
        assert seen["network 1"] is flag
        assert seen["network 2"] is True and seen["network 3"] is True
