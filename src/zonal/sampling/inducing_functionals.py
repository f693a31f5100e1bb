r"""The inducing variables of a prior path: :math:`u = T w` for :math:`f = \psi(\cdot)\, w`
(seed 004 eq. 2.18's :math:`f(Z)`).

Matheron's rule (seed 004 eqs. 2.18-2.19) needs, jointly with a prior draw :math:`f`, the inducing
variables :math:`u(f)` that :math:`q(u)` is over, so that :math:`\operatorname{Cov}(u) = K_{uu}` and
:math:`\operatorname{Cov}(u, f(x)) = K_{uf}`. For a prior path :math:`f = \psi(\cdot)\, w`,
:math:`u` is linear in :math:`w`: :math:`u = T w` with :math:`T` [*b, M, F]. With the RKHS
convention of docs/conventions.md,
:math:`u_m = \langle f, g_m \rangle_\mathcal{H} = \sum_{n, j} f_{nj} (g_m)_{nj} / \lambda_n`, and
the prior feature :math:`\psi_{nj} = \sqrt{\lambda_n}\, \phi_{nj}` has coefficients
:math:`f_{nj} = \sqrt{\lambda_n}\, w_{nj}`, so

.. math::

    T[m, (n, j)] = (g_m)_{nj} / \sqrt{\lambda_n}, \qquad
    (g_m)_{nj} = \langle g_m, \phi_{nj} \rangle_{L^2}.

* Spherical-harmonic features (full or phase-truncated; :math:`g_m` a unit-norm function of level
  :math:`n`): :math:`(g_m)_{nj}` comes from the reproducing property of :math:`Z_n`. With
  :math:`\eta_n` the fundamental system of ``SphericalHarmonics`` and
  :math:`\phi_n = L^{-1} Z_n(\eta_n \cdot\,)` (:math:`G = L L^\top`),
  :math:`\langle g, \phi_{nj} \rangle = (L^{-1} g(\eta_n))_j` and :math:`\phi_n(\eta_n) = L`, so
  the coefficients solve :math:`\phi_n(\eta_n)\, c = g_m(\eta_n)`. For VISH :math:`T` is
  :math:`\operatorname{diag}(1 / \sqrt{\lambda})` times an orthogonal matrix per level, hence
  :math:`T T^\top = \operatorname{diag}(1 / \lambda) = K_{uu}`.
* Activated features, :math:`\tilde g_m(x) = \sum_{n \in \mathcal{K}} \sigma_n Z_n(w_m \cdot x)`:
  :math:`(\tilde g_m)_{nj} = \sigma_n \phi_{nj}(w_m)`, so
  :math:`u_m = \sum_{n \in \mathcal{K}} (\sigma_n / \lambda_n) f_n(w_m)`, :math:`f_n` the
  projection of :math:`f` on level :math:`n`; then
  :math:`T T^\top = \sum_n \frac{\sigma_n^2}{\lambda_n} Z_n(w_m \cdot w_{m'}) = K_{uu}` and
  :math:`T \psi(x)^\top = \tilde g_m(x) = K_{uf}`.
* Inducing points: :math:`u = f(Z)`, so :math:`T = \psi(Z)` (any feature map, random Fourier
  features included).

For the first two, :math:`T \psi^\top` reproduces :math:`K_{uu}` and :math:`K_{uf}` exactly when
the prior keeps every level the features use (``required_levels``), so a posterior draw's
covariance is off by the prior's missing variance only. For inducing points
:math:`\operatorname{Cov}(u)` is the truncated :math:`k_L(Z, Z)`, and the update multiplies that
error by :math:`K_{uu}^{-1}`: the posterior error grows with the condition number of
:math:`K_{uu}`.
"""

from __future__ import annotations

from functools import singledispatch

import torch
from botorch.sampling.pathwise.features import FeatureMap
from gpytorch.kernels import Kernel

from zonal.features import (
    ActivatedFeatures,
    InducingFeatures,
    InducingPoints,
    SparseSphericalHarmonicFeatures,
    SphericalHarmonicFeatures,
)
from zonal.sampling.harmonic_features import HarmonicFeatureMap


@singledispatch
def required_levels(features: InducingFeatures, kernel: Kernel) -> tuple[int, ...]:
    """The degrees a prior expansion must keep for ``inducing_functional`` to be exact."""
    raise TypeError(f"no pathwise sampling rule for features of type {type(features).__name__}")


@singledispatch
def inducing_functional(
    features: InducingFeatures, kernel: Kernel, feature_map: FeatureMap
) -> torch.Tensor:
    r""":math:`T` [*b, M, F] with :math:`u = T w` for the prior path
    :math:`f = \mathtt{feature\_map}(\cdot)\, w` (module docstring)."""
    raise TypeError(f"no pathwise sampling rule for features of type {type(features).__name__}")


@required_levels.register
def _(features: InducingPoints, kernel: Kernel) -> tuple[int, ...]:
    return ()


@inducing_functional.register
def _(features: InducingPoints, kernel: Kernel, feature_map: FeatureMap) -> torch.Tensor:
    return feature_map(features.points)  # psi(Z) [*b, M, F]


@required_levels.register(SphericalHarmonicFeatures)
@required_levels.register(SparseSphericalHarmonicFeatures)
def _(features, kernel: Kernel) -> tuple[int, ...]:
    return tuple(sorted(set(features.levels.tolist())))


@inducing_functional.register(SphericalHarmonicFeatures)
@inducing_functional.register(SparseSphericalHarmonicFeatures)
def _(features, kernel: Kernel, feature_map: FeatureMap) -> torch.Tensor:
    harmonic_map = _harmonic_map(feature_map, features, kernel)
    harmonics = harmonic_map.harmonics
    columns = harmonic_map.column_levels  # [F]
    coefficients = harmonic_map.eigenvalues.new_zeros(features.num_inducing, len(columns))  # [M, F]
    for degree in sorted(set(features.levels.tolist())):
        eta = harmonics.points[harmonics.levels == degree]  # [N_n, d]
        own = torch.nonzero(columns == degree).squeeze(-1)  # [N_n]
        rows = torch.nonzero(features.levels == degree).squeeze(-1)  # [M_n]
        values = harmonic_map.basis(eta)[:, own]  # phi_n(eta_n) [N_n, N_n]
        targets = features.basis(eta.to(features.levels.device))[:, rows]  # g_m(eta_n) [N_n, M_n]
        solved = torch.linalg.solve(values, targets.to(values))  # (g_m)_nj [N_n, M_n]
        coefficients = coefficients.index_put((rows.unsqueeze(-1), own.unsqueeze(0)), solved.mT)
    return coefficients / harmonic_map.eigenvalues.sqrt().unsqueeze(-2)  # [*b, M, F]


@required_levels.register
def _(features: ActivatedFeatures, kernel: Kernel) -> tuple[int, ...]:
    return tuple(torch.nonzero(features.kept_coefficients(kernel)).squeeze(-1).tolist())


@inducing_functional.register
def _(features: ActivatedFeatures, kernel: Kernel, feature_map: FeatureMap) -> torch.Tensor:
    harmonic_map = _harmonic_map(feature_map, features, kernel)
    sigma = features.kept_coefficients(kernel).to(harmonic_map.eigenvalues)  # [N~ + 1]
    levels = harmonic_map.column_levels  # [F]
    inside = levels < len(sigma)
    column_sigma = torch.where(inside, sigma[levels.clamp(max=len(sigma) - 1)], 0.0)  # [F]
    weights = features.weights.to(harmonic_map.eigenvalues)  # w_m [M, d]
    ratio = column_sigma / harmonic_map.eigenvalues.sqrt()  # sigma_n / sqrt(lambda_n) [*b, F]
    return harmonic_map.basis(weights) * ratio.unsqueeze(-2)  # [*b, M, F]


def _harmonic_map(
    feature_map: FeatureMap, features: InducingFeatures, kernel: Kernel
) -> HarmonicFeatureMap:
    """The map itself, after checking that it is exact and keeps every level the features use."""
    if not isinstance(feature_map, HarmonicFeatureMap):
        raise TypeError(
            f"{type(features).__name__} need the exact harmonic prior (a zonal kernel), got "
            f"{type(feature_map).__name__}"
        )
    kept = set(feature_map.truncation.levels)
    missing = sorted(set(required_levels(features, kernel)) - kept)
    if missing:
        raise ValueError(f"the prior expansion leaves out degree(s) {missing} the features use")
    return feature_map
