"""Pieces shared by seed 002's experiments (``sparse-phases-magic``, ``sparse-phases-regression``): the
continuous-depth kernel, the two feature sets compared, the ROC AUC, the first step reaching a target.

Seed 002 sec. 6 compares, under the continuous-depth kernel of eq. 15 (lambda_l = l^{-beta}, beta
learned by the ELBO; ``zonal.kernels.PolynomialDecayKernel`` under a ``ScaleKernel``):

- *sparse* spherical-harmonic features (sec. 5.2): ``frequencies`` degrees 0..F-1, at most
  ``max_phases`` learned directions per degree (``SparseSphericalHarmonicFeatures``), and
- *complete* harmonics (sec. 5.1, Dutordoir et al. 2020): every harmonic of degrees 0..F'-1
  (``SphericalHarmonicFeatures``), with F' chosen for a similar number of features.

Both feature sets keep every degree up to their truncation (built without the kernel, so that a
fast initial decay does not drop the high levels the sparse features are meant to reach).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gpytorch.kernels import ScaleKernel
from scipy.stats import rankdata

FEATURE_KINDS = ("sparse", "complete")


def continuous_depth_kernel(
    ambient_dim: int, max_degree: int, beta: float | None = None
) -> ScaleKernel:
    """ScaleKernel(PolynomialDecayKernel) on R^{ambient_dim}, homogeneous (seed 000 sec. 4.1),
    truncated at ``max_degree``, decay rate starting at ``beta`` (learnable; None: d, the ReLU
    NTK's decay). A start below d - 1 makes the prior variance sum_l N_l^d l^{-beta} grow with the
    truncation like a power of it (N_l^d ~ l^{d-2}): at d = 10, L = 18 and beta = 3 it is ~1,600
    per unit radius, against ~5 at beta = d, and the ELBO starts far from the data's scale."""
    from zonal.kernels import PolynomialDecayKernel

    base = PolynomialDecayKernel(ambient_dim, max_degree=max_degree, beta=beta, homogeneous=True)
    return ScaleKernel(base).double()


def harmonic_features(
    kind: str, ambient_dim: int, frequencies: int, max_phases: int, seed: int
) -> Any:
    """``"sparse"``: degrees 0..frequencies-1 with at most ``max_phases`` learned directions each;
    ``"complete"``: every harmonic of degrees 0..frequencies-1."""
    from zonal.features import SparseSphericalHarmonicFeatures, SphericalHarmonicFeatures

    if frequencies < 1:
        raise ValueError(f"frequencies must be >= 1, got {frequencies}")
    if kind == "sparse":
        return SparseSphericalHarmonicFeatures(ambient_dim, frequencies - 1, max_phases, seed=seed)
    if kind == "complete":
        return SphericalHarmonicFeatures(ambient_dim, frequencies - 1)
    raise ValueError(f"unknown feature kind {kind!r}; use one of {FEATURE_KINDS}")


def prior_variance_share(
    kind: str,
    ambient_dim: int,
    beta: float,
    frequencies: int,
    max_phases: int,
    max_degree: int,
) -> float:
    """The share of the continuous-depth kernel's prior variance that a feature set holds,
    averaged over the sphere: with lambda_n = n^{-beta} per harmonic (eq. 15) and N_n the
    harmonics of degree n on S^{d-1},

        complete: sum_{n < F} lambda_n N_n / sum_{n <= L} lambda_n N_n,
        sparse:   sum_{n < F} lambda_n min(P, N_n) / sum_{n <= L} lambda_n N_n,

    since P orthonormal functions of degree n hold lambda_n P of that degree's lambda_n N_n on
    average over the sphere (the mean of Q(x, x) = k_u(x)^T K_uu^{-1} k_u(x) under the uniform
    measure). F = ``frequencies``, P = ``max_phases``, L = ``max_degree`` (the kernel's
    truncation). Where nearly all the variance sits in degrees both sets hold whole, the sparse
    set's higher degrees add almost nothing and its missing phases at middle degrees cost it."""
    from zonal.harmonics.counts import num_harmonics
    from zonal.kernels import PolynomialDecayKernel

    if kind not in FEATURE_KINDS:
        raise ValueError(f"unknown feature kind {kind!r}; use one of {FEATURE_KINDS}")
    kernel = PolynomialDecayKernel(ambient_dim, max_degree=max_degree, beta=beta).double()
    with torch.no_grad():
        eigenvalues = kernel.eigenvalues(max_degree).tolist()  # per harmonic, degrees 0..L
    counts = [num_harmonics(ambient_dim, n) for n in range(max_degree + 1)]
    total = sum(value * count for value, count in zip(eigenvalues, counts, strict=True))
    held = [
        min(max_phases, count) if kind == "sparse" else count
        for count in counts[: min(frequencies, max_degree + 1)]
    ]
    return sum(value * count for value, count in zip(eigenvalues, held, strict=False)) / total


def roc_auc(scores: np.ndarray | torch.Tensor, labels: np.ndarray | torch.Tensor) -> float:
    """Area under the ROC curve: the probability that a random positive scores above a random
    negative, ties counting one half (the Mann-Whitney U statistic over n_1 n_0, with mid-ranks)."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    positive = labels == 1
    num_positive, num_negative = int(positive.sum()), int((~positive).sum())
    if num_positive == 0 or num_negative == 0:
        raise ValueError("the AUC needs both classes among the labels")
    ranks = rankdata(scores)  # mid-ranks for ties
    rank_sum = ranks[positive].sum()
    return float((rank_sum - num_positive * (num_positive + 1) / 2) / (num_positive * num_negative))


def first_step_reaching(trace: list[dict[str, Any]], key: str, target: float) -> int | None:
    """The first ``step`` of ``trace`` (rows ``{step, key}`` in order) whose ``key`` is at least
    ``target``; None if none is."""
    return next((row["step"] for row in trace if row[key] >= target), None)


__all__ = [
    "FEATURE_KINDS",
    "continuous_depth_kernel",
    "first_step_reaching",
    "harmonic_features",
    "prior_variance_share",
    "roc_auc",
]
