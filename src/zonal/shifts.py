"""Dataset shift for image classifiers: rotations and four corruptions at five intensities
(seed 001 sec. 4.2, after Ovadia et al., 2019 and Hendrycks and Dietterich's CIFAR-10-C).

Images are tensors [N, C, H, W] with values in [0, 1]. Every function returns a new tensor of the
input's dtype and device; the random corruptions draw from a CPU ``torch.Generator`` seeded by
``seed`` (the same seed gives the same corruption on every device).

Rotation by theta (counter-clockwise as displayed, row 0 at the top) about the image centre, with
bilinear interpolation and zeros outside the image: output pixel (i, j) reads the input at the
point rotated by -theta. The sampling grid is computed in float64 (``affine_grid`` /
``grid_sample``, ``align_corners=False``), so that on a square image a multiple of 90 degrees maps
pixel centres onto pixel centres to float64 rounding.

Corruptions, intensity s = 1..5 (the CIFAR-10-C values where they carry over to 28 x 28 images):

* ``gaussian-noise``: x + sigma eps, eps ~ N(0, 1) per pixel, clipped to [0, 1];
  sigma = 0.08, 0.12, 0.18, 0.26, 0.38.
* ``gaussian-blur``: convolution with a normalised Gaussian of standard deviation
  sigma = 0.5, 0.75, 1.0, 1.25, 1.5 pixels (radius ceil(3 sigma), edges replicated).
* ``contrast``: m + c (x - m), m the image's mean (per channel); c = 0.4, 0.3, 0.2, 0.1, 0.05.
* ``impulse-noise`` (salt and pepper): each pixel independently with probability
  a = 0.03, 0.06, 0.09, 0.17, 0.27 is set to 0 or 1 (probability 1/2 each).

The random corruptions use the same draws at every intensity of one seed, so the distance to the
clean image grows monotonically with the intensity image by image, not only on average.
"""

from __future__ import annotations

import math

import torch

#: corruption name -> its parameter at intensities 1..5 (see the module docstring)
CORRUPTIONS: dict[str, tuple[float, ...]] = {
    "gaussian-noise": (0.08, 0.12, 0.18, 0.26, 0.38),
    "gaussian-blur": (0.5, 0.75, 1.0, 1.25, 1.5),
    "contrast": (0.4, 0.3, 0.2, 0.1, 0.05),
    "impulse-noise": (0.03, 0.06, 0.09, 0.17, 0.27),
}
#: the largest corruption intensity (the intensities are 1..5)
MAX_INTENSITY = 5


def check_images(images: torch.Tensor, name: str = "images") -> None:
    """Images must be a floating tensor [N, C, H, W] of finite values."""
    if not isinstance(images, torch.Tensor) or images.dim() != 4:
        found = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"{name} must be a tensor [N, C, H, W], got {found}")
    if not images.is_floating_point():
        raise ValueError(f"{name} must be a floating tensor, got {images.dtype}")
    if not torch.isfinite(images).all():
        raise ValueError(f"{name} contain NaN or infinite values")


def rotate(images: torch.Tensor, angle_degrees: float) -> torch.Tensor:
    """``images`` [N, C, H, W] rotated counter-clockwise by ``angle_degrees`` about the centre."""
    check_images(images)
    theta = math.radians(angle_degrees)
    cosine, sine = math.cos(theta), math.sin(theta)
    height, width = images.shape[-2:]
    # Output pixel q reads the input at R(-theta) q. With x right and y down (display
    # orientation) that is [[cos, -sin], [sin, cos]] in pixel units; in grid_sample's normalised
    # coordinates (x / (W / 2), y / (H / 2)) the off-diagonal entries pick up H / W and W / H.
    aspect = height / width
    matrix = torch.tensor(
        [[cosine, -sine * aspect, 0.0], [sine / aspect, cosine, 0.0]],
        dtype=torch.float64,
        device=images.device,
    )  # [2, 3]
    grid = torch.nn.functional.affine_grid(
        matrix.expand(len(images), 2, 3), list(images.shape), align_corners=False
    )  # [N, H, W, 2]
    rotated = torch.nn.functional.grid_sample(
        images.to(torch.float64), grid, mode="bilinear", padding_mode="zeros", align_corners=False
    )  # [N, C, H, W]
    return rotated.to(images.dtype)


def _check_intensity(corruption: str, intensity: int) -> float:
    if corruption not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {corruption!r}; use one of {sorted(CORRUPTIONS)}")
    if isinstance(intensity, bool) or not isinstance(intensity, int):
        raise ValueError(f"intensity must be an integer in 1..{MAX_INTENSITY}, got {intensity!r}")
    if not 1 <= intensity <= MAX_INTENSITY:
        raise ValueError(f"intensity must lie in 1..{MAX_INTENSITY}, got {intensity}")
    return CORRUPTIONS[corruption][intensity - 1]


def gaussian_kernel(sigma: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The normalised 1-D Gaussian exp(-k^2 / (2 sigma^2)) / Z on k = -r..r, r = ceil(3 sigma)."""
    radius = max(1, math.ceil(3 * sigma))
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float64, device=device)  # [2r + 1]
    weights = torch.exp(-(offsets**2) / (2 * sigma**2))
    return (weights / weights.sum()).to(dtype)


def gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of [N, C, H, W] images with replicated edges."""
    check_images(images)
    if sigma <= 0:
        raise ValueError(f"the blur's sigma must be positive, got {sigma}")
    kernel = gaussian_kernel(sigma, torch.float64, images.device)  # [K]
    radius = (len(kernel) - 1) // 2
    channels = images.shape[1]
    x = images.to(torch.float64)
    x = torch.nn.functional.pad(x, (radius, radius, radius, radius), mode="replicate")
    horizontal = kernel.view(1, 1, 1, -1).expand(channels, 1, 1, -1)  # [C, 1, 1, K]
    vertical = kernel.view(1, 1, -1, 1).expand(channels, 1, -1, 1)  # [C, 1, K, 1]
    x = torch.nn.functional.conv2d(x, horizontal, groups=channels)  # [N, C, H + 2r, W]
    x = torch.nn.functional.conv2d(x, vertical, groups=channels)  # [N, C, H, W]
    return x.to(images.dtype)


def corrupt(images: torch.Tensor, corruption: str, intensity: int, seed: int = 0) -> torch.Tensor:
    """``images`` [N, C, H, W] in [0, 1] under ``corruption`` at ``intensity`` 1..5 (the
    parameters of ``CORRUPTIONS``); deterministic given ``seed``."""
    check_images(images)
    parameter = _check_intensity(corruption, intensity)
    generator = torch.Generator().manual_seed(seed)
    if corruption == "gaussian-noise":
        noise = torch.randn(images.shape, generator=generator, dtype=torch.float64)
        noisy = images.to(torch.float64) + parameter * noise.to(images.device)
        return noisy.clamp(0, 1).to(images.dtype)
    if corruption == "gaussian-blur":
        return gaussian_blur(images, parameter)
    if corruption == "contrast":
        x = images.to(torch.float64)
        means = x.mean(dim=(-2, -1), keepdim=True)  # [N, C, 1, 1]
        return (means + parameter * (x - means)).to(images.dtype)
    uniform = torch.rand(images.shape, generator=generator, dtype=torch.float64)
    salt = torch.rand(images.shape, generator=generator, dtype=torch.float64) < 0.5
    hit = (uniform < parameter).to(images.device)
    return torch.where(hit, salt.to(images.device).to(images.dtype), images)


__all__ = [
    "CORRUPTIONS",
    "MAX_INTENSITY",
    "check_images",
    "corrupt",
    "gaussian_blur",
    "gaussian_kernel",
    "rotate",
]
