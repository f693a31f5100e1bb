r"""What every deep kernel machine shares: the minibatch objective (seed 003 eq. 76) from the
output marginals and the KL terms, and the contract's numbers (``predict``,
``log_predictive_density``) from the per-point marginals of the output layer.

A subclass builds its Gram layers and implements ``batch_outputs(inputs)``: the means [B, C] and
variances [B] of the output channels at a minibatch, the output KL
:math:`\sum_c \operatorname{KL}(\mathcal{N}(\mu_c, A) \,\|\, \mathcal{N}(0, K_{ii}))` and the layer
KLs :math:`\operatorname{KL}(\mathcal{N}(0, G^l_{ii}) \,\|\, \mathcal{N}(0, K(G^{l-1})_{ii}))`
(zero for NNGP layers), and ``latent_distribution`` for ``posterior``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from zonal.dkm.likelihoods import (
    categorical_expected_log_likelihood,
    categorical_log_probabilities,
    gaussian_expected_log_likelihood,
    gaussian_log_predictive,
    is_categorical,
    noise_variances,
)
from zonal.models.contract import PREDICTION_CHUNK, ZonalModel
from zonal.models.training import check_targets


class BatchOutputs(NamedTuple):
    """Output means [B, C], variances [B], the output KL and the layer KLs [L] of a minibatch."""

    mean: torch.Tensor
    variance: torch.Tensor
    output_kl: torch.Tensor
    layer_kls: torch.Tensor


class ObjectiveTerms(NamedTuple):
    """The parts of eq. 76 on a minibatch: mean expected log likelihood, output KL, layer KLs."""

    expected_log_likelihood: torch.Tensor
    output_kl: torch.Tensor
    layer_kls: torch.Tensor

    def objective(self, num_train: int, nu: Sequence[float]) -> torch.Tensor:
        r""":math:`\frac{1}{\lvert B \rvert} \sum \mathbb{E}_q[\log p]
        - (\mathrm{KL}_{\mathrm{out}} + \sum_l \nu_l \mathrm{KL}_l) / P` (eq. 76)."""
        weights = torch.tensor(
            [0.0 if math.isinf(value) else value for value in nu],
            dtype=self.layer_kls.dtype,
            device=self.layer_kls.device,
        )
        regulariser = self.output_kl + (weights * self.layer_kls).sum()
        return self.expected_log_likelihood - regulariser / num_train


class DeepKernelMachine(ZonalModel):
    """Base of the DKMs (module docstring). Subclasses set ``likelihood``, ``_num_outputs``,
    ``nu`` (per layer), ``likelihood_samples`` and ``seed``."""

    nu: tuple[float, ...]
    likelihood_samples: int
    seed: int

    def batch_outputs(self, inputs: torch.Tensor) -> BatchOutputs:
        """Output marginals and KL terms for a minibatch (see the module docstring)."""
        raise NotImplementedError

    def objective_terms(
        self, inputs: torch.Tensor, targets: torch.Tensor, generator: torch.Generator | None = None
    ) -> ObjectiveTerms:
        """The terms of eq. 76 on the minibatch (targets [B] labels or values, or [B, C])."""
        outputs = self.batch_outputs(inputs)
        if is_categorical(self.likelihood):
            expected = categorical_expected_log_likelihood(
                targets, outputs.mean, outputs.variance, self.likelihood_samples, generator
            )
        else:
            targets = targets.reshape(len(outputs.mean), -1)
            noise = noise_variances(self.likelihood)
            expected = gaussian_expected_log_likelihood(
                targets, outputs.mean, outputs.variance, noise
            )
        return ObjectiveTerms(expected.mean(), outputs.output_kl, outputs.layer_kls)

    def objective(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        num_train: int,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """The minibatch objective of eq. 76 (to maximise); ``num_train`` is :math:`P`."""
        return self.objective_terms(inputs, targets, generator).objective(num_train, self.nu)

    def _generator(self, device: torch.device) -> torch.Generator:
        return torch.Generator(device=device).manual_seed(self.seed)

    @torch.no_grad()
    def marginals(
        self, X: torch.Tensor, *, chunk_size: int = PREDICTION_CHUNK
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-point means [N, C] and variances [N] of :math:`f`, ``chunk_size`` rows at a time."""
        X = self.check_inputs(X)
        if X.dim() != 2:
            raise ValueError(f"marginals take inputs [N, D], got {tuple(X.shape)}")
        self.eval()
        parts = [
            self.batch_outputs(X[start : start + chunk_size])
            for start in range(0, len(X), chunk_size)
        ]
        return torch.cat([part.mean for part in parts]), torch.cat(
            [part.variance for part in parts]
        )

    @torch.no_grad()
    def predict(
        self, X: torch.Tensor, include_noise: bool = False, *, chunk_size: int = PREDICTION_CHUNK
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Predictive mean and variance of :math:`f(X)` (of :math:`y` with ``include_noise``,
        Gaussian only): [N] for one output, [N, C] for :math:`C` outputs; equal to the moments of
        ``posterior``."""
        mean, variance = self.marginals(X, chunk_size=chunk_size)
        variance = variance.clamp_min(0).unsqueeze(-1).expand_as(mean)  # [N, C]
        if include_noise:
            if is_categorical(self.likelihood):
                raise ValueError(
                    "include_noise needs a Gaussian likelihood, the model has SoftmaxLikelihood"
                )
            variance = variance + noise_variances(self.likelihood).detach()
        if self._num_outputs == 1:
            return mean.squeeze(-1), variance.squeeze(-1)
        return mean, variance

    @torch.no_grad()
    def class_log_probabilities(
        self, X: torch.Tensor, *, chunk_size: int = PREDICTION_CHUNK
    ) -> torch.Tensor:
        r""":math:`\log p(y = c \mid X)` [N, C] of a categorical DKM: log of the Monte Carlo mean of
        :math:`\operatorname{softmax}(f)` over ``likelihood_samples`` draws of the output
        marginals."""
        if not is_categorical(self.likelihood):
            raise ValueError("class probabilities need a SoftmaxLikelihood")
        mean, variance = self.marginals(X, chunk_size=chunk_size)
        return categorical_log_probabilities(
            mean, variance, self.likelihood_samples, self._generator(mean.device)
        )

    @torch.no_grad()
    def log_predictive_density(
        self, X: torch.Tensor, y: torch.Tensor, *, chunk_size: int = PREDICTION_CHUNK
    ) -> torch.Tensor:
        r""":math:`\log p(y_i \mid \text{data})` per point [N]: exact for Gaussian likelihoods,
        Monte Carlo (``likelihood_samples`` draws) for the categorical one."""
        X = self.check_inputs(X)
        y = check_targets(self.likelihood, torch.as_tensor(y), len(X)).to(X.device)
        if is_categorical(self.likelihood):
            log_probabilities = self.class_log_probabilities(X, chunk_size=chunk_size)
            return log_probabilities.gather(-1, y.reshape(-1, 1)).squeeze(-1)
        mean, variance = self.marginals(X, chunk_size=chunk_size)
        noise = noise_variances(self.likelihood).detach()
        return gaussian_log_predictive(y.to(X.dtype).reshape(len(X), -1), mean, variance, noise)
