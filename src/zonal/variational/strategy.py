r"""A GPyTorch variational strategy for any inducing feature, with a fast path for diagonal
:math:`K_{uu}`.

With :math:`q(u) = \mathcal{N}(m, S)` and the feature covariances :math:`K_{uu}`, :math:`K_{uf}`
(``zonal.features``), the approximate posterior (seed 000 eq. 2, seed 002 eq. 19) is

.. math::

    \text{unwhitened:} \quad & \text{mean} = K_{fu} K_{uu}^{-1} m, \qquad
    \text{cov} = K_{ff} + A^\top (S - K_{uu}) A, \qquad A = K_{uu}^{-1} K_{uf} \\
    \text{whitened:} \quad & u = L v, \ v \sim \mathcal{N}(m, S): \qquad \text{mean} = A^\top m,
    \qquad \text{cov} = K_{ff} + A^\top (S - I) A, \qquad A = L^{-1} K_{uf}

with :math:`L L^\top = K_{uu}`. For a diagonal :math:`K_{uu}` (spherical-harmonic features)
:math:`L = K_{uu}^{1/2}` elementwise and no cubic operation is done at all: the cost is
:math:`O(M N)` for the mean and :math:`O(M^2 N)` for the variance. The KL divergence is computed in
closed form from the Cholesky root of :math:`S` (:math:`O(M^2)` for a diagonal prior). Dense
:math:`K_{uu}` (activated features, inducing points) is factorised with adaptive jitter.

The strategy is the one owner of the conditional maths in zonal: the :math:`K_{uu}` root
(``kuu_root``), the map between whitened and unwhitened coordinates (``to_whitened``,
``to_unwhitened``), the weights :math:`B` of the posterior mean :math:`K_{fu} B`
(``inducing_weights`` / ``set_inducing_weights``: an activated layer's output weights), setting
:math:`q(u)` (``set_variational``, ``set_variational_scale``; ``current_q`` reads it fresh) and the
Titsias optimum for a Gaussian likelihood (``set_optimal_variational_distribution``). Supported
variational families: ``zonal.variational.families.SUPPORTED_FAMILIES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from gpytorch.distributions import Delta, MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.models import ApproximateGP
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
from zonal.linalg import NotPositiveDefiniteError, cholesky
from zonal.variational.families import check_family, parameter_like, write_gaussian
from zonal.variational.root_difference import RootDifferenceLinearOperator, compact


class InterDomainVariationalStrategy(_VariationalStrategy):
    r""":math:`q(f)` from :math:`q(u)` over inter-domain inducing variables (``zonal.features``).

    Args:
        model: the ``ApproximateGP`` that owns this strategy; its ``covar_module`` is the kernel
            and its optional ``mean_module`` the prior mean.
        features: an ``InducingFeatures`` instance (its parameters are trained with the model).
        variational_distribution: a GPyTorch variational distribution over :math:`M` inducing
            variables.
        whiten: parametrise :math:`q` over :math:`v = L^{-1} u` (default True).
    """

    def __init__(
        self,
        model: ApproximateGP,
        features: InducingFeatures,
        variational_distribution: _VariationalDistribution,
        *,
        whiten: bool = True,
        jitter_val: float | None = None,
    ) -> None:
        if not isinstance(features, InducingFeatures):
            raise ValueError(f"features must be a zonal InducingFeatures, got {type(features)}")
        check_family(variational_distribution)
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
        reference = parameter_like(variational_distribution)
        placeholder = reference.new_zeros(*batch_shape, num_inducing, 1)
        super().__init__(
            model,
            placeholder,
            variational_distribution,
            learn_inducing_locations=False,
            jitter_val=jitter_val,
        )
        self.features = features
        self.whiten = whiten

    #: (inputs, (A, B)) computed within ``shared_projection``; None outside it (a class default,
    #: so that a strategy pickled before it existed loads too)
    _shared: list[tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]] | None = None

    def _apply(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``.to`` / ``.cuda`` / ``.double``: also drop GPyTorch's cached q(u), which would keep
        the old dtype and device."""
        self._clear_cache()
        return super()._apply(fn, *args, **kwargs)

    # ------------------------------------------------------------------ covariances
    def _kernel(self) -> Kernel:
        return self.model.covar_module

    def _kuu(self) -> torch.Tensor | DiagLinearOperator:
        kuu = self.features.kuu(self._kernel())
        if isinstance(kuu, DiagLinearOperator):
            diagonal = kuu.diagonal()
            if not torch.isfinite(diagonal).all() or (diagonal <= 0).any():
                raise NotPositiveDefiniteError(
                    "Kuu has non-positive or infinite diagonal entries (a level whose kernel "
                    "eigenvalue is zero gives 1 / 0: build the features with kernel=...)"
                )
        return kuu

    def kuu_root(self) -> torch.Tensor | DiagLinearOperator:
        r""":math:`L` with :math:`L L^\top = K_{uu}` [*b, M, M]: :math:`K_{uu}^{1/2}` (a
        ``DiagLinearOperator``) for diagonal :math:`K_{uu}`, else the lower Cholesky factor
        (adaptive jitter, ``NotPositiveDefiniteError`` if none)."""
        kuu = self._kuu()
        if isinstance(kuu, DiagLinearOperator):
            return DiagLinearOperator(kuu.diagonal().sqrt())
        return cholesky(kuu, name="Kuu (inducing covariance)")

    def to_unwhitened(
        self, mean: torch.Tensor, covariance: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        r""":math:`(L m, L S L^\top)`: a :math:`q` over whitened :math:`v = L^{-1} u` [*b, M],
        [*b, M, M] as a :math:`q` over :math:`u`."""
        root = _dense(self.kuu_root()).to(mean)  # [*b, M, M]
        mean = (root @ mean.unsqueeze(-1)).squeeze(-1)
        return mean, None if covariance is None else root @ covariance @ root.mT

    def to_whitened(
        self, mean: torch.Tensor, covariance: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        r""":math:`(L^{-1} m, L^{-1} S L^{-\top})`: a :math:`q` over :math:`u` as a :math:`q` over
        :math:`v = L^{-1} u`."""
        root = _dense(self.kuu_root()).to(mean)  # [*b, M, M]
        mean = torch.linalg.solve_triangular(root, mean.unsqueeze(-1), upper=False).squeeze(-1)
        if covariance is None:
            return mean, None
        half = torch.linalg.solve_triangular(root, covariance, upper=False)  # L^{-1} S
        return mean, torch.linalg.solve_triangular(root, half.mT, upper=False)  # L^{-1} S L^{-T}

    @property
    def prior_distribution(self) -> MultivariateNormal:
        r""":math:`p(v) = \mathcal{N}(0, I)` when whitened, else
        :math:`p(u) = \mathcal{N}(0, K_{uu})`."""
        batch_shape = self._variational_distribution.batch_shape
        num_inducing = self.features.num_inducing
        reference = parameter_like(self._variational_distribution)
        dtype = reference.dtype
        zeros = reference.new_zeros(*batch_shape, num_inducing)
        if self.whiten:
            return MultivariateNormal(zeros, DiagLinearOperator(torch.ones_like(zeros)))
        kuu = self._kuu()
        if isinstance(kuu, DiagLinearOperator):
            diagonal = kuu.diagonal().to(dtype).expand(*batch_shape, num_inducing)
            return MultivariateNormal(zeros, DiagLinearOperator(diagonal))
        kuu = kuu.to(dtype).expand(*batch_shape, num_inducing, num_inducing)
        return MultivariateNormal(zeros, kuu)

    @property
    def shares_projection(self) -> bool:
        """Whether ``shared_projection`` is active (its callers then build :math:`B`'s graph)."""
        return self._shared is not None

    @contextmanager
    def shared_projection(self) -> Iterator[None]:
        """Within this context ``projection`` computes :math:`(A, B)` once per distinct input and
        hands the same tensors to every later call on equal inputs (their values compared,
        whatever their batch dimensions of size 1), with the autograd graph to the
        hyperparameters kept even when the first call came under ``torch.no_grad``. For one
        training step that reads :math:`B` twice at the same hyperparameters: the natural-gradient
        step on :math:`q(u)` and the ELBO's forward after it (``zonal.models.training.fit_svgp``),
        which :math:`B` does not depend on. The results are forgotten when the context ends; the
        hyperparameters must not change within it."""
        if self.shares_projection:
            raise RuntimeError("shared_projection is already active on this strategy")
        self._shared = []
        try:
            yield
        finally:
            self._shared = None

    def projection(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r""":math:`(A, B)` [*b, M, N] for inputs :math:`x` [*b, N, d]: :math:`B = L^{-1} K_{uf}` and
        :math:`A = B` (whitened) or :math:`K_{uu}^{-1} K_{uf} = L^{-\top} B`, so that
        :math:`Q_{ff} = K_{fu} K_{uu}^{-1} K_{uf} = B^\top B`.

        Batch dimensions along which :math:`x` is only expanded (stride 0, as GPyTorch's
        ``DeepGPLayer`` repeats a layer's input for each of its outputs) are computed once: the
        results have size 1 there and broadcast. Within ``shared_projection`` equal inputs share
        one result.
        """
        x = compact(x)
        if self._shared is None:
            return self._projection(x)
        rows = x.reshape(-1, *x.shape[-2:]) if all(size == 1 for size in x.shape[:-2]) else None
        for inputs, result in self._shared:
            if rows is not None and inputs.shape == rows.shape and torch.equal(inputs, rows):
                return result
        with torch.enable_grad():  # the ELBO's backward reads it too
            result = self._projection(x)
        if rows is not None:
            self._shared.append((rows, result))
        return result

    def _projection(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``projection`` for compacted inputs x [*b, N, d], computed."""
        kuu = self._kuu()
        kuf = self.features.kuf(self._kernel(), x)  # [*b, M, N]
        if isinstance(kuu, DiagLinearOperator):
            diagonal = kuu.diagonal().to(kuf.dtype)  # [*b, M]
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
        **kwargs: Any,
    ) -> MultivariateNormal:
        r""":math:`q(f(x)) = \mathcal{N}(A^\top m + \mu(x), K_{ff} + A^\top S A - B^\top B)`
        (:math:`A`, :math:`B` from ``projection``).

        With :math:`S = R R^\top` (:math:`R` the Cholesky root that
        ``CholeskyVariationalDistribution`` stores),
        :math:`A^\top S A = (R^\top A)^\top (R^\top A)`: one :math:`M \times M` by
        :math:`M \times N` product instead of the two of :math:`S A`.
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
            assert variational_inducing_covar is not None  # None gives an empty root
            product = variational_inducing_covar.matmul(projection)  # [*b, M, N]
            product = product.expand(*batch_shape, *product.shape[-2:])
            terms.append(MatmulLinearOperator(projection.expand_as(product).mT, product))
            reduced = projection[..., :0, :]
        terms.append(RootDifferenceLinearOperator(reduced, whitened, batch_shape))  # A^T S A - Qff
        return MultivariateNormal(mean, SumLinearOperator(*terms))

    def kl_divergence(self) -> torch.Tensor:
        r""":math:`\operatorname{KL}(q(u) \,\|\, p(u))` [*b], in closed form from the root of
        :math:`S` (:math:`-\log p(m)` for a Delta :math:`q`)."""
        q = self.variational_distribution
        prior = self.prior_distribution
        if isinstance(q, Delta) or not isinstance(prior.lazy_covariance_matrix, DiagLinearOperator):
            return super().kl_divergence()
        prior_variance = prior.lazy_covariance_matrix.diagonal()  # [*b, M]
        mean = q.mean  # [*b, M]
        root = q.lazy_covariance_matrix.root_decomposition().root.to_dense()  # [*b, M, K]
        trace = (root.pow(2).sum(-1) / prior_variance).sum(-1)
        mahalanobis = (mean.pow(2) / prior_variance).sum(-1)
        logdet_q = q.lazy_covariance_matrix.logdet()
        logdet_p = prior_variance.log().sum(-1)
        return 0.5 * (trace + mahalanobis - mean.shape[-1] + logdet_p - logdet_q)

    # ------------------------------------------------------------------ setting q(u)
    def _stored(
        self, mean: torch.Tensor, covariance: torch.Tensor | None, whitened: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A q given in whitened (v) or unwhitened (u) coordinates, in the strategy's own."""
        if whitened == self.whiten:
            return mean, covariance
        convert = self.to_unwhitened if whitened else self.to_whitened
        return convert(mean, covariance)

    @torch.no_grad()
    def set_variational(
        self, mean: torch.Tensor, covariance: torch.Tensor | None, *, whitened: bool
    ) -> None:
        r"""Set :math:`q = \mathcal{N}(\mathtt{mean}, \mathtt{covariance})` (mean [*b, M],
        covariance [*b, M, M]) given over :math:`v = L^{-1} u` (``whitened``) or over :math:`u`,
        whatever the strategy's own parametrisation, and mark :math:`q` as initialised (else
        GPyTorch resets it to the prior on the next call). ``covariance`` None: a Delta
        :math:`q`."""
        mean, covariance = self._stored(mean, covariance, whitened)
        write_gaussian(self._variational_distribution, mean, covariance)
        self._mark_set()

    @torch.no_grad()
    def set_variational_scale(self, scale: float, *, zero_mean: bool = False) -> None:
        r""":math:`q` covariance :math:`= \mathtt{scale}^2 I` in the strategy's own coordinates
        (whitened: relative to the prior); the mean is kept, or set to zero with ``zero_mean``."""
        distribution = self._variational_distribution
        mean = self.current_q().mean.detach()  # [*b, M]
        if zero_mean:
            mean = torch.zeros_like(mean)
        identity = torch.eye(mean.shape[-1], dtype=mean.dtype, device=mean.device)
        covariance = (scale**2 * identity).expand(*mean.shape, mean.shape[-1])
        write_gaussian(distribution, mean, covariance)
        self._mark_set()

    def current_q(self) -> MultivariateNormal | Delta:
        """:math:`q(u)` (or :math:`q(v)` when whitened) from the parameters as they are now:
        GPyTorch memoises ``variational_distribution`` and refreshes it only on a forward call in
        training mode, so after an optimiser step or a write it may be the previous :math:`q`."""
        return self._variational_distribution()

    def _mark_set(self) -> None:
        """q was written: mark it initialised (else GPyTorch resets it to the prior on the next
        call) and drop GPyTorch's memoised copy of the old q."""
        self.variational_params_initialized.fill_(1)
        self._clear_cache()

    def inducing_weights(self) -> torch.Tensor:
        r""":math:`B` [*b, M] with posterior mean :math:`K_{fu} B + \mu(x)` (seed 000 eq. 3):
        :math:`L^{-\top} m` whitened, :math:`K_{uu}^{-1} m` unwhitened. For activated features
        :math:`B` is the network's output weight."""
        mean = self.current_q().mean  # [*b, M]
        root = _dense(self.kuu_root()).to(mean)  # [*b, M, M]
        if self.whiten:
            solved = torch.linalg.solve_triangular(root.mT, mean.unsqueeze(-1), upper=True)
        else:
            solved = torch.cholesky_solve(mean.unsqueeze(-1), root)
        return solved.squeeze(-1)

    @torch.no_grad()
    def set_inducing_weights(self, weights: torch.Tensor) -> None:
        r"""Set the variational mean so that ``inducing_weights()`` is ``weights`` [*b, M]
        (:math:`m = L^\top B` whitened, :math:`K_{uu} B` unwhitened); the covariance is kept."""
        root = _dense(self.kuu_root()).to(weights)  # [*b, M, M]
        mean = root.mT @ weights.unsqueeze(-1)  # L^T B [*b, M, 1]
        if not self.whiten:
            mean = root @ mean  # Kuu B
        current = self.current_q()
        covariance = None if isinstance(current, Delta) else current.covariance_matrix.detach()
        write_gaussian(self._variational_distribution, mean.squeeze(-1), covariance)
        self._mark_set()

    @torch.no_grad()
    def set_optimal_variational_distribution(
        self, x: torch.Tensor, y: torch.Tensor, noise: float | torch.Tensor
    ) -> None:
        r"""Set :math:`q(u)` to the optimum for a Gaussian likelihood (Titsias, 2009), one output.

        ``x`` [N, d] are the kernel's inputs (already lifted), ``y`` [N] the targets less the prior
        mean. Computed in whitened coordinates :math:`v = L^{-1} u`, where it stays well
        conditioned even when :math:`K_{uu}` is (nearly) singular:

        .. math::

            A = L^{-1} K_{uf}, \qquad S_v = (I + A A^\top / s^2)^{-1}, \qquad m_v = S_v A y / s^2.

        At this :math:`q` the ELBO equals the collapsed bound (``zonal.models.SGPR.elbo``).
        """
        if self._variational_distribution.batch_shape != torch.Size():
            raise ValueError("the closed-form optimum is implemented for a single output")
        _, projection = self.projection(x)  # A = L^{-1} Kuf [M, N]
        y = y.to(projection).reshape(-1)  # [N]
        noise = torch.as_tensor(noise).to(projection)
        identity = torch.eye(len(projection), dtype=projection.dtype, device=projection.device)
        precision = identity + projection @ projection.mT / noise  # I + A A^T / s^2
        covariance = torch.cholesky_inverse(cholesky(precision, name="I + A A^T / noise"))
        covariance = 0.5 * (covariance + covariance.mT)  # S_v [M, M]
        mean = covariance @ (projection @ y) / noise  # m_v [M]
        self.set_variational(mean, covariance, whitened=True)


def _dense(matrix: torch.Tensor | LinearOperator) -> torch.Tensor:
    return matrix.to_dense() if isinstance(matrix, LinearOperator) else matrix


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
