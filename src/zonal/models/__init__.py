"""Models: SVGP, the one-pass collapsed SGPR, doubly-stochastic DGPs, activated DGPs and residual
DGPs on hyperspheres (Gaussian vector fields composed through the exponential map), activated DGP
heads on convolutional features with their baselines (MC dropout, deep ensembles), and stacked
mixtures of trained regression models; ``MomentMatchedModel`` views a mixture as one Gaussian.

Every model is a ``ZonalModel`` (``zonal.models.contract``): a BoTorch ``Model`` that owns its
likelihood and answers ``posterior``, ``predict`` and ``log_predictive_density``.
"""

from zonal.models.activated_dgp import ActivatedDGP, train_network, two_stage_fit
from zonal.models.baselines import DeepEnsembleClassifier, MCDropoutClassifier, inducing_point_head
from zonal.models.classifier_training import ClassifierHistory, train_classifier_to_convergence
from zonal.models.contract import ZonalModel
from zonal.models.conv_head import (
    ConvActivatedDGP,
    ConvDGPClassifier,
    ConvFeatures,
    HybridNetwork,
    ImageClassifier,
    fit_conv_adgp,
)
from zonal.models.dgp import DGP, DGPLayer, fit_dgp, inducing_point_dgp
from zonal.models.exact_gp import ExactZonalGP
from zonal.models.hyperpriors import Hyperpriors
from zonal.models.kmeans import kmeans
from zonal.models.moment_matched import MomentMatchedModel
from zonal.models.residual_dgp import ResidualDGP, hybrid_dgp, residual_dgp
from zonal.models.sgpr import SGPR
from zonal.models.sgpr_statistics import StatisticsKernel
from zonal.models.stacking import StackedModel
from zonal.models.svgp import SVGP
from zonal.models.training import PlateauSchedule, TrainingControl, check_targets, fit_svgp
from zonal.models.vector_field import (
    FrameSingularityError,
    FrameVectorField,
    GaussianVectorField,
    NotTangentError,
    ProjectedVectorField,
)

__all__ = [
    "DGP",
    "SGPR",
    "SVGP",
    "ActivatedDGP",
    "ClassifierHistory",
    "ConvActivatedDGP",
    "ConvDGPClassifier",
    "ConvFeatures",
    "DGPLayer",
    "DeepEnsembleClassifier",
    "ExactZonalGP",
    "FrameSingularityError",
    "FrameVectorField",
    "GaussianVectorField",
    "HybridNetwork",
    "Hyperpriors",
    "ImageClassifier",
    "MCDropoutClassifier",
    "MomentMatchedModel",
    "NotTangentError",
    "PlateauSchedule",
    "ProjectedVectorField",
    "ResidualDGP",
    "StackedModel",
    "StatisticsKernel",
    "TrainingControl",
    "ZonalModel",
    "check_targets",
    "fit_conv_adgp",
    "fit_dgp",
    "fit_svgp",
    "hybrid_dgp",
    "inducing_point_dgp",
    "inducing_point_head",
    "kmeans",
    "residual_dgp",
    "train_classifier_to_convergence",
    "train_network",
    "two_stage_fit",
]

# Any zonal model's import registers zonal with BoTorch's pathwise dispatchers
# (``draw_matheron_paths``, ``get_optimal_samples``): ``zonal.sampling.botorch_registration``.
import zonal.sampling  # noqa: F401
