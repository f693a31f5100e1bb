r"""Data augmentation for image DKMs (seed 003 sec. 5: random crops, and horizontal flips where
the data allow, e.g. CIFAR but not digits).

A random crop of the image zero-padded by :math:`p` pixels on every side is a translation by
:math:`(dy, dx)`, :math:`\lvert dy \rvert, \lvert dx \rvert \le p`, with zeros shifted in. Each
image of the batch gets its own translation (and flip); all randomness comes from the
``generator`` given, so a resumed run repeats the same crops.
"""

from __future__ import annotations

import torch
import torch.nn.functional as functional


def random_crops(
    images: torch.Tensor, padding: int, generator: torch.Generator, *, flips: bool = False
) -> torch.Tensor:
    r"""Randomly translated (and, with ``flips``, mirrored) copies [P, C, H, W] of images
    [P, C, H, W]: crops of size :math:`H \times W` of the images zero-padded by ``padding``."""
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"padding must be an int >= 0, got {padding!r}")
    count, _, height, width = images.shape
    padded = functional.pad(images, (padding, padding, padding, padding))  # [P, C, H + 2p, W + 2p]
    device = images.device
    # drawn from the (CPU) generator, so that a seed gives the same crops on any device
    offsets = torch.randint(0, 2 * padding + 1, (count, 2), generator=generator).to(device)
    rows = offsets[:, :1] + torch.arange(height, device=device)  # [P, H]
    cols = offsets[:, 1:] + torch.arange(width, device=device)  # [P, W]
    index = torch.arange(count, device=device).reshape(-1, 1, 1)
    cropped = padded.permute(0, 2, 3, 1)[
        index, rows.unsqueeze(-1), cols.unsqueeze(1)
    ]  # [P, H, W, C]
    cropped = cropped.permute(0, 3, 1, 2)
    if flips:
        mirror = (torch.rand(count, generator=generator) < 0.5).to(device)  # [P]
        cropped = torch.where(mirror.reshape(-1, 1, 1, 1), cropped.flip(-1), cropped)
    return cropped
