"""SphericalHarmonics: orthonormality by exact quadrature, addition theorem, Funk-Hecke, scipy."""

import math

import numpy as np
import pytest
import torch
from scipy.special import sph_harm_y

from zonal.harmonics import (
    SphericalHarmonics,
    funk_hecke,
    num_harmonics,
    total_harmonics,
    zonal_harmonic,
)
from zonal.harmonics.fundamental_system import _shipped, shipped_key
from zonal.harmonics.sphere_quadrature import sphere_quadrature


def random_unit(num_points, ambient_dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, ambient_dim, dtype=torch.float64, generator=generator)
    return x / x.norm(dim=-1, keepdim=True)


def highest_shipped_degree(ambient_dim):
    shipped = _shipped()
    degree = 0
    while shipped_key(ambient_dim, degree + 1) in shipped:
        degree += 1
    return degree


def quadrature_gram(harmonics, ambient_dim, exact_degree, chunk=20000):
    points, weights = sphere_quadrature(ambient_dim, exact_degree)
    gram = torch.zeros(harmonics.num_features, harmonics.num_features, dtype=torch.float64)
    for start in range(0, len(points), chunk):
        values = harmonics(torch.from_numpy(points[start : start + chunk]))  # [Q, M]
        w = torch.from_numpy(weights[start : start + chunk])
        gram += values.T @ (w[:, None] * values)
    return gram


@pytest.mark.parametrize(
    ("ambient_dim", "max_degree"),
    [
        (2, 40),
        (3, 30),
        (4, highest_shipped_degree(4)),
        (5, highest_shipped_degree(5)),
        (8, highest_shipped_degree(8)),
    ],
)
def test_orthonormal_by_exact_quadrature(ambient_dim, max_degree):
    harmonics = SphericalHarmonics(ambient_dim, max_degree)
    gram = quadrature_gram(harmonics, ambient_dim, 2 * max_degree)
    identity = torch.eye(harmonics.num_features, dtype=torch.float64)
    assert (gram - identity).abs().max() < 1e-8


SHIPPED_DIMENSIONS = [2, *range(3, 21)]


@pytest.mark.parametrize("ambient_dim", SHIPPED_DIMENSIONS)
def test_addition_theorem_at_highest_shipped_degree(ambient_dim):
    degree = highest_shipped_degree(ambient_dim)
    harmonics = SphericalHarmonics(ambient_dim, degree)
    x, y = random_unit(6, ambient_dim, 1), random_unit(5, ambient_dim, 2)
    phi_x, phi_y = harmonics(x), harmonics(y)  # [6, M], [5, M]
    expected = zonal_harmonic(x @ y.T, degree, ambient_dim)  # [6, 5, degree + 1]
    eps = torch.finfo(torch.float64).eps
    for n in range(degree + 1):
        level = harmonics.levels == n
        summed = phi_x[:, level] @ phi_y[:, level].T
        # Both sides read t = x . y rounded to eps; by Markov's inequality |d/dt C_n| grows like
        # n^2 (for the circle's shipped degrees up to 512: 2 T_n, |T_n'| <= n^2), so the rounding
        # of t alone moves either side by up to 2 n^2 eps (2.3e-10 at n = 512).
        tolerance = 1e-10 + 4 * n**2 * eps
        assert (summed - expected[..., n]).abs().max() < tolerance, n


def test_shipped_coverage():
    assert highest_shipped_degree(3) >= 40
    for ambient_dim in range(3, 21):
        degree = highest_shipped_degree(ambient_dim)
        assert total_harmonics(ambient_dim, degree + 1) > 1900 or degree >= 40


@pytest.mark.parametrize(("ambient_dim", "max_degree"), [(3, 12), (5, 6)])
def test_each_harmonic_is_a_funk_hecke_eigenfunction(ambient_dim, max_degree):
    # (1 / Omega) int s(x . y) phi_nj(y) dw(y) = lambda_n phi_nj(x), with s a polynomial of degree
    # 8 so that the quadrature of degree 8 + max_degree is exact.
    def shape(t):
        return (1 + t) ** 8 / 2**8

    harmonics = SphericalHarmonics(ambient_dim, max_degree)
    eigenvalues = funk_hecke(shape, ambient_dim, max_degree)  # [max_degree + 1]
    points, weights = sphere_quadrature(ambient_dim, 8 + max_degree)
    y = torch.from_numpy(points)
    x = random_unit(4, ambient_dim, 3)
    integral = (shape(x @ y.T) * torch.from_numpy(weights)) @ harmonics(y)  # [4, M]
    expected = eigenvalues[harmonics.levels] * harmonics(x)
    assert (integral - expected).abs().max() < 1e-12


def real_spherical_harmonics_scipy(degree, x):
    """Real orthonormal harmonics of one degree on S^2 from scipy's complex Y_n^m, rescaled to the
    normalised measure (times sqrt(4 pi)): [N, 2 degree + 1]."""
    theta = np.arccos(np.clip(x[:, 2], -1, 1))
    phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    columns = [sph_harm_y(degree, 0, theta, phi).real]
    for m in range(1, degree + 1):
        value = sph_harm_y(degree, m, theta, phi)
        columns += [math.sqrt(2) * value.real, math.sqrt(2) * value.imag]
    return math.sqrt(4 * math.pi) * np.stack(columns, axis=1)


def test_matches_scipy_up_to_a_rotation_within_each_level():
    max_degree = 25
    harmonics = SphericalHarmonics(3, max_degree)
    x = random_unit(400, 3, 4)
    ours = harmonics(x).numpy()
    for n in range(max_degree + 1):
        reference = real_spherical_harmonics_scipy(n, x.numpy())  # [400, 2n + 1]
        block = ours[:, harmonics.levels.numpy() == n]
        rotation, *_ = np.linalg.lstsq(reference, block, rcond=None)
        assert np.abs(reference @ rotation - block).max() < 1e-10
        assert np.abs(rotation.T @ rotation - np.eye(2 * n + 1)).max() < 1e-10


def test_levels_and_shapes():
    harmonics = SphericalHarmonics(4, 3)
    assert harmonics.num_features == sum(num_harmonics(4, n) for n in range(4))
    assert harmonics.levels.tolist() == [0] + [1] * 4 + [2] * 9 + [3] * 16
    x = random_unit(10, 4).reshape(2, 5, 4)
    assert harmonics(x).shape == (2, 5, 30)
    assert harmonics(x).dtype == torch.float64


def test_float32_path_and_input_gradient():
    harmonics = SphericalHarmonics(3, 6).to(torch.float32)
    values = harmonics(random_unit(5, 3).float())
    assert values.dtype == torch.float32
    reference = SphericalHarmonics(3, 6)(random_unit(5, 3))
    assert (values.double() - reference).abs().max() < 1e-4
    harmonics64 = SphericalHarmonics(3, 4)
    x = random_unit(3, 3).requires_grad_(True)
    # the harmonics extend to R^3 homogeneously only up to the projection; check autograd works
    assert torch.autograd.gradcheck(lambda v: harmonics64.zonal_at_points(v), (x,))


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (torch.ones(4, 3, dtype=torch.float64), "unit vectors"),
        (random_unit(4, 4), "last dimension"),
        (torch.full((2, 3), float("nan"), dtype=torch.float64), "NaN"),
    ],
)
def test_bad_inputs(x, message):
    harmonics = SphericalHarmonics(3, 3)
    with pytest.raises(ValueError, match=message):
        harmonics(x)


@pytest.mark.parametrize(
    ("ambient_dim", "max_degree", "message"),
    [(1, 3, "ambient_dim"), (3, -1, "max_degree"), (3, 2.0, "max_degree")],
)
def test_bad_construction(ambient_dim, max_degree, message):
    with pytest.raises(ValueError, match=message):
        SphericalHarmonics(ambient_dim, max_degree)
