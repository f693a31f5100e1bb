r"""Online variational conditioning: :math:`q(u)` updated by new Gaussian observations, no refit.

Maddox, Stanton and Wilson (2021), "Conditioning sparse variational Gaussian processes for online
decision-making" (NeurIPS), sec. 3: with the inducing features and hyperparameters kept, the
variational posterior that accounts for new rows :math:`(X_n, y_n)` under a Gaussian likelihood is
the current :math:`q(u) = \mathcal{N}(m, S)` times the sparse likelihood of the new rows,

.. math::

    q_\text{new}(u) \propto q(u)\, \mathcal{N}(y_n \mid A^\top u + \mu(X_n), N), \qquad
    N = \operatorname{diag}(\mathrm{noise}_i),

where :math:`A` [M, q] is the strategy's projection at the new rows
(``InterDomainVariationalStrategy.
projection``: :math:`A = L^{-1} K_{uf}` whitened, :math:`K_{uu}^{-1} K_{uf}` otherwise, so that the
conditional mean is :math:`A^\top m` in the strategy's own coordinates). It is Gaussian, a Kalman
update with the :math:`q \times q` innovation covariance :math:`C = A^\top S A + N = L_C L_C^\top`
and :math:`G = L_C^{-1} A^\top S` [q, M]:

.. math::

    m_\text{new} = m + G^\top L_C^{-1} (y_n - \mu(X_n) - A^\top m), \qquad
    S_\text{new} = S - G^\top G.

With :math:`S = R R^\top` the conditional at test inputs (projection :math:`A_\ast`, whitened
:math:`B_\ast`, seed 000 eq. 2) is

.. math::

    \text{mean} &= A_\ast^\top m_\text{new} + \mu(x_\ast), \\
    \text{cov} &= K_{ff} + (R^\top A_\ast)^\top (R^\top A_\ast) - B_\ast^\top B_\ast
    - (G A_\ast)^\top (G A_\ast),

so :math:`S_\text{new}` is never formed: the update costs :math:`O(q M^2 + q^3)` per batch of new
inputs, and the covariance stays the lazy ``RootDifferenceLinearOperator`` with :math:`G A_\ast`
appended to the negative root. When :math:`q(u)` is the Titsias optimum on rows :math:`D`
(``set_optimal_variational_distribution``), :math:`q_\text{new}` is the Titsias optimum on
:math:`D` and the new rows together: the product of Gaussian likelihoods is exact.

Batches: new inputs [*b, q, d] give :math:`G` [*b, q, M]; observations [*F, *b, q] (fantasies in
front) give :math:`m_\text{new}` [*F, *b, M], and the covariance is shared by the fantasies.

Updates compose: a :math:`q` already updated (:math:`S' = R R^\top - G'^\top G'`) is updated again
with :math:`S'` in place of :math:`S` (:math:`S' A = R R^\top A - G'^\top (G' A)`), and the gains
stack, :math:`S'' = R R^\top - G'^\top G' - G^\top G`, so a fantasy model can itself be fantasised
(multi-step look-ahead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch
from gpytorch.distributions import Delta, MultivariateNormal
from linear_operator.operators import DiagLinearOperator, RootLinearOperator, SumLinearOperator

from zonal.linalg import cholesky
from zonal.variational.root_difference import RootDifferenceLinearOperator

if TYPE_CHECKING:
    from zonal.variational.strategy import InterDomainVariationalStrategy


class OnlineUpdate(NamedTuple):
    """q_new(u) (module docstring): mean [*F, *b, M]; gain G [*b, q, M] with S_new = S - G^T G."""

    mean: torch.Tensor
    gain: torch.Tensor


def _prior_mean(strategy: InterDomainVariationalStrategy, x: torch.Tensor) -> torch.Tensor | None:
    """mu(x) [*b, N] of the model that owns ``strategy`` (None for a zero mean)."""
    mean_module = getattr(strategy.model, "mean_module", None)
    return None if mean_module is None else mean_module(x)


def _q_root(strategy: InterDomainVariationalStrategy) -> tuple[torch.Tensor, torch.Tensor]:
    """(m [*, M], R [*, M, K]) of the strategy's current q = N(m, R R^T); a point mass is refused."""
    q = strategy.current_q()
    if isinstance(q, Delta):
        raise ValueError(
            "online conditioning needs a Gaussian q(u); a DeltaVariationalDistribution (MAP "
            "inducing values) has no covariance to update"
        )
    covariance = q.lazy_covariance_matrix
    if isinstance(covariance, RootLinearOperator):  # Cholesky family: the stored factor
        return q.mean, covariance.root.to_dense()
    if isinstance(covariance, DiagLinearOperator):  # mean field
        return q.mean, torch.diag_embed(covariance.diagonal().sqrt())
    return q.mean, cholesky(covariance.to_dense(), name="variational covariance S")


def online_update(
    strategy: InterDomainVariationalStrategy,
    x: torch.Tensor,
    y: torch.Tensor,
    noise: torch.Tensor,
    previous: OnlineUpdate | None = None,
) -> OnlineUpdate:
    """q_new(u) for the new rows: kernel inputs x [*b, q, d] (already lifted), observations
    y [*F, *b, q] and noise variances [*b, q] (module docstring); ``previous``: the update of
    an already conditioned q, composed with this one."""
    mean, root = _q_root(strategy)  # [M], [M, K]
    projection, _ = strategy.projection(x)  # A [*b, M, q]
    projection = projection.expand(*x.shape[:-2], *projection.shape[-2:])
    reduced = root.mT @ projection  # R^T A [*b, K, q]
    covariance_times = root @ reduced  # S A [*b, M, q]
    innovation = reduced.mT @ reduced + torch.diag_embed(noise)  # A^T S A + N [*b, q, q]
    if previous is not None:  # S' = S - G'^T G'
        mean = previous.mean  # [*F', *b', M]
        earlier = previous.gain @ projection  # G' A [*B, q', q]
        covariance_times = covariance_times - previous.gain.mT @ earlier
        innovation = innovation - earlier.mT @ earlier
    factor = cholesky(innovation, name="innovation covariance A^T S A + noise")  # L_C [*b, q, q]
    gain = torch.linalg.solve_triangular(factor, covariance_times.mT, upper=False)  # G [*b, q, M]
    residual = y - (projection.mT @ mean.unsqueeze(-1)).squeeze(-1)  # [*F, *b, q]
    prior = _prior_mean(strategy, x)
    if prior is not None:
        residual = residual - prior
    whitened = torch.linalg.solve_triangular(
        factor, residual.unsqueeze(-1), upper=False
    )  # L_C^{-1} r [*F, *b, q, 1]
    new_mean = mean + (gain.mT @ whitened).squeeze(-1)  # [*F, *b, M]
    if previous is not None:  # the gains stack: S'' = S - G'^T G' - G^T G
        batch = torch.broadcast_shapes(previous.gain.shape[:-2], gain.shape[:-2])
        gains = [previous.gain, gain]
        gain = torch.cat([g.expand(*batch, *g.shape[-2:]) for g in gains], dim=-2)
    return OnlineUpdate(new_mean, gain)


def conditioned_marginal(
    strategy: InterDomainVariationalStrategy, update: OnlineUpdate, x: torch.Tensor
) -> MultivariateNormal:
    """q_new(f(x)) for kernel inputs x [*b', N, d] (module docstring): batch the broadcast of
    *b' with the update's [*F, *b], event [N]."""
    _, root = _q_root(strategy)  # [M, K]
    projection, whitened = strategy.projection(x)  # A*, B* [*b', M, N]
    mean = (projection.mT @ update.mean.unsqueeze(-1)).squeeze(-1)  # [*B, N]
    prior = _prior_mean(strategy, x)
    if prior is not None:
        mean = mean + prior
    corrected = update.gain @ projection  # G A* [*B, q, N]
    batch_shape = torch.broadcast_shapes(mean.shape[:-1], corrected.shape[:-2], x.shape[:-2])
    mean = mean.expand(*batch_shape, mean.shape[-1])
    minus = torch.cat(
        [
            whitened.expand(*batch_shape, *whitened.shape[-2:]),
            corrected.expand(*batch_shape, *corrected.shape[-2:]),
        ],
        dim=-2,
    )  # [*B, M + q, N]
    correction = RootDifferenceLinearOperator(root.mT @ projection, minus, batch_shape)
    prior_covariance = strategy.model.covar_module(x)
    prior_covariance = prior_covariance.expand(*batch_shape, *prior_covariance.shape[-2:])
    return MultivariateNormal(mean, SumLinearOperator(prior_covariance, correction))
