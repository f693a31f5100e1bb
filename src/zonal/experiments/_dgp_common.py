"""Shared pieces of the deep-GP experiments (``uci-dgp``, ``banana-dgp``) and their benchmark.

Seed 000 sec. 5.1-5.2 and seed 001 ch. 4 train two kinds of models:

* the *activated* DGP (ADGP): every layer uses Softplus activated features (seed 000 sec. 4.3), so
  its posterior mean is a network; it is trained by the two-stage recipe, first the network by a
  loss (MSE, or binary cross-entropy), then, with the network copied into the DGP's inducing
  directions W and variational means (``ActivatedDGP.from_torch_module``), everything by the ELBO;
* the standard DGP: inducing points Z in the lifted space [h, b] and the same arc-cosine kernel
  (seed 000 eq. 7), trained by the ELBO from the start.

Both stages are the library's ``train_network`` and ``fit_dgp``: Adam whose learning rate is
multiplied by ``plateau_factor`` whenever the epoch loss plateaus (``PlateauSchedule``), as in seed
000 sec. 5.2, with one ``torch.Generator`` for the minibatch order of both stages. ``timed`` adds
the training clock and evaluates a test metric every ``every`` steps for training traces (seed 000
fig. 6): the evaluation runs under ``torch.random.fork_rng`` and off the clock, so traces neither
change the result nor count as training time. For classification with GPyTorch's
``BernoulliLikelihood`` (probit link, p = Phi(f)) the network stage minimises the *probit*
cross-entropy (loss ``"bce"``), so the network copied into the DGP predicts the same probabilities
as the DGP with zero variance.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import torch

from zonal.models.training import PlateauSchedule
from zonal.tabular import recipes

if TYPE_CHECKING:
    from zonal.experiments._baselines import GPyTorchDeepGP
    from zonal.models import DGP

#: the deep models these helpers train and score: zonal's DGPs (inducing-point, activated,
#: residual) and GPyTorch's deep GP (the benchmark's baseline), all with ``num_posterior_samples``
DeepModel: TypeAlias = "DGP | GPyTorchDeepGP"

MODEL_NAMES = ("ADGP-1", "ADGP-3", "DGP-1", "DGP-3")


def parse_model_name(name: str) -> tuple[bool, int]:
    """``"ADGP-3"`` -> (activated=True, num_layers=3); ``"DGP-1"`` -> (False, 1)."""
    kind, _, depth = name.partition("-")
    if kind not in ("ADGP", "DGP") or not depth.isdigit() or int(depth) < 1:
        raise ValueError(f"model names are ADGP-L or DGP-L (L >= 1 layers), got {name!r}")
    return kind == "ADGP", int(depth)


# The deep models are built by the recipes' functions, so that ``zonal fit --model adgp|dgp`` and
# these experiments train the same models.
build_activated_dgp = recipes.build_activated_dgp
build_inducing_point_dgp = recipes.build_inducing_point_dgp


# ---------------------------------------------------------------------------------------- training
@dataclass
class Stopwatch:
    """Training time that can be paused (for evaluations inside the loop): CPU seconds of this
    process (``time.process_time``). The experiments run single-threaded (``OMP_NUM_THREADS=1``),
    where CPU seconds equal the wall clock of an idle machine but, unlike the wall clock, do not
    count the neighbours' work when several fits share the cores (``--jobs``, a second run)."""

    seconds: float = 0.0
    _started: float | None = field(default=None, repr=False)

    def start(self) -> None:
        if self._started is None:
            self._started = time.process_time()

    def stop(self) -> None:
        if self._started is not None:
            self.seconds += time.process_time() - self._started
            self._started = None

    def read(self) -> float:
        running = 0.0 if self._started is None else time.process_time() - self._started
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

    def options(self, generator: torch.Generator) -> dict[str, Any]:
        """Keyword arguments of ``fit_dgp`` / ``train_network`` for this schedule."""
        return {
            "batch_size": self.batch_size,
            "lr": self.learning_rate,
            "seed": generator,
            "plateau": PlateauSchedule(self.plateau_factor, self.plateau_patience),
        }


def timed(
    train: Callable[[Callable[[int, float], None]], list[float]],
    num_steps: int,
    *,
    clock: Stopwatch | None = None,
    evaluate: Callable[[], float] | None = None,
    every: int = 0,
    on_evaluate: Callable[[int, float, float], None] | None = None,
) -> list[float]:
    """Run ``train(callback)`` (a library fit taking a per-step callback) on ``clock``.

    If ``evaluate`` is given it is called (clock paused, global RNG forked, so that it changes
    neither the result nor the training time) before the first step, every ``every`` steps and
    after the last, and ``on_evaluate(step, seconds, value)`` receives the number of steps done,
    the training seconds on ``clock`` so far and its value.
    """
    clock = clock if clock is not None else Stopwatch()

    def record(step: int) -> None:
        if evaluate is None:
            return
        clock.stop()
        with torch.random.fork_rng(devices=[]):
            value = evaluate()
        if on_evaluate is not None:
            on_evaluate(step, clock.read(), value)
        clock.start()

    def callback(step: int, loss: float) -> None:
        done = step + 1
        if every > 0 and done % every == 0 and done < num_steps:
            record(done)

    clock.start()
    record(0)
    losses = train(callback)
    if num_steps > 0:
        record(num_steps)
    clock.stop()
    return losses


def train_elbo(
    model: DeepModel,
    x: torch.Tensor,
    y: torch.Tensor,
    num_steps: int,
    schedule: Schedule,
    generator: torch.Generator,
    *,
    num_samples: int = 1,
    **timing: Any,
) -> list[float]:
    """Stage 2 (or the whole training of a standard DGP): ``fit_dgp`` on the minibatch ELBO per
    datum (seed 000 eq. 5), ``num_samples`` samples propagated through the layers per step;
    ``timing`` are the keyword arguments of ``timed``."""
    from zonal.models import fit_dgp

    options = {"num_steps": num_steps, "num_samples": num_samples, **schedule.options(generator)}
    return timed(
        lambda callback: fit_dgp(model, x, y, callback=callback, **options), num_steps, **timing
    )


def train_network_stage(
    network: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss: str,
    num_steps: int,
    schedule: Schedule,
    generator: torch.Generator,
    **timing: Any,
) -> list[float]:
    """Stage 1: ``train_network`` by ``loss`` (``"mse"``, or ``"bce"``: the probit cross-entropy
    of ``BernoulliLikelihood``); ``timing`` are the keyword arguments of ``timed``."""
    from zonal.models import train_network

    options = {"loss": loss, "num_steps": num_steps, **schedule.options(generator)}
    return timed(
        lambda callback: train_network(network, x, y, callback=callback, **options),
        num_steps,
        **timing,
    )


# ---------------------------------------------------------------------------------------- metrics
def seconds_to_target(trace: list[dict[str, Any]], target: float) -> float | None:
    """Training seconds at the first evaluation of ``trace`` (rows ``{seconds, test_mse}`` in
    the order they were taken) whose test MSE is at most ``target``; None if none reached it.

    The answer is only as fine as the evaluation schedule: a model that crosses the target
    between two evaluations is credited with the time of the later one.
    """
    return next((row["seconds"] for row in trace if row["test_mse"] <= target), None)


@contextlib.contextmanager
def evaluating(model: DeepModel, num_samples: int) -> Iterator[None]:
    """``model`` in eval mode with ``num_samples`` posterior samples; restored afterwards."""
    was_training, samples = model.training, model.num_posterior_samples
    model.num_posterior_samples = num_samples
    try:
        yield
    finally:
        model.num_posterior_samples = samples
        model.train(was_training)


@torch.no_grad()
def regression_metrics(
    model: DeepModel, x: torch.Tensor, y: torch.Tensor, num_samples: int
) -> dict[str, float]:
    """Test MSE of the predictive (mixture) mean and the test log likelihood (mean over points of
    log (1/S) sum_s N(y | mu_s, v_s + noise)), both on the scale of ``y``."""
    with evaluating(model, num_samples):
        mean, _ = model.predict(x)  # [T]
        density = model.log_predictive_density(x, y)  # [T]
    return {"mse": float(torch.mean((mean - y) ** 2)), "tll": float(density.mean())}


@torch.no_grad()
def predictive_mse(model: DeepModel, x: torch.Tensor, y: torch.Tensor, num_samples: int) -> float:
    """Test MSE of the Monte Carlo predictive mean (for traces)."""
    with evaluating(model, num_samples):
        mean, _ = model.predict(x)
    return float(torch.mean((mean - y) ** 2))


@torch.no_grad()
def class_probability(
    model: DeepModel, x: torch.Tensor, num_samples: int, chunk: int = 4096
) -> torch.Tensor:
    """p(y = 1 | x) of a Bernoulli DGP: the mean over S samples of Phi(mu_s / sqrt(1 + v_s)): [N]."""
    parts = []
    with evaluating(model, num_samples):
        model.eval()
        for start in range(0, len(x), chunk):
            components = model.latent_distribution(x[start : start + chunk])  # batch [S], [n]
            parts.append(model.likelihood(components).probs.mean(-2))
    return torch.cat(parts)


__all__ = [
    "MODEL_NAMES",
    "Schedule",
    "Stopwatch",
    "build_activated_dgp",
    "build_inducing_point_dgp",
    "class_probability",
    "evaluating",
    "parse_model_name",
    "predictive_mse",
    "regression_metrics",
    "seconds_to_target",
    "timed",
    "train_elbo",
    "train_network_stage",
]
