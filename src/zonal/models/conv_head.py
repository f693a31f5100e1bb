r"""Convolutional feature extractors followed by deep-GP heads (seed 001 sec. 4.2, image
classification under dataset shift).

A ``ConvDGPClassifier`` is ``extractor`` (any ``torch.nn.Module`` mapping images [N, C, H, W] to
features [N, D]) followed by a deep GP ``head`` on the features with a softmax likelihood over
the classes; ``ConvActivatedDGP`` is the one whose head is an ``ActivatedDGP``, so that its
posterior mean is the network

.. math::

    \operatorname{logits}(x) = V_2^\top r\, \tilde g(W_2 [h_1, b]), \qquad
    h_1 = V_1^\top r\, \tilde g(W_1 [\phi(x), b]) \qquad (\texttt{zonal.nn})

with :math:`\phi` the extractor: two activated GP layers of :math:`M = 128` inducing functions (the
hidden units of the equivalent network), the first with ``hidden_width`` outputs, the second with
:math:`C`.

Two-stage training (``fit_conv_adgp``; seed 001 sec. 4.2): (1) the whole network
(``HybridNetwork``: extractor + the head's network) by cross-entropy; (2) the extractor and the
head's network copied in (the DGP's posterior mean then *is* the trained network), the head
trained by the ELBO with the features frozen; (3) optionally the extractor and head jointly by
the ELBO.

Class probabilities (every classifier here answers ``predict_proba(images) -> [N, C]``): for a
deep-GP head, the mixture over :math:`S` Monte Carlo samples of the inner layer of :math:`q(f(x))`,
each a Gaussian over the :math:`C` logits, pushed through the softmax by :math:`K` draws per
component:

.. math::

    p(y = c \mid x) \approx \frac{1}{S} \sum_s \frac{1}{K} \sum_k
    \operatorname{softmax}(\mu_s + \sigma_s \varepsilon_{sk})_c, \qquad
    \varepsilon_{sk} \sim \mathcal{N}(0, I),

the predictive of the softmax likelihood (``SoftmaxLikelihood``'s marginal), with both draws
seeded. The default extractor follows the report: two blocks conv :math:`5 \times 5` -> ReLU ->
max-pool 2, then (our addition, ``feature_dim``) a linear map to :math:`D` features;
``feature_dim=None`` feeds the flattened maps to the head as the report does, at a cost (each GP
layer of :math:`P` outputs works on :math:`S \times P` copies of its :math:`D`-dimensional
inputs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import gpytorch
import torch
from gpytorch.likelihoods import SoftmaxLikelihood
from torch import nn

from zonal.models.activated_dgp import ActivatedDGP, train_network
from zonal.models.dgp import DGP, fit_dgp
from zonal.models.training import Seed, adam_on_minibatches
from zonal.nn import ActivatedNetwork

#: images evaluated at a time by ``predict_proba``
IMAGE_CHUNK = 256
#: softmax draws per mixture component in a deep-GP head's class probabilities
SOFTMAX_SAMPLES = 16
#: arc-cosine variance and q(u) scale of the head when the network is copied in: the head starts
#: at the network with little extra variance (``zonal.recipes.ADGP_KERNEL_VARIANCE``)
HEAD_KERNEL_VARIANCE = 1e-3
HEAD_INITIAL_SCALE = 1e-2


class ConvFeatures(nn.Sequential):
    r"""The report's extractor: [conv :math:`k \times k` (padding :math:`\lfloor k / 2 \rfloor`)
    -> ReLU -> max-pool 2] :math:`\times 2`, flatten, then a linear map to ``feature_dim`` features
    (None: the flattened maps themselves).

    Args:
        image_shape: :math:`(C, H, W)` of the inputs (:math:`H` and :math:`W` divisible by 4).
        channels: output channels of the two convolutions.
        kernel_size: :math:`k`.
        feature_dim: :math:`D`, or None for :math:`C_2 (H / 4) (W / 4)`.
        seed: initialisation seed.
    """

    def __init__(
        self,
        image_shape: Sequence[int] = (1, 28, 28),
        *,
        channels: tuple[int, int] = (32, 64),
        kernel_size: int = 5,
        feature_dim: int | None = 64,
        seed: int = 0,
    ) -> None:
        in_channels, height, width = image_shape
        if height % 4 or width % 4:
            raise ValueError(f"image height and width must be divisible by 4, got {image_shape}")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            layers: list[nn.Module] = []
            previous = in_channels
            for out_channels in channels:
                layers += [
                    nn.Conv2d(previous, out_channels, kernel_size, padding=kernel_size // 2),
                    nn.ReLU(),
                    nn.MaxPool2d(2),
                ]
                previous = out_channels
            layers.append(nn.Flatten())
            flat = previous * (height // 4) * (width // 4)
            if feature_dim is not None:
                layers.append(nn.Linear(flat, feature_dim))
            super().__init__(*layers)
        self.feature_dim = feature_dim or flat


def _reference_tensor(module: nn.Module) -> torch.Tensor | None:
    return next(module.parameters(), None)


class ImageClassifier(nn.Module):
    """Base of the image classifiers: input checks and ``predict_proba`` in chunks.

    Subclasses implement ``_probabilities(images) -> [n, C]`` for a checked chunk.
    """

    def __init__(self, image_shape: Sequence[int], num_classes: int) -> None:
        super().__init__()
        if len(image_shape) != 3:
            raise ValueError(f"image_shape must be (C, H, W), got {tuple(image_shape)}")
        if num_classes < 2:
            raise ValueError(f"a classifier needs at least 2 classes, got {num_classes}")
        self.image_shape = tuple(int(size) for size in image_shape)
        self.num_classes = int(num_classes)

    def check_images(self, images: torch.Tensor) -> torch.Tensor:
        """Images [N, C, H, W] of the classifier's :math:`(C, H, W)`, finite; a ``ValueError``
        otherwise."""
        if not isinstance(images, torch.Tensor) or tuple(images.shape[1:]) != self.image_shape:
            found = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images)
            raise ValueError(
                f"images must have shape [N, {', '.join(map(str, self.image_shape))}], got {found}"
            )
        if not torch.isfinite(images).all():
            raise ValueError("images contain NaN or infinite values")
        return images

    def check_labels(self, labels: torch.Tensor, count: int) -> torch.Tensor:
        """Integer labels [count] in :math:`[0, C)`; a ``ValueError`` naming the problem
        otherwise."""
        labels = torch.as_tensor(labels)
        if labels.shape != (count,):
            raise ValueError(f"labels must have shape [{count}], got {tuple(labels.shape)}")
        if labels.is_floating_point() and not (labels == labels.round()).all():
            raise ValueError("labels must be integer class indices")
        labels = labels.long()
        if (labels < 0).any() or (labels >= self.num_classes).any():
            raise ValueError(
                f"labels must lie in [0, {self.num_classes}), got "
                f"{int(labels.min())}..{int(labels.max())}"
            )
        return labels

    def _probabilities(self, images: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @torch.no_grad()
    def predict_proba(self, images: torch.Tensor, *, chunk_size: int = IMAGE_CHUNK) -> torch.Tensor:
        r"""Class probabilities :math:`p(y \mid x)` [N, C] (float64), ``chunk_size`` images at a
        time."""
        images = self.check_images(images)
        chunks = [
            self._probabilities(images[start : start + chunk_size]).to(torch.float64)
            for start in range(0, len(images), chunk_size)
        ]
        return torch.cat(chunks)

    def log_predictive_density(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        r""":math:`\log p(y_i \mid x_i)` per image [N]."""
        labels = self.check_labels(labels, len(images))
        probabilities = self.predict_proba(images)
        return probabilities.gather(-1, labels.to(probabilities.device).unsqueeze(-1)).log()[:, 0]


def _check_extractor(
    extractor: nn.Module, image_shape: Sequence[int], expected_width: int | None
) -> int:
    """The extractor's output width D on one blank image; named errors for a non-matrix output
    or a width that is not ``expected_width``."""
    reference = _reference_tensor(extractor)
    dtype = reference.dtype if reference is not None else torch.float32
    device = reference.device if reference is not None else None
    blank = torch.zeros(1, *image_shape, dtype=dtype, device=device)
    was_training = extractor.training
    extractor.eval()
    with torch.no_grad():
        out = extractor(blank)
    extractor.train(was_training)
    if out.dim() != 2:
        raise ValueError(
            f"the extractor must map images [N, {', '.join(map(str, image_shape))}] to features "
            f"[N, D], got {tuple(out.shape)} for one image"
        )
    if expected_width is not None and out.shape[-1] != expected_width:
        raise ValueError(
            f"the extractor outputs {out.shape[-1]} features but the head expects {expected_width}"
        )
    return int(out.shape[-1])


def extract(extractor: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """phi(images) [N, D] in float64, the images cast to the extractor's dtype first."""
    reference = _reference_tensor(extractor)
    if reference is not None:
        images = images.to(device=reference.device, dtype=reference.dtype)
    return extractor(images).to(torch.float64)


def extract_frozen(
    extractor: nn.Module, images: torch.Tensor, *, chunk_size: int = IMAGE_CHUNK
) -> torch.Tensor:
    """phi(images) [N, D] (float64) in evaluation mode without gradients, in chunks."""
    extractor.eval()
    with torch.no_grad():
        chunks = [
            extract(extractor, images[start : start + chunk_size])
            for start in range(0, len(images), chunk_size)
        ]
    return torch.cat(chunks)


class HybridNetwork(ImageClassifier):
    """``extractor`` then ``head`` (an ``ActivatedNetwork``, or any ``nn.Sequential``), with
    optional dropout of rate ``dropout`` before every head layer (Gal and Ghahramani's MC
    dropout; ``MCDropoutClassifier`` keeps it on at test time). ``forward`` gives the logits;
    ``predict_proba`` their softmax with dropout off."""

    def __init__(
        self,
        extractor: nn.Module,
        head: nn.Module,
        image_shape: Sequence[int],
        num_classes: int,
        *,
        dropout: float = 0.0,
    ) -> None:
        super().__init__(image_shape, num_classes)
        if not 0 <= dropout < 1:
            raise ValueError(f"the dropout rate must lie in [0, 1), got {dropout}")
        if not isinstance(head, nn.Sequential):
            raise ValueError(
                f"the head must be an nn.Sequential of layers, got {type(head).__name__}"
            )
        self.extractor, self.head, self.dropout = extractor, head, float(dropout)
        first = head[0] if len(head) else None
        # ActivatedNetwork layers name their width input_dim, torch's Linear in_features
        expected = getattr(first, "input_dim", getattr(first, "in_features", None))
        self.feature_dim = _check_extractor(extractor, self.image_shape, expected)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head_logits(extract(self.extractor, images))

    def head_logits(self, features: torch.Tensor) -> torch.Tensor:
        """The head (with dropout in training mode) at features [N, D]: logits [N, C]."""
        h = features
        for layer in self.head:
            if self.dropout > 0:
                h = nn.functional.dropout(h, self.dropout, training=self.training)
            h = layer(h)
        return h  # [N, C]

    def _probabilities(self, images: torch.Tensor) -> torch.Tensor:
        self.eval()
        return torch.softmax(self(images), dim=-1)


class ConvDGPClassifier(ImageClassifier):
    """``extractor`` then a deep GP ``head`` (``zonal.models.DGP`` of :math:`C` outputs under
    ``SoftmaxLikelihood(num_classes=C, mixing_weights=False)``)."""

    def __init__(
        self,
        extractor: nn.Module,
        head: DGP,
        image_shape: Sequence[int],
        *,
        softmax_samples: int = SOFTMAX_SAMPLES,
        seed: int = 0,
    ) -> None:
        likelihood = head.likelihood
        if not isinstance(likelihood, SoftmaxLikelihood) or likelihood.mixing_weights is not None:
            raise ValueError(
                "the head needs SoftmaxLikelihood(num_classes=C, mixing_weights=False), got "
                f"{type(likelihood).__name__}"
            )
        if head.num_outputs != likelihood.num_classes:
            raise ValueError(
                f"the head has {head.num_outputs} outputs for {likelihood.num_classes} classes"
            )
        super().__init__(image_shape, likelihood.num_classes)
        _check_extractor(extractor, self.image_shape, head.input_dim)
        if softmax_samples < 1:
            raise ValueError(f"softmax_samples must be >= 1, got {softmax_samples}")
        self.extractor, self.head = extractor, head
        self.softmax_samples, self.seed = int(softmax_samples), int(seed)

    def features(self, images: torch.Tensor, *, chunk_size: int = IMAGE_CHUNK) -> torch.Tensor:
        r""":math:`\phi(\text{images})` [N, D] (float64, no gradient), ``chunk_size`` images at a
        time."""
        return extract_frozen(self.extractor, self.check_images(images), chunk_size=chunk_size)

    def head_probabilities(self, features: torch.Tensor) -> torch.Tensor:
        r""":math:`p(y \mid \phi)` [n, C] for features [n, D]: the Monte Carlo mixture of the module
        docstring (the head's ``posterior_seed`` fixes the inner draws, ``seed`` the softmax's)."""
        self.head.eval()
        latent = self.head.latent_distribution(features)  # batch [S], event [n, C]
        mean, std = latent.mean, latent.variance.clamp(min=0).sqrt()  # [S, n, C]
        generator = torch.Generator(device=mean.device).manual_seed(self.seed)
        noise = torch.randn(
            self.softmax_samples, *mean.shape, generator=generator, dtype=mean.dtype,
            device=mean.device,
        )  # [K, S, n, C]  # fmt: skip
        return torch.softmax(mean + std * noise, dim=-1).mean(dim=(0, 1))  # [n, C]

    def _probabilities(self, images: torch.Tensor) -> torch.Tensor:
        self.extractor.eval()
        return self.head_probabilities(extract(self.extractor, images))

    @torch.no_grad()
    def logits_mean(self, images: torch.Tensor) -> torch.Tensor:
        r"""The head's posterior mean at :math:`\phi(\text{images})`: [N, C] (for an activated
        head, the logits of the equivalent network)."""
        return self.head.posterior_mean(self.features(images))


class ConvActivatedDGP(ConvDGPClassifier):
    """A ``ConvDGPClassifier`` whose head is an ``ActivatedDGP`` (Softplus features truncated at
    level ``truncation_level``, first-order arc-cosine kernels, constant means: biases in the
    network), convertible to and from a ``HybridNetwork``."""

    head: ActivatedDGP

    @classmethod
    def build(
        cls,
        image_shape: Sequence[int] = (1, 28, 28),
        num_classes: int = 10,
        *,
        extractor: nn.Module | None = None,
        hidden_width: int = 16,
        num_inducing: int = 128,
        truncation_level: int = 20,
        num_posterior_samples: int = 16,
        seed: int = 0,
    ) -> ConvActivatedDGP:
        r"""The report's model: ``extractor`` (default ``ConvFeatures(image_shape)``), then two
        activated GP layers :math:`D \to \mathtt{hidden\_width} \to C` of ``num_inducing``
        inducing functions."""
        if extractor is None:
            extractor = ConvFeatures(image_shape, seed=seed)
        width = _check_extractor(extractor, image_shape, None)
        likelihood = SoftmaxLikelihood(num_classes=num_classes, mixing_weights=False).double()
        head = ActivatedDGP(
            width,
            [hidden_width],
            likelihood,
            output_dim=num_classes,
            num_inducing=num_inducing,
            activation="softplus",
            truncation_level=truncation_level,
            mean="constant",
            seed=seed,
        )
        head.num_posterior_samples = num_posterior_samples
        return cls(extractor, head, image_shape, seed=seed)

    def to_network(self, *, dropout: float = 0.0) -> HybridNetwork:
        """The network (a copy of the extractor + the head's posterior mean) this model is."""
        import copy

        return HybridNetwork(
            copy.deepcopy(self.extractor),
            self.head.to_torch_module(),
            self.image_shape,
            self.num_classes,
            dropout=dropout,
        )

    def network_like(self, seed: int = 0, *, dropout: float = 0.0) -> HybridNetwork:
        """A network of this architecture with the head's layers freshly initialised from
        ``seed`` and a copy of the current extractor (stage 1 trains both)."""
        network = self.to_network(dropout=dropout)
        network.head = self.head.network_like(seed)
        return network

    @torch.no_grad()
    def from_network(
        self,
        network: HybridNetwork,
        *,
        kernel_variance: float | None = HEAD_KERNEL_VARIANCE,
        variational_scale: float | None = HEAD_INITIAL_SCALE,
    ) -> ConvActivatedDGP:
        """Copy the network in: the extractor's weights, then the head's network
        (``ActivatedDGP.from_torch_module``): the posterior mean is then the network's logits."""
        if not isinstance(network.head, ActivatedNetwork):
            raise ValueError(
                f"the network's head must be an ActivatedNetwork, got {type(network.head).__name__}"
            )
        self.extractor.load_state_dict(network.extractor.state_dict())
        self.head.from_torch_module(
            network.head, kernel_variance=kernel_variance, variational_scale=variational_scale
        )
        return self


def epochs_to_steps(num_points: int, batch_size: int, epochs: float) -> int:
    """Adam steps in ``epochs`` passes over ``num_points`` rows in batches of ``batch_size``."""
    return max(0, math.ceil(epochs * math.ceil(num_points / batch_size)))


def train_classifier(
    network: HybridNetwork,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    epochs: float = 1.0,
    batch_size: int = 128,
    lr: float = 1e-3,
    seed: Seed = 0,
) -> list[float]:
    """Cross-entropy training of a ``HybridNetwork`` (its dropout on) with Adam; the losses."""
    images = network.check_images(images)
    labels = network.check_labels(labels, len(images))
    network.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed if isinstance(seed, int) else 0)  # dropout masks
        return train_network(
            network,
            images,
            labels,
            loss="ce",
            num_steps=epochs_to_steps(len(images), batch_size, epochs),
            batch_size=batch_size,
            lr=lr,
            seed=seed,
        )


def fit_dgp_head(
    model: ConvDGPClassifier,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    epochs: float = 1.0,
    batch_size: int = 128,
    lr: float = 1e-2,
    num_samples: int = 3,
    seed: int = 0,
    callback: Callable[[int, float], None] | None = None,
) -> list[float]:
    """The head by the ELBO on frozen features phi(images) (``fit_dgp``); the losses.
    ``callback(step, loss)`` runs after every step and may end training (``StopTraining``)."""
    features = model.features(images)
    labels = model.check_labels(labels, len(images))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the layers' reparametrised samples use the global stream
        return fit_dgp(
            model.head,
            features,
            labels,
            num_steps=epochs_to_steps(len(images), batch_size, epochs),
            batch_size=batch_size,
            lr=lr,
            num_samples=num_samples,
            seed=seed,
            callback=callback,
        )


def fine_tune_jointly(
    model: ConvDGPClassifier,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    epochs: float = 1.0,
    batch_size: int = 128,
    lr: float = 1e-3,
    num_samples: int = 3,
    seed: int = 0,
) -> list[float]:
    """Extractor and head together by the head's minibatch ELBO (features recomputed per batch)."""
    images = model.check_images(images)
    labels = model.check_labels(labels, len(images))
    head = model.head
    objective = gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(head.likelihood, head, num_data=len(images))
    )
    model.train()

    def loss_of_batch(index: torch.Tensor) -> torch.Tensor:
        features = extract(model.extractor, images[index])
        with gpytorch.settings.num_likelihood_samples(num_samples):
            return -objective(head(features), labels[index].to(features.device))

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return adam_on_minibatches(
            loss_of_batch,
            model.parameters(),
            len(images),
            num_steps=epochs_to_steps(len(images), batch_size, epochs),
            batch_size=batch_size,
            lr=lr,
            seed=seed,
        )


def fit_conv_adgp(
    model: ConvActivatedDGP,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    network: HybridNetwork | None = None,
    network_epochs: float = 1.0,
    elbo_epochs: float = 1.0,
    joint_epochs: float = 0.0,
    batch_size: int = 128,
    network_lr: float = 1e-3,
    elbo_lr: float = 1e-2,
    num_samples: int = 3,
    seed: int = 0,
) -> dict[str, list[float]]:
    """The two stages (and the optional third) of the module docstring; a ``network`` already
    trained (e.g. the plain baseline) skips stage 1. Returns the losses of each stage."""
    losses: dict[str, list[float]] = {"network": [], "elbo": [], "joint": []}
    if network is None:
        network = model.network_like(seed)
        losses["network"] = train_classifier(
            network, images, labels, epochs=network_epochs, batch_size=batch_size,
            lr=network_lr, seed=seed,
        )  # fmt: skip
    model.from_network(network)
    losses["elbo"] = fit_dgp_head(
        model, images, labels, epochs=elbo_epochs, batch_size=batch_size, lr=elbo_lr,
        num_samples=num_samples, seed=seed,
    )  # fmt: skip
    if joint_epochs > 0:
        losses["joint"] = fine_tune_jointly(
            model, images, labels, epochs=joint_epochs, batch_size=batch_size, lr=network_lr,
            num_samples=num_samples, seed=seed,
        )  # fmt: skip
    return losses


__all__ = [
    "ConvActivatedDGP",
    "ConvDGPClassifier",
    "ConvFeatures",
    "HybridNetwork",
    "ImageClassifier",
    "epochs_to_steps",
    "extract",
    "extract_frozen",
    "fine_tune_jointly",
    "fit_conv_adgp",
    "fit_dgp_head",
    "train_classifier",
]
