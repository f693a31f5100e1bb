r"""Exact GP regression with a zonal kernel: the reference the sparse models approximate.

With training rows :math:`X` [N, D], targets :math:`y` [N], a zonal kernel :math:`k` on the input
map's lifted inputs (``SphereEmbedding``: :math:`[s \odot x, b]`, the kernel 1-homogeneous,
:math:`k(x, x') = r r' k_S(z \cdot z')`, seed 000 sec. 4.1; per-input scales :math:`s` are the
zonal kernels' counterpart of ARD), a constant prior mean :math:`c` and Gaussian noise
:math:`\sigma^2`, the posterior at :math:`X_\ast` is (Rasmussen & Williams 2006, eqs. 2.25-2.26)

.. math::

    \text{mean} = c + K_{\ast N} K_y^{-1} (y - c), \qquad
    \text{cov} = K_{\ast\ast} - K_{\ast N} K_y^{-1} K_{N \ast}, \qquad
    K_y = K_{NN} + \sigma^2 I,

and the log marginal likelihood (eq. 2.30) that trains :math:`k`'s hyperparameters, the input
map, :math:`c` and :math:`\sigma^2` is

.. math::

    \log p(y) = -\tfrac{1}{2} (y - c)^\top K_y^{-1} (y - c) - \tfrac{1}{2} \log \lvert K_y \rvert
    - \tfrac{N}{2} \log 2 \pi.

With :math:`L L^\top = K_y` (``zonal.linalg.cholesky``: adaptive jitter, a named error when
:math:`K_y` is not positive definite) and :math:`a = L^{-1} (y - c)`,
:math:`V = L^{-1} K_{N \ast}`: :math:`\text{mean} = c + V^\top a`,
:math:`\text{cov} = K_{\ast\ast} - V^\top V`. :math:`O(N^3)` time and :math:`O(N^2)` memory: for
tables of a few thousand rows, where it is the most accurate of zonal's GPs on a kernel's own
terms (no feature truncation, no variational gap).

Conditioning on new rows :math:`X_n` [*b, q, D], :math:`Y_n` [*F, *b, q]
(``condition_on_observations``, ``fantasize``) keeps the factor of the stored rows and extends it
by blocks: :math:`B = L^{-1} K_{Nn}`,
:math:`C C^\top = K_{nn} + \operatorname{diag}(\text{noise}) - B^\top B`,
:math:`a_n = C^{-1} (Y_n - c - B^\top a)`; then at :math:`X_\ast`, with
:math:`V = L^{-1} K_{N \ast}` and :math:`W = C^{-1} (K_{n \ast} - B^\top V)`,

.. math::

    \text{mean} = c + V^\top a + W^\top a_n, \qquad
    \text{cov} = K_{\ast\ast} - V^\top V - W^\top W,

which is the posterior of the model fitted on all rows at the same hyperparameters.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import GaussianLikelihood
from linear_operator.operators import SumLinearOperator

from zonal._validation import check_finite
from zonal.geometry import InputMap, SphereEmbedding
from zonal.linalg import NotPositiveDefiniteError, cholesky, gaussian_log_density
from zonal.models.conditioning import conditioned_copy
from zonal.models.contract import ZonalModel
from zonal.models.hyperpriors import Hyperpriors, registered_log_prior
from zonal.models.lbfgs import maximise_by_lbfgs
from zonal.models.svgp import check_kernel_reads_map
from zonal.variational.root_difference import RootDifferenceLinearOperator

_TRAINING_GRAM = "K + noise I of the exact GP's training rows"


class ExactZonalGP(ZonalModel):
    """Exact GP regression with a zonal kernel on an input map (module docstring).

    Args:
        kernel: a zonal kernel (optionally in a ``ScaleKernel``) on the input map's lifted inputs:
            homogeneous for a ``SphereEmbedding``, on the sphere for ``OnSphere``.
        x: training inputs [N, D] (float64 by default; the model takes their dtype and device).
        y: training targets [N].
        input_map: ``SphereEmbedding(1.0)`` by default; one with input scales learns them (ARD).
        noise: the Gaussian noise variance to start from.
    """

    train_x: torch.Tensor  # buffers [N, D], [N]
    train_y: torch.Tensor
    #: a conditioned model's new rows: X [*b_c, q', D], Y [*F, *b_c, q'], noise [*b_c, q']
    _new_rows: tuple[torch.Tensor, torch.Tensor, torch.Tensor]

    def __init__(
        self,
        kernel: Kernel,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        input_map: InputMap | None = None,
        noise: float = 0.1,
    ) -> None:
        super().__init__()
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[-1] < 1:
            raise ValueError(f"x must be a tensor [N, D], got {getattr(x, 'shape', type(x))}")
        y = torch.as_tensor(y, dtype=x.dtype, device=x.device).reshape(-1)
        if len(y) != len(x):
            raise ValueError(f"x has {len(x)} rows but y has {len(y)}")
        check_finite(x, "x")
        check_finite(y, "y")
        self.input_dim = x.shape[-1]
        self.input_map = SphereEmbedding(1.0) if input_map is None else input_map
        check_kernel_reads_map(kernel, self.input_map)
        self.kernel = kernel.to(device=x.device, dtype=x.dtype)
        self.input_map.to(device=x.device, dtype=x.dtype)
        self.likelihood = GaussianLikelihood().to(device=x.device, dtype=x.dtype)
        self.likelihood.noise = torch.tensor(noise, dtype=x.dtype, device=x.device)
        self.constant = torch.nn.Parameter(torch.zeros((), dtype=x.dtype, device=x.device))
        self.register_buffer("train_x", x.clone())
        self.register_buffer("train_y", y.clone())
        self._cache: tuple[list[torch.Tensor], torch.Tensor, torch.Tensor] | None = None

    # ------------------------------------------------------------------ data and training
    @property
    def noise(self) -> torch.Tensor:
        r""":math:`\sigma^2`, a scalar tensor."""
        return self.likelihood.noise.reshape(())

    def set_training_data(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Replace the training rows (:math:`x` [N, D], :math:`y` [N]) at the current
        hyperparameters: the posterior becomes that of the new rows (the factor is recomputed when
        next needed)."""
        x = self.check_inputs(x)
        if x.dim() != 2:
            raise ValueError(f"x must be a tensor [N, D], got {tuple(x.shape)}")
        y = torch.as_tensor(y, dtype=x.dtype, device=x.device).reshape(-1)
        if len(y) != len(x):
            raise ValueError(f"x has {len(x)} rows but y has {len(y)}")
        check_finite(y, "y")
        self.train_x, self.train_y = x.clone(), y.clone()
        self._cache = None

    def lift(self, x: torch.Tensor) -> torch.Tensor:
        """Check :math:`x` [..., N, D] and map it to the kernel's inputs [..., N, ambient_dim]."""
        return self.input_map.lift(self.check_inputs(x))

    def _covariance(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """k(a, b) [*B, n, m], dense, for inputs a [*b1, n, D] and b [*b2, m, D]."""
        return self.kernel(self.input_map.lift(a), self.input_map.lift(b)).to_dense()

    def _training_gram(self) -> torch.Tensor:
        """K_y = K_NN + sigma^2 I [N, N] of the stored rows at the current parameters."""
        gram = self._covariance(self.train_x, self.train_x)  # [N, N]
        return gram + self.noise * torch.eye(len(gram), dtype=gram.dtype, device=gram.device)

    def _train_factor(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(L [N, N], a = L^{-1} (y - c) [N]) of the stored rows at the current parameters."""
        factor = cholesky(self._training_gram(), name=_TRAINING_GRAM)
        residual = (self.train_y - self.constant).unsqueeze(-1)  # [N, 1]
        weights = torch.linalg.solve_triangular(factor, residual, upper=False).squeeze(-1)
        return factor, weights

    def _cached_factor(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``_train_factor``: in training mode computed afresh (gradients reach the parameters);
        in evaluation mode kept without a graph (as GPyTorch's exact GPs keep theirs) and
        computed again only when a parameter or buffer has changed, so that BoTorch's
        acquisition optimisation factors K_y once. A change is told by the tensors' values
        against a copy kept with the factor: GPyTorch's setters (``likelihood.noise = ...``,
        ``outputscale = ...``) write through ``.data``, which leaves identities and version
        counters as they were."""
        if self.training:
            return self._train_factor()
        tensors = [t.detach() for t in (*self.parameters(), *self.buffers())]
        if self._cache is None or not _same_values(self._cache[0], tensors):
            with torch.no_grad():
                factor, weights = self._train_factor()
            self._cache = ([t.clone() for t in tensors], factor, weights)
        return self._cache[1], self._cache[2]

    def marginal_log_likelihood(self) -> torch.Tensor:
        r""":math:`\log p(y)` of the stored rows (module docstring), a scalar tensor with gradients
        (the closed-form gradient of ``zonal.linalg.gaussian_log_density``)."""
        return gaussian_log_density(
            self._training_gram(), self.train_y - self.constant, name=_TRAINING_GRAM
        )

    def leave_one_out_log_density(self) -> torch.Tensor:
        r""":math:`\log p(y_i \mid y_{-i})` [N] of each stored row under the posterior of the others
        at the current hyperparameters (Rasmussen & Williams 2006, eqs. 5.10-5.12): with
        :math:`a = K_y^{-1} (y - c)`,

        .. math::

            \mu_i = y_i - a_i / [K_y^{-1}]_{ii}, \qquad \sigma_i^2 = 1 / [K_y^{-1}]_{ii},

        from one factor of :math:`K_y` (:math:`O(N^3)`, no refits; in evaluation mode the factor
        the predictions keep, ``_cached_factor``). Without gradients."""
        with torch.no_grad():
            factor, _ = self._cached_factor()  # L [N, N]
            inverse = torch.cholesky_inverse(factor)  # K_y^{-1} [N, N]
            weights = inverse @ (self.train_y - self.constant)  # a [N]
            precision = torch.diagonal(inverse)  # 1 / sigma_i^2 [N]
            residual = weights / precision  # y_i - mu_i [N]
            return 0.5 * (precision.log() - precision * residual**2 - math.log(2 * math.pi))

    def log_prior(self, priors: Hyperpriors) -> torch.Tensor:
        r""":math:`\log p(\theta)` under ``priors`` (``zonal.models.hyperpriors``) of the learned
        input scales (none when the input map learns none), :math:`\sigma^2` and the mean prior
        variance of :math:`f` over the training rows, a scalar tensor with gradients."""
        scales = None
        if isinstance(self.input_map, SphereEmbedding) and self.input_map.learn_input_scales:
            scales = self.input_map.input_scales  # [D]
        variance = None
        if priors.signal_variance is not None:
            lifted = self.input_map.lift(self.train_x)  # [N, D + 1]
            variance = self.kernel(lifted, diag=True).mean()  # mean_i k(x_i, x_i)
        return priors.log_density(scales, self.noise, variance)

    def fit(
        self,
        max_iter: int = 100,
        lr: float = 1.0,
        *,
        deadline: float | None = None,
        priors: Hyperpriors | None = None,
    ) -> list[float]:
        r"""Maximise the marginal likelihood per row over every parameter (the kernel's, the input
        map's, :math:`c` and :math:`\sigma^2`) by L-BFGS with a strong Wolfe line search; the trace
        of :math:`\log p(y) / N` per evaluation. With ``priors`` the fit is type-II MAP: it
        maximises :math:`(\log p(y) + \log p(\theta)) / N` (``log_prior``), and the trace is that.
        GPyTorch priors registered on the kernel or the likelihood (``lengthscale_prior=``, ...)
        add their log densities as ``ExactMarginalLogLikelihood`` adds them
        (``registered_log_prior``). The parameters end at the best evaluation. With ``deadline``
        (a ``time.monotonic()`` time) the first evaluation after it stops the run; a trial point
        whose :math:`K_y` is not
        positive definite even with jitter stops it too.

        (``zonal.models.lbfgs.maximise_by_lbfgs``; one L-BFGS iteration per ``step`` call instead
        let the input scales' iterations diverge here: on yacht, :math:`\log p(y) / N` went from
        -0.35 to -43.9 where one call reaches 1.71.)"""
        count = len(self.train_y)

        def objective() -> torch.Tensor:
            value = self.marginal_log_likelihood() + registered_log_prior(self)
            if priors is not None:
                value = value + self.log_prior(priors)
            return value / count

        self.train()
        trace = maximise_by_lbfgs(
            [p for p in self.parameters() if p.requires_grad],
            objective,
            max_iter=max_iter,
            lr=lr,
            deadline=deadline,
            stop_on=(NotPositiveDefiniteError,),
        )
        self.eval()
        return trace

    # ------------------------------------------------------------------ predictions
    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        """:math:`q(f(X))` [*B, q] for inputs :math:`X` [*b, q, D] (module docstring); the
        covariance is lazy, its diagonal :math:`O(q N)` once :math:`V` is known; B broadcasts b
        with a conditioned model's batch."""
        factor, weights = self._cached_factor()
        solved = torch.linalg.solve_triangular(
            factor, self._covariance(self.train_x, X), upper=False
        )  # V [*b, N, q]
        mean = self.constant + (solved.mT @ weights.unsqueeze(-1)).squeeze(-1)  # [*b, q]
        subtracted = solved
        extra = getattr(self, "_new_rows", None)
        if extra is not None:
            new_x, new_y, new_noise = extra  # [*b_c, q', D], [*F, *b_c, q'], [*b_c, q']
            cross, inner, new_weights = self._new_row_terms(
                factor, weights, new_x, new_y, new_noise
            )
            batch = torch.broadcast_shapes(X.shape[:-2], new_x.shape[:-2])
            new_cross = self._covariance(
                new_x.expand(*batch, *new_x.shape[-2:]), X.expand(*batch, *X.shape[-2:])
            )  # K_n* [*B, q', q]
            projected = torch.linalg.solve_triangular(
                inner, new_cross - cross.mT @ solved, upper=False
            )  # W [*B, q', q]
            mean = mean + (projected.mT @ new_weights.unsqueeze(-1)).squeeze(-1)  # [*F, *B, q]
            batch = torch.broadcast_shapes(solved.shape[:-2], projected.shape[:-2])
            subtracted = torch.cat(
                [
                    solved.expand(*batch, *solved.shape[-2:]),
                    projected.expand(*batch, *projected.shape[-2:]),
                ],
                dim=-2,
            )
        batch_shape = torch.broadcast_shapes(mean.shape[:-1], subtracted.shape[:-2])
        zeros = torch.zeros(1, X.shape[-2], dtype=X.dtype, device=X.device)
        correction = RootDifferenceLinearOperator(zeros, subtracted, batch_shape)  # -V^T V
        prior = self.kernel(self.input_map.lift(X))
        prior = prior.expand(*batch_shape, *prior.shape[-2:])
        mean = mean.expand(*batch_shape, mean.shape[-1])
        return MultivariateNormal(mean, SumLinearOperator(prior, correction))

    def _new_row_terms(
        self,
        factor: torch.Tensor,
        weights: torch.Tensor,
        new_x: torch.Tensor,
        new_y: torch.Tensor,
        new_noise: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B [*b_c, N, q'], C [*b_c, q', q'], a_n [*F, *b_c, q']) of the conditioned rows."""
        cross = torch.linalg.solve_triangular(
            factor, self._covariance(self.train_x, new_x), upper=False
        )  # B [*b_c, N, q']
        gram = self._covariance(new_x, new_x) - cross.mT @ cross  # [*b_c, q', q']
        gram = gram + torch.diag_embed(new_noise)
        inner = cholesky(gram, name="the conditioned rows' K + noise I less their projection")
        residual = new_y - self.constant - (cross.mT @ weights.unsqueeze(-1)).squeeze(-1)
        batch = torch.broadcast_shapes(residual.shape[:-1], inner.shape[:-2])
        new_weights = torch.linalg.solve_triangular(
            inner.expand(*batch, *inner.shape[-2:]),
            residual.expand(*batch, residual.shape[-1]).unsqueeze(-1),
            upper=False,
        ).squeeze(-1)  # [*F, *b_c, q']
        return cross, inner, new_weights

    # ------------------------------------------------------------------ conditioning
    def _conditioned(
        self, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None, *, per_component: bool
    ) -> ExactZonalGP:
        """The model conditioned on rows X [*b, q, D], Y [*F, *b, q] with noise variances
        [*b, q] (the likelihood's when None), at the current hyperparameters (module docstring);
        rows conditioned on before are kept and these appended."""
        noise = self.noise.expand(X.shape[:-1]) if noise is None else noise  # [*b, q]
        model = conditioned_copy(self)
        previous = getattr(self, "_new_rows", None)
        if previous is not None:
            old_x, old_y, old_noise = previous
            batch = torch.broadcast_shapes(old_x.shape[:-2], X.shape[:-2])
            outer = torch.broadcast_shapes(old_y.shape[:-1], Y.shape[:-1])
            X = torch.cat(
                [old_x.expand(*batch, *old_x.shape[-2:]), X.expand(*batch, *X.shape[-2:])], -2
            )
            Y = torch.cat(
                [old_y.expand(*outer, old_y.shape[-1]), Y.expand(*outer, Y.shape[-1])], -1
            )
            noise = torch.cat(
                [
                    old_noise.expand(*batch, old_noise.shape[-1]),
                    noise.expand(*batch, noise.shape[-1]),
                ],
                -1,
            )
        model._new_rows = (X, Y, noise)
        model._conditioned_batch = torch.broadcast_shapes(Y.shape[:-1], X.shape[:-2])
        return model

    # ------------------------------------------------------------------ checkpoints
    def _load_from_state_dict(
        self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any
    ) -> None:
        """Take the training rows of the state (their number need not match this model's)."""
        for name in ("train_x", "train_y"):
            value = state_dict.get(prefix + name)
            if isinstance(value, torch.Tensor):
                setattr(self, name, torch.empty_like(value, device=getattr(self, name).device))
        self._cache = None
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def _same_values(kept: list[torch.Tensor], tensors: list[torch.Tensor]) -> bool:
    """Whether ``tensors`` hold the values (and shapes, dtypes, devices) of ``kept``."""
    return len(kept) == len(tensors) and all(
        a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)
        for a, b in zip(kept, tensors, strict=True)
    )


__all__ = ["ExactZonalGP"]
