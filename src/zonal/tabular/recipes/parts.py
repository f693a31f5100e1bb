"""The parts the recipes share: likelihoods, kernels, harmonic feature layouts, the sphere
embedding, the learning-rate schedule and the objective reported at the end of training.

Harmonic features take all harmonics of each level while those reach degree
``MIN_COMPLETE_DEGREE`` within the budget, else phase-truncated levels up to ``SPARSE_MAX_DEGREE``
(seed 002 sec. 5.2; ``harmonic_layout``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import (
    BernoulliLikelihood,
    GaussianLikelihood,
    Likelihood,
    SoftmaxLikelihood,
)
from gpytorch.means import ConstantMean

from zonal.features import SparseSphericalHarmonicFeatures, SphericalHarmonicFeatures
from zonal.features.levels import nonzero_levels
from zonal.features.spherical_harmonic import max_degree_for_budget
from zonal.geometry import SphereEmbedding
from zonal.harmonics import num_harmonics
from zonal.kernels import (
    ArcCosineKernel,
    ChordalMaternKernel,
    ChordalRBFKernel,
    PolynomialDecayKernel,
)
from zonal.models.training import TrainingControl

#: the Gaussian noise variance (of the standardised target) the regression recipes start from
INITIAL_NOISE = 0.1
#: (fraction of the steps, learning-rate factor) of the SVGP schedule
SCHEDULE = ((0.6, 1.0), (0.25, 0.2), (0.15, 0.04))
#: levels of the polynomial-decay kernel beyond those of the features (their mass enters the bound)
EXTRA_KERNEL_LEVELS = 4
#: the polynomial-decay kernel's truncation in a model without features (the exact GP): its
#: default, 20 levels, whose neglected mass at the default decay (beta = d) is below 1e-3 of
#: the kernel variance for d >= 3
EXACT_KERNEL_LEVELS = 20
#: the highest harmonic degree used as a feature (binds only for one or two input columns)
MAX_FEATURE_DEGREE = 40
#: complete harmonic levels are used when they reach this degree within the feature budget;
#: otherwise (about D > 11 inputs for 512 features) levels are phase-truncated (seed 002 sec. 5.2)
MIN_COMPLETE_DEGREE = 3
#: the highest degree of phase-truncated harmonic features
SPARSE_MAX_DEGREE = 6


def gaussian_likelihood(noise: float = INITIAL_NOISE) -> GaussianLikelihood:
    """A float64 Gaussian likelihood with noise variance ``noise``."""
    likelihood = GaussianLikelihood().to(torch.float64)
    likelihood.noise = torch.tensor(noise, dtype=torch.float64, device=likelihood.raw_noise.device)
    return likelihood


def make_likelihood(spec: Mapping[str, Any]) -> Likelihood:
    """The spec's likelihood in float64: Gaussian (noise ``initial_noise``, by default
    ``INITIAL_NOISE``), Bernoulli (probit
    link) or softmax over ``num_classes`` latent GPs without mixing weights (the softmax of the
    last layer's C outputs, as in the activated DGP's network)."""
    name = spec.get("likelihood", "gaussian")
    if name == "gaussian":
        return gaussian_likelihood(spec.get("initial_noise", INITIAL_NOISE))
    if name == "bernoulli":
        return BernoulliLikelihood().to(torch.float64)
    return SoftmaxLikelihood(num_classes=spec["num_classes"], mixing_weights=False).double()


def output_dim(spec: Mapping[str, Any]) -> int:
    """Latent outputs of the spec's model: C for a softmax likelihood, else 1."""
    return spec["num_classes"] if spec.get("likelihood", "gaussian") == "softmax" else 1


#: the kernel families that the harmonic recipes' ``kernel="auto"`` fits in turn, keeping the
#: larger objective (the exact GP stacks more: ``zonal.tabular.recipes.exact``)
AUTO_KERNELS = ("arccos", "polynomial-decay")
#: the chordal kernels (Euclidean squared exponential and Matérn-5/2 restricted to the sphere,
#: ``zonal.kernels.chordal``), for the exact GP
CHORDAL_KERNELS = ("chordal-se", "chordal-matern")


def kernel_names(spec: Mapping[str, Any]) -> list[str]:
    """The kernels a fit of ``spec`` tries: ``AUTO_KERNELS`` for ``"auto"``, else its own."""
    return list(AUTO_KERNELS) if spec["kernel"] == "auto" else [spec["kernel"]]


def fit_each_kernel(
    names: Sequence[str],
    control: TrainingControl,
    fit_one: Callable[[str, float | None], tuple[Any, float]],
) -> dict[str, tuple[Any, float]]:
    """Fit each kernel in ``names`` in turn with ``fit_one(name, deadline)`` -> (model, objective
    per row), each within its share of the time ``control`` leaves (the next one not started
    after the deadline): {kernel: (model, objective)}. A fit that raises ``ValueError`` (a
    Cholesky failure, a divergence) is skipped while another succeeds; otherwise its error is
    raised."""
    fits: dict[str, tuple[Any, float]] = {}
    failures: list[ValueError] = []
    for position, name in enumerate(names):
        if fits and control.remaining() <= 0:
            break
        try:
            model, objective = fit_one(name, control.share_deadline(1 / (len(names) - position)))
            if not math.isfinite(objective):
                raise ValueError(f"the fit with the {name} kernel diverged (objective {objective})")
            fits[name] = (model, objective)
        except ValueError as error:
            failures.append(error)
    if not fits:
        raise failures[0]
    return fits


def best_kernel_fit(
    names: Sequence[str],
    control: TrainingControl,
    fit_one: Callable[[str, float | None], tuple[Any, float]],
) -> tuple[Any, str, float, dict[str, float]]:
    """``fit_each_kernel``, keeping the largest objective: (model, kernel, objective, each
    kernel's objective)."""
    fits = fit_each_kernel(names, control, fit_one)
    best = max(fits, key=lambda name: fits[name][1])
    return fits[best][0], best, fits[best][1], {name: fit[1] for name, fit in fits.items()}


def tail_objective(losses: list[float]) -> float:
    """Minus the mean loss over the last 5% of the steps (the ELBO per point at the end)."""
    return -float(np.mean(losses[-max(1, len(losses) // 20) :]))


def build_kernel(name: str, ambient_dim: int, num_inducing: int | None) -> ScaleKernel:
    """A homogeneous zonal kernel on R^{ambient_dim} in a ``ScaleKernel`` (learned variance): the
    first-order arc-cosine, the polynomial-decay kernel (``EXTRA_KERNEL_LEVELS`` levels beyond
    the degree of ``num_inducing`` features; None, a model without features:
    ``EXACT_KERNEL_LEVELS``), or a chordal squared exponential or Matérn-5/2 (learned
    lengthscale, GPyTorch's initial 0.69)."""
    if name == "arccos":
        base = ArcCosineKernel(ambient_dim, order=1, homogeneous=True)
    elif name == "polynomial-decay":
        if num_inducing is None:
            max_degree = EXACT_KERNEL_LEVELS
        else:
            max_degree = harmonic_layout(ambient_dim, num_inducing)[0] + EXTRA_KERNEL_LEVELS
        base = PolynomialDecayKernel(ambient_dim, max_degree=max_degree, homogeneous=True)
    elif name == "chordal-se":
        base = ChordalRBFKernel(ambient_dim, homogeneous=True)
    elif name == "chordal-matern":
        base = ChordalMaternKernel(ambient_dim, nu=2.5, homogeneous=True)
    else:
        raise ValueError(f"no kernel {name!r} to build (resolve 'auto' first)")
    return ScaleKernel(base).double()


def prior_mean(spec: Mapping[str, Any]) -> ConstantMean | None:
    """The SVGP classifier's prior mean: with ``spec["prior_mean"] == "constant"`` a learned
    constant per latent function (C of them for a softmax likelihood, one for Bernoulli; float64,
    starting at 0), so that away from the data the classes keep the frequencies the training rows
    give them rather than falling back to equal probabilities; else None (zero mean)."""
    if spec.get("prior_mean") != "constant":
        return None
    outputs = output_dim(spec)
    batch = torch.Size([outputs]) if outputs > 1 else torch.Size()
    return ConstantMean(batch_shape=batch).double()


def start_outputscale(kernel: ScaleKernel, spec: Mapping[str, Any]) -> ScaleKernel:
    """``kernel`` with its variance set to the spec's ``initial_outputscale`` when it has one
    (``auto`` starts its SVGPs where its SGPR ended), else as built (1)."""
    if "initial_outputscale" in spec:
        raw = kernel.raw_outputscale
        kernel.outputscale = torch.tensor(
            spec["initial_outputscale"], dtype=raw.dtype, device=raw.device
        )
    return kernel


def harmonic_layout(
    ambient_dim: int, num_inducing: int, kernel: ScaleKernel | None = None
) -> tuple[int, int | None]:
    """(max_degree, max_phases) of the harmonic features within ``num_inducing``.

    Complete levels (``max_phases`` None) when they reach degree ``MIN_COMPLETE_DEGREE`` (levels
    whose eigenvalue is zero for ``kernel`` cost nothing); otherwise phase-truncated levels up to
    ``SPARSE_MAX_DEGREE`` with the most directions per level that fit (seed 002 sec. 5.2): on
    S^32 (32 inputs) and 512 features, complete levels stop at degree 1, phase-truncated ones
    reach degree 6.
    """
    complete = min(max_degree_for_budget(ambient_dim, num_inducing, kernel), MAX_FEATURE_DEGREE)
    if complete >= MIN_COMPLETE_DEGREE:
        return complete, None
    levels = (
        nonzero_levels(kernel, SPARSE_MAX_DEGREE)
        if kernel is not None
        else list(range(SPARSE_MAX_DEGREE + 1))
    )
    sizes = [num_harmonics(ambient_dim, n) for n in levels]
    phases = 0
    while phases < max(sizes) and sum(min(phases + 1, size) for size in sizes) <= num_inducing:
        phases += 1
    if phases < 1:
        return complete, None
    return levels[-1], phases


def harmonic_features(
    kernel: ScaleKernel,
    ambient_dim: int,
    num_inducing: int,
    *,
    learn_phases: bool = False,
    seed: int = 0,
) -> SphericalHarmonicFeatures | SparseSphericalHarmonicFeatures:
    """Harmonic features of the kernel's non-zero levels within ``num_inducing``
    (``harmonic_layout``): all harmonics of each level, or phase-truncated levels (learned phases
    with ``learn_phases``) when complete levels would stop below degree ``MIN_COMPLETE_DEGREE``."""
    degree, phases = harmonic_layout(ambient_dim, num_inducing, kernel)
    if phases is None:
        return SphericalHarmonicFeatures(ambient_dim, degree, kernel=kernel)
    return SparseSphericalHarmonicFeatures(
        ambient_dim, degree, phases, kernel=kernel, learn_phases=learn_phases, seed=seed
    )


def input_embedding(spec: Mapping[str, Any]) -> SphereEmbedding:
    """The sphere embedding [x, b] / ||[x, b]|| (bias 1), with learned per-input scales s when
    ``spec["ard"]`` ([s * x, b]; all 1 to start, or the spec's ``initial_input_scales``)."""
    if spec.get("ard", False):
        return SphereEmbedding(1.0, input_scales=start_input_scales(spec),
                               input_dim=spec["input_dim"])  # fmt: skip
    return SphereEmbedding(1.0)


def start_input_scales(spec: Mapping[str, Any]) -> float | torch.Tensor:
    """Where the learned input scales of ``spec`` start: its ``initial_input_scales`` (a float64
    tensor [D], on the default device as every parameter a recipe builds: the model moves with
    them) when given, else 1 for every input."""
    if "initial_input_scales" not in spec:
        return 1.0
    return torch.tensor(spec["initial_input_scales"], dtype=torch.float64)
