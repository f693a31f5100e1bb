r"""Doubly-stochastic deep GPs over inter-domain layers (Salimbeni and Deisenroth, 2017; seed 000
sec. 3.2).

Each ``DGPLayer`` is a (multi-output) SVGP with any ``zonal.features`` inducing feature, shared by
its outputs, and an input map (``zonal.geometry``: ``SphereEmbedding`` by default). Samples are
propagated through the layers (one reparametrised sample of each hidden layer's output per Monte
Carlo sample, as in GPyTorch's ``DeepGPLayer``), the ELBO is
``gpytorch.mlls.DeepApproximateMLL(VariationalELBO(...))``, and the posterior is the Gaussian
mixture over :math:`S` samples of the inner layers (``zonal.models.contract``):

.. math::

    \text{mean} &= \frac{1}{S} \sum_s \mu_s, \qquad
    \text{variance} = \frac{1}{S} \sum_s (v_s + \mu_s^2) - \text{mean}^2, \\
    \log p(y^\ast) &\approx \log \frac{1}{S} \sum_s p(y^\ast \mid f_s) \qquad
    \text{(log-mean-exp)}.

``posterior_seed`` fixes the inner-layer draws of every ``posterior`` call (the same draws for
inputs of the same shape), so that an acquisition function built on it is a deterministic,
differentiable function of :math:`X`, as ``optimize_acqf`` needs; None draws afresh each call.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import gpytorch
import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.kernels import Kernel, ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood, Likelihood
from gpytorch.models import ApproximateGP
from gpytorch.models.deep_gps import DeepGP, DeepGPLayer
from gpytorch.variational import CholeskyVariationalDistribution
from linear_operator.operators import BlockDiagLinearOperator

from zonal._validation import check_finite
from zonal.features import InducingFeatures, InducingPoints
from zonal.geometry import InputMap, SphereEmbedding
from zonal.kernels import ArcCosineKernel
from zonal.models.conditioning import conditioned_copy, gaussian_noise
from zonal.models.contract import ZonalModel
from zonal.models.means import make_mean
from zonal.models.svgp import resolve_input_map
from zonal.models.training import (
    PlateauSchedule,
    Seed,
    adam_on_minibatches,
    check_targets,
    transformed_training_data,
)
from zonal.variational import InterDomainVariationalStrategy
from zonal.variational.online import OnlineUpdate, conditioned_marginal, online_update

if TYPE_CHECKING:
    from zonal.models.vector_field import GaussianVectorField

#: Monte Carlo samples of the inner layers in a deep model's posterior
POSTERIOR_SAMPLES = 32


class DGPLayer(DeepGPLayer):
    r"""One GP layer :math:`\mathbb{R}^{D_\mathrm{in}} \to \mathbb{R}^{D_\mathrm{out}}`
    (``output_dims=None`` squashes a single output).

    Args:
        kernel: a zonal kernel on the lifted inputs (homogeneous for a ``SphereEmbedding``), or
            any kernel of the lifted inputs for ``InducingPoints``.
        features: inducing features in ``input_map.ambient_dim(D_in)``.
        input_dims: :math:`D_\mathrm{in}`.
        output_dims: number of outputs, or None for a single squashed output (the last layer).
        mean: ``"zero"``, ``"constant"``, ``"identity"`` or ``"linear"``.
        input_map: ``SphereEmbedding(bias)`` (None: bias 1, inputs lifted to :math:`[h, b]`) or
            ``OnSphere()`` for a layer whose inputs are unit vectors.
        whiten: whitened :math:`q(u)`.
    """

    def __init__(
        self,
        kernel: Kernel,
        features: InducingFeatures,
        input_dims: int,
        output_dims: int | None,
        *,
        mean: str = "zero",
        input_map: InputMap | None = None,
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
        self.input_map = resolve_input_map(input_map, features, input_dims, kernel)
        lifted = self.input_map.ambient_dim(input_dims) > input_dims
        self.mean_module = make_mean(mean, input_dims, output_dims or 1, lifted=lifted)

    @property
    def features(self) -> InducingFeatures:
        return self.variational_strategy.features

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """Prior on lifted inputs (used by GPyTorch when ``prior=True``)."""
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))

    def __call__(
        self,
        inputs: torch.Tensor | MultitaskMultivariateNormal,
        are_samples: bool = False,
        **kwargs: Any,
    ) -> MultivariateNormal:
        """:math:`q(f(h))` for inputs :math:`h` [..., N, D_in], or a sample of a previous layer's
        output.

        A ``MultitaskMultivariateNormal`` input is sampled (one reparametrised draw per entry).
        Deterministic inputs give an output expanded over ``num_likelihood_samples`` samples
        (GPyTorch's convention); ``are_samples=True`` keeps the inputs' batch shape. The output is
        a ``MultitaskMultivariateNormal`` [..., N, D_out], or a ``MultivariateNormal`` [..., N]
        for ``output_dims=None``.
        """
        deterministic = not are_samples
        if isinstance(inputs, MultitaskMultivariateNormal):
            inputs = torch.distributions.Normal(inputs.mean, inputs.variance.sqrt()).rsample()
            deterministic = False
        if not isinstance(inputs, torch.Tensor) or inputs.shape[-1] != self.input_dims:
            found = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs)
            raise ValueError(f"layer expects inputs [..., N, {self.input_dims}], got {found}")
        check_finite(inputs.reshape(-1, inputs.shape[-1]), "layer inputs")
        lifted = self.input_map.lift(inputs)  # [..., N, ambient_dim]
        if self.output_dims is not None:  # one copy per output (a stride-0 expansion)
            lifted = lifted.unsqueeze(-3).expand(*lifted.shape[:-2], self.output_dims, -1, -1)
        output = ApproximateGP.__call__(self, lifted, **kwargs)
        if self.output_dims is not None:
            covariance = BlockDiagLinearOperator(output.lazy_covariance_matrix, block_dim=-3)
            output = MultitaskMultivariateNormal(output.mean.mT, covariance, interleaved=False)
        if deterministic:
            samples = gpytorch.settings.num_likelihood_samples.value()
            output = output.expand(torch.Size([samples, *output.batch_shape]))
        return output

    def mean_function(self, h: torch.Tensor) -> torch.Tensor:
        r"""The layer's posterior mean at deterministic inputs :math:`h` [N, D_in]: [N, D_out] (or
        [N]).

        :math:`\text{mean}(h) = K_{fu} B + \mu(h)`, :math:`B = L^{-\top} m` (whitened) or
        :math:`K_{uu}^{-1} m`: seed 000 eq. 2-3.
        """
        lifted = self.input_map.lift(h)  # [N, ambient_dim]
        strategy = self.variational_strategy
        projection, _ = strategy.projection(lifted)  # A [M, N]
        inducing_mean = strategy.current_q().mean  # [P, M] or [M]
        mean = inducing_mean @ projection  # [P, N] or [N]
        batched = inducing_mean.dim() > 1
        prior_mean_input = (
            lifted.expand(*inducing_mean.shape[:-1], *lifted.shape) if batched else lifted
        )
        mean = mean + self.mean_module(prior_mean_input)
        return mean.mT if batched else mean  # [N, P] or [N]


class DGP(DeepGP, ZonalModel):
    """A deep GP: ``layers`` applied in order, then ``likelihood``.

    Train with ``fit_dgp`` or ``gpytorch.mlls.DeepApproximateMLL(VariationalELBO(likelihood,
    model, num_data))``. ``posterior``, ``predict`` and ``log_predictive_density`` (the model
    contract) mix ``num_posterior_samples`` Monte Carlo samples of the inner layers, drawn from
    ``posterior_seed`` (None: fresh draws at every call). ``input_transform`` and
    ``outcome_transform``: BoTorch transforms, as ``SingleTaskGP`` takes them (``fit_dgp``
    learns them on the training data).
    """

    _is_ensemble = True
    #: the output layer's update of q(u) in a conditioned model (unset on a fitted model)
    _online: OnlineUpdate

    def __init__(
        self,
        layers: Sequence[DGPLayer | GaussianVectorField],
        likelihood: Likelihood | None = None,
        *,
        num_posterior_samples: int = POSTERIOR_SAMPLES,
        posterior_seed: int | None = 0,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ) -> None:
        super().__init__()
        if likelihood is None:
            likelihood = GaussianLikelihood().to(torch.float64)
        if not layers:
            raise ValueError("a DGP needs at least one layer")
        for index, (previous, layer) in enumerate(itertools.pairwise(layers)):
            if previous.output_dims != layer.input_dims:
                raise ValueError(
                    f"layer {index} outputs {previous.output_dims} dimensions but layer "
                    f"{index + 1} expects {layer.input_dims}"
                )
        if num_posterior_samples < 1:
            raise ValueError(f"num_posterior_samples must be >= 1, got {num_posterior_samples}")
        self.layers = torch.nn.ModuleList(layers)
        self.likelihood = likelihood
        self.input_dim = self.input_dims = layers[0].input_dims
        self._num_outputs = layers[-1].output_dims or 1
        self.num_posterior_samples = int(num_posterior_samples)
        self.posterior_seed = posterior_seed
        self.set_transforms(input_transform, outcome_transform)

    def forward(self, x: torch.Tensor, *, are_samples: bool = False) -> MultivariateNormal:
        """Propagate inputs :math:`x` [..., N, D] through the layers (deterministic :math:`x`: the
        output is expanded over ``num_likelihood_samples`` samples in front)."""
        if x.dim() < 2 or x.shape[-1] != self.input_dims:
            raise ValueError(
                f"inputs must have shape [N, {self.input_dims}] (the model's input dimension), "
                f"got {tuple(x.shape)}"
            )
        check_finite(x, "inputs")
        output = self.layers[0](x, are_samples=are_samples)
        for layer in self.layers[1:]:
            output = layer(output)
        return output

    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        r"""The :math:`S` mixture components of :math:`q(f(X))` for :math:`X` [*b, q, D]: batch
        [*b, S], event [q] (or [q, P]); for a conditioned model batch [*F, *b, S]
        (``_conditioned``).

        Hidden layer :math:`l`'s output is drawn as :math:`h = \mu + \sigma \odot \varepsilon` with
        :math:`\varepsilon` [S, q, D_l] from ``posterior_seed`` (fresh when None), shared by every
        t-batch: a point gets the same inner draws wherever it sits in the batch, as BoTorch's
        fixed base samples do.
        """
        return self._output_marginal(self._output_layer_inputs(X))

    def _output_layer_inputs(self, X: torch.Tensor) -> torch.Tensor:
        """The last layer's inputs for the S components at X [*b, q, D]: [*b, S, q, D_L] (X
        itself, repeated, for a one-layer model)."""
        samples = self.num_posterior_samples
        if len(self.layers) == 1:
            return X.unsqueeze(-3).expand(*X.shape[:-2], samples, *X.shape[-2:])  # [*b, S, q, D]
        generator = None
        if self.posterior_seed is not None:
            generator = torch.Generator(device=X.device).manual_seed(self.posterior_seed)
        # the first layer's marginals at the deterministic X are the same for every draw: computed
        # once and broadcast against the S draws
        output = self.layers[0](X, are_samples=True)  # [*b, q, D_1]
        mean = output.mean.unsqueeze(-3)  # [*b, 1, q, D_1]
        std = output.variance.sqrt().unsqueeze(-3)  # [*b, 1, q, D_1]
        for layer in self.layers[1:]:
            noise = torch.randn(
                (samples, *mean.shape[-2:]), generator=generator, dtype=X.dtype, device=X.device
            )  # [S, q, D_l]
            h = mean + std * noise  # [*b, S, q, D_l]
            if layer is self.layers[-1]:
                return h
            output = layer(h, are_samples=True)  # [*b, S, q, D_{l+1}]
            mean, std = output.mean, output.variance.sqrt()
        raise AssertionError("unreachable: the loop returns at the last layer")

    def _output_marginal(self, h: torch.Tensor) -> MultivariateNormal:
        """The last layer's q(f) at its inputs h [*b, S, q, D_L]: the fitted q(u), or the
        online-conditioned one of a conditioned model (``zonal.variational.online``)."""
        layer = cast(DGPLayer, self.layers[-1])  # ``layers`` is a ModuleList
        update = getattr(self, "_online", None)
        if update is None:
            return layer(h, are_samples=True)
        return conditioned_marginal(layer.variational_strategy, update, layer.input_map.lift(h))

    def _output_stage(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the last layer's inputs [*b, S, q, D_L], the radius [*b, 1, q] that scales its output,
        or None)."""
        return self._output_layer_inputs(X), None

    def _conditioned(
        self, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None, *, per_component: bool
    ) -> DGP:
        """The output layer conditioned on the new rows for each inner draw, the hidden layers
        kept (online variational conditioning, ``zonal.variational.online``).

        For component s the new rows reach the output layer at the hidden draw h_s(X) (drawn as
        in ``latent_distribution``), and the output layer's q(u) is updated with N(y | g(h_s(X)),
        noise): Y [*F, *b, q] (the same rows for every component) or [*F, *b, S, q] (one per
        component, as ``fantasize`` draws them). What this approximates: the exact posterior
        would also update the hidden layers and correlate the hidden draws at the new rows with
        those at test points; here the hidden layers' q are kept and their draws at test points
        are independent of those at the new rows (each point's marginal, as in prediction), so
        the update reaches a test point only through the output layer's inducing variables.
        Exact for a one-layer model. A conditioned model can be conditioned again (the updates
        compose); Gaussian likelihood only.
        """
        noise = gaussian_noise(self).expand(X.shape[:-1]) if noise is None else noise  # [*b, q]
        model = conditioned_copy(self)
        h, radius = model._output_stage(X)  # [*b, S, q, D_L], [*b, 1, q] or None
        noise = noise.unsqueeze(-2)  # [*b, 1, q]
        if not per_component:
            Y = Y.unsqueeze(-2)  # [*F, *b, 1, q]
        if radius is not None:  # y = r g(h) + e: g(h) observed as y / r with noise / r^2
            Y, noise = Y / radius, noise / radius**2
        layer = cast(DGPLayer, model.layers[-1])
        lifted = layer.input_map.lift(h)  # [*b, S, q, ambient_dim]
        previous = getattr(self, "_online", None)
        model._online = online_update(layer.variational_strategy, lifted, Y, noise, previous)
        model._conditioned_batch = model._online.mean.shape[:-2]  # [*F, *b]
        return model

    def set_variational_scale(self, scale: float) -> None:
        r"""Every layer's :math:`q` covariance to :math:`\mathtt{scale}^2 I` (whitened: relative to
        the prior)."""
        for layer in cast("Iterable[DGPLayer | GaussianVectorField]", self.layers):
            layer.variational_strategy.set_variational_scale(scale)

    def posterior_mean(self, x: torch.Tensor) -> torch.Tensor:
        """The composition of the layers' posterior means (seed 000 eq. 3): [N] or [N, P]."""
        h = x
        for layer in cast("Iterable[DGPLayer]", self.layers):
            h = layer.mean_function(h)
            if h.dim() == 1 and layer is not self.layers[-1]:
                h = h.unsqueeze(-1)
        return h


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
    parameters: Iterable[torch.nn.Parameter] | None = None,
) -> list[float]:
    """Adam on the minibatch DGP ELBO with ``num_samples`` propagated samples; the loss per step.

    ``seed`` is an int or a ``torch.Generator`` for the minibatch order; ``plateau`` cuts the
    learning rate on plateaus of the epoch loss; ``callback(step, loss)`` runs after every step
    (traces, checkpoints). Targets [N] or [N, 1]; the model's input and outcome transforms, if
    any, are learnt on :math:`(x, y)` first (``ZonalModel.transform_training_data``).
    """
    x = model.check_inputs(torch.as_tensor(x))
    x, y = transformed_training_data(model, x, y)
    y = check_targets(model.likelihood, y, len(x)).to(device=x.device)
    y = y.to(x.dtype) if y.is_floating_point() else y
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


def initial_inducing_points(
    x: torch.Tensor, num_inducing: int, bias: float, generator: torch.Generator
) -> torch.Tensor:
    """Z [M, D + 1] for a first layer: M random training inputs lifted to [x, b] (standard normal
    inputs fill the rest when M exceeds the number of points)."""
    order = torch.randperm(len(x), generator=generator)[:num_inducing].to(x.device)
    points = x[order]  # [min(M, N), D]
    missing = num_inducing - len(points)
    if missing > 0:
        extra = torch.randn(missing, x.shape[-1], generator=generator, dtype=x.dtype)
        points = torch.cat([points, extra.to(x.device)])  # [M, D]
    return torch.cat([points, points.new_full((num_inducing, 1), bias)], dim=-1)


def inducing_point_dgp(
    x_train: torch.Tensor,
    widths: list[int],
    likelihood: Likelihood | None = None,
    *,
    num_inducing: int,
    mean: str = "constant",
    seed: int = 0,
    inner_scale: float = 1e-2,
    bias: float = 1.0,
) -> DGP:
    r"""The standard DGP of seed 000 sec. 5 (DGP-L): layers of widths ``widths`` = [D, ..., 1],
    each ``ScaleKernel(ArcCosineKernel(D_in + 1, homogeneous=True))`` with :math:`M` inducing
    points in the lifted space :math:`[h, b]` shared by the layer's outputs.

    First-layer points are lifted training inputs; hidden-layer points are standard normal. The
    hidden layers' whitened :math:`q(v)` start at :math:`\mathcal{N}(0, \mathtt{inner\_scale}^2 I)`
    (Salimbeni and Deisenroth's near-deterministic inner layers); the last layer's at the prior
    :math:`\mathcal{N}(0, I)`.
    """
    generator = torch.Generator().manual_seed(seed)
    dtype, device = x_train.dtype, x_train.device
    layers = []
    for index, (width_in, width_out) in enumerate(itertools.pairwise(widths)):
        kernel = ScaleKernel(ArcCosineKernel(width_in + 1, homogeneous=True))
        kernel = kernel.to(device=device, dtype=dtype)
        if index == 0:
            points = initial_inducing_points(x_train, num_inducing, bias, generator)
        else:
            hidden = torch.randn(num_inducing, width_in, generator=generator, dtype=dtype)
            points = torch.cat([hidden.to(device), hidden.new_full((num_inducing, 1), bias)], -1)
        last = index == len(widths) - 2
        layer = DGPLayer(
            kernel,
            InducingPoints(points),
            width_in,
            None if last and width_out == 1 else width_out,
            mean=mean,
            input_map=SphereEmbedding(bias),
        ).to(device=device, dtype=dtype)
        layer.variational_strategy.set_variational_scale(
            1.0 if last else inner_scale, zero_mean=True
        )
        layers.append(layer)
    return DGP(layers, likelihood)
