"""``auto``'s SVGP candidates start where its SGPR ended (``zonal.tabular.candidates.start_options``):
at the SGPR's noise and kernel variance, with q(u) at its optimum for them, rather than at the
defaults that Adam could not leave within the SVGP's share of the budget."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zonal.tabular.candidates import start_options, train_candidates
from zonal.tabular.recipes import resolve_spec
from zonal.tabular.split import Split
from zonal.tabular.targets import REGRESSION, Target


def _linear_split(num_rows: int = 900, input_dim: int = 16) -> Split:
    """A nearly noiseless linear target of 16 inputs: the SGPR learns a noise far below the
    default 0.1."""
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(num_rows, input_dim)))  # [N, D]
    y = x @ torch.from_numpy(rng.normal(size=input_dim)) / 4
    y = y + 0.05 * torch.from_numpy(rng.normal(size=num_rows))
    y = (y - y.mean()) / y.std()  # [N]
    return Split(x[:800], y[:800], x[800:], y[800:])


def test_the_svgp_candidate_starts_at_the_sgprs_noise_and_scores_near_it():
    fits, scores, _ = train_candidates(
        ["sgpr", "svgp"], _linear_split(), REGRESSION, None, False,
        automatic=True, seed=0, options={"num_inducing": 128, "steps": 40},
    )  # fmt: skip
    sgpr, svgp = fits["sgpr"], fits["svgp"]
    assert svgp.spec["initial_noise"] == pytest.approx(float(sgpr.model.likelihood.noise.detach()))
    assert svgp.spec["initial_outputscale"] == pytest.approx(
        float(sgpr.model.kernel.outputscale.detach())
    )
    assert float(sgpr.model.likelihood.noise.detach()) < 0.01  # the SGPR found the low noise
    # the SVGP refines the SGPR's optimum: it starts there (q(u) at the Titsias optimum gives
    # the same bound), so 40 Adam steps leave it near it (started at noise 0.1 it stayed 2 nats
    # per row below)
    gap = scores["sgpr"]["log_likelihood"] - scores["svgp"]["log_likelihood"]
    assert gap < 0.5


def test_a_named_svgp_starts_at_the_defaults_and_the_start_is_checked():
    assert "initial_noise" not in resolve_spec(3, model="svgp")
    spec = resolve_spec(3, model="svgp", initial_noise=0.01, initial_outputscale=2.0)
    assert (spec["initial_noise"], spec["initial_outputscale"]) == (0.01, 2.0)
    with pytest.raises(ValueError, match="initial_noise is a positive start of a Gaussian svgp"):
        resolve_spec(3, model="sgpr", initial_noise=0.01)
    with pytest.raises(ValueError, match="initial_noise is a positive start"):
        resolve_spec(3, model="svgp", initial_noise=0.0)
    with pytest.raises(ValueError, match="initial_outputscale is a positive start"):
        resolve_spec(3, model="svgp", likelihood="bernoulli", initial_outputscale=1.0)


def test_classification_candidates_start_at_the_defaults():
    # an SGPR was trained (as for a regression), yet a classifier's SVGP does not start from it
    split = _linear_split(120, 2)
    fits, _, _ = train_candidates(
        ["sgpr"], split, REGRESSION, None, False,
        automatic=True, seed=0, options={"num_inducing": 8, "steps": 5},
    )  # fmt: skip
    assert start_options("svgp", fits, Target("bernoulli", ("0", "1"))) == {}
    assert start_options("svgp-points", fits, Target("softmax", ("0", "1", "2"))) == {}
    assert set(start_options("svgp", fits, REGRESSION)) == {"initial_noise", "initial_outputscale"}
    labels = (split.y_train > 0).long(), (split.y_valid > 0).long()
    split = Split(split.x_train, labels[0], split.x_valid, labels[1])
    fits, _, _ = train_candidates(
        ["svgp-activated"], split, Target("bernoulli", ("0", "1")), None, False,
        automatic=True, seed=0, options={"num_inducing": 8, "steps": 5},
    )  # fmt: skip
    assert "initial_noise" not in fits["svgp-activated"].spec
    assert "initial_outputscale" not in fits["svgp-activated"].spec
