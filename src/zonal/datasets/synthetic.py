"""Synthetic targets: two moons in the plane, and smooth random functions on the sphere S^{d-1}."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zonal._validation import check_ambient_dim, check_degree
from zonal.datasets.dataset import Dataset


def two_moons(num_points: int = 200, noise: float = 0.1, seed: int = 0) -> Dataset:
    """Two interleaved half circles in R^2, labels 0 (upper moon) and 1 (lower moon).

    The upper moon is (cos t, sin t), the lower one (1 - cos t, 1/2 - sin t), t uniform in
    [0, pi]; isotropic Gaussian noise of standard deviation ``noise`` is added. Rows are shuffled.
    """
    if num_points < 2:
        raise ValueError(f"num_points must be >= 2, got {num_points}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    rng = np.random.default_rng(seed)
    labels = np.arange(num_points) % 2  # [N], balanced
    angles = rng.uniform(0.0, np.pi, size=num_points)  # [N]
    upper = np.stack([np.cos(angles), np.sin(angles)], axis=1)  # [N, 2]
    lower = np.stack([1.0 - np.cos(angles), 0.5 - np.sin(angles)], axis=1)  # [N, 2]
    points = np.where(labels[:, None] == 0, upper, lower) + noise * rng.standard_normal(
        (num_points, 2)
    )
    order = rng.permutation(num_points)
    return Dataset(
        name="two-moons",
        X=points[order],
        y=labels[order].astype(np.int64),
        task="classification",
        feature_names=("x1", "x2"),
        target_names=("moon",),
        source=f"synthetic two_moons(noise={noise}, seed={seed})",
    )


def uniform_sphere(num_points: int, ambient_dim: int, rng: np.random.Generator) -> np.ndarray:
    """``num_points`` points uniform on S^{d-1} [N, d] (normalised standard Gaussians)."""
    points = rng.standard_normal((num_points, ambient_dim))  # [N, d]
    norms = np.linalg.norm(points, axis=1, keepdims=True)  # [N, 1]
    return points / np.where(norms > 0, norms, 1.0)


@dataclass(frozen=True)
class ZonalBumpFunction:
    """f(x) = sum_k w_k ((1 + x . c_k) / 2)^p on S^{d-1}: a weighted sum of zonal bumps.

    Each bump is a polynomial of degree p in x . c_k, peaked at its centre c_k, so f lies exactly
    in the span of the spherical harmonics of degree <= p (a band-limited smooth function).
    """

    centers: np.ndarray  # [K, d] unit vectors
    weights: np.ndarray  # [K]
    degree: int

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """f at the unit vectors ``x`` [N, d] -> [N]."""
        cosines = np.asarray(x, dtype=np.float64) @ self.centers.T  # [N, K]
        bumps = ((1.0 + np.clip(cosines, -1.0, 1.0)) / 2.0) ** self.degree  # [N, K]
        return bumps @ self.weights  # [N]


def random_zonal_function(
    ambient_dim: int, num_bumps: int = 8, degree: int = 6, seed: int = 0
) -> ZonalBumpFunction:
    """A random ``ZonalBumpFunction``: centres uniform on S^{d-1}, weights standard normal."""
    ambient_dim = check_ambient_dim(ambient_dim)
    degree = check_degree(degree, "degree")
    if num_bumps < 1:
        raise ValueError(f"num_bumps must be >= 1, got {num_bumps}")
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[0])
    centers = uniform_sphere(num_bumps, ambient_dim, rng)  # [K, d]
    weights = rng.standard_normal(num_bumps)  # [K]
    return ZonalBumpFunction(centers=centers, weights=weights, degree=degree)


def sphere_function_dataset(
    ambient_dim: int = 3,
    num_points: int = 500,
    degree: int = 6,
    num_bumps: int = 8,
    noise: float = 0.05,
    seed: int = 0,
) -> Dataset:
    """Noisy observations y = f(x) + noise * eps of ``random_zonal_function(ambient_dim,
    num_bumps, degree, seed)`` at ``num_points`` points x uniform on S^{d-1}.

    ``X`` [N, d] holds unit vectors; the same ``seed`` gives the same f, so
    ``random_zonal_function`` evaluates the noise-free target anywhere (e.g. on test points).
    """
    if num_points < 1:
        raise ValueError(f"num_points must be >= 1, got {num_points}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    function = random_zonal_function(ambient_dim, num_bumps, degree, seed)
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
    points = uniform_sphere(num_points, ambient_dim, rng)  # [N, d]
    targets = function(points) + noise * rng.standard_normal(num_points)  # [N]
    return Dataset(
        name="sphere-function",
        X=points,
        y=targets,
        task="regression",
        feature_names=tuple(f"x{i}" for i in range(ambient_dim)),
        target_names=("f",),
        source=(
            f"synthetic sphere_function_dataset(ambient_dim={ambient_dim}, degree={degree}, "
            f"num_bumps={num_bumps}, noise={noise}, seed={seed})"
        ),
    )
