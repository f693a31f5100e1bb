r"""Bayesian optimisation on hyperspheres with shallow and deep zonal models, in BoTorch's terms
(seed 004 ch. 4).

* ``models``: the exact GP with the intrinsic Matérn kernel of the sphere (BoTorch's
  ``SingleTaskGP`` with a zonal kernel) and the residual deep GP, builders and fitting;
* ``thompson``: pathwise Thompson sampling, deep models included;
* ``optimize_acqf_sphere``: BoTorch's ``optimize_acqf`` on :math:`\mathbb{S}^{d-1}` (multi-start
  Riemannian ascent, or geoopt's Riemannian Adam); ``optimize_acqf_normalised``: the ambient-box
  baseline;
* ``objectives``: test functions on spheres with known optima (Ackley on :math:`\mathbb{S}^3`, a
  singular function and a smooth one on :math:`\mathbb{S}^2`);
* ``lookahead``: knowledge gradient, max-value and joint entropy search for zonal models (which
  condition on fantasies), on spheres and in boxes;
* ``optimize``: the loop (shallow, deep, switch after :math:`K` steps, adaptive switch), resumable.
"""

from zonal.bo.acquisition_optimization import optimize_acqf_sphere
from zonal.bo.ambient_baseline import NormalisedInput, optimize_acqf_normalised
from zonal.bo.design import sobol_sphere, uniform_sphere
from zonal.bo.errors import (
    BOError,
    BudgetError,
    MissingOptionalDependencyError,
    ObjectiveNaNError,
    OffSphereError,
)
from zonal.bo.lookahead import (
    KnowledgeGradient,
    MultiStepLookahead,
    lookahead_acquisition,
    optimal_samples,
)
from zonal.bo.loop import LoopSettings, optimize
from zonal.bo.models import exact_sphere_gp, fit_deep_gp, fit_exact_gp, residual_deep_gp
from zonal.bo.objectives import (
    OBJECTIVES,
    SphereObjective,
    ackley_sphere,
    singular_objective,
    singular_sphere,
    smooth_sphere,
    sphere_objective,
)
from zonal.bo.riemannian import AscentOptions, geoopt_ascent, riemannian_ascent
from zonal.bo.state import BOState
from zonal.bo.thompson import DeepPathwiseThompsonSampling, thompson_sampling

__all__ = [
    "OBJECTIVES",
    "AscentOptions",
    "BOError",
    "BOState",
    "BudgetError",
    "DeepPathwiseThompsonSampling",
    "KnowledgeGradient",
    "LoopSettings",
    "MissingOptionalDependencyError",
    "MultiStepLookahead",
    "NormalisedInput",
    "ObjectiveNaNError",
    "OffSphereError",
    "SphereObjective",
    "ackley_sphere",
    "exact_sphere_gp",
    "fit_deep_gp",
    "fit_exact_gp",
    "geoopt_ascent",
    "lookahead_acquisition",
    "optimal_samples",
    "optimize",
    "optimize_acqf_normalised",
    "optimize_acqf_sphere",
    "residual_deep_gp",
    "riemannian_ascent",
    "singular_objective",
    "singular_sphere",
    "smooth_sphere",
    "sobol_sphere",
    "sphere_objective",
    "thompson_sampling",
    "uniform_sphere",
]
