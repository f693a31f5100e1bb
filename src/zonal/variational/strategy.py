"""A GPyTorch variational strategy for any inducing feature, with a fast path for diagonal Kuu.

With q(u) = N(m, S) and the feature covariances Kuu, Kuf (``zonal.features``), the approximate
posterior (seed 000 eq. 2, seed 002 eq. 19) is

    unwhitened:  mean = Kfu Kuu^{-1} m,     cov = Kff + A^T (S - Kuu) A,   A = Kuu^{-1} Kuf
    whitened:    u = L v, v ~ N(m, S):      mean = A^T m, cov = Kff + A^T (S - I) A,  A = L^{-1} Kuf

with L L^T = Kuu. For a diagonal Kuu (spherical-harmonic features) L = Kuu^{1/2} elementwise and
no cubic operation is done at all: the cost is O(M N) for the mean and O(M^2 N) for the variance.
The KL divergence is computed in closed form from the Cholesky root of S (O(M^2) for a diagonal
prior). Dense Kuu (activated features, inducing points) is factorised with adaptive jitter.
"""

from __future__ import annotations

import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.variational import _VariationalDistribution
from gpytorch.variational._variational_strategy import _VariationalStrategy
from linear_operator.operators import (
    DiagLinearOperator,
    LinearOperator,
    MatmulLinearOperator,
    RootLinearOperator,
    SumLinearOperator,
)

from zonal.features import InducingFeatures
from zonal.linalg import cholesky
from zonal.variational.root_difference import RootDifferenceLinearOperator, compact


class InterDomainVariationalStrategy(_VariationalStrategy):
    """q(f) from q(u) over inter-domain inducing variables (``zonal.features``).

    Args:
        model: the ``ApproximateGP`` that owns this strategy; its ``covar_module`` is the kernel
            and its optional ``mean_module`` the prior mean.
        features: an ``InducingFeatures`` instance (its parameters are trained with the model).
        variational_distribution: a GPyTorch variational distribution over M inducing variables.
        whiten: parametrise q over v = L^{-1} u (default True).
    """

    def __init__(
        self,
        model,
        features: InducingFeatures,
        variational_distribution: _VariationalDistribution,
        *,
        whiten: bool = True,
        jitter_val: float | None = None,
    ) -> None:
        if not isinstance(features, InducingFeatures):
            raise ValueError(f"features must be a zonal InducingFeatures, got {type(features)}")
        batch_shape = variational_distribution.batch_shape
        num_inducing = features.num_inducing
        shape = variational_distribution.shape()
        if shape[-1] != num_inducing:
            raise ValueError(
                f"the variational distribution has {shape[-1]} inducing variables but the "
                f"features have {num_inducing}"
            )
        # GPyTorch's base keeps "inducing_points"; inter-domain variables have none, so a
        # placeholder [*batch, M, 1] carries the batch shape (it is never read as locations).
        placeholder = torch.zeros(*batch_shape, num_inducing, 1, dtype=torch.float64)
        super().__init__(
            model,
            placeholder,
            variational_distribution,
            learn_inducing_locations=False,
            jitter_val=jitter_val,
        )
        self.features = features
        self.whiten = whiten

    # ------------------------------------------------------------------ covariances
    def _kernel(self):
        return self.model.covar_module

    def _kuu(self) -> torch.Tensor | DiagLinearOperator:
        return self.features.kuu(self._kernel())

    @property
    def prior_distribution(self) -> MultivariateNormal:
        """p(v) = N(0, I) when whitened, else p(u) = N(0, Kuu)."""
        batch_shape = self._variational_distribution.batch_shape
        num_inducing = self.features.num_inducing
        dtype = self._variational_distribution.variational_mean.dtype
        device = self._variational_distribution.variational_mean.device
        zeros = torch.zeros(*batch_shape, num_inducing, dtype=dtype, device=device)
        if self.whiten:
            return MultivariateNormal(zeros, DiagLinearOperator(torch.ones_like(zeros)))
        kuu = self._kuu()
        if isinstance(kuu, DiagLinearOperator):
            diagonal = kuu.diagonal().to(dtype).expand(*batch_shape, num_inducing)
            return MultivariateNormal(zeros, DiagLinearOperator(diagonal))
        kuu = kuu.to(dtype).expand(*batch_shape, num_inducing, num_inducing)
        return MultivariateNormal(zeros, kuu)

    def projection(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(A, B) [*b, M, N] for inputs x [*b, N, d]: B = L^{-1} Kuf and A = B (whitened) or
        Kuu^{-1} Kuf = L^{-T} B, so that Qff = Kfu Kuu^{-1} Kuf = B^T B.

        Batch dimensions along which x is only expanded (stride 0, as GPyTorch's ``DeepGPLayer``
        repeats a layer's input for each of its outputs) are computed once: the results have
        size 1 there and broadcast.
        """
        x = compact(x)
        kuu = self._kuu()
        kuf = self.features.kuf(self._kernel(), x)  # [*b, M, N]
        if isinstance(kuu, DiagLinearOperator):
            diagonal = kuu.diagonal().to(kuf.dtype)  # [*b, M]
            if (diagonal <= 0).any():
                raise ValueError("Kuu has non-positive diagonal entries (a zero eigenvalue level?)")
            whitened = kuf / diagonal.sqrt().unsqueeze(-1)
            return (whitened if self.whiten else kuf / diagonal.unsqueeze(-1)), whitened
        factor = cholesky(kuu.to(kuf.dtype), name="Kuu (inducing covariance)")  # [*b, M, M]
        whitened = torch.linalg.solve_triangular(factor, kuf, upper=False)  # L^{-1} Kuf
        if self.whiten:
            return whitened, whitened
        return torch.linalg.solve_triangular(factor.mT, whitened, upper=True), whitened

    # ------------------------------------------------------------------ conditional
    def forward(
        self,
        x: torch.Tensor,
        inducing_points: torch.Tensor,
        inducing_values: torch.Tensor,
        variational_inducing_covar: LinearOperator | None = None,
        diag: bool = True,
        **kwargs,
    ) -> MultivariateNormal:
        """q(f(x)) = N(A^T m + mu(x), Kff + A^T S A - B^T B) (A, B from ``projection``).

        With S = R R^T (R the Cholesky root that ``CholeskyVariationalDistribution`` stores),
        A^T S A = (R^T A)^T (R^T A): one M x M by M x N product instead of the two of S @ A.
        """
        projection, whitened = self.projection(x)  # [*b', M, N], *b' broadcasts to *b
        mean = (projection.mT @ inducing_values.unsqueeze(-1)).squeeze(-1)  # [*b, N]
        mean_module = getattr(self.model, "mean_module", None)
        if mean_module is not None:
            mean = mean + mean_module(x)
        batch_shape = torch.broadcast_shapes(x.shape[:-2], mean.shape[:-1])
        mean = mean.expand(*batch_shape, mean.shape[-1])  # [*b, N]
        terms = [self._kernel()(x)]  # Kff, lazy [*b, N, N]
        reduced = _root_times(variational_inducing_covar, projection)  # R^T A [*b', K, N]
        if reduced is None:  # S stores no root: A^T (S A)
            product = variational_inducing_covar.matmul(projection)  # [*b, M, N]
            product = product.expand(*batch_shape, *product.shape[-2:])
            terms.append(MatmulLinearOperator(projection.expand_as(product).mT, product))
            reduced = projection[..., :0, :]
        terms.append(RootDifferenceLinearOperator(reduced, whitened, batch_shape))  # A^T S A - Qff
        return MultivariateNormal(mean, SumLinearOperator(*terms))

    def kl_divergence(self) -> torch.Tensor:
        """KL(q(u) || p(u)) [*b], in closed form from the root of S."""
        q = self.variational_distribution
        prior = self.prior_distribution
        if not isinstance(prior.lazy_covariance_matrix, DiagLinearOperator):
            return super().kl_divergence()
        prior_variance = prior.lazy_covariance_matrix.diagonal()  # [*b, M]
        mean = q.mean  # [*b, M]
        root = q.lazy_covariance_matrix.root_decomposition().root.to_dense()  # [*b, M, K]
        trace = (root.pow(2).sum(-1) / prior_variance).sum(-1)
        mahalanobis = (mean.pow(2) / prior_variance).sum(-1)
        logdet_q = q.lazy_covariance_matrix.logdet()
        logdet_p = prior_variance.log().sum(-1)
        return 0.5 * (trace + mahalanobis - mean.shape[-1] + logdet_p - logdet_q)


def _root_times(covariance: LinearOperator | None, projection: torch.Tensor) -> torch.Tensor | None:
    """R^T A [*b, K, N] for S = R R^T when S stores its root (Cholesky or diagonal; K = 0 for
    S = None, a Delta q(u)), else None."""
    if covariance is None:
        return projection[..., :0, :]
    if isinstance(covariance, RootLinearOperator):  # includes CholLinearOperator
        return covariance.root.to_dense().mT @ projection
    if isinstance(covariance, DiagLinearOperator):
        return covariance.diagonal().sqrt().unsqueeze(-1) * projection
    return None
