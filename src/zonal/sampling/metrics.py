r"""The joint log predictive density of a test set (seed 004 sec. 3.2, eqs. 3.6 and 3.9-3.11).

:math:`\mathrm{LPD} = \log p(y \mid X)`, the density of all test targets together (eq. 3.6). For a
deep model it is intractable and is estimated through pathwise draws of the first :math:`L - 1`
layers (eqs. 3.10-3.11):

.. math::

    \mathrm{LPD} = \log \mathbb{E}_{F \sim p(F^{L-1} \mid X)} [p(y \mid F)]
    \approx \log \frac{1}{S} \sum_s \mathcal{N}(y \mid m_L(F_s), C_L(F_s) + s^2 I),

where :math:`F_s` are joint draws of the hidden layers' outputs at all test inputs (``DeepPaths``:
whole functions, so the test points are jointly distributed) and :math:`\mathcal{N}(m_L, C_L)` is
the last layer's :math:`q(f)` given its inputs, with the likelihood's noise :math:`s^2`. A
single-layer model has no hidden layer and its LPD is exact:
:math:`\log \mathcal{N}(y \mid m, C + s^2 I)` from its posterior. For draws of :math:`f` itself
(``DrawnPaths``, or any callable returning [S, N] or [S, N, P]) the same Monte Carlo average reads

.. math::

    \mathrm{LPD} \approx \log \frac{1}{S} \sum_s \prod_i \mathcal{N}(y_i \mid f_s(x_i), s^2),

a log-mean-exp over draws of the joint Gaussian likelihood. The per-point TLL (eq. 3.7) and MSE
(eq. 3.8) are ``model.log_predictive_density(X, y).sum()`` and the mean of
(y - ``model.predict(X)[0]``)^2.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from torch import Size

from zonal.geometry import exp_map
from zonal.linalg import cholesky
from zonal.models import DGP, ResidualDGP, ZonalModel
from zonal.models.contract import GAUSSIAN_LIKELIHOODS
from zonal.sampling.paths import DeepPaths, draw_layer_paths

#: Monte Carlo draws of the hidden layers for a deep model's joint density
DEFAULT_SAMPLES = 256
#: entries of the dense [S', N, N] test covariances factorised at a time
DENSE_ENTRIES = 1 << 25


@torch.no_grad()
def joint_log_predictive_density(
    source: ZonalModel | Callable[[torch.Tensor], torch.Tensor],
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    num_samples: int = DEFAULT_SAMPLES,
    noise: float | torch.Tensor | None = None,
) -> torch.Tensor:
    r""":math:`\log p(y \mid X)` for test inputs :math:`X` [N, D] and targets :math:`y` [N] (or
    [N, P]): a scalar.

    Args:
        source: a zonal model (a deep one: Monte Carlo over ``num_samples`` pathwise draws of its
            hidden layers, eq. 3.11; a single-layer one: exact) or drawn paths (then ``noise``,
            the Gaussian noise variance, is required and every draw counts once).
        X: test inputs.
        y: test targets.
        num_samples: hidden-layer draws for a deep model.
        noise: the observation noise variance, for paths only.
    """
    if isinstance(source, ZonalModel):
        if noise is not None:
            raise ValueError("noise is the model's likelihood's: give it for paths only")
        X = source.check_inputs(X)
        y = torch.as_tensor(y).to(X)
        if isinstance(source, DGP):
            return _deep_density(source, X, y, num_samples)
        return _gaussian_log_density(y, source.posterior(X, observation_noise=True).distribution)
    if noise is None:
        raise ValueError("the density of drawn paths needs the observation noise variance")
    values = source(X)  # [S, N] or [S, N, P]
    y = torch.as_tensor(y).to(values)
    if values.shape[1:] != y.shape:
        raise ValueError(f"paths give {tuple(values.shape)} for targets {tuple(y.shape)}")
    scale = torch.as_tensor(noise).to(values).sqrt()
    per_draw = torch.distributions.Normal(values, scale).log_prob(y)  # [S, N(, P)]
    per_draw = per_draw.reshape(len(values), -1).sum(-1)  # [S]
    return torch.logsumexp(per_draw, 0) - math.log(len(values))


def _deep_density(model: DGP, X: torch.Tensor, y: torch.Tensor, num_samples: int) -> torch.Tensor:
    """Eq. 3.11: hidden layers drawn as paths, the last layer's Gaussian joint density exactly."""
    if not isinstance(model.likelihood, GAUSSIAN_LIKELIHOODS):
        raise ValueError(
            f"the joint density needs a Gaussian likelihood, the model has "
            f"{type(model.likelihood).__name__}"
        )
    if isinstance(model, ResidualDGP):
        return _residual_density(model, X, y, num_samples)
    last = model.layers[-1]
    hidden = list(model.layers[:-1])
    if hidden:
        draws = DeepPaths([draw_layer_paths(layer, Size([num_samples])) for layer in hidden])
        h = draws(X)  # [S, N, D_L] (or [S, N] for a one-output hidden layer)
        h = h.unsqueeze(-1) if hidden[-1].output_dims is None else h
    else:
        h = X.unsqueeze(0)  # [1, N, D]: no hidden layer, the density is exact
    per_draw = torch.cat(
        [
            _gaussian_log_density(y, model.likelihood(last(draws, are_samples=True)))
            for draws in h.split(max(1, DENSE_ENTRIES // X.shape[-2] ** 2))
        ]
    )  # [S]
    return torch.logsumexp(per_draw, 0) - math.log(len(per_draw))


def _residual_density(
    model: ResidualDGP, X: torch.Tensor, y: torch.Tensor, num_samples: int
) -> torch.Tensor:
    """Eq. 3.11 for a residual DGP: each hidden field v = A(x) g(x) drawn as a path of its
    component GP g, points moved by h <- exp_h(v(h)) (draw s at its own points), then the output
    layer's joint Gaussian (times the embedding's radii) at the moved points, exactly."""
    z, radius = model.to_sphere(X)  # [N, d], [N] or None
    h = z.expand(num_samples, *z.shape) if model.fields else z.unsqueeze(0)  # [S, N, d]
    for field in model.fields:
        components = draw_layer_paths(field.gp, Size([num_samples]))(h)  # [S, N, P]
        h = exp_map(h, field.tangent_vectors(h, components))  # [S, N, d]
    per_draw = torch.cat(
        [
            _gaussian_log_density(y, model.likelihood(model.output_distribution(points, radius)))
            for points in h.split(max(1, DENSE_ENTRIES // X.shape[-2] ** 2))
        ]
    )  # [S]
    return torch.logsumexp(per_draw, 0) - math.log(len(per_draw))


def _gaussian_log_density(y: torch.Tensor, distribution: MultivariateNormal) -> torch.Tensor:
    """log N(y | mean, covariance) by a dense Cholesky factor (exact, adaptive jitter): [*batch].

    A multitask normal is flattened in its own order (interleaved: point-major)."""
    mean = distribution.mean  # [*batch, N] or [*batch, N, P]
    if isinstance(distribution, MultitaskMultivariateNormal):
        interleaved = distribution._interleaved
        mean = mean.flatten(-2) if interleaved else mean.mT.flatten(-2)  # [*batch, N P]
        y = y.flatten(-2) if interleaved else y.mT.flatten(-2)
    covariance = distribution.covariance_matrix  # [*batch, K, K]
    factor = cholesky(covariance, name="predictive covariance of the test set")
    residual = (y - mean).unsqueeze(-1)  # [*batch, K, 1]
    whitened = torch.linalg.solve_triangular(factor, residual, upper=False).squeeze(-1)
    log_det = 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    count = residual.shape[-2]
    return -0.5 * (whitened.pow(2).sum(-1) + log_det + count * math.log(2 * math.pi))
