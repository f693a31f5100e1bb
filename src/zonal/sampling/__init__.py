"""Pathwise sampling: exact prior draws of zonal GPs and Matheron posterior draws (seed 004 sec. 2.2.2).

Importing the package registers zonal with BoTorch's pathwise machinery (``botorch_registration``).
"""

from zonal.sampling import botorch_registration  # noqa: F401  (registers with BoTorch)
from zonal.sampling.harmonic_features import HarmonicFeatureMap, PriorSettings, prior_feature_map
from zonal.sampling.inducing_functionals import inducing_functional, required_levels
from zonal.sampling.metrics import joint_log_predictive_density
from zonal.sampling.paths import (
    ConditionedPathsError,
    DeepPaths,
    DrawnPaths,
    TransformedPathsError,
    draw_layer_paths,
    draw_posterior_paths,
    draw_prior_paths,
)
from zonal.sampling.residual_paths import ResidualPaths
from zonal.sampling.truncation import HarmonicTruncation, choose_truncation

__all__ = [
    "ConditionedPathsError",
    "DeepPaths",
    "DrawnPaths",
    "HarmonicFeatureMap",
    "HarmonicTruncation",
    "PriorSettings",
    "ResidualPaths",
    "TransformedPathsError",
    "choose_truncation",
    "draw_layer_paths",
    "draw_posterior_paths",
    "draw_prior_paths",
    "inducing_functional",
    "joint_log_predictive_density",
    "prior_feature_map",
    "required_levels",
]
