"""The names and defaults of ``zonal fit``, importable without torch.

The command line builds its help from these (``zonal --help`` must not wait for torch, GPyTorch
and BoTorch to import); ``zonal.tabular.recipes`` and ``zonal.tabular.fitting`` use the same values.
"""

from __future__ import annotations

import math

DEFAULT_VALIDATION_FRACTION = 0.1
#: the minibatch of the Adam recipes (``zonal.tabular.recipes``): a table of at most this many
#: rows is one batch, and a step costs less the fewer its rows
BATCH_SIZE = 1024
#: default wall-clock budget of ``zonal fit`` and the ``zonal.tabular.sklearn`` estimators per latent
#: function of a classifier, seconds: a cap, since early stopping ends most fits sooner; the
#: activated DGP's network was still improving at it on compactiv and grid-stability of
#: ``benchmarks/fit_default.py``, which then took 34-36 s per split against 38-48 s for the
#: RBF-ARD SVGP's 1000 Adam steps in the same runs
DEFAULT_BUDGET = 45.0
#: default wall-clock budget of a regression of at least ``BATCH_SIZE`` rows, seconds (fewer rows:
#: ``default_budget``); the RBF-ARD SVGP's 1000 Adam steps took 29-35 s on such tables of the
#: development suite (docs/fit_evidence.md, session 31)
REGRESSION_BUDGET = 30.0
#: the budget's default name (``default_budget``)
AUTO_BUDGET = "auto"


def default_budget(likelihood: str, num_classes: int, num_rows: int) -> float:
    """The default wall-clock budget of a fit of ``num_rows`` rows (validation rows included).

    Regression (``gaussian``): ``REGRESSION_BUDGET`` x sqrt(min(N, ``BATCH_SIZE``) /
    ``BATCH_SIZE``): up to a minibatch of rows every step and evaluation costs less the fewer
    the rows, as the RBF-ARD SVGP's 1000 steps did on the development tables (10-13 s at 150-188
    rows, 27 s at 927, 29-35 s from 1,024). Classification: ``DEFAULT_BUDGET`` seconds per
    latent function, one for two classes (``bernoulli``, a probit of one function) and C for
    ``softmax`` over C classes (the harmonic SVGP classifier holds a variational distribution
    per class over the same features, so each of its steps costs about C times a one-function
    step)."""
    if likelihood == "gaussian":
        return REGRESSION_BUDGET * math.sqrt(min(max(num_rows, 1), BATCH_SIZE) / BATCH_SIZE)
    return DEFAULT_BUDGET * (num_classes if likelihood == "softmax" else 1)


def describe_default_budget(likelihood: str, num_classes: int, num_rows: int) -> str:
    """The line ``zonal fit`` announces the default budget with: its seconds and its rule."""
    seconds = default_budget(likelihood, num_classes, num_rows)
    if likelihood == "gaussian":
        rule = (
            f"{REGRESSION_BUDGET:g} s for a regression of {BATCH_SIZE} rows or more"
            if num_rows >= BATCH_SIZE
            else f"{REGRESSION_BUDGET:g} s x sqrt({num_rows} / {BATCH_SIZE} rows)"
        )
    else:
        rule = f"{DEFAULT_BUDGET:g} s " + (
            "per class" if likelihood == "softmax" else "for two classes"
        )
    return f"budget {round(seconds, 1):g} s ({rule}; --budget SECONDS sets it)"


#: kernel names of the recipes ("auto": the recipe's own choice; the chordal ones: the exact GP)
KERNELS = ("auto", "arccos", "polynomial-decay", "chordal-se", "chordal-matern")
#: likelihood names: regression, binary classification (probit), multi-class (softmax)
LIKELIHOODS = ("gaussian", "bernoulli", "softmax")
#: one line per recipe of ``zonal.tabular.recipes``, in the order they are offered
RECIPE_SUMMARIES = {
    "sgpr": "collapsed SGPR with spherical-harmonic features: one data pass, then L-BFGS",
    "exact": "exact GP with a zonal kernel on every training row, then L-BFGS: O(N^3), for "
    "tables of a few thousand rows",
    "svgp": "minibatch SVGP with spherical-harmonic features",
    "svgp-activated": "SVGP with activated Softplus features: its mean is a one-hidden-layer "
    "network",
    "svgp-points": "minibatch SVGP with learned inducing points and a chordal kernel on the "
    "sphere embedding",
    "adgp": "activated deep GP: trained as a network, then by the ELBO (seed 000 sec. 5)",
    "dgp": "deep GP with inducing points and arc-cosine kernels, by the ELBO",
}

#: each recipe's defaults: feature budget M, steps (L-BFGS iterations for sgpr, Adam steps
#: otherwise) and learning rate
RECIPE_DEFAULTS = {
    "sgpr": {"num_inducing": 512, "steps": 200, "learning_rate": 1.0},
    # (every training row is the exact GP's own inducing point: num_inducing is not read)
    "exact": {"num_inducing": 1, "steps": 200, "learning_rate": 1.0},
    "svgp": {"num_inducing": 512, "steps": 1000, "learning_rate": 0.05},
    "svgp-activated": {"num_inducing": 128, "steps": 1000, "learning_rate": 0.05},
    "svgp-points": {"num_inducing": 256, "steps": 1000, "learning_rate": 0.05},
    "adgp": {"num_inducing": 128, "steps": 1000, "learning_rate": 0.01},
    "dgp": {"num_inducing": 128, "steps": 1000, "learning_rate": 0.01},
}

__all__ = [
    "AUTO_BUDGET",
    "BATCH_SIZE",
    "DEFAULT_BUDGET",
    "DEFAULT_VALIDATION_FRACTION",
    "KERNELS",
    "LIKELIHOODS",
    "RECIPE_DEFAULTS",
    "RECIPE_SUMMARIES",
    "REGRESSION_BUDGET",
    "default_budget",
    "describe_default_budget",
]
