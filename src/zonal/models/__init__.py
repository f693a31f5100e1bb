"""Models: SVGP, the one-pass collapsed SGPR, doubly-stochastic DGPs and activated DGPs.

Every model is a ``ZonalModel`` (``zonal.models.contract``): a BoTorch ``Model`` that owns its
likelihood and answers ``posterior``, ``predict`` and ``log_predictive_density``.
"""

from zonal.models.activated_dgp import ActivatedDGP, train_network, two_stage_fit
from zonal.models.contract import ZonalModel
from zonal.models.dgp import DGP, DGPLayer, fit_dgp, inducing_point_dgp
from zonal.models.sgpr import SGPR
from zonal.models.svgp import SVGP
from zonal.models.training import check_targets, fit_svgp

__all__ = [
    "DGP",
    "SGPR",
    "SVGP",
    "ActivatedDGP",
    "DGPLayer",
    "ZonalModel",
    "check_targets",
    "fit_dgp",
    "fit_svgp",
    "inducing_point_dgp",
    "train_network",
    "two_stage_fit",
]
