"""Recipes: the presets behind ``zonal fit`` (name, defaults, build, train), tensors in and out,
one module per model family (``sgpr``, ``svgp``, ``deep`` with its ``network`` stage), their
shared ``parts``, the ``registry`` and the ``auto`` rule.

A recipe builds a model of the contract (``zonal.models.ZonalModel``) for standardised inputs
[N, D] and trains it; the CLI reads its choices from ``RECIPES`` (filled when this package is
imported), and the experiments build their
deep models through the same functions (``build_activated_dgp``, ``build_inducing_point_dgp``), so
``zonal fit --model dgp`` and the ``uci-dgp`` experiment train the same DGP. Every option a recipe
reads is in its resolved ``spec`` (a plain dict, saved in checkpoints), and the learning rate in
the spec is the one the optimiser uses.

Recipes (standardised data; a Gaussian likelihood for regression, Bernoulli (probit) or softmax
over one latent GP per class for classification, ``LIKELIHOODS``):

- ``"sgpr"``: the collapsed SGPR with spherical-harmonic features (seed 000 sec. 3.3, seed 002
  sec. 5): one pass over the data for the sufficient statistics, then L-BFGS on the bound, at a cost
  independent of N; ``kernel="auto"`` fits the first-order arc-cosine and the polynomial-decay
  kernel and keeps the one with the larger bound. Gaussian only (``UnsupportedLikelihoodError``).
- ``"exact"``: exact GP regression with a zonal kernel on every training row
  (``zonal.models.ExactZonalGP``), L-BFGS on the marginal likelihood: O(N^3), no feature
  truncation and no variational gap; ``kernel="auto"`` fits the arc-cosine, the
  polynomial-decay and the chordal squared-exponential and Matérn-5/2 kernels and stacks them by
  their leave-one-out densities. Gaussian only.
- ``"svgp"``: the same features (with learned phases when phase-truncated) and kernel (arc-cosine
  for ``"auto"``) in a minibatch SVGP.
- ``"svgp-activated"``: SVGP with activated Softplus features (seed 000 sec. 4.3), arc-cosine
  kernel: its posterior mean is a one-hidden-layer Softplus network.
- ``"svgp-points"``: a minibatch SVGP with learned inducing points on the sphere embedding and a
  chordal kernel (squared exponential for ``"auto"``): the RBF-ARD SVGP's model as a limit of
  small input scales, with the homogeneous kernels' growth away from the data.
- ``"adgp"``: the activated DGP (seed 000 sec. 5), trained as a network (MSE, probit or softmax
  cross-entropy: the likelihood's own loss) and then by the ELBO.
- ``"dgp"``: the DGP with inducing points and arc-cosine kernels (seed 000's DGP-L), by the ELBO.

Harmonic features take all harmonics of each level while those reach degree
``MIN_COMPLETE_DEGREE`` within the budget, else phase-truncated levels up to ``SPARSE_MAX_DEGREE``
(seed 002 sec. 5.2; ``harmonic_layout``). SVGPs start from the optimal q(u) for the initial
hyperparameters (Gaussian likelihood; Titsias, 2009; skipped when N x M exceeds
``OPTIMAL_Q_MAX_ENTRIES``) and are trained by Adam in three phases: the full learning rate for 60%
of the steps, then 1/5 of it for 25% and 1/25 for the last 15%.

Training runs under a ``zonal.models.training.TrainingControl``: a wall-clock deadline (each SVGP
phase may use its fraction of the time left, the activated DGP's network stage
``NETWORK_SHARE``), a validation score that keeps the best state (early stopping), a progress bar;
Ctrl-C raises ``TrainingInterrupted`` carrying the best model so far. ``auto_candidates`` is the
rule of ``zonal fit --model auto``.
"""

from __future__ import annotations

from zonal.tabular.options import KERNELS, LIKELIHOODS, RECIPE_DEFAULTS, RECIPE_SUMMARIES
from zonal.tabular.recipes.auto import (
    AUTO_DEEP_MAX_ROWS,
    AUTO_REFINEMENT_GAP,
    AUTO_REFINEMENT_SHARE,
    auto_candidates,
    auto_refinement,
)
from zonal.tabular.recipes.deep import (
    ADGP_ELBO_PATIENCE_SHARE,
    DGP_INNER_SCALE,
    HIDDEN_WIDTH,
    build_activated_dgp,
    build_deep,
    build_inducing_point_dgp,
    layer_widths,
    train_deep,
)
from zonal.tabular.recipes.exact import (
    EXACT_AUTO_KERNELS,
    EXACT_EVALUATIONS,
    EXACT_MAX_ROWS,
    STACKED_KERNELS,
    build_exact,
    exact_fits_budget,
    kernel_components,
    train_exact,
)
from zonal.tabular.recipes.network import (
    ADGP_INITIAL_SCALE,
    ADGP_KERNEL_VARIANCE,
    NETWORK_LOSSES,
    NETWORK_SHARE,
    network_stage,
)
from zonal.tabular.recipes.parts import (
    EXTRA_KERNEL_LEVELS,
    INITIAL_NOISE,
    MAX_FEATURE_DEGREE,
    MIN_COMPLETE_DEGREE,
    SCHEDULE,
    SPARSE_MAX_DEGREE,
    build_kernel,
    gaussian_likelihood,
    harmonic_features,
    harmonic_layout,
    input_embedding,
    make_likelihood,
    output_dim,
    tail_objective,
)
from zonal.tabular.recipes.points import POINTS_KERNELS, build_points_svgp, train_points_svgp
from zonal.tabular.recipes.registry import (
    ARD_MODELS,
    BATCH_SIZE,
    EXACT_ONLY_OPTIONS,
    RECIPES,
    START_MODELS,
    TRUNCATION_LEVEL,
    Fit,
    Recipe,
    TrainingInterrupted,
    UnsupportedLikelihoodError,
    get_recipe,
    register,
    resolve_spec,
    train,
)
from zonal.tabular.recipes.sgpr import (
    ARD_ITERATIONS,
    ARD_SUBSAMPLE,
    build_sgpr,
    train_sgpr,
)
from zonal.tabular.recipes.svgp import (
    OPTIMAL_Q_MAX_ENTRIES,
    build_svgp,
    optimal_q_fits,
    scheduled_adam,
    train_svgp,
)

__all__ = [
    "ADGP_ELBO_PATIENCE_SHARE",
    "ADGP_INITIAL_SCALE",
    "ADGP_KERNEL_VARIANCE",
    "ARD_ITERATIONS",
    "ARD_MODELS",
    "ARD_SUBSAMPLE",
    "AUTO_DEEP_MAX_ROWS",
    "AUTO_REFINEMENT_GAP",
    "AUTO_REFINEMENT_SHARE",
    "BATCH_SIZE",
    "DGP_INNER_SCALE",
    "EXACT_AUTO_KERNELS",
    "EXACT_EVALUATIONS",
    "EXACT_MAX_ROWS",
    "EXACT_ONLY_OPTIONS",
    "EXTRA_KERNEL_LEVELS",
    "HIDDEN_WIDTH",
    "INITIAL_NOISE",
    "KERNELS",
    "LIKELIHOODS",
    "MAX_FEATURE_DEGREE",
    "MIN_COMPLETE_DEGREE",
    "NETWORK_LOSSES",
    "NETWORK_SHARE",
    "OPTIMAL_Q_MAX_ENTRIES",
    "POINTS_KERNELS",
    "RECIPES",
    "RECIPE_DEFAULTS",
    "RECIPE_SUMMARIES",
    "SCHEDULE",
    "SPARSE_MAX_DEGREE",
    "STACKED_KERNELS",
    "START_MODELS",
    "TRUNCATION_LEVEL",
    "Fit",
    "Recipe",
    "TrainingInterrupted",
    "UnsupportedLikelihoodError",
    "auto_candidates",
    "auto_refinement",
    "build_activated_dgp",
    "build_deep",
    "build_exact",
    "build_inducing_point_dgp",
    "build_kernel",
    "build_points_svgp",
    "build_sgpr",
    "build_svgp",
    "exact_fits_budget",
    "gaussian_likelihood",
    "get_recipe",
    "harmonic_features",
    "harmonic_layout",
    "input_embedding",
    "kernel_components",
    "layer_widths",
    "make_likelihood",
    "network_stage",
    "optimal_q_fits",
    "output_dim",
    "register",
    "resolve_spec",
    "scheduled_adam",
    "tail_objective",
    "train",
    "train_deep",
    "train_exact",
    "train_points_svgp",
    "train_sgpr",
    "train_svgp",
]
