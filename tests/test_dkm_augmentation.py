"""Random crops (seed 003 sec. 5) are zero-filled translations by at most the padding, one per
image, reproducible from the generator; flips mirror the columns."""

import pytest
import torch

from zonal.dkm.augmentation import random_crops


def shifted(image, dy, dx):
    """The image [C, H, W] translated by (dy, dx) with zeros shifted in, pixel by pixel."""
    out = torch.zeros_like(image)
    _, height, width = image.shape
    for r in range(height):
        for c in range(width):
            source_r, source_c = r + dy, c + dx
            if 0 <= source_r < height and 0 <= source_c < width:
                out[:, r, c] = image[:, source_r, source_c]
    return out


def test_every_crop_is_a_zero_filled_translation_within_the_padding():
    images = torch.randn(6, 2, 5, 4, generator=torch.Generator().manual_seed(0))
    crops = random_crops(images, 2, torch.Generator().manual_seed(1))
    for image, crop in zip(images, crops, strict=True):
        matches = [
            (dy, dx)
            for dy in range(-2, 3)
            for dx in range(-2, 3)
            if torch.equal(crop, shifted(image, dy, dx))
        ]
        assert len(matches) == 1
    again = random_crops(images, 2, torch.Generator().manual_seed(1))
    assert torch.equal(crops, again)
    assert torch.equal(random_crops(images, 0, torch.Generator().manual_seed(1)), images)


def test_flips_mirror_the_columns_of_some_images():
    images = torch.randn(40, 1, 3, 3, generator=torch.Generator().manual_seed(2))
    out = random_crops(images, 0, torch.Generator().manual_seed(3), flips=True)
    flipped = [
        torch.equal(o, i.flip(-1)) and not torch.equal(o, i)
        for o, i in zip(out, images, strict=True)
    ]
    kept = [torch.equal(o, i) for o, i in zip(out, images, strict=True)]
    assert all(f or k for f, k in zip(flipped, kept, strict=True))
    assert 5 < sum(flipped) < 35
    with pytest.raises(ValueError, match="padding must be an int >= 0"):
        random_crops(images, -1, torch.Generator())
