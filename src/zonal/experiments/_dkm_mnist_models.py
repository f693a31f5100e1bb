"""The models of the DKM experiments (``zonal.experiments.dkm_mnist``): the sparse DKM (fully
connected or convolutional) of a configuration, its inducing inputs, and its test metrics."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from zonal.experiments._dkm_mnist_sweeps import parse_nu

if TYPE_CHECKING:
    from zonal.dkm import DeepKernelMachine
    from zonal.experiments._dkm_mnist_sweeps import Configuration


def random_patches(
    images: torch.Tensor, count: int, generator: torch.Generator, candidates: int = 20
) -> torch.Tensor:
    """``count`` random 3x3 patches [M_0, C, 3, 3] of images [N, C, H, W] (seed 003 sec. 5), drawn
    among ``candidates * count`` random ones with at least 1% of their mean energy (sum of squares).

    A blank patch (MNIST's empty border, 0 after whitening) would make the first layer's K_ii
    singular: condition numbers of 1e28 and gradients of 1e11 for the patches when that layer's
    Gram is learned (nu_1 < inf), and a unit-norm noise direction under local normalisation."""
    draws = candidates * count
    chosen = torch.randint(len(images), (draws,), generator=generator)
    rows = torch.randint(images.shape[-2] - 2, (draws,), generator=generator)
    cols = torch.randint(images.shape[-1] - 2, (draws,), generator=generator)
    patches = torch.stack(
        [images[i, :, r : r + 3, c : c + 3] for i, r, c in zip(chosen, rows, cols, strict=True)]
    )  # [count * candidates, C, 3, 3]
    energy = patches.square().sum((1, 2, 3))  # [count * candidates]
    kept = patches[energy >= 0.01 * energy.mean()]
    if len(kept) < count:
        raise ValueError(f"fewer than {count} of {draws} random patches are not blank")
    return kept[:count]


def build_model(
    x_train: torch.Tensor,
    configuration: Configuration,
    config: dict[str, Any],
    image_shape: tuple,
) -> DeepKernelMachine:
    """The sparse DKM (fully connected or convolutional) of ``configuration``, its inducing inputs
    at random training images (fully connected) or random 3x3 patches of them (convolutional)."""
    from gpytorch.likelihoods import MultitaskGaussianLikelihood, SoftmaxLikelihood

    from zonal.dkm import ConvDKM, SparseDKM, resnet_layers

    if configuration.likelihood == "categorical":
        likelihood = SoftmaxLikelihood(num_classes=10, mixing_weights=False)
    else:
        likelihood = MultitaskGaussianLikelihood(num_tasks=10, rank=0, has_task_noise=False)
    nu = parse_nu(configuration.nu)
    generator = torch.Generator().manual_seed(config["seed"])
    if config["architecture"] == "conv":
        layers = resnet_layers(configuration.inducing, config["conv_blocks"])
        count = layers[0].num_inducing
        patches = random_patches(x_train.reshape(-1, 1, *image_shape), count, generator)
        first = math.inf if count > 9 else nu
        inducing_norm, train_test_norm = configuration.normalisation
        inducing_scale, train_test_scale = configuration.rescaling
        return ConvDKM(
            (1, *image_shape),
            layers,
            likelihood,
            inducing_patches=patches,
            nu=[first] + [nu] * (len(layers) - 1),
            top=configuration.top,
            normalisation={
                "inducing": inducing_norm,
                "train_test": train_test_norm,
                "inducing_scale": inducing_scale,
                "train_test_scale": train_test_scale,
            },
            likelihood_samples=config["train_samples"],
            seed=config["seed"],
        )
    if config["num_inducing"] > len(x_train):
        raise ValueError(f"num_inducing {config['num_inducing']} exceeds num_train {len(x_train)}")
    chosen = torch.randperm(len(x_train), generator=generator)[: config["num_inducing"]]
    return SparseDKM(
        x_train[chosen],
        config["num_layers"],
        likelihood,
        nu=nu,
        likelihood_samples=config["train_samples"],
        seed=config["seed"],
    )


def evaluate(
    model: DeepKernelMachine, x_test: torch.Tensor, y_test: torch.Tensor, config: dict[str, Any]
) -> dict[str, float]:
    """Test accuracy (%) and mean test log likelihood log p(y | x) of the labels."""
    from zonal.dkm.likelihoods import categorical_log_probabilities, is_categorical

    model.likelihood_samples = config["eval_samples"]
    chunk = config["batch_size"]  # batch statistics of the convolutional normalisation
    if is_categorical(model.likelihood):
        log_probabilities = model.class_log_probabilities(x_test, chunk_size=chunk)
        predicted = log_probabilities.argmax(-1)
        log_likelihood = log_probabilities.gather(-1, y_test.reshape(-1, 1)).mean()
    else:  # Gaussian on one-hot labels: classify by the mean, score the softmax of the outputs
        mean, variance = model.marginals(x_test, chunk_size=chunk)
        predicted = mean.argmax(-1)
        generator = torch.Generator(device=mean.device).manual_seed(config["seed"])
        log_probabilities = categorical_log_probabilities(
            mean, variance, config["eval_samples"], generator
        )
        log_likelihood = log_probabilities.gather(-1, y_test.reshape(-1, 1)).mean()
    model.likelihood_samples = config["train_samples"]
    return {
        "accuracy_percent": 100 * float((predicted == y_test).double().mean()),
        "test_log_likelihood": float(log_likelihood),
    }
