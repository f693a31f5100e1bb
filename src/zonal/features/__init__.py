r"""Inducing features and their covariances :math:`K_{uu}`, :math:`K_{uf}` (one owner per concept:
they live only here).

What a feature set keeps is public: ``ActivatedFeatures.kept_levels(kernel)`` /
``kept_coefficients(kernel)``; ``SphericalHarmonicFeatures`` and ``SparseSphericalHarmonicFeatures``
have ``levels`` (degree of each feature), ``kept_levels`` (the degrees used), ``spectrum(kernel)``
(:math:`\lambda` of each feature) and ``basis(x)`` (the features' functions at unit vectors).
"""

from zonal.features.activated import ACTIVATIONS, ActivatedFeatures, activation_coefficients
from zonal.features.base import InducingFeatures, NonFiniteCovarianceError, kernel_eigenvalues
from zonal.features.inducing_points import InducingPoints
from zonal.features.levels import ZERO_EIGENVALUE, kept_level_mask, nonzero_levels
from zonal.features.sparse_spherical_harmonic import SparseSphericalHarmonicFeatures
from zonal.features.spherical_harmonic import SphericalHarmonicFeatures, max_degree_for_budget

__all__ = [
    "ACTIVATIONS",
    "ZERO_EIGENVALUE",
    "ActivatedFeatures",
    "InducingFeatures",
    "InducingPoints",
    "NonFiniteCovarianceError",
    "SparseSphericalHarmonicFeatures",
    "SphericalHarmonicFeatures",
    "activation_coefficients",
    "kept_level_mask",
    "kernel_eigenvalues",
    "max_degree_for_budget",
    "nonzero_levels",
]
