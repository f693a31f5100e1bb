"""Doubly-stochastic deep GPs over inter-domain layers (Salimbeni and Deisenroth, 2017; seed 000
sec. 3.2).

Each ``DGPLayer`` is a (multi-output) SVGP with any ``zonal.features`` inducing feature, shared by
its outputs, and a ``SphereEmbedding`` of its input. Samples are propagated through the layers
(GPyTorch's ``DeepGPLayer`` draws one reparametrised sample per Monte Carlo sample), the ELBO is
``gpytorch.mlls.DeepApproximateMLL(VariationalELBO(...))``, and predictions are the Monte Carlo
mixture over S samples:

    mean = (1/S) sum_s mu_s,   variance = (1/S) sum_s (v_s + mu_s^2) - mean^2,
    log p(y*) ~ log (1/S) sum_s p(y* | f_s)   (log-mean-exp).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import gpytorch
import torch
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import Likelihood
from gpytorch.models.deep_gps import DeepGP, DeepGPLayer
from gpytorch.variational import CholeskyVariationalDistribution

from zonal._validation import check_finite
from zonal.geometry import SphereEmbedding
from zonal.features import InducingFeatures
from zonal.models.means import make_mean
from zonal.models.training import PlateauSchedule, Seed, adam_on_minibatches, check_targets
from zonal.variational import InterDomainVariationalStrategy


class DGPLayer(DeepGPLayer):
    """One GP layer R^{D_in} -> R^{D_out} (``output_dims=None`` squashes a single output).

    Args:
        kernel: a homogeneous zonal kernel on S^{D_in} (ambient_dim D_in + 1), or any kernel of
            the lifted inputs for ``InducingPoints``.
        features: inducing features in ambient_dim D_in + 1.
        input_dims: D_in.
        output_dims: number of outputs, or None for a single squashed output (the last layer).
        mean: ``"zero"``, ``"constant"``, ``"identity"`` or ``"linear"``.
        bias: the embedding's bias b (inputs lifted to [h, b]).
        whiten: whitened q(u).
    """

    def __init__(
        self,
        kernel: Kernel,
        features: InducingFeatures,
        input_dims: int,
        output_dims: int | None,
        *,
        mean: str = "zero",
        bias: float = 1.0,
        learn_bias: bool = False,
        whiten: bool = True,
    ) -> None:
        batch_shape = torch.Size([output_dims]) if output_dims is not None else torch.Size()
        distribution = CholeskyVariationalDistribution(
            features.num_inducing, batch_shape=batch_shape
        )
        distribution.to(torch.float64)
        strategy = InterDomainVariationalStrategy(self, features, distribution, whiten=whiten)
        super().__init__(strategy, input_dims, output_dims)
        self.covar_module = kernel
        self.mean_kind = mean
        self.mean_module = make_mean(mean, input_dims, output_dims or 1)
        self.embedding = SphereEmbedding(bias, learn_bias=learn_bias)
        ambient_dim = getattr(features, "ambient_dim", None)
        if ambient_dim is not None and ambient_dim != input_dims + 1:
            raise ValueError(
                f"the layer's features live in ambient_dim={ambient_dim}, but inputs of dimension "
                f"{input_dims} lift to {input_dims + 1}"
            )

    @property
    def features(self) -> InducingFeatures:
        return self.variational_strategy.features

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """Prior on lifted inputs (used by GPyTorch when ``prior=True``)."""
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))

    def __call__(self, inputs, are_samples: bool = False, **kwargs):
        if isinstance(inputs, MultitaskMultivariateNormal):
            inputs = torch.distributions.Normal(inputs.mean, inputs.variance.sqrt()).rsample()
            are_samples = True
        if inputs.shape[-1] != self.input_dims:
            raise ValueError(
                f"layer expects inputs of dimension {self.input_dims}, got {inputs.shape[-1]}"
            )
        check_finite(inputs.reshape(-1, inputs.shape[-1]), "layer inputs")
        lifted = self.embedding.lift(inputs)
        self.input_dims += 1  # GPyTorch checks the lifted width in debug mode
        try:
            return super().__call__(lifted, are_samples=are_samples, **kwargs)
        finally:
            self.input_dims -= 1

    def mean_function(self, h: torch.Tensor) -> torch.Tensor:
        """The layer's posterior mean at deterministic inputs h [N, D_in]: [N, D_out] (or [N]).

        mean(h) = Kfu B + mu(h), B = L^{-T} m (whitened) or Kuu^{-1} m: seed 000 eq. 2-3.
        """
        lifted = self.embedding.lift(h)  # [N, D_in + 1]
        strategy = self.variational_strategy
        projection, _ = strategy.projection(lifted)  # A [M, N]
        inducing_mean = strategy.variational_distribution.mean  # [P, M] or [M]
        mean = inducing_mean @ projection  # [P, N] or [N]
        batched = inducing_mean.dim() > 1
        prior_mean_input = (
            lifted.expand(*inducing_mean.shape[:-1], *lifted.shape) if batched else lifted
        )
        mean = mean + self.mean_module(prior_mean_input)
        return mean.mT if batched else mean  # [N, P] or [N]


class DGP(DeepGP):
    """A deep GP: ``layers`` applied in order, then ``likelihood``.

    Train with ``fit_dgp`` or ``gpytorch.mlls.DeepApproximateMLL(VariationalELBO(likelihood,
    model, num_data))``; ``predict`` and ``log_predictive_density`` average over
    ``num_samples`` Monte Carlo samples.
    """

    def __init__(self, layers: list[DGPLayer], likelihood: Likelihood) -> None:
        super().__init__()
        if not layers:
            raise ValueError("a DGP needs at least one layer")
        for index, (previous, layer) in enumerate(itertools.pairwise(layers)):
            if previous.output_dims != layer.input_dims:
                raise ValueError(
                    f"layer {index} outputs {previous.output_dims} dimensions but layer "
                    f"{index + 1} expects {layer.input_dims}"
                )
        self.layers = torch.nn.ModuleList(layers)
        self.likelihood = likelihood
        self.input_dims = layers[0].input_dims

    def forward(self, x: torch.Tensor):
        if x.dim() != 2 or x.shape[-1] != self.input_dims:
            raise ValueError(
                f"inputs must have shape [N, {self.input_dims}] (the model's input dimension), "
                f"got {tuple(x.shape)}"
            )
        check_finite(x, "inputs")
        output = self.layers[0](x)
        for layer in self.layers[1:]:
            output = layer(output)
        return output

    def posterior_mean(self, x: torch.Tensor) -> torch.Tensor:
        """The composition of the layers' posterior means (seed 000 eq. 3): [N] or [N, P]."""
        h = x
        for layer in self.layers:
            h = layer.mean_function(h)
            if h.dim() == 1 and layer is not self.layers[-1]:
                h = h.unsqueeze(-1)
        return h

    def predict(self, x: torch.Tensor, num_samples: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
        """Mixture mean and variance of f(x) over ``num_samples`` samples: [N] (or [N, P])."""
        with torch.no_grad(), gpytorch.settings.num_likelihood_samples(num_samples):
            output = self(x)
            means, variances = output.mean, output.variance  # [S, N(, P)]
            mean = means.mean(0)
            variance = (variances + means**2).mean(0) - mean**2
        return mean, variance.clamp(min=0)

    def log_predictive_density(
        self, x: torch.Tensor, y: torch.Tensor, num_samples: int = 32
    ) -> torch.Tensor:
        """log (1/S) sum_s p(y_i | f_s(x_i)) per point [N] (log-mean-exp over samples)."""
        with torch.no_grad(), gpytorch.settings.num_likelihood_samples(num_samples):
            output = self(x)
            log_marginal = self.likelihood.log_marginal(y, output)  # [S, N]
            return torch.logsumexp(log_marginal, dim=0) - math.log(log_marginal.shape[0])


def fit_dgp(
    model: DGP,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    num_steps: int = 1000,
    batch_size: int = 1024,
    lr: float = 0.01,
    num_samples: int = 5,
    seed: Seed = 0,
    plateau: PlateauSchedule | None = None,
    callback: Callable[[int, float], None] | None = None,
    parameters=None,
) -> list[float]:
    """Adam on the minibatch DGP ELBO with ``num_samples`` propagated samples; the loss per step.

    ``seed`` is an int or a ``torch.Generator`` for the minibatch order; ``plateau`` cuts the
    learning rate on plateaus of the epoch loss; ``callback(step, loss)`` runs after every step
    (traces, checkpoints).
    """
    x = torch.as_tensor(x, dtype=torch.float64)
    y = check_targets(model.likelihood, y, len(x))
    objective = gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(x))
    )
    model.train()

    def loss_of_batch(index: torch.Tensor) -> torch.Tensor:
        with gpytorch.settings.num_likelihood_samples(num_samples):
            return -objective(model(x[index]), y[index])

    return adam_on_minibatches(
        loss_of_batch,
        parameters or model.parameters(),
        len(x),
        num_steps=num_steps,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        plateau=plateau,
        callback=callback,
    )
