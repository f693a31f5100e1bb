"""The data of the DKM experiments (``zonal.experiments.dkm_mnist``): the images, the rows each
architecture sees ([x, 1] or ZCA-whitened pixels), random crops and the targets of each
likelihood."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def load_images(config: dict[str, Any]) -> tuple[Any, ...]:
    """(x_train [N, D], y_train [N], x_test [T, D], y_test [T], image (H, W)): pixels in [0, 1]."""
    if config["dataset"] == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        pixels = torch.as_tensor(digits.data, dtype=torch.float64) / 16
        labels = torch.as_tensor(digits.target)
        order = torch.randperm(len(pixels), generator=torch.Generator().manual_seed(config["seed"]))
        train, test = order[: len(order) // 2], order[len(order) // 2 :]
        image_shape: tuple[int, ...] = (8, 8)
    elif config["dataset"] in ("mnist", "fashion-mnist"):
        from zonal.datasets import load_dataset

        data = load_dataset(config["dataset"])
        pixels = torch.as_tensor(data.X)
        labels = torch.as_tensor(data.y)
        train = torch.as_tensor(data.splits["train"])
        test = torch.as_tensor(data.splits["test"])
        if data.image_shape is None:
            raise ValueError(f"{config['dataset']!r} is not an image dataset")
        image_shape = data.image_shape
        if config["num_train"] > len(train) and "validation" in data.splits:
            # MNIST's full protocol: training and validation splits
            train = torch.cat([train, torch.as_tensor(data.splits["validation"])])
    else:
        raise ValueError(
            f"dataset must be 'mnist', 'fashion-mnist' or 'digits', got {config['dataset']!r}"
        )
    if config["num_train"] > len(train) or config["num_test"] > len(test):
        raise ValueError(
            f"{config['dataset']} has {len(train)} training and {len(test)} test images; asked for "
            f"{config['num_train']} and {config['num_test']}"
        )
    train, test = train[: config["num_train"]], test[: config["num_test"]]
    return pixels[train], labels[train], pixels[test], labels[test], image_shape


def prepare_inputs(
    config: dict[str, Any], train: torch.Tensor, test: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's rows: [x, 1] (fully connected) or ZCA-whitened pixels (convolutional)."""
    if config["architecture"] == "fc":
        train, test = (
            torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype, device=x.device)], 1)
            for x in (train, test)
        )
        return train, test
    if config["architecture"] != "conv":
        raise ValueError(f"architecture must be 'fc' or 'conv', got {config['architecture']!r}")
    mean = train.mean(0)
    values, vectors = torch.linalg.eigh((train - mean).mT @ (train - mean) / len(train))
    scale = (values.clamp_min(0) + config["zca_epsilon"] * values.clamp_min(0).mean()).rsqrt()
    whitening = vectors @ torch.diag(scale) @ vectors.mT  # [D, D]
    # a pixel constant over the training set (MNIST's blank border) is 0 after centring, but eigh
    # leaves ~1e-13 of the other pixels in it; local normalisation (seed 003 eq. 71e) would scale
    # that noise up to unit norm (in float32 Local/Local gives NaN within its first steps), so such
    # pixels neither give nor take anything
    constant = (train == train[:1]).all(0)  # [D]
    whitening[constant] = 0
    whitening[:, constant] = 0
    return (train - mean) @ whitening, (test - mean) @ whitening


def augmentation(
    config: dict[str, Any], image_shape: tuple[int, ...]
) -> Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None:
    """Random crops of the (whitened) image rows for the convolutional DKM, or None."""
    if config["architecture"] != "conv" or config["crop_padding"] == 0:
        return None
    from zonal.dkm.augmentation import random_crops

    def crop(rows: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        images = rows.reshape(-1, 1, *image_shape)
        return random_crops(images, config["crop_padding"], generator).flatten(1)

    return crop


def targets_for(y: torch.Tensor, likelihood: str) -> torch.Tensor:
    """Labels (categorical) or one-hot rows (Gaussian)."""
    if likelihood == "gaussian":
        return torch.nn.functional.one_hot(y, 10).to(torch.float64)
    return y
