"""Counts and constants of harmonic analysis against independent formulas and integrals."""

import math

import pytest
from scipy.integrate import quad

from zonal.harmonics import num_harmonics, sphere_area, surface_ratio, total_harmonics


@pytest.mark.parametrize("ambient_dim", [2, 3, 4, 5, 8, 20])
def test_num_harmonics_is_dimension_of_harmonic_polynomials(ambient_dim):
    # dim H_n = dim P_n - dim P_{n-2}: homogeneous polynomials of degree n in d variables
    def homogeneous(n):
        return math.comb(n + ambient_dim - 1, n) if n >= 0 else 0

    for n in range(12):
        assert num_harmonics(ambient_dim, n) == homogeneous(n) - homogeneous(n - 2)


def test_known_counts():
    assert [num_harmonics(2, n) for n in range(4)] == [1, 2, 2, 2]
    assert [num_harmonics(3, n) for n in range(5)] == [1, 3, 5, 7, 9]
    assert total_harmonics(3, 40) == 41**2
    assert total_harmonics(4, 5) == sum((n + 1) ** 2 for n in range(6))


def test_sphere_area():
    assert sphere_area(2) == pytest.approx(2 * math.pi)
    assert sphere_area(3) == pytest.approx(4 * math.pi)
    assert sphere_area(4) == pytest.approx(2 * math.pi**2)
    # Omega_{d-1} = Omega_{d-2} * int (1 - t^2)^{(d-3)/2} dt
    for d in range(3, 12):
        integral = quad(lambda t, d=d: (1 - t * t) ** ((d - 3) / 2), -1, 1)[0]
        assert sphere_area(d) == pytest.approx(sphere_area(d - 1) * integral, rel=1e-7)


@pytest.mark.parametrize("ambient_dim", [3, 4, 7, 16])
def test_surface_ratio_normalises_the_weight(ambient_dim):
    integral = quad(lambda t: (1 - t * t) ** ((ambient_dim - 3) / 2), -1, 1)[0]
    assert surface_ratio(ambient_dim) * integral == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("bad", [1, 0, -3, 2.0, "3", True])
def test_bad_ambient_dim(bad):
    with pytest.raises(ValueError, match="ambient_dim"):
        num_harmonics(bad, 2)


def test_bad_degree():
    with pytest.raises(ValueError, match="degree"):
        num_harmonics(3, -1)
    with pytest.raises(ValueError, match="degree"):
        num_harmonics(3, 1.5)
