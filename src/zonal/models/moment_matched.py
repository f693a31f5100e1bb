r"""A mixture model seen as one Gaussian: the moment-matched view of a deep or stacked model.

Deep zonal models and stacked models are ensembles: their posterior at :math:`X` [*b, q, D] is the
equally weighted mixture of :math:`S` Gaussians :math:`\mathcal{N}(\mu_s, C_s)`
(``zonal.models.contract``). Acquisition functions that read one Gaussian per point (BoTorch's
``qMaxValueEntropy`` and ``qJointEntropySearch``: entropies of Gaussian marginals) do not take a
mixture. The Gaussian with the mixture's first two moments,

.. math::

    m = \frac{1}{S} \sum_s \mu_s, \qquad
    C = \frac{1}{S} \sum_s (C_s + \mu_s \mu_s^\top) - m m^\top,

is the closest Gaussian in :math:`\operatorname{KL}(\text{mixture} \,\|\, \text{Gaussian})`
(moment matching, as in expectation propagation). ``MomentMatchedModel(model)`` answers the model
contract with it, and conditions and fantasises by conditioning the mixture
(``model.condition_on_observations``: the same observations for every component) and matching the
conditioned mixture's moments again.
"""

from __future__ import annotations

import torch
from gpytorch.distributions import MultivariateNormal
from torch.distributions import Normal

from zonal.models import conditioning
from zonal.models.contract import PREDICTION_CHUNK, ZonalModel


def matched_moments(distribution: MultivariateNormal) -> MultivariateNormal:
    """N(m, C) with the moments of the equally weighted mixture of ``distribution``'s components
    on the dimension before the event: [*b, S, q] -> [*b, q] (module docstring)."""
    means = distribution.mean  # [*b, S, q]
    mean = means.mean(-2)  # [*b, q]
    second = distribution.covariance_matrix + means.unsqueeze(-1) * means.unsqueeze(-2)
    covariance = second.mean(-3) - mean.unsqueeze(-1) * mean.unsqueeze(-2)  # [*b, q, q]
    return MultivariateNormal(mean, 0.5 * (covariance + covariance.mT))


class MomentMatchedModel(ZonalModel):
    """The moment-matched Gaussian view of a single-output mixture ``model`` (module docstring).

    Args:
        model: a deep or stacked zonal model (``_is_ensemble``), one output.
    """

    def __init__(self, model: ZonalModel) -> None:
        super().__init__()
        if not model._is_ensemble or model.num_outputs != 1:
            raise ValueError(
                "MomentMatchedModel takes a single-output mixture model (a deep or stacked "
                f"zonal model), got {type(model).__name__} with {model.num_outputs} outputs"
            )
        self.ensemble = model
        self.input_dim = getattr(model, "input_dim", None)
        self.likelihood = getattr(model, "likelihood", None)

    @property
    def batch_shape(self) -> torch.Size:
        """The mixture model's batch (non-empty once conditioned)."""
        return self.ensemble.batch_shape

    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        r""":math:`\mathcal{N}(m, C)` of :math:`f(X)` [*b, q]."""
        return self._noisy_distribution(X, False)

    def _noisy_distribution(
        self, X: torch.Tensor, observation_noise: bool | torch.Tensor
    ) -> MultivariateNormal:
        """The moments of the mixture's posterior (with its own transforms and noise)."""
        posterior = self.ensemble.posterior(X, observation_noise=observation_noise)
        return matched_moments(posterior.distribution)

    @torch.no_grad()
    def log_predictive_density(
        self, X: torch.Tensor, y: torch.Tensor, *, chunk_size: int = PREDICTION_CHUNK
    ) -> torch.Tensor:
        r""":math:`\log \mathcal{N}(y_i \mid m_i, C_{ii})` per point [N], the moments with the
        observation noise."""
        mean, variance = self.predict(X, include_noise=True, chunk_size=chunk_size)  # [N]
        y = torch.as_tensor(y).to(mean)
        if y.dim() == 2 and y.shape[-1] == 1 and mean.dim() == 1:
            y = y.squeeze(-1)  # a one-column y [N, 1]
        if y.shape != mean.shape:
            raise ValueError(f"y must have shape {tuple(mean.shape)}, got {tuple(y.shape)}")
        return Normal(mean, variance.sqrt()).log_prob(y)

    def _conditioned(
        self, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None, *, per_component: bool
    ) -> MomentMatchedModel:
        """The mixture conditioned on the same observations for every component, matched."""
        noise = None if noise is None else noise.unsqueeze(-1)
        return MomentMatchedModel(
            conditioning.condition_on_observations(self.ensemble, X, Y.unsqueeze(-1), noise)
        )
