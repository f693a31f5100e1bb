"""Funk-Hecke coefficients: seed 000 tables C.1 and C.2, closed forms, and independent expansions."""

import math

import numpy as np
import pytest
import torch
from scipy.special import gamma, iv

from zonal.harmonics import (
    arccos_eigenvalues,
    funk_hecke,
    gegenbauer_alpha,
    relu_coefficients,
    zonal_harmonic,
)

# Seed 000 table C.1 (first-order arc-cosine) and table C.2 (ReLU), columns d = 3, 5, 7, n = 0..9,
# as printed (analytical column). None marks entries the seed prints as rounding noise (odd n >= 3).
TABLE_C1 = {
    3: [0.375, 0.167, 0.0234, None, 0.000651, None, 9.16e-05, None, 2.29e-05, None],
    5: [0.352, 0.1, 0.00977, None, 0.000153, None, 1.37e-05, None, 2.38e-06, None],
    7: [0.342, 0.0714, 0.00534, None, 5.34e-05, None, 3.34e-06, None, 4.26e-07, None],
}
TABLE_C2 = {
    3: [0.25, 0.167, 0.0625, None, -0.0104, None, 0.00391, None, -0.00195, None],
    5: [0.188, 0.1, 0.0312, None, -0.00391, None, 0.00117, None, -0.000488, None],
    7: [0.156, 0.0714, 0.0195, None, -0.00195, None, 0.000488, None, -0.000174, None],
}


def relu(t):
    return t.clamp(min=0)


def arccos_shape(t):
    t = t.clamp(-1, 1)
    return (torch.sqrt(1 - t * t) + t * (math.pi - torch.arccos(t))) / math.pi


def agrees_to_printed_precision(value: float, printed: float) -> bool:
    """True if ``value`` rounds to ``printed`` at its printed number of significant digits
    (half a unit in the last place, plus slack for the seed's round-half-even ambiguity)."""
    digits = len(f"{abs(printed):.3g}".replace(".", "").replace("e", "").lstrip("0").split("-")[0])
    exponent = math.floor(math.log10(abs(printed)))
    unit = 10.0 ** (exponent - max(digits, 1) + 1)
    return abs(value - printed) <= 0.5 * unit * 1.0001 + 1e-15


def check_table(values, table_column):
    for n, printed in enumerate(table_column):
        if printed is None:
            assert abs(float(values[n])) < 1e-12, (n, float(values[n]))
        else:
            assert agrees_to_printed_precision(float(values[n]), printed), (n, float(values[n]))


@pytest.mark.parametrize("ambient_dim", [3, 5, 7])
def test_table_c1_arccos_by_quadrature_and_closed_form(ambient_dim):
    check_table(funk_hecke(arccos_shape, ambient_dim, 9, num_nodes=400), TABLE_C1[ambient_dim])
    check_table(arccos_eigenvalues(ambient_dim, 9), TABLE_C1[ambient_dim])


@pytest.mark.parametrize("ambient_dim", [3, 5, 7])
def test_table_c2_relu_by_quadrature_and_closed_form(ambient_dim):
    check_table(funk_hecke(relu, ambient_dim, 9, kinks=(0.0,)), TABLE_C2[ambient_dim])
    check_table(relu_coefficients(ambient_dim, 9), TABLE_C2[ambient_dim])


@pytest.mark.parametrize("ambient_dim", [2, 3, 4, 6, 9, 16])
def test_quadrature_equals_closed_forms_in_every_dimension(ambient_dim):
    relu_quadrature = funk_hecke(relu, ambient_dim, 40, kinks=(0.0,))
    relu_closed = relu_coefficients(ambient_dim, 40)
    assert (relu_quadrature - relu_closed).abs().max() < 1e-12
    arccos_quadrature = funk_hecke(arccos_shape, ambient_dim, 20, num_nodes=2000)
    arccos_closed = arccos_eigenvalues(ambient_dim, 20)
    assert (arccos_quadrature - arccos_closed).abs().max() < 1e-9


def test_the_kink_option_matters():
    closed = relu_coefficients(5, 30)
    split = funk_hecke(relu, 5, 30, kinks=(0.0,), num_nodes=60)
    unsplit = funk_hecke(relu, 5, 30, num_nodes=60)
    assert (split - closed).abs().max() < 1e-14
    assert (unsplit - closed).abs().max() > 1e3 * (split - closed).abs().max()


@pytest.mark.parametrize("ambient_dim", [3, 4, 7, 12])
def test_exponential_shape_against_bessel_expansion(ambient_dim):
    # e^{r t} = Gamma(alpha) (r/2)^{-alpha} sum_n (n + alpha) I_{n+alpha}(r) C_n^alpha(t), so with
    # Z_n = (n + alpha)/alpha C_n^alpha: lambda_n = Gamma(alpha + 1) (2/r)^alpha I_{n+alpha}(r).
    rate = 1.7
    alpha = gegenbauer_alpha(ambient_dim)
    expected = gamma(alpha + 1) * (2 / rate) ** alpha * iv(np.arange(26) + alpha, rate)
    ours = funk_hecke(lambda t: torch.exp(rate * t), ambient_dim, 25).numpy()
    # Rounding bounds the absolute error by ~eps * max|s| (|C_n(t)| <= C_n(1)), so the tiny
    # high-degree coefficients are accurate in absolute, not relative, terms.
    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-14 * math.exp(rate))


@pytest.mark.parametrize("ambient_dim", [2, 3, 5])
def test_zonal_harmonic_has_unit_coefficient_at_its_degree(ambient_dim):
    # Reproducing property: the coefficients of s = Z_m are the indicator of degree m.
    for degree in [0, 1, 4, 9]:
        coefficients = funk_hecke(
            lambda t, m=degree: zonal_harmonic(t, m, ambient_dim)[..., m], ambient_dim, 12
        )
        expected = torch.zeros(13, dtype=torch.float64)
        expected[degree] = 1
        assert (coefficients - expected).abs().max() < 1e-12


def test_differentiable_in_shape_parameters():
    rate = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)

    def eigenvalues(r):
        return funk_hecke(lambda t: torch.exp(r * t), 4, 6)

    assert torch.autograd.gradcheck(eigenvalues, (rate,))


def test_bad_shape_functions():
    with pytest.raises(ValueError, match="same shape"):
        funk_hecke(lambda t: t.sum(), 3, 4)
    with pytest.raises(ValueError, match="NaN"):
        funk_hecke(lambda t: torch.log(t), 3, 4)
    with pytest.raises(ValueError, match="kinks"):
        funk_hecke(relu, 3, 4, kinks=(1.5,))
    with pytest.raises(ValueError, match="ambient_dim"):
        funk_hecke(relu, 1, 4)
