r"""Harmonic analysis on the hypersphere :math:`\mathbb{S}^{d-1}`: Gegenbauer polynomials, counts,
Funk-Hecke eigenvalues and an orthonormal basis of spherical harmonics in any dimension."""

from zonal.harmonics.counts import (
    addition_factor,
    gegenbauer_alpha,
    gegenbauer_at_one,
    num_harmonics,
    sphere_area,
    surface_ratio,
    total_harmonics,
)
from zonal.harmonics.fundamental_system import (
    build_fundamental_system,
    default_cache_dir,
    load_fundamental_system,
)
from zonal.harmonics.funk_hecke import (
    arccos_eigenvalues,
    funk_hecke,
    quadrature_rule,
    relu_coefficients,
)
from zonal.harmonics.gegenbauer import gegenbauer, zonal_harmonic
from zonal.harmonics.spherical_harmonics import SphericalHarmonics

__all__ = [
    "SphericalHarmonics",
    "addition_factor",
    "arccos_eigenvalues",
    "build_fundamental_system",
    "default_cache_dir",
    "funk_hecke",
    "gegenbauer",
    "gegenbauer_alpha",
    "gegenbauer_at_one",
    "load_fundamental_system",
    "num_harmonics",
    "quadrature_rule",
    "relu_coefficients",
    "sphere_area",
    "surface_ratio",
    "total_harmonics",
    "zonal_harmonic",
]
