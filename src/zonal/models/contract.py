r"""The model contract: what every zonal model answers, the same way (docs/design.md).

Every model is a BoTorch ``Model`` owning its ``likelihood`` and offers

* ``posterior(X, observation_noise=False)``: a BoTorch ``Posterior`` over :math:`f(X)`
  (:math:`X` [*b, q, D]) in data space: a ``GPyTorchPosterior`` for single-layer models; for deep
  models a ``GaussianMixturePosterior`` whose components are the :math:`S` Monte Carlo samples of
  the inner layers, on the batch dimension just before :math:`q` ([*b, S, q]). Deep models set
  ``_is_ensemble``, so BoTorch's MC acquisition functions average over that dimension
  (log-mean-exp for the log variants) and ``optimize_acqf`` takes the model unchanged;
* ``predict(X, include_noise=False)`` -> (mean, variance) [N] (or [N, P]), the predictive moments
  (mixture moments for deep models: variance = mean of :math:`v_s + \mu_s^2` less the squared
  mean);
* ``log_predictive_density(X, y)`` -> [N], :math:`\log p(y_i \mid \text{data})` per point: the
  likelihood's marginal under :math:`q(f)`, log-mean-exp over the components for deep models.

Subclasses implement ``latent_distribution(X)`` (:math:`q(f(X))` with the component dimension for
deep models) and say whether they are a mixture (``_is_ensemble``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import gpytorch
import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.exceptions.errors import UnsupportedError
from botorch.models.model import FantasizeMixin, Model
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from botorch.posteriors import GPyTorchPosterior
from botorch.posteriors.fully_bayesian import GaussianMixturePosterior
from botorch.sampling import MCSampler
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.likelihoods import (
    FixedNoiseGaussianLikelihood,
    GaussianLikelihood,
    Likelihood,
    MultitaskGaussianLikelihood,
)

from zonal._validation import check_finite
from zonal.models import conditioning

#: rows evaluated at a time by ``predict`` and ``log_predictive_density``
PREDICTION_CHUNK = 4096
#: Monte Carlo draws of a likelihood whose marginal GPyTorch samples (the softmax's) in
#: ``log_predictive_density``: its standard error is about 1/16 of the draws' spread
LIKELIHOOD_SAMPLES = 256
GAUSSIAN_LIKELIHOODS = (GaussianLikelihood, MultitaskGaussianLikelihood)


def _cuda_devices(X: torch.Tensor) -> list[torch.device]:
    """The devices whose random streams ``torch.random.fork_rng`` must save for draws on X's."""
    return [X.device] if X.device.type == "cuda" else []


@contextlib.contextmanager
def evaluation_mode(module: torch.nn.Module) -> Iterator[None]:
    """The block in evaluation mode, the module's modes restored after it: ``predict`` and
    ``log_predictive_density`` called inside a training loop leave it training (GPyTorch keeps
    its memoised q(u) in evaluation mode, so a loop left there trains on a stale one)."""
    modes = [(part, part.training) for part in module.modules()]  # parents before children
    module.eval()
    try:
        yield
    finally:
        for part, mode in modes:  # each part's own mode back (a frozen normalisation layer
            part.train(mode)  # stays frozen), through ``train`` so that GPyTorch clears caches


def _point_noise(noise: torch.Tensor, points: torch.Size) -> torch.Tensor:
    """An observation-noise tensor as variances [*b', q'] that broadcast to the points' shape
    [*b, q]: BoTorch's [*b, q, 1] (read first: also [q, 1], broadcast over the t-batches) or
    zonal's [*b, q]; a named error when neither reading broadcasts."""
    readings = [noise.squeeze(-1)] if noise.dim() >= 1 and noise.shape[-1] == 1 else []
    for reading in (*readings, noise):
        try:
            if torch.broadcast_shapes(reading.shape, points) == points:
                return reading
        except RuntimeError:
            continue
    raise ValueError(
        f"observation_noise of shape {tuple(noise.shape)} does not broadcast to the points' "
        f"shape {tuple(points)} ([*b, q]): give it as [*b, q, 1] or [*b, q]"
    )


class ZonalModel(Model, FantasizeMixin):
    """Base of every zonal model: ``posterior``, ``predict`` and ``log_predictive_density``.

    Subclasses set ``self.likelihood`` and ``self._num_outputs`` and implement
    ``latent_distribution``.
    """

    likelihood: Likelihood
    _num_outputs: int = 1
    #: component (mixture) dimension of ``latent_distribution``, for deep models
    _is_ensemble: bool = False
    #: whether ``_conditioned`` takes several outputs (Y [*F, *b, q, P])
    _conditions_outputs: bool = False
    #: the batch shape of a model conditioned on observations (unset on a fitted model)
    _conditioned_batch: torch.Size

    # ------------------------------------------------------------------ to implement
    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        """:math:`q(f(X))` for inputs :math:`X` [*b, q, D]: batch [*b] ([*b, S] for a mixture),
        event [q] (or [q, P] for a multitask normal)."""
        raise NotImplementedError

    def forward(self, X: torch.Tensor) -> MultivariateNormal:
        """``model(X)``: :math:`q(f(X))` for :math:`X` [*b, q, D] in the model's input space (after
        any input transform, as GPyTorch's models take :math:`X` when called in evaluation mode;
        BoTorch's ``qLowerBoundMaxValueEntropy`` with pending points calls the model so, and
        with transforms mixes this untransformed call with transformed posteriors, as it does
        for its own models). A stacked mixture has no single normal to give: it raises
        ``UnsupportedError``. The deep models keep GPyTorch's ``DeepGP`` call (their layers'
        propagation, a batch of draws), which GIBBON cannot read either: give them to it through
        ``MomentMatchedModel``."""
        if self._is_ensemble:
            raise UnsupportedError(
                f"{type(self).__name__}'s posterior is a Gaussian mixture, so calling it for one "
                "normal (as qLowerBoundMaxValueEntropy does with pending points) is not "
                "supported: wrap it in zonal.models.MomentMatchedModel or use "
                "zonal.bo.lookahead_acquisition"
            )
        return self.latent_distribution(self.check_inputs(X))

    # ------------------------------------------------------------------ BoTorch
    @property
    def num_outputs(self) -> int:
        """:math:`P`, the number of outputs."""
        return self._num_outputs

    @property
    def batch_shape(self) -> torch.Size:
        """The model batch: empty for a fitted model (an input [*b, q, D] gives a posterior over
        [*b, q]); [*F, *b] for a model conditioned on observations [*F, *b, q]."""
        return getattr(self, "_conditioned_batch", torch.Size())

    # ------------------------------------------------------------------ transforms
    def set_transforms(
        self,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ) -> None:
        """Attach BoTorch transforms (module docstring); None leaves a transform out."""
        if input_transform is not None:
            self.input_transform = input_transform
        if outcome_transform is not None:
            if self.num_outputs != 1:
                raise ValueError("outcome transforms are supported for single-output models")
            self.outcome_transform = outcome_transform

    def transform_training_data(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Learn the transforms on training data (:math:`x` [N, D], :math:`y` [N] or [N, 1]) and
        return them transformed (:math:`y` as given: [N] or [N, 1]); without transforms,
        :math:`(x, y)` as they are."""
        input_transform = getattr(self, "input_transform", None)
        if input_transform is not None:
            input_transform.train()
            x = input_transform(torch.as_tensor(x))
            input_transform.eval()
        outcome_transform = getattr(self, "outcome_transform", None)
        if outcome_transform is not None:
            y = torch.as_tensor(y)
            column = y.reshape(-1, 1).to(x)  # [N, 1]
            outcome_transform.train()
            transformed, _ = outcome_transform(column)
            outcome_transform.eval()
            y = transformed.reshape(y.shape)
        return x, y

    def _set_transformed_inputs(self) -> None:
        """Zonal models hold no training inputs: the input transform is applied to every input."""

    def _revert_to_original_inputs(self) -> None:
        """See ``_set_transformed_inputs``."""

    # ------------------------------------------------------------------ conditioning
    def condition_on_observations(
        self, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None = None, **kwargs: Any
    ) -> ZonalModel:
        """This model conditioned on new rows :math:`X` [*b, q, D], :math:`Y` [*F, *b, q, 1]
        (``noise`` [*b, q, 1]: their noise variances; None: the likelihood's), at the current
        hyperparameters, with batch shape [*F, *b] (``zonal.models.conditioning``)."""
        return conditioning.condition_on_observations(self, X, Y, noise)

    def fantasize(
        self,
        X: torch.Tensor,
        sampler: MCSampler,
        observation_noise: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> ZonalModel:
        """A fantasy model: observations drawn at :math:`X` [*b, q, D] by ``sampler`` ([*F] draws)
        and conditioned on, batch shape [*F, *b] (``zonal.models.conditioning.fantasize``)."""
        return conditioning.fantasize(self, X, sampler, observation_noise, **kwargs)

    def _conditioned(
        self, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None, *, per_component: bool
    ) -> ZonalModel:
        """The conditioned model for checked X [*b, q, D], Y [*F, *b, (S,) q], noise [*b, q]."""
        raise conditioning.ConditioningError(
            f"{type(self).__name__} does not support conditioning on observations"
        )

    def check_inputs(self, X: torch.Tensor) -> torch.Tensor:
        """:math:`X` [*b, N, D] as a tensor of the model's dtype and device; a named error
        otherwise."""
        if not isinstance(X, torch.Tensor) or X.dim() < 2:
            raise ValueError("inputs must be a tensor [N, D] (or [..., N, D])")
        input_dim = getattr(self, "input_dim", None)
        if input_dim is not None and X.shape[-1] != input_dim:
            raise ValueError(
                f"inputs must have shape [N, {input_dim}] (or [..., N, {input_dim}]): the model's "
                f"input dimension is {input_dim}, got {tuple(X.shape)}"
            )
        reference: torch.Tensor | None = next(self.parameters(), None)
        if reference is None:
            reference = next(self.buffers())
        X = X.to(device=reference.device, dtype=reference.dtype)
        check_finite(X, "inputs")
        return X

    # BoTorch's Model and FantasizeMixin declare incompatible ``posterior`` signatures: Model's here
    def posterior(  # type: ignore[override]
        self,
        X: torch.Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | torch.Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ) -> GPyTorchPosterior:
        """The posterior over :math:`f(X)` (or :math:`y(X)` with ``observation_noise``),
        :math:`X` [*b, q, D].

        ``observation_noise`` True adds the Gaussian likelihood's noise; a tensor [*b, q, P] (or
        [*b, q]) gives the noise variance of each point instead.
        """
        self.eval()
        X = self.check_inputs(self.transform_inputs(X))
        distribution = self._noisy_distribution(X, observation_noise)
        if output_indices is not None:
            distribution = _select_outputs(distribution, output_indices, self.num_outputs)
        family = GaussianMixturePosterior if self._is_ensemble else GPyTorchPosterior
        posterior = family(distribution)
        outcome_transform = getattr(self, "outcome_transform", None)
        if outcome_transform is not None:
            posterior = family(outcome_transform.untransform_posterior(posterior).distribution)
        return posterior if posterior_transform is None else posterior_transform(posterior)

    def _noisy_distribution(
        self, X: torch.Tensor, observation_noise: bool | torch.Tensor
    ) -> MultivariateNormal:
        """q(f(X)), or the distribution of y(X) with ``observation_noise`` (what ``posterior``
        wraps); a model whose components carry their own noise overrides it."""
        distribution = self.latent_distribution(X)
        if observation_noise is not False:
            distribution = self._add_noise(distribution, observation_noise)
        return distribution

    def _add_noise(
        self, distribution: MultivariateNormal, noise: bool | torch.Tensor
    ) -> MultivariateNormal:
        if isinstance(noise, torch.Tensor):
            noise = noise.to(distribution.mean)
            if isinstance(distribution, MultitaskMultivariateNormal):
                noise = noise.reshape(*noise.shape[:-2], -1)  # [*b, q * P], interleaved
            else:
                points = distribution.mean.shape  # [*b, q] ([*b, S, q] for a mixture)
                if self._is_ensemble:
                    points = points[:-2] + points[-1:]
                noise = _point_noise(noise, points)  # [*b', q'] broadcasting to [*b, q]
            if self._is_ensemble:
                noise = noise.unsqueeze(-2 if noise.dim() > 0 else 0)
            covariance = distribution.lazy_covariance_matrix.add_diagonal(noise)
            return type(distribution)(distribution.mean, covariance)
        if not isinstance(self.likelihood, GAUSSIAN_LIKELIHOODS) or isinstance(
            self.likelihood, FixedNoiseGaussianLikelihood
        ):
            raise ValueError(
                f"observation_noise=True needs a Gaussian likelihood, the model has "
                f"{type(self.likelihood).__name__}; pass the noise as a tensor instead"
            )
        return self.likelihood(distribution)

    # ------------------------------------------------------------------ numbers
    @torch.no_grad()
    def predict(
        self, X: torch.Tensor, include_noise: bool = False, *, chunk_size: int = PREDICTION_CHUNK
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Predictive mean and variance of :math:`f(X)` (or of :math:`y` with ``include_noise``) in
        data space: [N] for one output, [N, P] for :math:`P` outputs; ``chunk_size`` rows at a
        time."""
        X = self.check_inputs(X)
        if X.dim() != 2:
            raise ValueError(f"predict takes inputs [N, D], got {tuple(X.shape)}")
        means, variances = [], []
        with evaluation_mode(self):
            for start in range(0, len(X), chunk_size):
                posterior = self.posterior(
                    X[start : start + chunk_size], observation_noise=include_noise
                )
                if self._is_ensemble:
                    mean, variance = posterior.mixture_mean, posterior.mixture_variance
                else:
                    mean, variance = posterior.mean, posterior.variance  # [n, P]
                means.append(mean)
                variances.append(variance.clamp(min=0))
        mean, variance = torch.cat(means), torch.cat(variances)  # [N, P]
        if self.num_outputs == 1:
            return mean.squeeze(-1), variance.squeeze(-1)
        return mean, variance

    @torch.no_grad()
    def log_predictive_density(
        self, X: torch.Tensor, y: torch.Tensor, *, chunk_size: int = PREDICTION_CHUNK
    ) -> torch.Tensor:
        r""":math:`\log p(y_i \mid \text{data})` per point [N]: the likelihood's marginal log
        density under :math:`q(f(x_i))` (log-mean-exp over the mixture components of a deep
        model). With an outcome transform (an affine one such as ``Standardize``) :math:`y` is
        transformed and the log-Jacobian added. :math:`y` is checked as training checks it
        (``zonal.models.training.check_targets``: a column [N, 1] of a single-output likelihood,
        labels of a classifier). A likelihood whose marginal GPyTorch samples (the softmax's)
        draws ``LIKELIHOOD_SAMPLES`` from the model's ``posterior_seed`` (default 0; None:
        afresh), so that two calls agree."""
        with evaluation_mode(self):  # (an input transform in training mode would learn from X)
            return self._log_predictive_density(X, y, chunk_size)

    def _log_predictive_density(
        self, X: torch.Tensor, y: torch.Tensor, chunk_size: int
    ) -> torch.Tensor:
        """``log_predictive_density`` in evaluation mode."""
        from zonal.models.training import check_targets  # (training builds on this module)

        X = self.check_inputs(self.transform_inputs(X))
        if X.dim() != 2:
            raise ValueError(f"log_predictive_density takes inputs [N, D], got {tuple(X.shape)}")
        y = check_targets(self.likelihood, torch.as_tensor(y, device=X.device), len(X))
        y = y.to(X.dtype) if y.is_floating_point() else y
        y, log_jacobian = self._transformed_targets(y)
        seed = getattr(self, "posterior_seed", 0)
        with contextlib.ExitStack() as scope:
            scope.enter_context(gpytorch.settings.num_likelihood_samples(LIKELIHOOD_SAMPLES))
            if seed is not None:  # the draws from the seed; the global stream left as it was
                scope.enter_context(torch.random.fork_rng(devices=_cuda_devices(X)))
                torch.manual_seed(seed)
            densities = self._log_densities(X, y, chunk_size)
        return torch.cat(densities) + log_jacobian

    def _log_densities(
        self, X: torch.Tensor, y: torch.Tensor, chunk_size: int
    ) -> list[torch.Tensor]:
        """``log_predictive_density``'s per-chunk densities [n] of checked inputs and targets."""
        densities = []
        for start in range(0, len(X), chunk_size):
            distribution = self.latent_distribution(X[start : start + chunk_size])
            targets = y[start : start + chunk_size]
            log_density = self.likelihood.log_marginal(targets, distribution)  # [(S,) n(, P)]
            if isinstance(distribution, MultitaskMultivariateNormal) and log_density.dim() > (
                1 + self._is_ensemble
            ):
                log_density = log_density.sum(-1)  # independent outputs: one density per row
            if self._is_ensemble:
                count = log_density.shape[-2]
                log_density = torch.logsumexp(log_density, dim=-2) - math.log(count)
            densities.append(log_density)
        return densities

    def _transformed_targets(self, y: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(y in the outcome-transformed space, log |dy_tf / dy|) for ``log_predictive_density``:
        y itself and 0 without an outcome transform; affine transforms (``stdvs``) only."""
        transform = getattr(self, "outcome_transform", None)
        if transform is None:
            return y, 0.0
        scale = getattr(transform, "stdvs", None)
        if scale is None:
            raise ValueError(
                f"log_predictive_density supports affine outcome transforms (Standardize), got "
                f"{type(transform).__name__}"
            )
        transformed, _ = transform(y.reshape(-1, 1))  # [N, 1]
        return transformed.reshape(y.shape), -float(scale.log().sum())


def _select_outputs(
    distribution: MultivariateNormal, output_indices: list[int], num_outputs: int
) -> MultivariateNormal:
    """The marginal of a multitask q(f) over the outputs ``output_indices`` (one index: a
    ``MultivariateNormal`` over [*b, q])."""
    if not isinstance(distribution, MultitaskMultivariateNormal):
        if list(output_indices) != [0]:
            raise ValueError(f"the model has one output; output_indices {output_indices}")
        return distribution
    bad = [index for index in output_indices if not 0 <= index < num_outputs]
    if bad:
        raise ValueError(f"output indices {bad} out of range for {num_outputs} outputs")
    q = distribution.mean.shape[-2]
    points = torch.arange(q, device=distribution.mean.device).unsqueeze(-1)  # [q, 1]
    outputs = torch.tensor(output_indices, device=points.device)  # [J]
    # entry (i, j) sits at i P + j (interleaved) or j q + i; rows [q * J] in point-major order
    interleaved = distribution._interleaved
    rows = (points * num_outputs + outputs if interleaved else outputs * q + points).reshape(-1)
    covariance = distribution.lazy_covariance_matrix[..., rows, :][..., :, rows]
    mean = distribution.mean[..., output_indices]  # [*b, q, J]
    if len(output_indices) == 1:
        return MultivariateNormal(mean.squeeze(-1), covariance)
    return MultitaskMultivariateNormal(mean, covariance, interleaved=True)
