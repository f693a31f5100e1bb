"""Inducing features and their covariances Kuu, Kuf (one owner per concept: they live only here)."""

from zonal.features.activated import ACTIVATIONS, ActivatedFeatures, activation_coefficients
from zonal.features.base import InducingFeatures, kernel_eigenvalues
from zonal.features.inducing_points import InducingPoints
from zonal.features.sparse_spherical_harmonic import SparseSphericalHarmonicFeatures
from zonal.features.spherical_harmonic import SphericalHarmonicFeatures, nonzero_levels

__all__ = [
    "ACTIVATIONS",
    "ActivatedFeatures",
    "InducingFeatures",
    "InducingPoints",
    "SparseSphericalHarmonicFeatures",
    "SphericalHarmonicFeatures",
    "activation_coefficients",
    "kernel_eigenvalues",
    "nonzero_levels",
]
