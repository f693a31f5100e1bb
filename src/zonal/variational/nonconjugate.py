r""":math:`q(u)` at its optimum for any likelihood at fixed hyperparameters: damped natural-gradient
steps.

In whitened coordinates :math:`v = L^{-1} u`, with :math:`p(v) = \mathcal{N}(0, I)` and
:math:`q(v) = \mathcal{N}(m, S)` per output (a batch [*b] of them: one per class of a softmax
classifier), the marginals of :math:`q(f)` at :math:`N` rows are

.. math::

    \mu = \mu_0 + B^\top m, \qquad s = r + \operatorname{diag}(B^\top S B), \qquad
    B = L^{-1} K_{uf} \ [M, N],

where :math:`\mu_0` is the prior mean and :math:`r = \operatorname{diag}(K_{ff} - B^\top B)`
(``InterDomainVariationalStrategy``). The ELBO is
:math:`E = \sum_n \mathbb{E}_q[\log p(y_n \mid f_n)] - \operatorname{KL}(q \,\|\, p)`. In the
natural parameters :math:`(h, P) = (S^{-1} m, S^{-1})` the natural gradient of :math:`E` is its
ordinary gradient in the expectation parameters :math:`(m, S + m m^\top)` (Hensman et al. 2013;
Salimbeni, Eleftheriadis & Hensman 2018, sec. 2); with
:math:`g = \partial \mathrm{ELL} / \partial \mu` and
:math:`w = -2\, \partial \mathrm{ELL} / \partial s` [*b, N] it points from :math:`(h, P)` to

.. math::

    P^\ast = I + B \operatorname{diag}(w) B^\top, \qquad h^\ast = B (g + w (\mu - \mu_0)),

and a step of size :math:`\rho` moves :math:`(h, P)` the fraction :math:`\rho` of the way there.
For a Gaussian likelihood :math:`w = 1 / \mathrm{noise}`,
:math:`g + w (\mu - \mu_0) = (y - \mu_0) / \mathrm{noise}`, and one step of size 1 lands on
Titsias' optimum (``InterDomainVariationalStrategy.set_optimal_variational_distribution``); for a
log-concave likelihood (probit, softmax) :math:`w \ge 0` (Price's theorem:
:math:`w = -\mathbb{E}_q[\partial^2 \log p / \partial f^2]`) and the steps are those of Newton's
method on :math:`E`, which converge in a few. A step is taken only where it raises :math:`E` (else
its size halves); the iterations stop when :math:`E` changes by less than ``tolerance`` nats per
row, up or down: at the optimum a full step changes :math:`E` by rounding only, and a fall there is
no reason to halve the step (with a Gaussian likelihood the first step lands on the optimum and the
second fell by 1e-12 nats on one machine, which had halved the step to its floor and reported no
convergence). :math:`\mathbb{E}_q[\log p]` is the likelihood's own (Gauss-Hermite quadrature for
one-dimensional likelihoods and closed form for a Gaussian one, GPyTorch's ``expected_log_prob``)
or, for others (softmax), a Monte Carlo average over ``num_samples`` draws that stay fixed through
the iterations, so that every step compares the same objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import Likelihood
from gpytorch.likelihoods.gaussian_likelihood import _GaussianLikelihoodBase
from gpytorch.likelihoods.likelihood import _OneDimensionalLikelihood
from linear_operator.operators import DiagLinearOperator

from zonal.linalg import cholesky

#: rows' Monte Carlo draws of E_q[log p(y | f)] for a likelihood of several latent functions
NUM_SAMPLES = 64
#: the iterations stop when the ELBO rises by less than this many nats per row
TOLERANCE = 1e-4
#: at most this many natural-gradient steps (each O(M^2 N) per output)
MAX_ITERATIONS = 25
#: a step whose size halved below this is not tried
MIN_STEP = 1.0 / 64


@dataclass(frozen=True)
class NaturalGradientResult:
    """What ``optimal_variational_q`` did: the ELBO in nats at the start and after each step
    taken (``trace``), the steps tried, and whether the last rise was below the tolerance."""

    trace: tuple[float, ...]
    tries: int
    converged: bool

    @property
    def elbo(self) -> float:
        """The ELBO at the :math:`q` returned, nats."""
        return self.trace[-1]

    @property
    def steps(self) -> int:
        """The steps taken (each raised the ELBO)."""
        return len(self.trace) - 1


@dataclass(frozen=True)
class Marginals:
    """The parts of q(f)'s marginals that do not move with q(v) (module docstring): B [M, N]
    (or [*b, M, N]), mu_0 and r [*b, N]."""

    projection: torch.Tensor
    prior_mean: torch.Tensor
    residual: torch.Tensor

    def of(self, mean: torch.Tensor, covariance: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(mu, s) [*b, N] for q(v) = N(mean [*b, M], covariance [*b, M, M])."""
        b = self.projection
        mu = self.prior_mean + (mean.unsqueeze(-2) @ b).squeeze(-2)  # [*b, N]
        s = self.residual + (b * (covariance @ b)).sum(-2)  # [*b, N]
        return mu, s


def expected_log_likelihood(
    likelihood: Likelihood,
    y: torch.Tensor,
    mu: torch.Tensor,
    s: torch.Tensor,
    draws: torch.Tensor | None,
) -> torch.Tensor:
    """sum_n E_{q(f_n)}[log p(y_n | f_n)] for marginals mu, s [*b, N] (a batch [C] is the C
    latent functions of one likelihood); ``draws`` [K, *b, N] are fixed standard normal draws
    (None: the likelihood's own ``expected_log_prob``: closed form for a Gaussian, quadrature for
    a one-dimensional likelihood)."""
    if draws is None:
        marginal = MultivariateNormal(mu, DiagLinearOperator(s))
        return likelihood.expected_log_prob(y, marginal).sum()
    samples = mu + s.clamp_min(0).sqrt() * draws  # [K, *b, N]
    if samples.dim() > 2:
        samples = samples.movedim(1, -1)  # [K, N, C]: the latent functions last
    return likelihood(samples).log_prob(y).mean(0).sum()


def monte_carlo_draws(
    likelihood: Likelihood,
    marginals: Marginals,
    num_samples: int,
    generator: torch.Generator | None,
) -> torch.Tensor | None:
    """Standard normal draws [K, *b, N] for ``expected_log_likelihood`` at the rows of
    ``marginals``, from ``generator``; None for a Gaussian likelihood (closed form) or a
    one-dimensional one (quadrature)."""
    if isinstance(likelihood, (_GaussianLikelihoodBase, _OneDimensionalLikelihood)):
        return None
    prior_mean = marginals.prior_mean  # [*b, N]
    shape = (num_samples, *prior_mean.shape)
    return torch.randn(shape, generator=generator, dtype=prior_mean.dtype, device=prior_mean.device)


def whitened_kl(mean: torch.Tensor, covariance: torch.Tensor) -> torch.Tensor:
    """KL(N(m, S) || N(0, I)) summed over the batch, for m [*b, M] and S [*b, M, M]:
    (tr S + m^T m - M - log det S) / 2."""
    root = cholesky(covariance, name="S (q(v)'s covariance)")  # [*b, M, M]
    logdet = 2.0 * root.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    trace = covariance.diagonal(dim1=-2, dim2=-1).sum(-1)
    return 0.5 * (trace + mean.pow(2).sum(-1) - mean.shape[-1] - logdet).sum()


@torch.no_grad()
def optimal_variational_q(
    marginals: Marginals,
    likelihood: Likelihood,
    y: torch.Tensor,
    mean: torch.Tensor,
    covariance: torch.Tensor,
    *,
    tolerance: float = TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
    num_samples: int = NUM_SAMPLES,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, NaturalGradientResult]:
    r"""The whitened :math:`q(v) = \mathcal{N}(m, S)` (:math:`m` [*b, M], :math:`S` [*b, M, M])
    that maximises the ELBO of targets :math:`y` [N] under ``likelihood``, from
    :math:`q(v) = \mathcal{N}(\mathtt{mean}, \mathtt{covariance})`, by the damped natural-gradient
    steps of the module docstring; returns (:math:`m`, :math:`S`, what was done). A
    non-positive-definite precision raises ``zonal.linalg.NotPositiveDefiniteError``."""
    projection = marginals.projection  # [*b, M, N]
    num_rows = projection.shape[-1]
    generator = torch.Generator(device=mean.device).manual_seed(seed)
    draws = monte_carlo_draws(likelihood, marginals, num_samples, generator)  # fixed throughout

    def evaluate(m: torch.Tensor, s_v: torch.Tensor) -> tuple[Any, ...]:
        """(ELBO, mu, dELL/dmu, dELL/ds) at q(v) = N(m, s_v)."""
        mu, s = marginals.of(m, s_v)
        mu, s = mu.detach().requires_grad_(True), s.detach().requires_grad_(True)
        with torch.enable_grad():
            ell = expected_log_likelihood(likelihood, y, mu, s, draws)
            gradient_mu, gradient_s = torch.autograd.grad(ell, (mu, s))
        elbo = float(ell.detach()) - float(whitened_kl(m, s_v))
        return elbo, mu.detach(), gradient_mu, gradient_s

    precision = torch.cholesky_inverse(cholesky(covariance, name="S (q(v)'s covariance)"))
    state = evaluate(mean, covariance)
    trace, tries, step, converged = [state[0]], 0, 1.0, False
    while tries < max_iterations and step >= MIN_STEP:
        elbo, mu, gradient_mu, gradient_s = state
        target = natural_target(marginals, mu, gradient_mu, gradient_s)
        new_precision, new_mean, new_covariance = damped_step(precision, mean, target, step)
        candidate = evaluate(new_mean, new_covariance)
        tries += 1
        rise = candidate[0] - elbo
        if rise < 0 and -rise >= tolerance * num_rows:
            step /= 2
            continue
        if rise >= 0:
            mean, covariance, precision, state = new_mean, new_covariance, new_precision, candidate
            trace.append(candidate[0])
        if abs(rise) < tolerance * num_rows:
            converged = True
            break
    result = NaturalGradientResult(tuple(trace), tries, converged)
    return mean, covariance, result


def natural_target(
    marginals: Marginals,
    mu: torch.Tensor,
    gradient_mu: torch.Tensor,
    gradient_s: torch.Tensor,
    scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The point (P* [*b, M, M], h* [*b, M]) that a natural-gradient step moves towards (module
    docstring), from the marginals' means mu and the expected log likelihood's gradients g =
    dELL/dmu, dELL/ds [*b, N] at the rows of ``marginals``; ``scale`` multiplies the rows' terms
    (N / B for a minibatch of B of N rows, an unbiased estimate of the full sums):

        P* = I + scale B diag(w) B^T,    h* = scale B (g + w (mu - mu_0)),    w = -2 dELL/ds,

    with w clamped at 0 (a likelihood that is not log-concave keeps P* positive definite)."""
    projection = marginals.projection  # [*b, M, N]
    weight = (-2.0 * gradient_s).clamp_min(0.0)  # w [*b, N]
    identity = torch.eye(projection.shape[-2], dtype=projection.dtype, device=projection.device)
    target_precision = identity + scale * (projection * weight.unsqueeze(-2)) @ projection.mT
    shifted = gradient_mu + weight * (mu - marginals.prior_mean)  # [*b, N]
    target_shift = scale * (projection @ shifted.unsqueeze(-1)).squeeze(-1)  # [*b, M]
    return target_precision, target_shift


def damped_step(
    precision: torch.Tensor,
    mean: torch.Tensor,
    target: tuple[torch.Tensor, torch.Tensor],
    step: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Move q(v)'s natural parameters (h, P) = (S^{-1} m, S^{-1}), given as P [*b, M, M] and
    m [*b, M], the fraction ``step`` of the way to ``target`` = (P*, h*): P' = (1 - step) P +
    step P*, h' = (1 - step) h + step h*. Returns (P', m' = P'^{-1} h', S' = P'^{-1})."""
    target_precision, target_shift = target
    new_precision = (1 - step) * precision + step * target_precision
    shift = (1 - step) * (precision @ mean.unsqueeze(-1)).squeeze(-1) + step * target_shift
    new_root = cholesky(new_precision, name="the natural-gradient step's precision")
    new_covariance = torch.cholesky_inverse(new_root)
    new_covariance = 0.5 * (new_covariance + new_covariance.mT)  # S' [*b, M, M]
    new_mean = torch.cholesky_solve(shift.unsqueeze(-1), new_root).squeeze(-1)  # [*b, M]
    return new_precision, new_mean, new_covariance


@torch.no_grad()
def stochastic_natural_step(
    marginals: Marginals,
    likelihood: Likelihood,
    y: torch.Tensor,
    mean: torch.Tensor,
    covariance: torch.Tensor,
    *,
    step: float,
    num_data: int,
    num_samples: int = NUM_SAMPLES,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One natural-gradient step of size ``step`` on q(v) = N(``mean`` [*b, M], ``covariance``
    [*b, M, M]) from a minibatch: the rows of ``marginals`` and their targets y [B] stand for
    ``num_data`` rows (the target of ``natural_target`` with scale N / B), so that the step is
    that of Hensman, Fusi & Lawrence (2013) and of GPyTorch's ``NGD`` optimiser with learning rate
    ``step``; no line search (the minibatch ELBO is noisy). Returns (m', S'). The expectation of
    a likelihood of several latent functions (softmax) is a Monte Carlo average over
    ``num_samples`` draws from ``generator``."""
    draws = monte_carlo_draws(likelihood, marginals, num_samples, generator)
    mu, s = marginals.of(mean, covariance)
    mu, s = mu.requires_grad_(True), s.requires_grad_(True)
    with torch.enable_grad():
        ell = expected_log_likelihood(likelihood, y, mu, s, draws)
        gradient_mu, gradient_s = torch.autograd.grad(ell, (mu, s))
    scale = num_data / marginals.projection.shape[-1]
    target = natural_target(marginals, mu.detach(), gradient_mu, gradient_s, scale)
    precision = torch.cholesky_inverse(cholesky(covariance, name="S (q(v)'s covariance)"))
    _, new_mean, new_covariance = damped_step(precision, mean, target, step)
    return new_mean, new_covariance
