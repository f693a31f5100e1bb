"""Minibatch Adam training (optionally with a plateau schedule) for SVGPs, DGPs and networks, with
label checks done before any computation."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

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


def check_targets(likelihood: Likelihood, y: torch.Tensor, num_points: int) -> torch.Tensor:
    """Validate targets for ``likelihood`` and return them in the dtype it needs.

    Gaussian: real values [N] (or [N, P] for a multitask likelihood); Bernoulli: labels in {0, 1};
    softmax / categorical: integer class labels in [0, num_classes). NaN or infinite values are
    reported with the first bad row.
    """
    if not isinstance(y, torch.Tensor):
        y = torch.as_tensor(y)
    if y.shape[0] != num_points:
        raise ValueError(f"the inputs have {num_points} rows but the targets have {y.shape[0]}")
    check_finite(y.reshape(num_points, -1).double(), "targets")
    if isinstance(likelihood, MultitaskGaussianLikelihood):
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


def fit_svgp(
    model,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    num_steps: int = 1000,
    batch_size: int = 1024,
    lr: float = 0.01,
    seed: Seed = 0,
    plateau: PlateauSchedule | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Adam on the minibatch ELBO (``gpytorch.mlls.VariationalELBO``) of a single-layer model
    and its ``model.likelihood``; returns the loss per step.

    ``plateau`` cuts the learning rate on plateaus; ``callback(step, loss)`` is called after every
    step (for traces and checkpoints).
    """
    x = model.check_inputs(torch.as_tensor(x))  # shape and NaN checks before anything else
    likelihood = model.likelihood
    y = check_targets(likelihood, y, len(x)).to(device=x.device)
    if y.is_floating_point():
        y = y.to(x.dtype)
    objective = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(x))
    model.train()
    return adam_on_minibatches(
        lambda index: -objective(model(x[index]), y[index]),
        model.parameters(),
        len(x),
        num_steps=num_steps,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        plateau=plateau,
        callback=callback,
    )


def minibatch_indices(
    num_points: int, batch_size: int, num_steps: int, seed: Seed
) -> Iterator[torch.Tensor]:
    """Row indices of ``num_steps`` minibatches: epochs of a permutation, reshuffled each epoch.

    ``seed`` is an int or a ``torch.Generator`` (which then carries on from where it is, so that
    consecutive training stages can share one stream).
    """
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
    ``callback(step, loss)`` runs after every step (traces, checkpoints, evaluations).
    """
    optimiser = torch.optim.Adam(list(parameters), lr=lr)
    scheduler = None
    if plateau is not None:
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimiser, factor=plateau.factor, patience=plateau.patience
        )
    per_epoch = max(1, math.ceil(num_points / batch_size))
    losses: list[float] = []
    for step, index in enumerate(minibatch_indices(num_points, batch_size, num_steps, seed)):
        optimiser.zero_grad()
        loss = loss_of_batch(index)
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
        if scheduler is not None and (step + 1) % per_epoch == 0:
            scheduler.step(sum(losses[-per_epoch:]) / per_epoch)
        if callback is not None:
            callback(step, losses[-1])
    return losses
