"""The rule of ``zonal fit --model auto``: which recipes it trains (``auto_candidates``) and the
refinement it may add (``auto_refinement``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from zonal.tabular.recipes.parts import harmonic_layout
from zonal.tabular.recipes.registry import RECIPES

#: the activated DGP is a candidate of ``--model auto`` up to this many training rows
AUTO_DEEP_MAX_ROWS = 20_000
#: ``auto``'s regression refinement (``auto_refinement``): the harmonic SVGP with ARD, trained after
#: the activated DGP within this share of the budget (9 s of the default 45: on white wine the
#: stack's test MSE was the same with 11 s, 0.6027-0.6029 over 3 splits, ``benchmarks/fit_default.py``) ...
AUTO_REFINEMENT_SHARE = 0.2
#: ... when the one-pass SGPR's validation log likelihood per row is within this many nats of the
#: DGP's: shallow models then compete and stacking gains from them (white wine, 0.01-0.03 nats;
#: airfoil, compactiv and grid-stability, where they got weight <= 0.1, 0.19-0.64)
AUTO_REFINEMENT_GAP = 0.1


def auto_candidates(
    num_rows: int, input_dim: int, likelihood: str, *, exact: bool = False
) -> list[str]:
    """The recipes ``--model auto`` trains, in order, for N training rows of D inputs.

    Regression: the one-pass ``sgpr`` first, then the ``exact`` GP up to ``EXACT_MAX_ROWS`` rows
    (``exact``, which the caller evaluates; whether it trains is decided at its turn, against the
    share of the budget it then gets: ``zonal.tabular.candidates.fits_its_share``), then the
    accurate activated DGP (``adgp``) for N up
    to ``AUTO_DEEP_MAX_ROWS``; above, a minibatch SVGP: ``svgp`` with learned phase-truncated
    harmonics where 512 complete levels would stop below degree 3 (about D > 11,
    ``harmonic_layout``), else ``svgp-activated`` (128 features: steps cost O(M^3) for 128, not
    512); ``auto_refinement`` may add one more, and ``zonal.tabular.fitting`` stacks them (weights that
    maximise the validation log density, ``zonal.models.stacking``). Classification (no SGPR):
    the harmonic ``svgp`` with ARD (C latent GPs), ``svgp-points`` (since session 27: the
    tables where ``auto`` stayed behind the RBF-ARD SVGP lacked a model that holds its kernel;
    in the exact GP's place for regression it was tried and not adopted, docs/fit_evidence.md), then
    ``adgp`` for N up to
    ``AUTO_DEEP_MAX_ROWS``, stacked the same way (a mixture of their class probabilities). The
    harmonic SVGP replaced ``svgp-activated`` there in session 21: on split 0 of segment, yeast
    and vehicle (120 s each, ARD) it classified better (accuracy / test log likelihood 0.965 /
    -0.110, 0.626 / -0.999, 0.835 / -0.362 against 0.948 / -0.214, 0.626 / -1.020, 0.706 /
    -0.670 with 128 activated features; 512 of them were no better), and the suite's nine
    classification tables confirmed it under ``auto`` (docs/fit_evidence.md).
    """
    deep = ["adgp"] if num_rows <= AUTO_DEEP_MAX_ROWS else []
    if likelihood != "gaussian":
        return ["svgp", "svgp-points", *deep]
    truncated = harmonic_layout(input_dim + 1, RECIPES["svgp"].defaults["num_inducing"])[1]
    shallow = "svgp" if truncated is not None else "svgp-activated"
    return ["sgpr", *(["exact"] if exact else []), *(deep or [shallow])]


def auto_refinement(scores: Mapping[str, Mapping[str, float]], likelihood: str) -> str | None:
    """The recipe ``auto`` trains after its candidates (within ``AUTO_REFINEMENT_SHARE`` of the
    budget), or None: the harmonic ``svgp`` with ARD, for regression, when the ``sgpr`` and
    ``adgp`` candidates were scored on validation rows and the SGPR's log likelihood per row is
    within ``AUTO_REFINEMENT_GAP`` of the DGP's, unless an exact GP was trained. The SVGP refines
    the SGPR (the same harmonic features, with learned input scales and minibatch training);
    where the one-pass model is far behind the deep one the refinement cannot close the gap and
    its time is not spent. The exact GP (since session 27) holds the refinement's model without
    its approximations: its stack has the SVGP's kernel families with the same learned input
    scales on every training row, with neither the harmonic truncation nor a variational gap."""
    if likelihood != "gaussian" or "exact" in scores:
        return None
    shallow = scores.get("sgpr", {}).get("log_likelihood", math.nan)
    deep = scores.get("adgp", {}).get("log_likelihood", math.nan)
    if not (math.isfinite(shallow) and math.isfinite(deep)):
        return None
    return "svgp" if deep - shallow < AUTO_REFINEMENT_GAP else None
