"""Early stopping of an image classifier on its validation log likelihood: one evaluation per
epoch, the patience rule ends training, the best epoch's weights are the ones left, and the epoch
cap holds when the validation score keeps improving."""

from __future__ import annotations

import math

import pytest
import torch

from zonal.models.classifier_training import (
    train_classifier_to_convergence,
    validation_log_likelihood,
)
from zonal.models.conv_head import ConvActivatedDGP, ConvFeatures

IMAGE_SHAPE = (1, 8, 8)
NUM_CLASSES = 3


def _network(seed: int = 0):
    extractor = ConvFeatures(IMAGE_SHAPE, channels=(2, 3), kernel_size=3, feature_dim=5, seed=seed)
    model = ConvActivatedDGP.build(
        IMAGE_SHAPE, NUM_CLASSES, extractor=extractor, hidden_width=3, num_inducing=8, seed=seed
    )
    return model.network_like(seed)


def _images(count: int, seed: int, learnable: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """A bright bar whose row is the class (``learnable``), or noise images with random labels
    (a network can only memorise them: its validation score falls as it does)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, NUM_CLASSES, (count,), generator=generator)
    images = torch.rand(count, *IMAGE_SHAPE, generator=generator)
    if learnable:
        images = 0.1 * images
        for index, label in enumerate(labels.tolist()):
            images[index, 0, 1 + 2 * label : 3 + 2 * label, 2:6] = 1.0
    return images, labels


def test_validation_log_likelihood_is_the_mean_log_softmax_of_the_true_labels():
    network = _network()
    images, labels = _images(30, 0, learnable=True)
    network.eval()
    with torch.no_grad():
        expected = float(
            torch.distributions.Categorical(logits=network(images)).log_prob(labels).mean()
        )
    network.train()
    assert validation_log_likelihood(network, images, labels) == pytest.approx(expected, rel=1e-6)
    assert network.training  # the mode it was in is restored


def test_patience_ends_training_and_the_best_epoch_is_kept():
    """On labels a network can only memorise, the validation score stops improving: training
    ends ``patience`` epochs after the best one, long before the cap, and the weights left give
    the best validation score seen."""
    network = _network(1)
    images, labels = _images(60, 1, learnable=False)
    held, held_labels = _images(60, 2, learnable=False)
    history = train_classifier_to_convergence(
        network, images, labels, held, held_labels, max_epochs=200, patience=3,
        batch_size=20, lr=0.05, seed=0,
    )  # fmt: skip
    assert history.stopped_early
    per_epoch = 3
    assert len(history.losses) == per_epoch * history.epochs < per_epoch * 200
    assert len(history.validation) == history.epochs + 1  # the start and every epoch
    assert history.epochs - history.best_epoch == 3
    best = max(history.validation)
    assert history.validation[history.best_epoch] == best
    assert all(value < best for value in history.validation[history.best_epoch + 1 :])
    assert validation_log_likelihood(network, held, held_labels) == pytest.approx(best, rel=1e-6)


def test_the_cap_holds_while_the_validation_score_improves():
    network = _network(2)
    images, labels = _images(60, 3, learnable=True)
    held, held_labels = _images(30, 4, learnable=True)
    history = train_classifier_to_convergence(
        network, images, labels, held, held_labels, max_epochs=4, patience=10,
        batch_size=30, lr=0.01, seed=0,
    )  # fmt: skip
    assert not history.stopped_early
    assert history.epochs == 4 and len(history.losses) == 8
    assert all(math.isfinite(value) for value in history.validation)
    assert history.validation[history.best_epoch] == max(history.validation)


def test_bad_settings_are_named():
    network = _network()
    images, labels = _images(10, 0, learnable=True)
    with pytest.raises(ValueError, match="max_epochs and patience"):
        train_classifier_to_convergence(network, images, labels, images, labels, patience=0)
    with pytest.raises(ValueError, match="needs training and validation images"):
        train_classifier_to_convergence(network, images, labels, images[:0], labels[:0])
