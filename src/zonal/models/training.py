"""Minibatch Adam training (optionally with a plateau schedule) for SVGPs, DGPs and networks, with
label checks done before any computation; ``TrainingControl`` watches a fit (wall-clock deadline,
validation score with early stopping that keeps the best state, tqdm progress bar) through the
step callback, which may end a training by raising ``StopTraining``."""

from __future__ import annotations

import math
import numbers
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Literal

import gpytorch
import torch
from gpytorch.likelihoods import (
    BernoulliLikelihood,
    GaussianLikelihood,
    Likelihood,
    MultitaskGaussianLikelihood,
    SoftmaxLikelihood,
)

from zonal._validation import check_finite

if TYPE_CHECKING:
    from zonal.models.contract import ZonalModel


@dataclass(frozen=True)
class PlateauSchedule:
    """Multiply Adam's learning rate by ``factor`` after ``patience`` epochs whose mean loss did not
    improve (``torch.optim.lr_scheduler.ReduceLROnPlateau`` stepped once per epoch; seed 000
    sec. 5.2 uses factor 0.9)."""

    factor: float = 0.9
    patience: int = 10

    def __post_init__(self) -> None:
        if not 0 < self.factor < 1:
            raise ValueError(f"the plateau factor must lie in (0, 1), got {self.factor}")
        if self.patience < 0:
            raise ValueError(f"the plateau patience must be >= 0 epochs, got {self.patience}")


Seed = int | torch.Generator


class StopTraining(Exception):  # noqa: N818 (a control-flow signal, like StopIteration)
    """Raised by a step callback to end ``adam_on_minibatches`` early (budget spent, or no
    validation improvement); the losses so far are returned."""


def check_targets(likelihood: Likelihood, y: torch.Tensor, num_points: int) -> torch.Tensor:
    r"""Validate targets for ``likelihood`` and return them in the dtype it needs.

    Gaussian: real values [N] (or [N, P] for a multitask likelihood); Bernoulli: labels in
    :math:`\{0, 1\}`; softmax / categorical: integer class labels in
    :math:`[0, \mathtt{num\_classes})`. A single-output likelihood also takes one column [N, 1]
    (BoTorch's convention) and returns [N]. NaN or infinite values are reported with the first bad
    row.
    """
    if not isinstance(y, torch.Tensor):
        y = torch.as_tensor(y)
    multitask = isinstance(likelihood, MultitaskGaussianLikelihood)
    if y.dim() == 2 and y.shape[1] == 1 and not multitask:
        y = y.squeeze(-1)  # [N, 1] -> [N]
    if y.dim() == 0 or y.shape[0] != num_points:
        found = tuple(y.shape)
        raise ValueError(f"the inputs have {num_points} rows but the targets have shape {found}")
    if num_points:  # (zero rows, e.g. an empty data-parallel shard, have nothing to check)
        check_finite(y.reshape(num_points, -1).double(), "targets")
    if multitask:
        if y.dim() != 2 or y.shape[1] != likelihood.num_tasks:
            raise ValueError(
                f"a multitask Gaussian likelihood with {likelihood.num_tasks} tasks needs targets "
                f"[N, {likelihood.num_tasks}], got {tuple(y.shape)}"
            )
        return y.to(torch.float64)
    if isinstance(likelihood, GaussianLikelihood):
        if y.dim() != 1:
            raise ValueError(f"a Gaussian likelihood needs targets [N], got {tuple(y.shape)}")
        return y.to(torch.float64)
    if isinstance(likelihood, BernoulliLikelihood):
        if (
            y.dim() != 1
            or not torch.isin(y, torch.tensor([0, 1], dtype=y.dtype, device=y.device)).all()
        ):
            raise ValueError("a Bernoulli likelihood needs labels [N] with values in {0, 1}")
        return y.to(torch.float64)
    if isinstance(likelihood, SoftmaxLikelihood):
        num_classes = likelihood.num_classes
        if y.dim() != 1 or (y.is_floating_point() and not (y == y.round()).all()):
            raise ValueError("a softmax likelihood needs integer class labels [N]")
        if (y < 0).any() or (y >= num_classes).any():
            raise ValueError(
                f"class labels must lie in [0, {num_classes}), got {int(y.min())}..{int(y.max())}"
            )
        return y.long()
    return y


def transformed_training_data(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) through the model's input and outcome transforms, learnt on them
    (``ZonalModel.transform_training_data``); as they are for a model without transforms."""
    transform = getattr(model, "transform_training_data", None)
    return (x, torch.as_tensor(y)) if transform is None else transform(x, y)


def fit_svgp(
    model: ZonalModel,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    num_steps: int = 1000,
    batch_size: int = 1024,
    lr: float = 0.01,
    seed: Seed = 0,
    plateau: PlateauSchedule | None = None,
    callback: Callable[[int, float], None] | None = None,
    natural_gradient: float | None = None,
) -> list[float]:
    """Adam on the minibatch ELBO (``gpytorch.mlls.VariationalELBO``) of a single-layer model
    and its ``model.likelihood``; returns the loss per step.

    ``plateau`` cuts the learning rate on plateaus; ``callback(step, loss)`` is called after every
    step (for traces and checkpoints). Targets [N] or [N, 1]; the model's input and outcome
    transforms, if any, are learnt on :math:`(x, y)` first (``ZonalModel.transform_training_data``).
    ``seed`` orders the minibatches (and draws a classifier's natural-gradient samples); the
    model's initial :math:`q(u)` and the likelihood's Monte Carlo draws come from torch's global
    stream, as in GPyTorch: seed it (``torch.manual_seed``) before building the model for a fit
    that repeats to the bit (``zonal fit`` does).

    ``natural_gradient`` (a step size in :math:`(0, 1]`, for a ``zonal.models.SVGP``): each step
    first moves :math:`q(u)` by a natural-gradient step of that size on the minibatch
    (``SVGP.natural_gradient_step``), then Adam moves the hyperparameters alone with :math:`q(u)`
    fixed, as GPflow's ``NaturalGradient`` with Adam and GPyTorch's ``NGD`` with Adam do
    (Salimbeni, Eleftheriadis & Hensman 2018). :math:`q(u)`'s parameters do not require gradients
    during the training (the backward pass skips them: 0.8x its time for 10 classes), and do
    again afterwards. Within a step both read one :math:`B = L^{-1} K_{uf}`, computed once
    (``InterDomainVariationalStrategy.shared_projection``: :math:`q(u)`'s step does not change
    it).
    """
    if natural_gradient is not None:
        if not hasattr(model, "natural_gradient_step"):
            raise TypeError(f"natural_gradient needs an SVGP, got a {type(model).__name__}")
        if not 0 < natural_gradient <= 1:
            raise ValueError(f"natural_gradient must lie in (0, 1], got {natural_gradient!r}")
    x = model.check_inputs(torch.as_tensor(x))  # shape and NaN checks before anything else
    x, y = transformed_training_data(model, x, y)
    likelihood = model.likelihood
    y = check_targets(likelihood, y, len(x)).to(device=x.device)
    if y.is_floating_point():
        y = y.to(x.dtype)
    objective = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(x))
    model.train()
    parameters = list(model.parameters())
    draws = None
    frozen: list[torch.nn.Parameter] = []
    if natural_gradient is not None:
        variational = list(model.variational_parameters())  # type: ignore[operator]
        parameters = [p for p in parameters if all(p is not q for q in variational)]  # Adam's
        # q(u) moves by its own steps: the backward pass need not differentiate it
        frozen = [p for p in variational if p.requires_grad]
        draws = torch.Generator(device=x.device).manual_seed(
            seed if isinstance(seed, int) else seed.initial_seed()
        )

    def loss_of_batch(index: torch.Tensor) -> torch.Tensor:
        if natural_gradient is None:
            return -objective(model(x[index]), y[index])
        # q(u) first, by its natural gradient; the step and the ELBO after it read one
        # B = L^{-1} Kuf, which q(u) does not change (0.87x the step's time on banana's points)
        with model.inducing_strategy.shared_projection():  # type: ignore[union-attr,operator]
            model.natural_gradient_step(  # type: ignore[operator]
                x[index], y[index], step=natural_gradient, num_data=len(x), generator=draws
            )
            return -objective(model(x[index]), y[index])

    for parameter in frozen:
        parameter.requires_grad_(False)
    try:
        return adam_on_minibatches(
            loss_of_batch,
            parameters,
            len(x),
            num_steps=num_steps,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            plateau=plateau,
            callback=callback,
        )
    finally:
        for parameter in frozen:
            parameter.requires_grad_(True)


def check_batch_size(batch_size: object) -> None:
    """Refuse a minibatch size that is not a positive int (0 divided by zero; a negative one
    trained on a slice of the rows without a word)."""
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, numbers.Integral)
        or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")


def minibatch_indices(
    num_points: int, batch_size: int, num_steps: int, seed: Seed
) -> Iterator[torch.Tensor]:
    """Row indices of ``num_steps`` minibatches: epochs of a permutation, reshuffled each epoch.

    ``seed`` is an int or a ``torch.Generator`` (which then carries on from where it is, so that
    consecutive training stages can share one stream).
    """
    check_batch_size(batch_size)
    generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)
    per_epoch = max(1, math.ceil(num_points / batch_size))
    for step in range(num_steps):
        position = step % per_epoch
        if position == 0:
            order = torch.randperm(num_points, generator=generator)
        yield order[position * batch_size : (position + 1) * batch_size]


def adam_on_minibatches(
    loss_of_batch: Callable[[torch.Tensor], torch.Tensor],
    parameters: Iterable[torch.nn.Parameter],
    num_points: int,
    *,
    num_steps: int,
    batch_size: int,
    lr: float,
    seed: Seed,
    plateau: PlateauSchedule | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Adam steps on ``loss_of_batch(indices)``; returns the loss per step.

    ``plateau`` cuts the learning rate when the epoch's mean loss stops improving;
    ``callback(step, loss)`` runs after every step (traces, checkpoints, evaluations) and may end
    the training by raising ``StopTraining``. Without ``parameters`` (an SVGP whose q(u) moves by
    natural-gradient steps inside ``loss_of_batch`` and which has no other) the losses are only
    evaluated.
    """
    check_batch_size(batch_size)
    parameters = list(parameters)
    optimiser = torch.optim.Adam(parameters, lr=lr) if parameters else None
    scheduler = None
    if plateau is not None and optimiser is not None:
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimiser, factor=plateau.factor, patience=plateau.patience
        )
    per_epoch = max(1, math.ceil(num_points / batch_size))
    losses: list[float] = []
    for step, index in enumerate(minibatch_indices(num_points, batch_size, num_steps, seed)):
        if optimiser is None:
            with torch.no_grad():
                loss = loss_of_batch(index)
        else:
            optimiser.zero_grad()
            loss = loss_of_batch(index)
            loss.backward()
            optimiser.step()
        losses.append(float(loss.detach()))
        if scheduler is not None and (step + 1) % per_epoch == 0:
            scheduler.step(sum(losses[-per_epoch:]) / per_epoch)
        if stop_requested(callback, step, losses[-1]):
            break
    return losses


def stop_requested(callback: Callable[[int, float], None] | None, step: int, loss: float) -> bool:
    """Run a step callback; True if it ended training by raising ``StopTraining``."""
    if callback is None:
        return False
    try:
        callback(step, loss)
    except StopTraining:
        return True
    return False


# ------------------------------------------------------------------------------------ watching
#: evaluations without a better validation score before a stage stops
PATIENCE = 15
#: a stage with a deadline also stops at an evaluation that finds its best validation score older
#: than this share of the time the stage was given (its patience in time: steps of very different
#: cost, from a network's to a deep GP's ELBO, get the same patience in wall clock)
PATIENCE_SHARE = 0.2
#: fewest steps between two validation evaluations
MIN_EVALUATION_INTERVAL = 20
#: the evaluations may take about 1 / EVALUATION_RATIO of a stage's time
EVALUATION_RATIO = 5.0


@dataclass
class TrainingControl:
    """How a fit is watched: a wall-clock ``deadline`` (``time.monotonic()``), a validation
    ``score(model)`` (higher is better, e.g. the mean validation log likelihood) evaluated every so
    often, early stopping after ``patience`` evaluations without improvement or, in a stage with a
    deadline, at an evaluation that finds the best score older than ``patience_share`` of the
    stage's time (the best state is kept), and a tqdm progress bar on stderr (``progress``) named
    ``label``. With ``early_stopping=False`` every stage runs to its steps or its deadline and
    still keeps its best validated state.

    ``validation`` holds the validation inputs and targets for stages that score a module other
    than the model (the activated DGP's network stage). ``interval`` is the number of steps between
    two evaluations without a deadline (e.g. one epoch's steps, so that ``patience`` counts
    epochs) and the fewest with one.
    """

    deadline: float | None = None
    score: Callable[[torch.nn.Module], float] | None = None
    validation: tuple[torch.Tensor, torch.Tensor] | None = None
    patience: int = PATIENCE
    patience_share: float = PATIENCE_SHARE
    progress: bool = False
    label: str = ""
    interval: int = MIN_EVALUATION_INTERVAL
    early_stopping: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.patience_share <= 1:
            raise ValueError(f"patience_share must lie in (0, 1], got {self.patience_share!r}")
        if self.interval < 1:
            raise ValueError(f"interval must be >= 1 step, got {self.interval!r}")

    def remaining(self) -> float:
        """Seconds left before the deadline (infinite without one)."""
        if self.deadline is None:
            return math.inf
        return self.deadline - time.monotonic()

    def share_deadline(self, share: float) -> float | None:
        """The deadline of a part of the work that may use ``share`` of the time left (a
        ``time.monotonic`` instant, not before now; None without a deadline)."""
        remaining = self.remaining()
        if math.isinf(remaining):
            return None
        return time.monotonic() + share * max(0.0, remaining)

    def watch(
        self,
        module: torch.nn.Module,
        steps: int,
        *,
        stage: str,
        share: float = 1.0,
        score: Callable[[torch.nn.Module], float] | Literal["default"] | None = "default",
        patience_share: float | None = None,
        early_stopping: bool = True,
    ) -> StageWatch:
        """A ``StageWatch`` over ``steps`` steps of ``module`` that may use ``share`` of the time
        left; ``score`` overrides the control's (None: no validation in this stage), and
        ``patience_share`` the control's patience in time for this stage; with
        ``early_stopping=False`` (here or in the control) the stage runs to its steps or its
        deadline (the best validated state is still kept)."""
        stage_score = self.score if score == "default" else score
        if patience_share is not None and not 0 < patience_share <= 1:
            raise ValueError(f"patience_share must lie in (0, 1], got {patience_share!r}")
        deadline = self.share_deadline(share)
        return StageWatch(self, module, steps, stage, deadline, stage_score,
                          self.patience_share if patience_share is None else patience_share,
                          early_stopping=early_stopping and self.early_stopping)  # fmt: skip


class StageWatch:
    """The step callback of one training stage (``callback(step, loss)``): it updates the progress
    bar (objective, validation score, seconds of budget left; the ETA is to the deadline or the
    last step, whichever comes first),
    evaluates the validation score every ``control.interval`` steps or, with a deadline,
    at adaptive intervals (their cost kept near 1 / ``EVALUATION_RATIO`` of the stage), copies the
    best state, and raises ``StopTraining`` at the stage deadline, after ``patience`` evaluations
    without improvement, or (with a deadline) at an evaluation whose best score was found more
    than ``patience_share`` of the stage's time (deadline minus start) ago, counted from the first
    evaluation after the start at the earliest (so that a slow first step, a warm-up, does not
    count); ``early_stopping=False`` keeps neither patience, so the stage ends at its steps or its
    deadline. Without a deadline nothing depends on the clock: a seeded fit is reproducible.

    Use it as a context manager: entering it scores the starting state; leaving it normally (or by
    ``StopTraining``) scores the final state too, and leaving it in any way (Ctrl-C included) loads
    the best state seen into the module.
    """

    def __init__(
        self,
        control: TrainingControl,
        module: torch.nn.Module,
        steps: int,
        stage: str,
        deadline: float | None,
        score: Callable[[torch.nn.Module], float] | None,
        patience_share: float | None = None,
        *,
        early_stopping: bool = True,
    ) -> None:
        from tqdm.auto import tqdm

        self.control, self.module, self.deadline, self.score = control, module, deadline, score
        self.steps = steps
        self.best_score = -math.inf
        self.best_state: dict[str, torch.Tensor] | None = None
        self.best_step = -1
        self.best_time = math.nan
        self.last_score = math.nan
        self.last_step = self.evaluated_step = -1
        self.evaluated_at = self.first_evaluated_at = math.nan
        self.evaluations_without_gain = 0
        self.interval = control.interval
        self.next_evaluation = 0
        self.started = time.monotonic()
        patience_share = control.patience_share if patience_share is None else patience_share
        self.time_patience = (
            math.inf
            if deadline is None or not early_stopping
            else patience_share * (deadline - self.started)
        )
        self.patience = control.patience if early_stopping else math.inf
        label = f"{control.label} {stage}".strip()
        self.bar = tqdm(total=steps, desc=label, disable=not control.progress, leave=False,
                        dynamic_ncols=True, file=sys.stderr)  # fmt: skip

    def __enter__(self) -> StageWatch:
        if self.score is not None:
            self.evaluate(-1)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.bar.close()
        if kind is None and self.score is not None and self.last_step > self.evaluated_step:
            self.evaluate(self.last_step)  # the final state competes too
        self.restore_best()

    def restore_best(self) -> None:
        """Load the best-scoring state seen (if any evaluation was made) into the module."""
        if self.best_state is not None:
            self.module.load_state_dict(self.best_state)

    def evaluate(self, step: int) -> float:
        """Score the module now; keep its state if it is the best so far."""
        was_training = self.module.training
        started = time.monotonic()
        assert self.score is not None  # evaluated only with a score
        value = float(self.score(self.module))
        self.module.train(was_training)
        spent = time.monotonic() - started
        self.last_score, self.evaluated_step, self.evaluated_at = value, step, started
        if value > self.best_score:
            self.best_score, self.best_step, self.best_time = value, step, started
            self.best_state = {
                name: tensor.detach().clone() for name, tensor in self.module.state_dict().items()
            }
            self.evaluations_without_gain = 0
        else:
            self.evaluations_without_gain += 1
        if step >= 0 and math.isnan(self.first_evaluated_at):
            self.first_evaluated_at = started
        per_step = (started - self.started) / max(step + 1, 1)
        if step >= 0 and per_step > 0 and self.deadline is not None:  # no clock: fixed interval
            self.interval = max(self.control.interval,
                                math.ceil(EVALUATION_RATIO * spent / per_step))  # fmt: skip
        self.next_evaluation = step + self.interval
        return value

    def _fit_total_to_deadline(self, step: int) -> None:
        """Shrink the bar's total to the steps the deadline leaves at the current rate, so that
        tqdm's ETA is the time to whichever ends the stage first."""
        if self.deadline is None or step < 1:
            return
        per_step = (time.monotonic() - self.started) / (step + 1)
        reachable = step + 1 + max(0.0, self.deadline - time.monotonic()) / per_step
        self.bar.total = min(self.steps, math.ceil(reachable))

    def __call__(self, step: int, loss: float) -> None:
        self.last_step = step
        evaluated = self.score is not None and step >= self.next_evaluation
        if evaluated:
            self.evaluate(step)
        if self.control.progress:
            self._fit_total_to_deadline(step)
            postfix = {"objective": f"{-loss:.4g}"}
            if self.score is not None:
                postfix["validation"] = f"{self.last_score:.4g}"
            if self.deadline is not None:
                postfix["budget"] = f"{max(0.0, self.deadline - time.monotonic()):.0f}s"
            # Redraw at once on the first step and after each validation pass, so that the
            # figures show however fast the stage runs; otherwise tqdm's own rate limit decides.
            self.bar.set_postfix(postfix, refresh=step == 0 or evaluated)
        self.bar.update(1)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise StopTraining("the stage's time budget is spent")
        if self.evaluations_without_gain >= self.patience or (
            evaluated
            and self.evaluations_without_gain > 0
            and self.evaluated_at - max(self.best_time, self.first_evaluated_at)
            >= self.time_patience
        ):
            raise StopTraining("no validation improvement")
