"""Shared pieces of the deep-GP experiments (``uci-dgp``, ``banana-dgp``) and their benchmark.

Seed 000 sec. 5.1-5.2 and seed 001 ch. 4 train two kinds of models:

* the *activated* DGP (ADGP): every layer uses Softplus activated features (seed 000 sec. 4.3), so
  its posterior mean is a network; it is trained by the two-stage recipe, first the network by a
  loss (MSE, or binary cross-entropy), then, with the network copied into the DGP's inducing
  directions W and variational means (``ActivatedDGP.from_torch_module``), everything by the ELBO;
* the standard DGP: inducing points Z in the lifted space [h, b] and the same arc-cosine kernel
  (seed 000 eq. 7), trained by the ELBO from the start.

Both stages use Adam whose learning rate is multiplied by ``plateau_factor`` whenever the objective
plateaus (``torch.optim.lr_scheduler.ReduceLROnPlateau``, stepped once per epoch with the epoch's
mean loss), as in seed 000 sec. 5.2. ``train_loop`` also evaluates a test metric every ``every``
steps for training traces (seed 000 fig. 6): the evaluation runs under ``torch.random.fork_rng``
and off the clock, so traces neither change the result nor count as training time.

The library's ``two_stage_fit`` / ``train_network`` / ``fit_dgp`` have no learning-rate schedule and
no hook to evaluate during the network stage, hence these loops. For classification with GPyTorch's
``BernoulliLikelihood`` (probit link, p = Phi(f)) the network stage minimises the *probit*
cross-entropy, -y log Phi(f) - (1 - y) log Phi(-f), so the network copied into the DGP predicts the
same probabilities as the DGP with zero variance (``probit_bce``).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import gpytorch
import torch
from gpytorch.likelihoods import Likelihood

from zonal.models.activated_dgp import probit_cross_entropy

MODEL_NAMES = ("ADGP-1", "ADGP-3", "DGP-1", "DGP-3")


def parse_model_name(name: str) -> tuple[bool, int]:
    """``"ADGP-3"`` -> (activated=True, num_layers=3); ``"DGP-1"`` -> (False, 1)."""
    kind, _, depth = name.partition("-")
    if kind not in ("ADGP", "DGP") or not depth.isdigit() or int(depth) < 1:
        raise ValueError(f"model names are ADGP-L or DGP-L (L >= 1 layers), got {name!r}")
    return kind == "ADGP", int(depth)


def layer_widths(input_dim: int, num_layers: int, hidden_width: int) -> list[int]:
    """[D, w, ..., w, 1]: ``num_layers`` GP layers, the hidden ones with ``hidden_width`` outputs."""
    return [input_dim, *([hidden_width] * (num_layers - 1)), 1]


# ---------------------------------------------------------------------------------------- models
def build_activated_dgp(
    input_dim: int,
    num_layers: int,
    likelihood: Likelihood,
    *,
    num_inducing: int,
    hidden_width: int,
    truncation_level: int,
    mean: str,
    seed: int,
):
    """An ``ActivatedDGP`` with Softplus features and the first-order arc-cosine kernel."""
    from zonal.models import ActivatedDGP

    hidden = layer_widths(input_dim, num_layers, hidden_width)[1:-1]
    return ActivatedDGP(
        input_dim,
        hidden,
        likelihood,
        num_inducing=num_inducing,
        activation="softplus",
        truncation_level=truncation_level,
        mean=mean,
        seed=seed,
    )


def initial_inducing_points(
    x: torch.Tensor, num_inducing: int, bias: float, generator: torch.Generator
) -> torch.Tensor:
    """Z [M, D + 1] for a first layer: M random training inputs lifted to [x, b] (standard normal
    inputs fill the rest when M exceeds the number of points)."""
    order = torch.randperm(len(x), generator=generator)[:num_inducing]
    points = x[order]  # [min(M, N), D]
    missing = num_inducing - len(points)
    if missing > 0:
        extra = torch.randn(missing, x.shape[-1], generator=generator, dtype=x.dtype)
        points = torch.cat([points, extra])  # [M, D]
    return torch.cat([points, torch.full((num_inducing, 1), bias, dtype=x.dtype)], dim=-1)


def build_inducing_point_dgp(
    x_train: torch.Tensor,
    num_layers: int,
    likelihood: Likelihood,
    *,
    num_inducing: int,
    hidden_width: int,
    mean: str,
    seed: int,
    inner_scale: float = 1e-2,
    bias: float = 1.0,
):
    """A standard DGP: per layer ``ScaleKernel(ArcCosineKernel(D + 1, homogeneous=True))`` with M
    inducing points in the lifted space [h, b] shared by the layer's outputs.

    First-layer points are lifted training inputs; hidden-layer points are standard normal. The
    hidden layers' whitened q(v) start at N(0, inner_scale^2 I) (Salimbeni and Deisenroth's
    near-deterministic inner layers); the last layer's at the prior N(0, I).
    """
    from gpytorch.kernels import ScaleKernel

    from zonal.features import InducingPoints
    from zonal.kernels import ArcCosineKernel
    from zonal.models import DGP, DGPLayer

    generator = torch.Generator().manual_seed(seed)
    widths = layer_widths(x_train.shape[-1], num_layers, hidden_width)
    layers = []
    for index, (width_in, width_out) in enumerate(itertools.pairwise(widths)):
        kernel = ScaleKernel(ArcCosineKernel(width_in + 1, homogeneous=True)).to(torch.float64)
        if index == 0:
            points = initial_inducing_points(x_train, num_inducing, bias, generator)
        else:
            hidden = torch.randn(num_inducing, width_in, generator=generator, dtype=torch.float64)
            points = torch.cat([hidden, torch.full((num_inducing, 1), bias)], dim=-1)
        last = index == len(widths) - 2
        layer = DGPLayer(
            kernel,
            InducingPoints(points),
            width_in,
            None if last else width_out,
            mean=mean,
            bias=bias,
        )
        initialise_whitened_q(layer.variational_strategy, 1.0 if last else inner_scale)
        layers.append(layer)
    return DGP(layers, likelihood)


def initialise_whitened_q(strategy, scale: float) -> None:
    """q(v) = N(0, scale^2 I), marked as initialised: GPyTorch would otherwise reset it to the
    prior (plus noise from the global RNG) on the first forward pass."""
    distribution = strategy._variational_distribution
    with torch.no_grad():
        distribution.variational_mean.zero_()
        eye = torch.eye(distribution.chol_variational_covar.shape[-1], dtype=torch.float64)
        distribution.chol_variational_covar.copy_(
            scale * eye.expand_as(distribution.chol_variational_covar)
        )
    strategy.variational_params_initialized.fill_(1)


# ---------------------------------------------------------------------------------------- losses
probit_bce = probit_cross_entropy  # the probit link of ``BernoulliLikelihood``

NETWORK_LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mse": lambda f, y: torch.mean((f - y) ** 2),
    "probit_bce": probit_bce,
}


def elbo_objective(model, num_data: int) -> gpytorch.mlls.DeepApproximateMLL:
    """The DGP ELBO per datum (seed 000 eq. 5) for minibatches of a training set of ``num_data``."""
    return gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=num_data)
    )


# ---------------------------------------------------------------------------------------- training
@dataclass
class Stopwatch:
    """Training wall time that can be paused (for evaluations inside the loop)."""

    seconds: float = 0.0
    _started: float | None = field(default=None, repr=False)

    def start(self) -> None:
        if self._started is None:
            self._started = time.perf_counter()

    def stop(self) -> None:
        if self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self._started = None

    def read(self) -> float:
        running = 0.0 if self._started is None else time.perf_counter() - self._started
        return self.seconds + running


@dataclass(frozen=True)
class Schedule:
    """Adam with a learning rate cut by ``plateau_factor`` when the epoch loss plateaus."""

    batch_size: int = 1024
    learning_rate: float = 0.01
    plateau_factor: float = 0.9
    plateau_patience: int = 10  # epochs without improvement before a cut

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Schedule:
        return cls(
            batch_size=int(config["batch_size"]),
            learning_rate=float(config["learning_rate"]),
            plateau_factor=float(config["plateau_factor"]),
            plateau_patience=int(config["plateau_patience"]),
        )


def epoch_batches(num_points: int, batch_size: int, generator: torch.Generator) -> Iterator:
    """Minibatch index tensors [B], a fresh permutation every epoch, forever."""
    while True:
        order = torch.randperm(num_points, generator=generator)
        yield from order.split(batch_size)


Evaluate = Callable[[], float]


def train_loop(
    parameters: list[torch.nn.Parameter],
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    num_points: int,
    num_steps: int,
    schedule: Schedule,
    generator: torch.Generator,
    *,
    clock: Stopwatch | None = None,
    evaluate: Evaluate | None = None,
    every: int = 0,
    on_evaluate: Callable[[int, float, float], None] | None = None,
) -> list[float]:
    """Adam + ReduceLROnPlateau on ``loss_fn(batch_index)`` for ``num_steps`` steps; the losses.

    If ``evaluate`` is given it is called (clock paused, global RNG forked) before the first step,
    every ``every`` steps and after the last, and ``on_evaluate(step, seconds, value)`` receives
    the number of steps done, the training seconds on ``clock`` so far and its value.
    """
    clock = clock if clock is not None else Stopwatch()
    optimiser = torch.optim.Adam(parameters, lr=schedule.learning_rate)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimiser, factor=schedule.plateau_factor, patience=schedule.plateau_patience
    )
    per_epoch = max(1, math.ceil(num_points / schedule.batch_size))
    batches = epoch_batches(num_points, schedule.batch_size, generator)

    def record(step: int) -> None:
        if evaluate is None:
            return
        clock.stop()
        with torch.random.fork_rng(devices=[]):
            value = evaluate()
        if on_evaluate is not None:
            on_evaluate(step, clock.read(), value)
        clock.start()

    losses: list[float] = []
    epoch_losses: list[float] = []
    clock.start()
    record(0)
    for step in range(num_steps):
        optimiser.zero_grad()
        loss = loss_fn(next(batches))
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
        epoch_losses.append(losses[-1])
        if len(epoch_losses) == per_epoch:
            scheduler.step(sum(epoch_losses) / per_epoch)
            epoch_losses = []
        if every > 0 and (step + 1) % every == 0 and step + 1 < num_steps:
            record(step + 1)
    if num_steps > 0:
        record(num_steps)
    clock.stop()
    return losses


def train_elbo(
    model,
    x: torch.Tensor,
    y: torch.Tensor,
    num_steps: int,
    schedule: Schedule,
    generator: torch.Generator,
    *,
    num_samples: int = 1,
    **loop_kwargs: Any,
) -> list[float]:
    """Stage 2 (or the whole training of a standard DGP): the minibatch ELBO, ``num_samples``
    samples propagated through the layers per step."""
    objective = elbo_objective(model, len(x))
    model.train()

    def loss_fn(index: torch.Tensor) -> torch.Tensor:
        with gpytorch.settings.num_likelihood_samples(num_samples):
            return -objective(model(x[index]), y[index])

    return train_loop(
        list(model.parameters()), loss_fn, len(x), num_steps, schedule, generator, **loop_kwargs
    )


def train_network_stage(
    network: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss: str,
    num_steps: int,
    schedule: Schedule,
    generator: torch.Generator,
    **loop_kwargs: Any,
) -> list[float]:
    """Stage 1: the network by ``loss`` (``"mse"`` or ``"probit_bce"``)."""
    if loss not in NETWORK_LOSSES:
        raise ValueError(f"unknown network loss {loss!r}; use one of {sorted(NETWORK_LOSSES)}")
    objective = NETWORK_LOSSES[loss]

    def loss_fn(index: torch.Tensor) -> torch.Tensor:
        return objective(network(x[index]), y[index])

    return train_loop(
        list(network.parameters()), loss_fn, len(x), num_steps, schedule, generator, **loop_kwargs
    )


# ---------------------------------------------------------------------------------------- metrics
@torch.no_grad()
def regression_metrics(
    model, x: torch.Tensor, y: torch.Tensor, num_samples: int
) -> dict[str, float]:
    """Test MSE of the predictive (mixture) mean and the test log likelihood (mean over points of
    log (1/S) sum_s N(y | mu_s, v_s + noise)), both on the scale of ``y``."""
    was_training = model.training
    model.eval()
    mean, _ = model.predict(x, num_samples=num_samples)  # [T]
    density = model.log_predictive_density(x, y, num_samples=num_samples)  # [T]
    model.train(was_training)
    return {"mse": float(torch.mean((mean - y) ** 2)), "tll": float(density.mean())}


@torch.no_grad()
def predictive_mse(model, x: torch.Tensor, y: torch.Tensor, num_samples: int) -> float:
    """Test MSE of the Monte Carlo predictive mean (for traces)."""
    was_training = model.training
    model.eval()
    mean, _ = model.predict(x, num_samples=num_samples)
    model.train(was_training)
    return float(torch.mean((mean - y) ** 2))


@torch.no_grad()
def class_probability(model, x: torch.Tensor, num_samples: int, chunk: int = 4096) -> torch.Tensor:
    """p(y = 1 | x) of a Bernoulli DGP: the mean over S samples of Phi(mu_s / sqrt(1 + v_s)): [N]."""
    was_training = model.training
    model.eval()
    parts = []
    with gpytorch.settings.num_likelihood_samples(num_samples):
        for start in range(0, len(x), chunk):
            output = model(x[start : start + chunk])  # batch [S, n]
            parts.append(model.likelihood(output).probs.mean(0))
    model.train(was_training)
    return torch.cat(parts)


__all__ = [
    "MODEL_NAMES",
    "Schedule",
    "Stopwatch",
    "build_activated_dgp",
    "build_inducing_point_dgp",
    "class_probability",
    "elbo_objective",
    "initialise_whitened_q",
    "layer_widths",
    "parse_model_name",
    "predictive_mse",
    "probit_bce",
    "regression_metrics",
    "train_elbo",
    "train_loop",
    "train_network_stage",
]
