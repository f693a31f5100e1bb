"""Models: SVGP, the one-pass collapsed SGPR, doubly-stochastic DGPs and activated DGPs."""

from zonal.models.activated_dgp import ActivatedDGP, train_network, two_stage_fit
from zonal.models.dgp import DGP, DGPLayer, fit_dgp
from zonal.models.sgpr import SGPR
from zonal.models.svgp import SVGP
from zonal.models.training import check_targets, fit_svgp

__all__ = [
    "DGP",
    "SGPR",
    "SVGP",
    "ActivatedDGP",
    "DGPLayer",
    "check_targets",
    "fit_dgp",
    "fit_svgp",
    "train_network",
    "two_stage_fit",
]
