r"""Activated deep GPs: every layer is a sphere embedding + activated features + an arc-cosine
kernel, so the posterior mean is exactly a neural network (seed 000 sec. 3.2, 4.3; seed 001 ch. 4).

``to_torch_module()`` returns that network (``zonal.nn.ActivatedNetwork``);
``from_torch_module(net)`` sets the inducing directions :math:`W` and the variational means so that
the DGP's posterior mean equals ``net``: with :math:`B = V` (the network's output weights),
:math:`m = L^\top V` (whitened, :math:`L L^\top = K_{uu}`) or :math:`m = K_{uu} V` (unwhitened).
The rest (variational covariances, kernel variances, likelihood) is then trained by the ELBO:
``two_stage_fit``.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Sequence
from typing import cast

import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood, Likelihood, SoftmaxLikelihood

from zonal.features import ActivatedFeatures
from zonal.geometry import SphereEmbedding
from zonal.kernels import ArcCosineKernel
from zonal.models.dgp import DGP, DGPLayer, fit_dgp
from zonal.models.training import (
    PlateauSchedule,
    Seed,
    adam_on_minibatches,
    check_targets,
    transformed_training_data,
)
from zonal.nn import ActivatedLayer, ActivatedNetwork


class ActivatedDGP(DGP):
    r"""An :math:`L`-layer activated DGP with widths ``input_dim -> hidden_dims... -> output_dim``.

    Args:
        input_dim: :math:`D`.
        hidden_dims: output widths of the hidden layers (seed 000 uses 5), empty for one layer.
        likelihood: e.g. ``GaussianLikelihood()``, ``BernoulliLikelihood()``,
            ``SoftmaxLikelihood(num_classes=C, mixing_weights=False)`` (with ``output_dim=C``:
            the softmax of the last layer's :math:`C` outputs, as in the network; GPyTorch's
            default mixing weights would multiply :math:`f` by a random :math:`C \times C` matrix
            the network does not have).
        output_dim: outputs of the last layer (1 is squeezed: a single GP output).
        num_inducing: :math:`M` per layer (the hidden width of the equivalent network).
        activation: ``"relu"`` or ``"softplus"`` (seed 001 recommends Softplus).
        truncation_level: :math:`\tilde N` (seed 000 uses 10; seed 001 uses 20).
        mean: ``"zero"`` or ``"constant"`` (a bias in the network).
        kernel_variance: initial arc-cosine variance (a ``ScaleKernel`` outputscale).
        bias: the constant appended to each layer's input.
        input_scales: give the first layer's ``SphereEmbedding`` one learnt scale per input
            (ARD; True: all 1 to start, a number or a tensor [D]: that start; the equivalent
            network's first layer carries the same scales).
        input_transform, outcome_transform: BoTorch transforms, as ``SingleTaskGP`` takes them.
    """

    def __init__(
        self,
        input_dim: int,
        hidden_dims: list[int] | tuple[int, ...],
        likelihood: Likelihood,
        *,
        output_dim: int = 1,
        num_inducing: int = 100,
        activation: str = "softplus",
        truncation_level: int = 10,
        mean: str = "zero",
        kernel_variance: float = 1.0,
        bias: float = 1.0,
        input_scales: bool | float | torch.Tensor = False,
        seed: int = 0,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ) -> None:
        if mean not in ("zero", "constant"):
            raise ValueError(f"an activated DGP supports mean 'zero' or 'constant', got {mean!r}")
        if isinstance(likelihood, SoftmaxLikelihood) and likelihood.mixing_weights is not None:
            raise ValueError(
                "SoftmaxLikelihood mixes the GP outputs by a random matrix that the equivalent "
                "network does not have: use SoftmaxLikelihood(num_classes=C, mixing_weights=False) "
                "with output_dim=C"
            )
        widths = _checked_widths(input_dim, hidden_dims, output_dim)
        layers = []
        for index, (width_in, width_out) in enumerate(itertools.pairwise(widths)):
            last = index == len(widths) - 2
            kernel = ScaleKernel(ArcCosineKernel(width_in + 1, homogeneous=True)).to(torch.float64)
            kernel.outputscale = kernel_variance
            features = ActivatedFeatures(
                width_in + 1,
                num_inducing,
                kernel=kernel,
                activation=activation,
                truncation_level=truncation_level,
                seed=seed + index,
            )
            output_dims = None if last and width_out == 1 else width_out
            start = _scales_start(input_scales) if index == 0 else None
            embedding = (
                SphereEmbedding(bias)
                if start is None
                else SphereEmbedding(bias, input_scales=start, input_dim=width_in)
            )
            layers.append(
                DGPLayer(
                    kernel,
                    features,
                    width_in,
                    output_dims,
                    mean=mean,
                    input_map=embedding,
                )
            )
        super().__init__(
            layers,
            likelihood,
            input_transform=input_transform,
            outcome_transform=outcome_transform,
        )
        self.widths = widths
        self.activation = activation
        self.mean_kind = mean

    # ------------------------------------------------------------------ network <-> DGP
    def _dgp_layers(self) -> list[DGPLayer]:
        """The layers (``layers`` holds them as a ModuleList)."""
        return cast("list[DGPLayer]", list(self.layers))

    @staticmethod
    def _layer_coefficients(layer: DGPLayer) -> torch.Tensor:
        """sigma_n restricted to the levels the layer's kernel keeps: [N~ + 1]."""
        features, _ = _activated_parts(layer)
        return features.kept_coefficients(layer.covar_module).detach()

    @staticmethod
    def _output_weights(layer: DGPLayer) -> torch.Tensor:
        """B [M, P] with mean = Kfu B (``InterDomainVariationalStrategy.inducing_weights``)."""
        weights = layer.variational_strategy.inducing_weights().detach()  # [P, M] or [M]
        return weights.mT if weights.dim() > 1 else weights.unsqueeze(-1)

    def to_torch_module(self) -> ActivatedNetwork:
        """The network whose forward pass equals ``posterior_mean`` (seed 000 eq. 4)."""
        network_layers = []
        for layer in self._dgp_layers():
            features, embedding = _activated_parts(layer)
            width_in = layer.input_dims
            width_out = layer.output_dims or 1
            net_layer = ActivatedLayer(
                width_in,
                features.num_inducing,
                width_out,
                self._layer_coefficients(layer),
                bias=float(embedding.bias),
                output_bias=self.mean_kind == "constant",
                input_scales=embedding.input_scales,
            )
            with torch.no_grad():
                net_layer.raw_weights.copy_(features.weights)
                net_layer.output_weights.copy_(self._output_weights(layer))
                if net_layer.output_bias is not None:
                    net_layer.output_bias.copy_(layer.mean_module.constant.detach().reshape(-1))
            network_layers.append(net_layer)
        reference = next(self.parameters())  # the network in the model's dtype and device
        return ActivatedNetwork(*network_layers).to(dtype=reference.dtype, device=reference.device)

    def network_like(self, seed: int = 0) -> ActivatedNetwork:
        """A freshly initialised network of the matching architecture (for stage-1 training;
        input scales, if any, start where the model's first-layer scales are now: where they
        started, for a model not yet trained)."""
        network = self.to_torch_module()
        generator = torch.Generator().manual_seed(seed)
        fresh = []
        for layer in _network_layers(network):
            fresh.append(
                ActivatedLayer(
                    layer.input_dim,
                    layer.hidden_width,
                    layer.output_dim,
                    layer.coefficients,
                    bias=float(layer.bias),
                    output_bias=layer.output_bias is not None,
                    input_scales=None
                    if layer.input_scales is None
                    else layer.input_scales.detach().clone(),
                    generator=generator,
                )
            )
        reference = next(network.parameters())  # the model's dtype and device
        return ActivatedNetwork(*fresh).to(dtype=reference.dtype, device=reference.device)

    @torch.no_grad()
    def from_torch_module(
        self,
        network: ActivatedNetwork,
        *,
        kernel_variance: float | Sequence[float] | None = None,
        variational_scale: float | None = None,
    ) -> ActivatedDGP:
        r"""Set inducing directions and variational means so that the posterior mean is
        ``network``.

        The network must match layer by layer (input width, hidden width :math:`M`, output width,
        truncated activation coefficients, bias, whether it has input scales); a mismatch raises a
        ``ValueError`` naming the layer and the shapes. Input scales are copied into the layer's
        ``SphereEmbedding``.

        ``kernel_variance`` first sets the layers' arc-cosine variances (one for every layer, or
        one per layer, first to last): the copied mean does not depend on them (the variational
        mean absorbs them), but everything the DGP adds to the network,
        :math:`K_{ff} - Q_{ff} + Q S Q^\top` in every layer, scales with them (see the ``uci-dgp``
        experiment: 1e-3 starts a deep regression model at the network). ``variational_scale``
        then sets every :math:`q` covariance to :math:`\mathtt{scale}^2 I`
        (``set_variational_scale``).
        """
        layers = _network_layers(network)
        if len(layers) != len(self.layers):
            raise ValueError(f"the network has {len(layers)} layers, the DGP {len(self.layers)}")
        if kernel_variance is not None:
            variances = (
                [float(kernel_variance)] * len(layers)
                if isinstance(kernel_variance, int | float)
                else [float(v) for v in kernel_variance]
            )
            if len(variances) != len(layers):
                raise ValueError(
                    f"kernel_variance holds {len(variances)} values for {len(layers)} layers"
                )
            if min(variances) <= 0:
                raise ValueError(f"kernel_variance must be positive, got {kernel_variance}")
            for layer, variance in zip(self._dgp_layers(), variances, strict=True):
                layer.covar_module.outputscale = variance
        for index, (net_layer, layer) in enumerate(zip(layers, self._dgp_layers(), strict=True)):
            features, embedding = _activated_parts(layer)
            expected = (layer.input_dims, features.num_inducing, layer.output_dims or 1)
            found = (net_layer.input_dim, net_layer.hidden_width, net_layer.output_dim)
            if expected != found:
                raise ValueError(
                    f"layer {index}: the DGP has (input, hidden, output) = {expected}, "
                    f"the network {found}"
                )
            coefficients = self._layer_coefficients(layer)
            if net_layer.coefficients.shape != coefficients.shape or not torch.allclose(
                net_layer.coefficients, coefficients
            ):
                raise ValueError(
                    f"layer {index}: the network's activation coefficients differ from the DGP's "
                    f"({tuple(net_layer.coefficients.shape)} vs {tuple(coefficients.shape)})"
                )
            if float(net_layer.bias) != float(embedding.bias):
                raise ValueError(
                    f"layer {index}: bias {float(net_layer.bias)} vs {float(embedding.bias)}"
                )
            scales = net_layer.input_scales
            if (scales is None) != (getattr(embedding, "input_scales", None) is None):
                raise ValueError(
                    f"layer {index}: the network {'has' if scales is not None else 'lacks'} "
                    "input scales and the DGP's embedding does not match"
                )
            if scales is not None:
                embedding.raw_input_scales.copy_(
                    embedding.input_scales_constraint.inverse_transform(scales.detach())
                )
            features.raw_weights.copy_(net_layer.weights)
            strategy = layer.variational_strategy
            weights = net_layer.output_weights.detach().mT  # B [P, M]
            shape = strategy._variational_distribution.batch_shape + weights.shape[-1:]
            strategy.set_inducing_weights(weights.reshape(shape))
            if net_layer.output_bias is not None:
                layer.mean_module.constant.copy_(
                    net_layer.output_bias.reshape(layer.mean_module.constant.shape)
                )
        if variational_scale is not None:
            self.set_variational_scale(variational_scale)
        return self


def _activated_parts(layer: DGPLayer) -> tuple[ActivatedFeatures, SphereEmbedding]:
    """A layer's features and input map, of the types an activated DGP builds."""
    features, embedding = layer.features, layer.input_map
    assert isinstance(features, ActivatedFeatures) and isinstance(embedding, SphereEmbedding)
    return features, embedding


def _network_layers(network: ActivatedNetwork) -> list[ActivatedLayer]:
    """The layers of an activated network (an ``nn.Sequential`` of them)."""
    return cast("list[ActivatedLayer]", list(network))


def mean_prior_penalty(layer: DGPLayer, network_layer: ActivatedLayer) -> torch.Tensor:
    """0.5 sum_p v_p^T Kuu(W) v_p: the part of KL(q(u) || p(u)) that the variational mean adds,
    0.5 m^T Kuu^-1 m, when ``network_layer`` (directions W, output weights V [M, P]) is copied
    into the activated DGP's ``layer`` (m = Kuu V, or L^T V whitened: the same value), at the
    layer's kernel as it is. Differentiable in the network's W and V, so that a network trained on
    its loss plus this over N is the DGP's MAP mean for that layer's prior (seed 000 sec. 3.2: the
    network is the posterior mean, V the inducing weights)."""
    features, _ = _activated_parts(layer)
    kuu = features.kuu(layer.covar_module, network_layer.weights)  # [M, M]
    weights = network_layer.output_weights  # [M, P]
    return 0.5 * (weights * (kuu.to(weights.dtype) @ weights)).sum()


def probit_cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """-mean[y log Phi(f) + (1 - y) log Phi(-f)]: the link of GPyTorch's ``BernoulliLikelihood``,
    so that a network trained by it is the DGP's mean under the same likelihood."""
    signed = (2 * target - 1) * output  # [N]
    return -torch.special.log_ndtr(signed).mean()


LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mse": lambda output, target: torch.nn.functional.mse_loss(output, target),
    "bce": probit_cross_entropy,
    "ce": lambda output, target: torch.nn.functional.cross_entropy(output, target.long()),
}


def train_network(
    network: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: str = "mse",
    num_steps: int = 1000,
    batch_size: int = 1024,
    lr: float = 0.01,
    seed: Seed = 0,
    plateau: PlateauSchedule | None = None,
    callback: Callable[[int, float], None] | None = None,
    penalty: Callable[[], torch.Tensor] | None = None,
) -> list[float]:
    """Stage 1: fit the network by MSE, binary (probit) or categorical cross-entropy with Adam.

    ``seed``, ``plateau`` and ``callback`` are those of ``zonal.models.training.adam_on_minibatches``.
    ``penalty()`` / :math:`N` is added to every minibatch's mean loss (a prior's negative log
    density, e.g. ``mean_prior_penalty``: the loss is then a MAP objective per point).
    """
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; use one of {sorted(LOSSES)}")
    objective = LOSSES[loss]
    y = targets_like_outputs(network, x, y, loss)

    def loss_of_batch(index: torch.Tensor) -> torch.Tensor:
        value = objective(network(x[index]), y[index])
        return value if penalty is None else value + penalty() / len(x)

    return adam_on_minibatches(
        loss_of_batch,
        network.parameters(),
        len(x),
        num_steps=num_steps,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        plateau=plateau,
        callback=callback,
    )


@torch.no_grad()
def targets_like_outputs(
    network: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, loss: str = "mse"
) -> torch.Tensor:
    """y shaped as the network's outputs for the ``loss``: a one-column y [N, 1] of a network with
    one output [N] is flattened (``mse_loss`` would broadcast the two to [N, N] and fit the mean);
    for "mse" any other mismatch is a ``ValueError`` naming the shapes; class labels ("bce",
    "ce") are [N]. A vector y is returned as it is; for a matrix y the network is run on one row
    in evaluation mode (no dropout draw, no batch-norm update), then put back in its mode."""
    if len(y) != len(x):
        raise ValueError(f"x has {len(x)} rows but y has {len(y)}")
    if y.dim() < 2:
        return y
    training = network.training
    network.eval()
    try:
        outputs = network(x[:1])  # [1] or [1, P]
    finally:
        network.train(training)
    if y.dim() == 2 and y.shape[-1] == 1 and outputs.dim() == 1:
        y = y.reshape(-1)
    if loss == "mse" and y.shape[1:] != outputs.shape[1:]:
        raise ValueError(
            f"targets of shape {tuple(y.shape)} do not match the network's outputs "
            f"[N{', ' + str(outputs.shape[-1]) if outputs.dim() > 1 else ''}]"
        )
    return y


@torch.no_grad()
def noise_from_network(
    likelihood: GaussianLikelihood, network: torch.nn.Module, x: torch.Tensor, y: torch.Tensor
) -> float:
    """Set a Gaussian likelihood's noise variance to the network's training MSE (the variance of
    seed 001's "Vanilla" network model), kept above the likelihood's lower bound; returns it."""
    floor = 2 * float(likelihood.noise_covar.raw_noise_constraint.lower_bound)
    y = targets_like_outputs(network, x, y)
    noise = max(float(torch.mean((network(x) - y) ** 2)), floor)
    raw = likelihood.noise_covar.raw_noise
    likelihood.noise = torch.tensor(noise, dtype=raw.dtype, device=raw.device)
    return noise


def two_stage_fit(
    model: ActivatedDGP,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: str = "mse",
    network_steps: int = 1000,
    elbo_steps: int = 1000,
    batch_size: int = 1024,
    lr: float = 0.01,
    kernel_variance: float | None = None,
    initial_scale: float = 1e-2,
    seed: int = 0,
    plateau: PlateauSchedule | None = None,
) -> dict[str, list[float]]:
    """Seed 000 sec. 5 / seed 001 ch. 4: train the mean as a network, copy it into the DGP, then
    optimise everything (variational covariances, kernel variances, likelihood) by the ELBO.

    After the copy (``from_torch_module(network, kernel_variance=..., variational_scale=
    initial_scale)``) a Gaussian likelihood's noise starts at the network's training MSE
    (``noise_from_network``). ``plateau`` (e.g. ``PlateauSchedule(0.9)``, seed 000 sec. 5.2)
    applies to both stages. The inputs are checked, and the model's input and outcome
    transforms learnt on :math:`(x, y)`, before the network stage, which trains on the
    transformed rows that the ELBO stage (``fit_dgp``) reads.
    """
    x = model.check_inputs(torch.as_tensor(x))  # shapes, dtype and NaN before any training
    x_network, y_network = transformed_training_data(model, x, y)  # as fit_dgp will read them
    y_network = check_targets(model.likelihood, y_network, len(x_network)).to(x_network.device)
    if y_network.is_floating_point():
        y_network = y_network.to(x_network.dtype)
    network = model.network_like(seed)
    network_losses = train_network(
        network,
        x_network,
        y_network,
        loss=loss,
        num_steps=network_steps,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        plateau=plateau,
    )
    model.from_torch_module(
        network, kernel_variance=kernel_variance, variational_scale=initial_scale
    )
    if isinstance(model.likelihood, GaussianLikelihood) and loss == "mse":
        noise_from_network(model.likelihood, network, x_network, y_network)
    elbo_losses = fit_dgp(
        model, x, y, num_steps=elbo_steps, batch_size=batch_size, lr=lr, seed=seed, plateau=plateau
    )
    return {"network": network_losses, "elbo": elbo_losses}


def _checked_widths(input_dim: object, hidden_dims: object, output_dim: object) -> list[int]:
    """[D, *hidden_dims, output_dim] as ints, refusing by argument name widths an activated DGP
    cannot have (a width of 0 surfaced as an ambient dimension of 1; ``hidden_dims=5`` as a
    TypeError of the unpacking); numpy integers and arrays of widths are taken."""
    try:
        hidden = [] if isinstance(hidden_dims, str) else list(hidden_dims)  # type: ignore[call-overload]
    except TypeError:
        hidden = None
    if hidden is None or isinstance(hidden_dims, str):
        raise ValueError(f"hidden_dims must be a list of widths (e.g. [5]), got {hidden_dims!r}")
    named = [("input_dim", input_dim), *[(f"hidden_dims[{i}]", w) for i, w in enumerate(hidden)],
             ("output_dim", output_dim)]  # fmt: skip
    for name, width in named:
        if isinstance(width, bool) or not isinstance(width, numbers.Integral) or width < 1:
            raise ValueError(f"{name} must be a positive int, got {width!r}")
    return [int(width) for _, width in named]


def _scales_start(input_scales: bool | float | torch.Tensor) -> float | torch.Tensor | None:
    """The first layer's input-scale start of ``ActivatedDGP(input_scales=...)``: None for
    False (no scales), 1 for True, else the number or tensor given."""
    if isinstance(input_scales, bool):
        return 1.0 if input_scales else None
    return input_scales


__all__ = [
    "ActivatedDGP",
    "mean_prior_penalty",
    "noise_from_network",
    "train_network",
    "two_stage_fit",
]
