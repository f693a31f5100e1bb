"""Rotations and corruptions of images: exact identities of the rotation group on the pixel grid,
the corruptions' stated statistics, determinism, and distance growing with intensity."""

from __future__ import annotations

import math

import pytest
import torch

from zonal.shifts import CORRUPTIONS, corrupt, gaussian_blur, rotate


def _images(count: int = 3, size: int = 8, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(count, 1, size, size, generator=generator, dtype=torch.float64)


def _blobs(count: int = 4, size: int = 12) -> torch.Tensor:
    """Smooth bright blobs on a dark background at different places (digit-like images)."""
    rows = torch.arange(size, dtype=torch.float64).view(-1, 1)
    cols = torch.arange(size, dtype=torch.float64).view(1, -1)
    centres = [(4.0, 5.0), (6.0, 6.0), (7.5, 3.0), (3.0, 8.0)][:count]
    blobs = [torch.exp(-((rows - r) ** 2 + (cols - c) ** 2) / 4.0) for r, c in centres]
    return torch.stack(blobs).unsqueeze(1)  # [N, 1, H, W]


def test_rotation_by_zero_is_the_identity():
    """float32 images come back bit for bit; float64 images to rounding (1e-14)."""
    single = torch.rand(2, 3, 7, 5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(rotate(single, 0.0), single)
    images = _images()
    assert (rotate(images, 0.0) - images).abs().max() < 1e-14


@pytest.mark.parametrize("quarter_turns", [1, 2, 3, -1])
def test_quarter_turns_equal_rot90_on_square_images(quarter_turns):
    """On a square grid a multiple of 90 degrees maps pixel centres onto pixel centres, so the
    bilinear rotation is torch.rot90 (counter-clockwise as displayed) to 1e-14, edges included."""
    images = _images(size=8)
    expected = torch.rot90(images, quarter_turns, dims=(-2, -1))
    assert (rotate(images, 90.0 * quarter_turns) - expected).abs().max() < 1e-14


def test_four_quarter_turns_return_the_image_and_half_turn_flips_any_rectangle():
    images = _images(size=9)
    turned = images
    for _ in range(4):
        turned = rotate(turned, 90.0)
    assert (turned - images).abs().max() < 1e-13
    rectangle = torch.rand(2, 1, 4, 6, generator=torch.Generator().manual_seed(2))
    half = rotate(rectangle.double(), 180.0)
    assert (half - rectangle.double().flip(-2, -1)).abs().max() < 1e-14


def test_rotation_keeps_the_mass_of_a_centred_blob():
    """A blob well inside the image keeps its total intensity under a 30-degree rotation (bilinear
    interpolation preserves the integral of a smooth function to O(h^2): 1 % here) and its centre
    of mass moves by the rotation about the image centre."""
    size = 24
    rows = torch.arange(size, dtype=torch.float64).view(-1, 1)
    cols = torch.arange(size, dtype=torch.float64).view(1, -1)
    centre = (size - 1) / 2
    blob = torch.exp(-((rows - centre + 4) ** 2 + (cols - centre - 3) ** 2) / 8.0)[None, None]
    turned = rotate(blob, 30.0)
    assert float(turned.sum()) == pytest.approx(float(blob.sum()), rel=0.01)
    mass = turned[0, 0]
    row_mean = float((mass * rows).sum() / mass.sum()) - centre
    col_mean = float((mass * cols).sum() / mass.sum()) - centre
    # the blob sits at (x, y_up) = (3, 4) from the centre; rotated CCW by 30 degrees
    angle = math.radians(30)
    x_new = 3 * math.cos(angle) - 4 * math.sin(angle)
    y_new = 3 * math.sin(angle) + 4 * math.cos(angle)
    assert col_mean == pytest.approx(x_new, abs=0.05)
    assert -row_mean == pytest.approx(y_new, abs=0.05)


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corruptions_are_deterministic_and_grow_with_intensity(corruption):
    """The same seed gives the same images; the distance ||corrupt(x) - x|| to the clean images
    grows strictly with the intensity (the same draws at every intensity make this hold image by
    image); another seed gives other noise."""
    images = _blobs()
    levels = [corrupt(images, corruption, level, seed=3) for level in range(1, 6)]
    assert torch.equal(levels[2], corrupt(images, corruption, 3, seed=3))
    distances = torch.stack([(level - images).flatten(1).norm(dim=-1) for level in levels])
    assert (distances[1:] > distances[:-1]).all(), distances
    if "noise" in corruption:
        assert not torch.equal(levels[2], corrupt(images, corruption, 3, seed=4))


def test_gaussian_noise_has_the_stated_standard_deviation():
    """On a mid-grey image nothing is clipped at intensity 1 (0.5 +- 6 sigma inside [0, 1]), so
    the noise's empirical sd is 0.08 within 1 % (40k pixels: sd of the estimate 0.35 %)."""
    grey = torch.full((10, 1, 64, 64), 0.5, dtype=torch.float64)
    noise = corrupt(grey, "gaussian-noise", 1, seed=0) - grey
    assert float(noise.std()) == pytest.approx(0.08, rel=0.01)
    assert abs(float(noise.mean())) < 4 * 0.08 / math.sqrt(noise.numel())


def test_impulse_noise_hits_the_stated_fraction_with_salt_and_pepper():
    """At intensity 5 a fraction 0.27 of the pixels (binomial sd 0.0022 over 40k) is set to 0 or
    1 in equal shares."""
    grey = torch.full((10, 1, 64, 64), 0.5, dtype=torch.float64)
    hit = corrupt(grey, "impulse-noise", 5, seed=0)
    changed = hit != 0.5
    assert float(changed.double().mean()) == pytest.approx(0.27, abs=0.01)
    assert float((hit[changed] == 1).double().mean()) == pytest.approx(0.5, abs=0.02)


def test_contrast_keeps_the_mean_and_scales_deviations():
    """m + c (x - m): the image mean is unchanged and the standard deviation is multiplied by c."""
    images = _images(size=10)
    low = corrupt(images, "contrast", 4)
    assert torch.allclose(low.mean(dim=(-2, -1)), images.mean(dim=(-2, -1)), atol=1e-14)
    ratio = low.std(dim=(-2, -1)) / images.std(dim=(-2, -1))
    assert torch.allclose(ratio, torch.full_like(ratio, CORRUPTIONS["contrast"][3]), atol=1e-12)


def test_blur_preserves_constants_and_the_mass_of_interior_images():
    """A normalised kernel leaves a constant image unchanged, and a blob far from the edges keeps
    its sum; a single bright pixel spreads into the kernel's outer product."""
    constant = torch.full((1, 2, 9, 9), 0.3, dtype=torch.float64)
    assert (gaussian_blur(constant, 1.0) - constant).abs().max() < 1e-15
    impulse = torch.zeros(1, 1, 21, 21, dtype=torch.float64)
    impulse[0, 0, 10, 10] = 1.0
    blurred = gaussian_blur(impulse, 1.5)
    assert float(blurred.sum()) == pytest.approx(1.0, abs=1e-14)
    offsets = torch.arange(-5, 6, dtype=torch.float64)
    profile = torch.exp(-(offsets**2) / (2 * 1.5**2))
    profile = profile / profile.sum()
    assert torch.allclose(blurred[0, 0, 5:16, 5:16], torch.outer(profile, profile), atol=1e-15)


def test_bad_input_raises_named_errors():
    images = _images()
    with pytest.raises(ValueError, match="unknown corruption"):
        corrupt(images, "fog", 1)
    with pytest.raises(ValueError, match=r"intensity must lie in 1..5"):
        corrupt(images, "contrast", 6)
    with pytest.raises(ValueError, match=r"\[N, C, H, W\]"):
        rotate(images[0], 10.0)
    with pytest.raises(ValueError, match="NaN"):
        rotate(images.fill_(float("nan")), 10.0)
