r"""Training an image classifier until its validation log likelihood stops improving.

A fixed epoch count either stops a network short of convergence or lets it overfit, and an
overfitted network is a weak baseline of calibration under shift. ``train_classifier_to_convergence``
trains by cross-entropy with Adam (``zonal.models.activated_dgp.train_network``), evaluates the mean
validation log likelihood

.. math::

    L_{\mathrm{val}} = \frac{1}{n} \sum_i \log \operatorname{softmax}(f(x_i))_{y_i}

after every epoch, stops after ``patience`` epochs without a better :math:`L_{\mathrm{val}}` (or at
``max_epochs``) and keeps the weights of the best epoch: early stopping as in Ovadia et al. (2019),
whose dataset shift protocol seed 001 sec. 4.2 follows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from zonal.models.activated_dgp import train_network
from zonal.models.conv_head import HybridNetwork, epochs_to_steps
from zonal.models.training import TrainingControl

#: images per forward pass when scoring the validation set
VALIDATION_CHUNK = 1000


@dataclass
class ClassifierHistory:
    """What ``train_classifier_to_convergence`` did: the training loss per step, the validation
    log likelihood after each epoch (``validation[0]`` is the untrained network's), the epoch whose
    weights were kept (0: none improved on the start) and whether the patience rule ended training
    before ``max_epochs``."""

    losses: list[float] = field(default_factory=list)
    validation: list[float] = field(default_factory=list)
    best_epoch: int = 0
    stopped_early: bool = False

    @property
    def epochs(self) -> float:
        """Epochs trained (validation evaluations after the start)."""
        return float(len(self.validation) - 1)


@torch.no_grad()
def validation_log_likelihood(
    network: HybridNetwork, images: torch.Tensor, labels: torch.Tensor
) -> float:
    """Mean log softmax probability of the true labels, the network in evaluation mode."""
    was_training = network.training
    network.eval()
    total = 0.0
    for start in range(0, len(images), VALIDATION_CHUNK):
        logits = network(images[start : start + VALIDATION_CHUNK])  # [chunk, C]
        chosen = labels[start : start + VALIDATION_CHUNK].to(logits.device)
        total += float(torch.log_softmax(logits, dim=-1).gather(-1, chosen[:, None]).sum())
    network.train(was_training)
    return total / len(images)


def train_classifier_to_convergence(
    network: HybridNetwork,
    images: torch.Tensor,
    labels: torch.Tensor,
    validation_images: torch.Tensor,
    validation_labels: torch.Tensor,
    *,
    max_epochs: int = 30,
    patience: int = 3,
    batch_size: int = 128,
    lr: float = 1e-3,
    seed: int = 0,
) -> ClassifierHistory:
    """Cross-entropy training of ``network`` (its dropout on) with Adam, evaluated on the
    validation set after every epoch; stops after ``patience`` epochs without a better validation
    log likelihood or at ``max_epochs``, and leaves the best epoch's weights in ``network``."""
    if max_epochs < 1 or patience < 1:
        raise ValueError(f"max_epochs and patience must be >= 1, got {max_epochs} and {patience}")
    images = network.check_images(images)
    labels = network.check_labels(labels, len(images))
    validation_images = network.check_images(validation_images)
    validation_labels = network.check_labels(validation_labels, len(validation_images))
    if len(images) == 0 or len(validation_images) == 0:
        raise ValueError(
            f"early stopping needs training and validation images, got {len(images)} and "
            f"{len(validation_images)}"
        )
    history = ClassifierHistory()

    def score(module: torch.nn.Module) -> float:
        value = validation_log_likelihood(network, validation_images, validation_labels)
        history.validation.append(value)
        return value

    per_epoch = epochs_to_steps(len(images), batch_size, 1)
    control = TrainingControl(score=score, patience=patience, interval=per_epoch)
    steps = epochs_to_steps(len(images), batch_size, max_epochs)
    network.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout masks
        with control.watch(network, steps, stage="network") as watch:
            history.losses = train_network(
                network,
                images,
                labels,
                loss="ce",
                num_steps=steps,
                batch_size=batch_size,
                lr=lr,
                seed=seed,
                callback=watch,
            )
    history.best_epoch = max(0, math.ceil((watch.best_step + 1) / per_epoch))
    history.stopped_early = len(history.losses) < steps
    return history


__all__ = ["ClassifierHistory", "train_classifier_to_convergence", "validation_log_likelihood"]
