r"""Log-normal hyperpriors for type-II MAP fits of GP hyperparameters.

Maximising :math:`\log p(y \mid \theta)` alone overfits a small table: on 5 rows of 3 inputs the
exact GP's input scales grew to 1e3-1e4 (the embedding :math:`[s \odot x, b]` then forgets its bias
:math:`b`, so :math:`s` and the kernel's outputscale trade off freely), the outputscale fell to
1e-8 and the noise to 0, and its 95% intervals covered 2-56% of new rows. A maximum a posteriori
fit maximises

.. math::

    \log p(y \mid \theta) + \log p(\theta),

with independent log-normal priors adapted from the defaults of BoTorch's ``SingleTaskGP``
(Hvarfner, Hellsten & Nardi 2024, "Vanilla Bayesian optimization performs great in high
dimensions", sec. 4) to zonal's parameters:

- each input scale :math:`s_d` (an inverse lengthscale of a standardised input column)
  :math:`\sim \operatorname{LogNormal}(-\frac{1}{2} \log D, \sqrt{3})`: the prior median
  :math:`1 / \sqrt{D}` keeps :math:`\|s \odot x\|` about :math:`1 = b` for standardised inputs
  whatever :math:`D`, as BoTorch's lengthscale median grows as :math:`\sqrt{D}`, with its width
  :math:`\sqrt{3}`. BoTorch's median lengthscale is :math:`e^{\sqrt{2}} \sqrt{D}` on inputs scaled
  to the unit cube, far smoother: zonal's centre is not BoTorch's;
- the noise variance :math:`\sigma^2` of a standardised target
  :math:`\sim \operatorname{LogNormal}(-4, 1)` (BoTorch's);
- the mean prior variance of :math:`f` over the training rows,
  :math:`\operatorname{mean}_i k(x_i, x_i) \sim \operatorname{LogNormal}(0, 1)`: a standardised
  target has variance 1 (BoTorch fixes the outputscale at 1 instead; with the embedding's radius
  the kernel's variance is not one number, and this prior ties :math:`s` and the outputscale,
  which maximum likelihood trades off freely).

A log-normal density in closed form (not fitted to any table):

.. math::

    \log p(v) = -\log v - \log \tau - \tfrac{1}{2} \log(2 \pi) - (\log v - \mu)^2 / (2 \tau^2).

Its weight against :math:`\log p(y)` falls as :math:`1 / N` per row, so a table of thousands of
rows barely feels it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

#: the width tau of the input scales' log-normal prior (BoTorch's lengthscale prior)
INPUT_SCALE_PRIOR_WIDTH = math.sqrt(3.0)
#: (mu, tau) of the noise variance's log-normal prior for a standardised target (BoTorch's)
NOISE_PRIOR = (-4.0, 1.0)
#: (mu, tau) of the signal variance's log-normal prior for a standardised target
SIGNAL_VARIANCE_PRIOR = (0.0, 1.0)


def log_normal_log_density(value: torch.Tensor, loc: float, scale: float) -> torch.Tensor:
    """log p(v) [...] of values v [...] > 0 under LogNormal(loc, scale) (module docstring)."""
    logs = value.log()
    return (
        -logs - math.log(scale) - 0.5 * math.log(2 * math.pi) - (logs - loc) ** 2 / (2 * scale**2)
    )


@dataclass(frozen=True)
class Hyperpriors:
    r"""Independent log-normal priors on a GP's input scales, noise variance and mean signal
    variance.

    Args:
        input_scales: :math:`(\mu, \tau)` of every learned input scale's log-normal prior, or None
            (no prior on them).
        noise: :math:`(\mu, \tau)` of the noise variance's log-normal prior, or None.
        signal_variance: :math:`(\mu, \tau)` of the log-normal prior on the mean prior variance
            of :math:`f` over the training rows, or None.
    """

    input_scales: tuple[float, float] | None = None
    noise: tuple[float, float] | None = None
    signal_variance: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        for name in ("input_scales", "noise", "signal_variance"):
            value = getattr(self, name)
            if value is None:
                continue
            if len(value) != 2 or not all(math.isfinite(part) for part in value) or value[1] <= 0:
                raise ValueError(
                    f"the {name} prior is (mu, tau) with tau > 0, both finite; got {value!r}"
                )

    @classmethod
    def default(cls, input_dim: int) -> Hyperpriors:
        """The priors of the module docstring for :math:`D =` ``input_dim`` standardised
        inputs."""
        if isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1:
            raise ValueError(f"input_dim must be a positive integer, got {input_dim!r}")
        return cls(
            input_scales=(-0.5 * math.log(input_dim), INPUT_SCALE_PRIOR_WIDTH),
            noise=NOISE_PRIOR,
            signal_variance=SIGNAL_VARIANCE_PRIOR,
        )

    def log_density(
        self,
        input_scales: torch.Tensor | None,
        noise: torch.Tensor,
        signal_variance: torch.Tensor | None = None,
    ) -> torch.Tensor:
        r""":math:`\log p(\theta)`, a scalar tensor with gradients: the sum over the input scales
        :math:`s` [D] (None: a model without learned scales, whose prior is then not read), the
        noise variance (a scalar tensor) and the mean signal variance (a scalar tensor; None: not
        read)."""
        total = torch.zeros((), dtype=noise.dtype, device=noise.device)
        if self.input_scales is not None and input_scales is not None:
            total = total + log_normal_log_density(input_scales, *self.input_scales).sum()
        if self.noise is not None:
            total = total + log_normal_log_density(noise, *self.noise).sum()
        if self.signal_variance is not None and signal_variance is not None:
            total = total + log_normal_log_density(signal_variance, *self.signal_variance).sum()
        return total


def registered_log_prior(module: torch.nn.Module) -> torch.Tensor:
    r""":math:`\sum_j \log p_j(\theta_j)` over the GPyTorch priors registered on ``module`` and its
    submodules (``lengthscale_prior=`` of a kernel, ``outputscale_prior=`` of a ``ScaleKernel``,
    ``noise_prior=`` of a likelihood), a scalar tensor with gradients (0 without priors): what
    GPyTorch's ``ExactMarginalLogLikelihood`` adds to :math:`\log p(y)`, so that the closed-form
    fits (``ExactZonalGP.fit``, ``SGPR.fit``) honour them as ``fit_svgp``'s ELBO does."""
    terms = [
        prior.log_prob(closure(owner)).sum()
        for owner in module.modules()  # a zonal model is a torch Module holding GPyTorch ones
        for prior, closure, _ in getattr(owner, "_priors", {}).values()
    ]
    if terms:
        return sum(terms[1:], terms[0])  # dtypes promote as the terms mix
    tensors = itertools.chain(module.parameters(), module.buffers())
    reference = next(tensors, None)  # 0 on the model's device, in its dtype
    return torch.zeros(()) if reference is None else reference.new_zeros(())


__all__ = [
    "INPUT_SCALE_PRIOR_WIDTH",
    "NOISE_PRIOR",
    "SIGNAL_VARIANCE_PRIOR",
    "Hyperpriors",
    "log_normal_log_density",
    "registered_log_prior",
]
