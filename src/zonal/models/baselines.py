r"""Baselines of the activated DGP head on the same feature extractor (seed 001 sec. 4.2): the
plain network (``zonal.models.conv_head.HybridNetwork``), Monte Carlo dropout, a deep ensemble and
the deep GP with inducing points on the extracted features.

* MC dropout (Gal and Ghahramani, 2016): dropout of rate :math:`p` (0.1 in the report) before every
  head layer at training *and* test time;
  :math:`p(y \mid x) = \frac{1}{T} \sum_t \operatorname{softmax}(\operatorname{logits}_t(x))` over
  :math:`T = 100` passes with independent masks (seeded). The extractor has no dropout, so its
  features are computed once per image and only the head runs :math:`T` times.
* Deep ensemble (Lakshminarayanan et al., 2017): :math:`E` networks trained from different seeds
  (5 in the protocol),
  :math:`p(y \mid x) = \frac{1}{E} \sum_e \operatorname{softmax}(\operatorname{logits}_e(x))`.
* Inducing-point DGP: seed 000's DGP (``zonal.models.inducing_point_dgp``: arc-cosine layers,
  inducing points in the lifted space, first-layer points at training features) of the same
  widths as the activated head, trained by the ELBO on the frozen features of a trained network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from gpytorch.likelihoods import SoftmaxLikelihood

from zonal.models.conv_head import (
    ConvDGPClassifier,
    HybridNetwork,
    ImageClassifier,
    extract_frozen,
)
from zonal.models.dgp import inducing_point_dgp

#: stochastic forward passes of MC dropout at test time (the report's protocol)
DROPOUT_PASSES = 100


class MCDropoutClassifier(ImageClassifier):
    """A ``HybridNetwork`` with dropout (rate > 0) averaged over ``num_passes`` dropout masks."""

    def __init__(self, network: HybridNetwork, *, num_passes: int = DROPOUT_PASSES, seed: int = 0):
        super().__init__(network.image_shape, network.num_classes)
        if network.dropout <= 0:
            raise ValueError("MC dropout needs a network with a dropout rate > 0")
        if num_passes < 1:
            raise ValueError(f"num_passes must be >= 1, got {num_passes}")
        self.network, self.num_passes, self.seed = network, int(num_passes), int(seed)

    def _probabilities(self, images: torch.Tensor) -> torch.Tensor:
        """The extractor has no dropout: its features are computed once, the head T times."""
        features = extract_frozen(self.network.extractor, images)  # [n, D]
        self.network.train()  # dropout on in the head
        total = torch.zeros((), dtype=features.dtype, device=features.device)
        # the masks are drawn where the head runs: the features' device, not the images'
        with torch.random.fork_rng(devices=[features.device] if features.is_cuda else []):
            torch.manual_seed(self.seed)
            for _ in range(self.num_passes):
                total = total + torch.softmax(self.network.head_logits(features), dim=-1)
        self.network.eval()
        return total / self.num_passes  # [n, C]


class DeepEnsembleClassifier(ImageClassifier):
    """The mean of the members' softmax probabilities."""

    def __init__(self, members: Sequence[ImageClassifier]) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member")
        first = members[0]
        super().__init__(first.image_shape, first.num_classes)
        for index, member in enumerate(members):
            if (member.image_shape, member.num_classes) != (self.image_shape, self.num_classes):
                raise ValueError(
                    f"member {index} takes {member.image_shape} images and {member.num_classes} "
                    f"classes, member 0 {self.image_shape} and {self.num_classes}"
                )
        self.members = torch.nn.ModuleList(members)

    def _probabilities(self, images: torch.Tensor) -> torch.Tensor:
        members = cast("list[ImageClassifier]", list(self.members))  # from a ModuleList
        probabilities = [member.predict_proba(images) for member in members]
        return torch.stack(probabilities).mean(0)  # [n, C]


def inducing_point_head(
    network: HybridNetwork,
    images: torch.Tensor,
    *,
    hidden_width: int = 16,
    num_inducing: int = 128,
    num_posterior_samples: int = 16,
    seed: int = 0,
) -> ConvDGPClassifier:
    r"""The inducing-point DGP :math:`D \to \mathtt{hidden\_width} \to C` on the (frozen)
    extractor of a trained ``network``, its first-layer points at the features of
    ``num_inducing`` of ``images``."""
    import copy

    extractor = copy.deepcopy(network.extractor)
    features = extract_frozen(extractor, network.check_images(images))  # [N, D]
    likelihood = SoftmaxLikelihood(num_classes=network.num_classes, mixing_weights=False).double()
    head = inducing_point_dgp(
        features,
        [features.shape[-1], hidden_width, network.num_classes],
        likelihood,
        num_inducing=num_inducing,
        seed=seed,
    )
    head.num_posterior_samples = num_posterior_samples
    return ConvDGPClassifier(extractor, head, network.image_shape, seed=seed)


__all__ = [
    "DROPOUT_PASSES",
    "DeepEnsembleClassifier",
    "MCDropoutClassifier",
    "inducing_point_head",
]
