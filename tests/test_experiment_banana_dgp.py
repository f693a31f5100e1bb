"""The banana-dgp experiment (seed 000 fig. 5) in a tiny configuration (two moons, no download):
the networks are confident far from the data and the activated DGPs they initialise are not; the
far region it measures; the files it writes; resuming; and the probit loss of its first stage."""

from __future__ import annotations

import csv
import math

import gpytorch
import pytest
import torch

from zonal.experiments import (
    _dgp_common,
    banana_dgp,
    create_run,
    execute_run,
    resume_experiment,
    run_experiment,
)
from zonal.models.activated_dgp import probit_cross_entropy

TINY_BANANA = {
    "dataset": "synthetic",
    "num_train": 40,
    "num_test": 40,
    "num_inducing": 8,
    "network_steps": 100,
    "elbo_steps": 20,
    "eval_samples": 4,
    "grid_size": 12,
}
DEPTHS = (1, 3)


class SimulatedCrashError(RuntimeError):
    """Stands for a run killed part way."""


def _read_csv(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def banana_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("banana")
    return run_experiment("banana-dgp", overrides=TINY_BANANA, runs_root=root)


@pytest.fixture(scope="module")
def confidence(banana_reference) -> dict[str, dict[str, float]]:
    """confidence.csv by model: mean |p(y = 1 | x) - 0.5| far from and near the data."""
    rows = _read_csv(banana_reference.path / "confidence.csv")
    return {
        row["model"]: {key: float(row[f"{key}_confidence"]) for key in ("far", "near")}
        for row in rows
    }


def test_the_networks_are_confident_far_from_the_data(confidence):
    """Seed 000 fig. 5: "the neural networks make very confident decisions, even far away from the
    data". A Softplus network's output grows linearly away from the data, so its mean |p - 0.5|
    far from the data exceeds that near it."""
    for depth in DEPTHS:
        network = confidence[f"network-{depth}"]
        assert network["far"] > network["near"]


def test_the_dgps_are_less_confident_far_from_the_data_than_their_networks(
    banana_reference, confidence
):
    """Seed 000 fig. 5: training the DGP initialised by the network "leads, in both situations, to
    a more calibrated model". For each depth the DGP's mean |p - 0.5| far from the data is below
    its network's, and the DGP gives up more confidence far from the data than near it (the
    homogeneous DGP's predictive standard deviation grows with ||x|| like its mean, so p stays
    away from 0 and 1 where the network's saturates). The metrics say the same."""
    for depth in DEPTHS:
        network, dgp = confidence[f"network-{depth}"], confidence[f"dgp-{depth}"]
        assert dgp["far"] < network["far"]
        assert network["far"] - dgp["far"] > network["near"] - dgp["near"]
    assert banana_reference.metrics["dgp_less_confident_far"] == {"1": True, "3": True}


def test_far_from_the_data_is_the_ring_outside_the_training_box():
    """``make_grid``: a grid point is far exactly when its distance to the training rows' bounding
    box is at least ``ring_margin``; the grid reaches ``grid_margin`` beyond the box on every side,
    so the ring is not empty."""
    generator = torch.Generator().manual_seed(0)
    x_train = torch.randn(30, 2, generator=generator, dtype=torch.float64)
    config = {**banana_dgp.QUICK, "grid_size": 25}
    axis_0, axis_1, points, far = banana_dgp.make_grid(x_train, config)
    low, high = x_train.min(0).values, x_train.max(0).values
    assert axis_0[0] == pytest.approx(float(low[0]) - config["grid_margin"])
    assert axis_1[-1] == pytest.approx(float(high[1]) + config["grid_margin"])
    nearest_in_box = torch.maximum(torch.minimum(points, high), low)  # [G^2, 2]
    distance = (points - nearest_in_box).norm(dim=-1)
    assert torch.equal(far, distance >= config["ring_margin"])
    assert far.any()
    assert not far[(points >= low).all(-1) & (points <= high).all(-1)].any()


def test_banana_dgp_writes_the_maps_and_the_confidence_table(banana_reference):
    """confidence.csv holds one row per model in training order with finite confidences (in
    [0, 0.5]), accuracies and log likelihoods; the report names the seed's figure."""
    path = banana_reference.path
    files = {p.name for p in path.iterdir()}
    assert {"confidence.csv", "report.md", "metrics.json", "checkpoint.pt"} <= files
    rows = _read_csv(path / "confidence.csv")
    assert [row["model"] for row in rows] == ["network-1", "dgp-1", "network-3", "dgp-3"]
    for column in ("far_confidence", "near_confidence", "test_accuracy", "test_log_likelihood"):
        assert all(math.isfinite(float(row[column])) for row in rows)
    assert "paper (seed 000 figure 5)" in (path / "report.md").read_text()


def test_banana_dgp_resumes_after_an_interruption_with_the_same_metrics(
    banana_reference, tmp_path, monkeypatch
):
    """A run killed in its first ELBO stage resumes with the first network from the checkpoint
    (only the second network is trained) and ends with the metrics and table of an uninterrupted
    run."""
    real_elbo = _dgp_common.train_elbo
    calls = {"network": 0}

    def crashing_elbo(*args, **kwargs):
        raise SimulatedCrashError("killed in the first ELBO stage")

    monkeypatch.setattr(_dgp_common, "train_elbo", crashing_elbo)
    run = create_run("banana-dgp", overrides=TINY_BANANA, runs_root=tmp_path)
    with pytest.raises(SimulatedCrashError):
        execute_run(run)
    assert run.directory.checkpoint_path.exists()  # the first network was saved

    real_network = _dgp_common.train_network_stage

    def counting_network(*args, **kwargs):
        calls["network"] += 1
        return real_network(*args, **kwargs)

    monkeypatch.setattr(_dgp_common, "train_elbo", real_elbo)
    monkeypatch.setattr(_dgp_common, "train_network_stage", counting_network)
    resumed = resume_experiment(run.directory.path)
    assert calls["network"] == 1  # the 1-layer network came from the checkpoint
    assert resumed.metrics == banana_reference.metrics
    assert _read_csv(resumed.path / "confidence.csv") == _read_csv(
        banana_reference.path / "confidence.csv"
    )


def test_probit_cross_entropy_is_the_bernoulli_likelihood_at_zero_variance():
    """The first stage's loss is -log Phi((2y - 1) f), GPyTorch's Bernoulli (probit) likelihood of
    a point mass at f, so the network and the DGP it initialises predict the same p."""
    generator = torch.Generator().manual_seed(0)
    f = 3 * torch.randn(50, generator=generator, dtype=torch.float64)
    y = (torch.rand(50, generator=generator, dtype=torch.float64) > 0.5).double()
    likelihood = gpytorch.likelihoods.BernoulliLikelihood()
    point_mass = gpytorch.distributions.MultivariateNormal(f, torch.diag(torch.full_like(f, 1e-8)))
    log_marginal = likelihood.log_marginal(y, point_mass)  # log Phi((2y - 1) f)
    assert torch.allclose(-log_marginal.mean(), probit_cross_entropy(f, y), atol=1e-6)
