r"""SVGP with inter-domain features on the sphere (seed 000 sec. 3.1, 4; seed 002 sec. 5).

Inputs :math:`x \in \mathbb{R}^D` reach the kernel through an input map (``zonal.geometry``):
``SphereEmbedding`` lifts them to :math:`[x, b] \in \mathbb{R}^{D+1}`, where the kernel,
homogeneous, is the 1-homogeneous extension of a zonal kernel on :math:`\mathbb{S}^D`, so every
prediction is already in data space (mean :math:`r \mu`, variance :math:`r^2 \sigma^2` with
:math:`r = \|[x, b]\|`, seed 000 sec. 4.1); ``OnSphere`` takes unit vectors as they are. Train
with ``zonal.models.fit_svgp`` (the minibatch ELBO). The model answers the contract of
``zonal.models.contract``: ``posterior``, ``predict``, ``log_predictive_density``.
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import GaussianLikelihood, Likelihood, MultitaskGaussianLikelihood
from gpytorch.means import Mean
from gpytorch.models import ApproximateGP
from gpytorch.variational import (
    CholeskyVariationalDistribution,
    DeltaVariationalDistribution,
    IndependentMultitaskVariationalStrategy,
    MeanFieldVariationalDistribution,
    NaturalVariationalDistribution,
    TrilNaturalVariationalDistribution,
)

from zonal.features import InducingFeatures
from zonal.geometry import InputMap, SphereEmbedding
from zonal.models.conditioning import conditioned_copy, gaussian_noise, task_noises
from zonal.models.contract import ZonalModel
from zonal.models.training import check_targets
from zonal.variational import InterDomainVariationalStrategy
from zonal.variational.nonconjugate import (
    Marginals,
    NaturalGradientResult,
    optimal_variational_q,
    stochastic_natural_step,
)
from zonal.variational.online import OnlineUpdate, conditioned_marginal, online_update

VARIATIONAL_FAMILIES = {
    "cholesky": CholeskyVariationalDistribution,
    "meanfield": MeanFieldVariationalDistribution,
    "natural": NaturalVariationalDistribution,
    "tril-natural": TrilNaturalVariationalDistribution,
    "delta": DeltaVariationalDistribution,
}


def default_likelihood(num_outputs: int) -> Likelihood:
    """A float64 Gaussian likelihood (multitask for several outputs), noise 0.1 to start."""
    if num_outputs == 1:
        likelihood = GaussianLikelihood()
    else:
        likelihood = MultitaskGaussianLikelihood(num_tasks=num_outputs, rank=0)
    likelihood = likelihood.to(torch.float64)
    likelihood.noise = 0.1
    return likelihood


def check_kernel_reads_map(kernel: Kernel, input_map: InputMap) -> None:
    """Refuse, when the model is built, a zonal kernel that cannot read the input map's lifted
    inputs: an embedding keeps the rows' radius (``input_map.homogeneous``), which only a
    homogeneous kernel reads (a non-homogeneous one failed at the first prediction, asking for
    the embedding the model already had)."""
    base = getattr(kernel, "base_kernel", kernel)  # inside a ScaleKernel; any GPyTorch kernel
    if input_map.homogeneous and getattr(base, "homogeneous", True) is False:
        raise ValueError(
            f"{type(input_map).__name__} lifts each row to [x, b], keeping its radius, which a "
            f"non-homogeneous {type(base).__name__} cannot read: build it with "
            "homogeneous=True (or give unit vectors with input_map=zonal.geometry.OnSphere())"
        )


def resolve_input_map(
    input_map: InputMap | None,
    features: InducingFeatures,
    input_dim: int,
    kernel: Kernel | None = None,
) -> InputMap:
    """``input_map`` itself (the default ``SphereEmbedding(1.0)`` for None), after checking that
    inputs of dimension ``input_dim`` reach the ambient dimension the features live in, and that
    ``kernel`` (when given) reads its lifted inputs (``check_kernel_reads_map``)."""
    if input_map is None:
        input_map = SphereEmbedding(1.0)
    if not isinstance(input_map, InputMap):
        raise ValueError(
            f"input_map must be a zonal.geometry input map (SphereEmbedding, OnSphere), "
            f"got {type(input_map).__name__}"
        )
    ambient_dim = getattr(features, "ambient_dim", None)
    expected = input_map.ambient_dim(input_dim)
    if ambient_dim is not None and ambient_dim != expected:
        raise ValueError(
            f"the features live in ambient_dim={ambient_dim} but inputs of dimension "
            f"{input_dim} through {type(input_map).__name__} give {expected}"
        )
    if kernel is not None:
        check_kernel_reads_map(kernel, input_map)
    return input_map


class SVGP(ApproximateGP, ZonalModel):
    r"""Sparse variational GP with any ``zonal.features`` inducing features.

    Args:
        kernel: a GPyTorch kernel; for harmonic and activated features a ``ZonalKernel``
            (optionally in a ``ScaleKernel``), homogeneous when an embedding is used.
        features: the inducing features (shared by all outputs).
        input_dim: :math:`D`, the data dimension (checked on every call); the features'
            ambient_dim is ``input_map.ambient_dim(D)`` (:math:`D + 1` for a sphere embedding,
            :math:`D` on the sphere).
        likelihood: the model's likelihood (default: Gaussian, multitask for :math:`P > 1`,
            float64).
        input_map: ``SphereEmbedding(bias)`` (None: the default, bias 1) or ``OnSphere()`` for
            inputs already on the sphere.
        num_outputs: :math:`P` independent outputs (a batch of :math:`q(u)`, one per output).
        mean_module: prior mean (default zero). It reads the input map's lifted inputs, as the
            kernel does: :math:`D + 1` columns :math:`[s \odot x, b]` through a
            ``SphereEmbedding`` (e.g. ``gpytorch.means.LinearMean(input_size=D + 1)``), unit
            vectors through ``OnSphere``.
        variational_family: ``"cholesky"`` (full :math:`S`), ``"meanfield"`` (diagonal :math:`S`),
            ``"natural"`` / ``"tril-natural"`` (natural parameters, for ``gpytorch.optim.NGD``)
            or ``"delta"`` (a point mass: MAP inducing values).
        whiten: whitened parametrisation (default True).
        input_transform, outcome_transform: BoTorch transforms (e.g. ``Normalize``,
            ``Standardize``), as ``SingleTaskGP`` takes them (``ZonalModel.set_transforms``).
    """

    covar_module: Kernel
    # set by GPyTorch's ApproximateGP: the inter-domain strategy, wrapped for several outputs
    variational_strategy: InterDomainVariationalStrategy | IndependentMultitaskVariationalStrategy
    #: the update of q(u) of a model conditioned on observations (unset on a fitted model)
    _online: OnlineUpdate

    _conditions_outputs = True

    def __init__(
        self,
        kernel: Kernel,
        features: InducingFeatures,
        input_dim: int,
        *,
        likelihood: Likelihood | None = None,
        input_map: InputMap | None = None,
        num_outputs: int = 1,
        mean_module: Mean | None = None,
        variational_family: str = "cholesky",
        whiten: bool = True,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ) -> None:
        if variational_family not in VARIATIONAL_FAMILIES:
            raise ValueError(
                f"unknown variational_family {variational_family!r}; "
                f"use one of {sorted(VARIATIONAL_FAMILIES)}"
            )
        if num_outputs < 1:
            raise ValueError(f"num_outputs must be >= 1, got {num_outputs}")
        batch_shape = torch.Size([num_outputs]) if num_outputs > 1 else torch.Size()
        distribution = VARIATIONAL_FAMILIES[variational_family](
            features.num_inducing, batch_shape=batch_shape
        )
        distribution.to(torch.float64)
        strategy = InterDomainVariationalStrategy(self, features, distribution, whiten=whiten)
        if num_outputs > 1:
            strategy = IndependentMultitaskVariationalStrategy(strategy, num_tasks=num_outputs)
        super().__init__(strategy)
        self.covar_module = kernel
        self.mean_module = mean_module
        self.input_dim = int(input_dim)
        self._num_outputs = num_outputs
        self.likelihood = default_likelihood(num_outputs) if likelihood is None else likelihood
        self.input_map = resolve_input_map(input_map, features, self.input_dim, kernel)
        self.set_transforms(input_transform, outcome_transform)

    @property
    def features(self) -> InducingFeatures:
        """The inducing features."""
        return self.inducing_strategy.features

    @property
    def inducing_strategy(self) -> InterDomainVariationalStrategy:
        """The inter-domain strategy (inside the multitask wrapper for several outputs)."""
        strategy = self.variational_strategy
        if isinstance(strategy, IndependentMultitaskVariationalStrategy):
            return strategy.base_variational_strategy
        return strategy

    def lift(self, x: torch.Tensor) -> torch.Tensor:
        """Check :math:`x` [..., N, D] and map it to the kernel's inputs [..., N, ambient_dim]."""
        return self.input_map.lift(self.check_inputs(x))

    @torch.no_grad()
    def set_optimal_variational_distribution(
        self, x: torch.Tensor, y: torch.Tensor, noise: float | torch.Tensor | None = None
    ) -> None:
        """Set :math:`q(u)` to the optimum for a Gaussian likelihood (Titsias, 2009), single
        output, at the current hyperparameters (``InterDomainVariationalStrategy.
        set_optimal_variational_distribution``); ``noise`` defaults to the likelihood's. At this
        :math:`q` the ELBO equals the collapsed bound (``SGPR.elbo``) for the same features and
        kernel.
        """
        if self.num_outputs != 1:
            raise ValueError("the closed-form optimum is implemented for a single output")
        x, y = self.transform_training_data(torch.as_tensor(x), y)
        lifted = self.lift(x)
        y = torch.as_tensor(y).to(lifted).reshape(-1)
        if self.mean_module is not None:
            y = y - self.mean_module(lifted)
        if noise is None:
            noise = self.likelihood.noise.reshape(())
        self.inducing_strategy.set_optimal_variational_distribution(lifted, y, noise)

    def set_natural_gradient_optimum(
        self, x: torch.Tensor, y: torch.Tensor, **options: Any
    ) -> NaturalGradientResult:
        """Set :math:`q(u)` to the ELBO's optimum on rows :math:`x` [N, D], :math:`y` [N] at the
        current hyperparameters and features, for any likelihood (a probit or softmax classifier
        too; one :math:`q(u)` per output): damped natural-gradient steps from the current
        :math:`q(u)`
        (``zonal.variational.nonconjugate``, whose ``optimal_variational_q`` takes ``options``).
        For a Gaussian likelihood the first step lands on ``set_optimal_variational_distribution``'s
        closed form. Returns what the steps did (the ELBO before and after, in nats)."""
        x, y = self.transform_training_data(torch.as_tensor(x), y)
        y = check_targets(self.likelihood, y, len(x))
        marginals, mean, covariance = self._whitened_marginals(x)
        mean, covariance, result = optimal_variational_q(
            marginals, self.likelihood, y.to(mean.device), mean, covariance, **options
        )
        self.inducing_strategy.set_variational(mean, covariance, whitened=True)
        return result

    def natural_gradient_step(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        step: float,
        num_data: int,
        generator: torch.Generator | None = None,
    ) -> None:
        """One natural-gradient step of size ``step`` on :math:`q(u)` from a minibatch :math:`x`
        [B, D], :math:`y` [B] of ``num_data`` rows (already through the model's transforms) at the
        current hyperparameters (``zonal.variational.nonconjugate.stochastic_natural_step``:
        GPyTorch's ``NGD`` step with learning rate ``step``, for the Cholesky family too). Used by
        ``fit_svgp(natural_gradient=...)``; :math:`q(u)` is written, the hyperparameters stay."""
        marginals, mean, covariance = self._whitened_marginals(x)
        mean, covariance = stochastic_natural_step(
            marginals, self.likelihood, y, mean, covariance,
            step=step, num_data=num_data, generator=generator,
        )  # fmt: skip
        self.inducing_strategy.set_variational(mean, covariance, whitened=True)

    @torch.no_grad()
    def _whitened_marginals(self, x: torch.Tensor) -> tuple[Marginals, torch.Tensor, torch.Tensor]:
        """(the marginals' fixed parts at rows x [N, D], q(v)'s mean [*b, M], its covariance
        [*b, M, M]) in whitened coordinates (``zonal.variational.nonconjugate``): B = L^{-1} Kuf,
        the prior mean mu_0 and r = diag(Kff) - colsum(B * B), the variance q(f) adds to
        diag(B^T S B) (``InterDomainVariationalStrategy.forward``)."""
        strategy = self.inducing_strategy
        with torch.set_grad_enabled(strategy.shares_projection):  # B's graph, for the ELBO's
            lifted = self.lift(x)  # [N, d]
        _, projection = strategy.projection(lifted)  # B = L^{-1} Kuf [*b', M, N]
        q = strategy.current_q()
        mean, covariance = q.mean, q.covariance_matrix  # [*b, M], [*b, M, M]
        if not strategy.whiten:
            mean, covariance = strategy.to_whitened(mean, covariance)
        prior_mean = lifted.new_zeros(len(lifted)) if self.mean_module is None else \
            self.mean_module(lifted)  # [N] or [*b, N]  # fmt: skip
        residual = self.covar_module(lifted, diag=True) - projection.pow(2).sum(-2)  # [*b', N]
        shape = (*mean.shape[:-1], len(lifted))  # [*b, N]: one row of marginals per output
        marginals = Marginals(projection, prior_mean.expand(shape), residual.expand(shape))
        return marginals, mean, covariance

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """The prior :math:`p(f(x))` on lifted inputs (GPyTorch calls this with prior=True)."""
        mean = x.new_zeros(x.shape[:-1]) if self.mean_module is None else self.mean_module(x)
        return MultivariateNormal(mean, self.covar_module(x))

    def __call__(self, x: torch.Tensor, prior: bool = False, **kwargs: Any) -> MultivariateNormal:
        """:math:`q(f(x))` for data-space inputs :math:`x` [..., N, D] (already in data space)."""
        return super().__call__(self.lift(x), prior=prior, **kwargs)

    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        """:math:`q(f(X))` [*b, q] (a multitask normal [*b, q, P] for several outputs); for a
        conditioned model the online-conditioned :math:`q` (``zonal.variational.online``), batch
        [*F, *b] broadcast."""
        update = getattr(self, "_online", None)
        if update is None:  # P outputs: X's t-batches stay apart from the batch of q(u_p)
            return self(X if self.num_outputs == 1 else X.unsqueeze(-3))
        lifted = self.lift(X)  # [*b, q, ambient_dim]
        if self.num_outputs == 1:
            return conditioned_marginal(self.inducing_strategy, update, lifted)
        per_output = conditioned_marginal(self.inducing_strategy, update, lifted.unsqueeze(-3))
        return MultitaskMultivariateNormal.from_batch_mvn(per_output, task_dim=-1)  # [*B, q, P]

    def _conditioned(
        self, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None, *, per_component: bool
    ) -> SVGP:
        """Online variational conditioning (Maddox, Stanton and Wilson, 2021;
        ``zonal.variational.online``): q(u) times the new rows' sparse Gaussian likelihood, at
        the current hyperparameters and features, for every feature type. A Gaussian likelihood
        is required (others are refused by name); a conditioned model can be conditioned again
        (the updates compose). With P outputs (a batch of q(u_p) over shared features) each
        output's q(u_p) is updated by its own column of Y [*F, *b, q, P] and noise."""
        model = conditioned_copy(self)
        lifted = model.lift(X)  # [*b, q, ambient_dim]
        if self.num_outputs == 1:
            noise = gaussian_noise(self).expand(X.shape[:-1]) if noise is None else noise  # [*b, q]
        else:  # one q(u_p) per output: outputs on the batch dimension before q
            lifted = lifted.unsqueeze(-3)  # [*b, 1, q, ambient_dim]
            Y = Y.movedim(-1, -2)  # [*F, *b, P, q]
            if noise is None:
                noise = task_noises(self).unsqueeze(-1).expand(*X.shape[:-2], -1, X.shape[-2])
            else:
                noise = noise.expand(*X.shape[:-1], self.num_outputs).movedim(-1, -2)
            # noise [*b, P, q]
        previous = getattr(self, "_online", None)
        model._online = online_update(model.inducing_strategy, lifted, Y, noise, previous)
        model._conditioned_batch = model._online.mean.shape[: -1 - (self.num_outputs > 1)]
        return model
