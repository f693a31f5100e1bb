"""Convolutional features + deep-GP heads on tiny synthetic images: the copied network is the
DGP's posterior mean, the head's class probabilities are the softmax likelihood's predictive
(checked against GPyTorch's own marginal), frozen features stay frozen, and the baselines average
what they claim to average."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from torch import nn

from zonal.models.baselines import DeepEnsembleClassifier, MCDropoutClassifier, inducing_point_head
from zonal.models.conv_head import (
    ConvActivatedDGP,
    ConvFeatures,
    HybridNetwork,
    fit_conv_adgp,
    fit_dgp_head,
    train_classifier,
)

IMAGE_SHAPE = (1, 8, 8)
NUM_CLASSES = 3


def _data(count: int = 48, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Images whose class is the quadrant-row of a bright square (learnable by a tiny net)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, NUM_CLASSES, (count,), generator=generator)
    images = 0.1 * torch.rand(count, *IMAGE_SHAPE, generator=generator)
    for index, label in enumerate(labels.tolist()):
        row = 1 + 2 * label
        images[index, 0, row : row + 2, 2:6] = 1.0
    return images, labels


def _model(extractor: nn.Module | None = None, seed: int = 0) -> ConvActivatedDGP:
    if extractor is None:
        extractor = ConvFeatures(IMAGE_SHAPE, channels=(2, 3), kernel_size=3, feature_dim=5)
    return ConvActivatedDGP.build(
        IMAGE_SHAPE, NUM_CLASSES, extractor=extractor, hidden_width=3, num_inducing=8, seed=seed
    )


def _user_extractor() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 4), nn.Tanh())


@pytest.mark.parametrize("user_given", [False, True], ids=["default", "user-extractor"])
def test_the_copied_network_is_the_posterior_mean(user_given):
    """After stage 1 (a few cross-entropy steps) and the copy, the DGP head's posterior mean at
    the extracted features reproduces the network's logits to 1e-8, for the report's extractor
    and for a user-given one."""
    images, labels = _data()
    model = _model(_user_extractor() if user_given else None)
    network = model.network_like(seed=1)
    train_classifier(network, images, labels, epochs=8, batch_size=16, lr=3e-2)
    model.from_network(network)
    network.eval()
    with torch.no_grad():
        logits = network(images)
    assert logits.std() > 0.1  # a trained, non-constant network
    assert (model.logits_mean(images) - logits).abs().max() < 1e-8
    assert (model.to_network()(images) - logits).abs().max() < 1e-8


def test_head_probabilities_match_gpytorch_softmax_marginal():
    """log p(y | x) from ``predict_proba`` (K = 400 softmax draws per inner sample) against the
    head's contract path (``log_predictive_density``: GPyTorch's SoftmaxLikelihood marginal with
    4000 draws, log-mean-exp over the same S inner samples): equal within Monte Carlo error
    (0.02 nats) at a head with appreciable variance."""
    images, labels = _data(count=12)
    model = _model()
    network = model.network_like(seed=2)
    model.from_network(network, kernel_variance=0.5, variational_scale=0.5)
    model.softmax_samples = 400
    ours = model.log_predictive_density(images, labels)  # [N]
    features = model.features(images)
    with gpytorch.settings.num_likelihood_samples(4000), torch.random.fork_rng():
        torch.manual_seed(0)
        reference = model.head.log_predictive_density(features, labels)  # [N]
    spread = model.head.predict(features)[1]
    assert spread.mean() > 0.05  # the logits are uncertain, so the softmax average matters
    assert (ours - reference).abs().max() < 0.02


@pytest.mark.filterwarnings("ignore:Negative variance values detected")
def test_a_near_deterministic_head_predicts_the_networks_softmax():
    """With kernel variance 1e-12 and q covariance 1e-12 I the predictive is the network's
    softmax to 1e-4."""
    images, _ = _data(count=10)
    model = _model()
    network = model.network_like(seed=4)
    model.from_network(network, kernel_variance=1e-12, variational_scale=1e-6)
    network.eval()
    with torch.no_grad():
        expected = torch.softmax(network(images), dim=-1)
    assert (model.predict_proba(images) - expected).abs().max() < 1e-4


def test_elbo_stage_keeps_the_features_frozen_and_joint_tuning_moves_them():
    images, labels = _data()
    model = _model()
    fit_conv_adgp(model, images, labels, network_epochs=2, elbo_epochs=1, batch_size=16)
    before = [p.detach().clone() for p in model.extractor.parameters()]
    head_before = [p.detach().clone() for p in model.head.parameters()]
    fit_dgp_head(model, images, labels, epochs=1, batch_size=16)
    after = list(model.extractor.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert any(
        not torch.equal(a, b) for a, b in zip(head_before, model.head.parameters(), strict=True)
    )
    network = model.to_network()
    fit_conv_adgp(model, images, labels, network=network, elbo_epochs=0, joint_epochs=1,
                  batch_size=16)  # fmt: skip
    moved = list(model.extractor.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, moved, strict=True))


def test_mc_dropout_is_stochastic_per_pass_and_reproducible():
    """Dropout stays on at test time (one pass differs from the deterministic network), the
    average over passes is reproducible from its seed, and it converges: 100 vs 200 passes agree
    far better than single passes do (sd ~ 1 / sqrt(T))."""
    images, _ = _data(count=8)
    network = _model().network_like(seed=0, dropout=0.5)
    deterministic = network.predict_proba(images)
    one = MCDropoutClassifier(network, num_passes=1, seed=0).predict_proba(images)
    assert (one - deterministic).abs().max() > 1e-3
    many = MCDropoutClassifier(network, num_passes=100, seed=0)
    assert torch.equal(many.predict_proba(images), many.predict_proba(images))
    more = MCDropoutClassifier(network, num_passes=200, seed=1).predict_proba(images)
    other_one = MCDropoutClassifier(network, num_passes=1, seed=1).predict_proba(images)
    gap_many = (many.predict_proba(images) - more).abs().max()
    gap_one = (one - other_one).abs().max()
    assert gap_many < gap_one / 3


def test_the_ensemble_averages_its_members():
    images, _ = _data(count=6)
    members = [_model().network_like(seed=seed) for seed in (0, 1)]
    ensemble = DeepEnsembleClassifier(members).predict_proba(images)
    expected = (members[0].predict_proba(images) + members[1].predict_proba(images)) / 2
    assert (ensemble - expected).abs().max() < 1e-15


def test_inducing_point_head_starts_at_lifted_training_features():
    """The baseline's first-layer inducing points are training features lifted to [phi, 1]."""
    images, _ = _data(count=20)
    network = _model().network_like(seed=0)
    model = inducing_point_head(network, images, hidden_width=2, num_inducing=6)
    points = model.head.layers[0].features.points.detach()  # [M, D + 1]
    features = model.features(images)
    assert torch.equal(points[:, -1], torch.ones(6, dtype=points.dtype))
    distances = torch.cdist(points[:, :-1], features).min(-1).values
    assert distances.max() < 1e-12


def test_bad_input_raises_named_errors():
    images, labels = _data(count=8)
    model = _model()
    with pytest.raises(ValueError, match=r"images must have shape \[N, 1, 8, 8\]"):
        model.predict_proba(torch.zeros(2, 1, 9, 9))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        model.log_predictive_density(images, labels + 3)
    with pytest.raises(ValueError, match="outputs 4 features but the head expects 5"):
        HybridNetwork(_user_extractor(), model.head.to_torch_module(), IMAGE_SHAPE, NUM_CLASSES)
    with pytest.raises(ValueError, match="outputs 4 features but the head expects 5"):
        HybridNetwork(_user_extractor(), nn.Sequential(nn.Linear(5, 3)), IMAGE_SHAPE, NUM_CLASSES)
    wrong = ConvActivatedDGP.build(IMAGE_SHAPE, NUM_CLASSES, extractor=_user_extractor(),
                                   hidden_width=2, num_inducing=4)  # fmt: skip
    with pytest.raises(ValueError, match="outputs 5 features but the head expects 4"):
        type(model)(model.extractor, wrong.head, IMAGE_SHAPE)
    with pytest.raises(ValueError, match="divisible by 4"):
        ConvFeatures((1, 10, 10))
    with pytest.raises(ValueError, match="dropout rate"):
        model.network_like(dropout=1.0)
    assert math.isfinite(float(model.log_predictive_density(images, labels).sum()))


def test_mc_dropout_fast_path_equals_full_passes():
    """Features once + T dropout passes of the head equals T passes of the whole network with the
    same seed (the extractor draws no dropout masks): to 1e-12."""
    images, _ = _data(count=5)
    network = _model().network_like(seed=3, dropout=0.3)
    fast = MCDropoutClassifier(network, num_passes=4, seed=5).predict_proba(images)
    network.train()
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(5)
        naive = torch.stack([torch.softmax(network(images), dim=-1) for _ in range(4)]).mean(0)
    assert (fast - naive).abs().max() < 1e-12
