r"""Training a DKM by Adam on the minibatch objective (seed 003 sec. 5, eq. 76).

Seed 003 trains every parameter (inducing inputs, inducing Gram blocks, mixing matrices, the output
:math:`q(f_i)`, the likelihood's) with Adam(:math:`\beta_1 = 0.8`, :math:`\beta_2 = 0.9`), batches
of 256 and a step schedule: the learning rate (0.01) divided by 10 at fixed epochs (40 and 80 of
100; 80 and 160 of 200).

Training is resumable: after every epoch ``checkpoint(state)`` receives the model, optimiser,
schedule and random-generator states and the objective history; passing that state back as
``resume`` continues exactly where it stopped (the same batches and Monte Carlo draws).

A step whose objective is not finite, or whose Gram matrices are no longer positive definite
(parameters driven to NaN or infinity), stops training with ``TrainingDivergedError`` naming the
epoch and step, before the optimiser can step on it.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from zonal.dkm.model import DeepKernelMachine
from zonal.linalg import NotPositiveDefiniteError
from zonal.models.training import check_targets, minibatch_indices


class TrainingDivergedError(ArithmeticError):
    """Training of a DKM reached a non-finite objective or a Gram matrix that is not positive
    definite (typically a learning rate too large for the floating-point precision)."""


def fit_dkm(
    model: DeepKernelMachine,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int = 1,
    batch_size: int = 256,
    lr: float = 0.01,
    betas: tuple[float, float] = (0.8, 0.9),
    milestones: Sequence[int] = (),
    gamma: float = 0.1,
    seed: int = 0,
    progress: bool = False,
    epoch_callback: Callable[[int, float], Mapping[str, float] | None] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    resume: dict[str, Any] | None = None,
    augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
) -> list[float]:
    """Maximise eq. 76 for ``epochs`` epochs; returns the objective (to maximise) of every step.

    ``milestones``: epochs after which the learning rate is multiplied by ``gamma``;
    ``epoch_callback(epoch, mean objective)`` runs after every epoch (evaluations) and may return
    figures (e.g. ``{"accuracy": 0.97}``) that the bar shows from then on;
    ``checkpoint(state)`` saves, and ``resume=state`` restores, the training state (module
    docstring); ``augment(rows, generator)`` transforms each minibatch's inputs (e.g. random crops,
    ``zonal.dkm.augmentation``), drawing from the batch generator (so it resumes too). A tqdm bar
    (``progress``, on a terminal) shows the objective, the points per second and those figures.
    """
    from tqdm.auto import tqdm

    x = model.check_inputs(torch.as_tensor(x))
    if x.dim() != 2:
        raise ValueError(f"training inputs must be [N, D], got {tuple(x.shape)}")
    y = check_targets(model.likelihood, torch.as_tensor(y), len(x)).to(x.device)
    if y.is_floating_point():
        y = y.to(x.dtype)
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be an integer >= 0, got {epochs!r}")
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimiser = torch.optim.Adam(parameters, lr=lr, betas=betas)
    schedule = torch.optim.lr_scheduler.MultiStepLR(optimiser, list(milestones), gamma)
    draws = torch.Generator(device=x.device).manual_seed(seed)
    batches = torch.Generator().manual_seed(seed + 1)
    history: list[float] = []
    start = 0
    if resume is not None:
        model.load_state_dict(resume["model"])
        optimiser.load_state_dict(resume["optimiser"])
        schedule.load_state_dict(resume["schedule"])
        draws.set_state(resume["draws"])
        batches.set_state(resume["batches"])
        history, start = list(resume["history"]), resume["epoch"]
    num_train = len(x)
    per_epoch = max(1, math.ceil(num_train / batch_size))
    bar = tqdm(
        total=epochs * per_epoch,
        initial=start * per_epoch,
        disable=None if progress else True,  # None: hidden when stderr is not a terminal
        leave=False,
        file=sys.stderr,
    )
    shown: dict[str, str] = {}  # the last epoch callback's figures
    model.train()
    for epoch in range(start, epochs):
        started = time.monotonic()
        for step, index in enumerate(minibatch_indices(num_train, batch_size, per_epoch, batches)):
            optimiser.zero_grad()
            inputs = x[index] if augment is None else augment(x[index], batches)
            where = f"epoch {epoch + 1}, step {step + 1} of {per_epoch}"
            try:
                objective = model.objective(inputs, y[index], num_train, draws)
            except NotPositiveDefiniteError as error:
                raise TrainingDivergedError(f"training diverged at {where}: {error}") from error
            if not torch.isfinite(objective):
                raise TrainingDivergedError(
                    f"training diverged at {where}: the objective is {float(objective.detach())}"
                )
            (-objective).backward()
            optimiser.step()
            history.append(float(objective.detach()))
            bar.update(1)
            if progress:
                rate = (step + 1) * batch_size / max(time.monotonic() - started, 1e-9)
                figures = {"objective": f"{history[-1]:.4g}", "points/s": f"{rate:.0f}"}
                bar.set_postfix({**figures, **shown})
        schedule.step()
        if epoch_callback is not None:
            reported = epoch_callback(epoch, sum(history[-per_epoch:]) / per_epoch)
            shown = {name: f"{value:.4g}" for name, value in (reported or {}).items()}
        if checkpoint is not None:
            checkpoint(
                {
                    "epoch": epoch + 1,
                    "model": model.state_dict(),
                    "optimiser": optimiser.state_dict(),
                    "schedule": schedule.state_dict(),
                    "draws": draws.get_state(),
                    "batches": batches.get_state(),
                    "history": history,
                }
            )
    bar.close()
    model.eval()
    return history
