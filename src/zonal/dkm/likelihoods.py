r"""Expected log likelihoods and predictive densities of the DKM output layer (seed 003 appendix
D.2).

The output channels :math:`f_c` of a test/train point are Gaussian under :math:`q` (eqs. 86-87),
independent across points and channels, with means :math:`m_c` and variances :math:`v_c`. For the
GP-ELBO (eq. 77):

* Gaussian likelihood :math:`y_c \sim \mathcal{N}(f_c, \sigma_c^2)`, in closed form (eqs. 80-83):

  .. math::

      \mathbb{E}_q[\log p(y \mid f)] = -\frac{1}{2} \sum_c \big[\log(2 \pi \sigma_c^2)
      + ((y_c - m_c)^2 + v_c) / \sigma_c^2\big];

* categorical likelihood :math:`p(y \mid f) = \operatorname{softmax}(f)_y` (eqs. 88-90):
  :math:`\mathbb{E}_q[\log p(y \mid f)] = \mathbb{E}_q[f_y - \log \sum_c \exp f_c]`, a Monte Carlo
  average over draws of :math:`f`.

Predictive densities: Gaussian :math:`\log \mathcal{N}(y_c; m_c, v_c + \sigma_c^2)` summed over
:math:`c` (exact); categorical
:math:`\log p(y) = \log \mathbb{E}_q[\operatorname{softmax}(f)_y]`, the log of a Monte Carlo
average of the probabilities.

Noise variances and class counts are read from GPyTorch likelihood objects, which hold (and learn)
them: ``GaussianLikelihood`` (one output), ``MultitaskGaussianLikelihood`` (one output per task,
global and/or per-task noise), ``SoftmaxLikelihood(num_classes=C, mixing_weights=False)``.
"""

from __future__ import annotations

import math

import torch
from gpytorch.likelihoods import (
    FixedNoiseGaussianLikelihood,
    GaussianLikelihood,
    Likelihood,
    MultitaskGaussianLikelihood,
    SoftmaxLikelihood,
)


def likelihood_outputs(likelihood: Likelihood) -> int:
    """The number of output channels C the likelihood needs; a named error for others."""
    if isinstance(likelihood, SoftmaxLikelihood):
        if likelihood.mixing_weights is not None:
            raise ValueError(
                "a DKM's outputs are the softmax's logits: use "
                "SoftmaxLikelihood(num_classes=C, mixing_weights=False)"
            )
        return likelihood.num_classes
    if isinstance(likelihood, MultitaskGaussianLikelihood):
        if likelihood.rank != 0:
            raise ValueError("a DKM's output channels are independent: use rank=0 task noise")
        return likelihood.num_tasks
    if isinstance(likelihood, GaussianLikelihood) and not isinstance(
        likelihood, FixedNoiseGaussianLikelihood
    ):
        return 1
    raise ValueError(
        f"a DKM supports GaussianLikelihood, MultitaskGaussianLikelihood and SoftmaxLikelihood, "
        f"got {type(likelihood).__name__}"
    )


def noise_variances(likelihood: Likelihood) -> torch.Tensor:
    """sigma_c^2 [C] (or [1]) of a Gaussian likelihood: global plus per-task noise."""
    if isinstance(likelihood, MultitaskGaussianLikelihood):
        noise = torch.zeros((), dtype=torch.float64)  # adopts the noises' dtype when added
        if likelihood.has_global_noise:
            noise = noise + likelihood.noise
        if likelihood.has_task_noise:
            noise = noise + likelihood.task_noises
        return noise.reshape(-1)
    return likelihood.noise.reshape(-1)


def is_categorical(likelihood: Likelihood) -> bool:
    """Whether the targets are class labels (a softmax likelihood)."""
    return isinstance(likelihood, SoftmaxLikelihood)


def gaussian_expected_log_likelihood(
    targets: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor, noise: torch.Tensor
) -> torch.Tensor:
    """E_q[log N(y; f, sigma^2)] per point [n] (eq. 83) for y, mean [n, C], variance [n, C] or [n]."""
    variance = variance.unsqueeze(-1) if variance.dim() == mean.dim() - 1 else variance
    terms = (math.log(2 * math.pi) + noise.log()) + ((targets - mean).square() + variance) / noise
    return -0.5 * terms.sum(-1)


def gaussian_log_predictive(
    targets: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor, noise: torch.Tensor
) -> torch.Tensor:
    """log p(y) = sum_c log N(y_c; m_c, v_c + sigma_c^2) per point [n]."""
    variance = variance.unsqueeze(-1) if variance.dim() == mean.dim() - 1 else variance
    total = variance + noise  # [n, C]
    terms = math.log(2 * math.pi) + total.log() + (targets - mean).square() / total
    return -0.5 * terms.sum(-1)


def draw_outputs(
    mean: torch.Tensor, variance: torch.Tensor, num_samples: int, generator: torch.Generator | None
) -> torch.Tensor:
    """num_samples draws [S, n, C] of independent f_c ~ N(m_c, v_c), variance [n] or [n, C]."""
    variance = variance.unsqueeze(-1) if variance.dim() == mean.dim() - 1 else variance
    noise = torch.randn(
        (num_samples, *mean.shape), generator=generator, dtype=mean.dtype, device=mean.device
    )  # [S, n, C]
    return mean + variance.clamp_min(0).sqrt() * noise


def categorical_expected_log_likelihood(
    labels: torch.Tensor,
    mean: torch.Tensor,
    variance: torch.Tensor,
    num_samples: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Monte Carlo E_q[log softmax(f)_y] per point [n] (eq. 90); labels [n] integer."""
    draws = draw_outputs(mean, variance, num_samples, generator)  # [S, n, C]
    log_probabilities = draws.log_softmax(-1)  # [S, n, C]
    index = labels.reshape(1, -1, 1).expand(num_samples, -1, 1)
    return log_probabilities.gather(-1, index).squeeze(-1).mean(0)


def categorical_log_probabilities(
    mean: torch.Tensor,
    variance: torch.Tensor,
    num_samples: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """log E_q[softmax(f)] [n, C] by Monte Carlo: the log predictive probability of every class."""
    draws = draw_outputs(mean, variance, num_samples, generator)  # [S, n, C]
    return torch.logsumexp(draws.log_softmax(-1), dim=0) - math.log(num_samples)
