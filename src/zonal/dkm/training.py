"""Training a DKM by Adam on the minibatch objective (seed 003 sec. 5, eq. 76).

Seed 003 trains every parameter (inducing inputs, inducing Gram blocks, the output q(f_i), the
likelihood's) with Adam(beta_1 = 0.8, beta_2 = 0.9), batches of 256 and a step schedule: the
learning rate (0.01) divided by 10 at fixed epochs (40 and 80 of 100; 80 and 160 of 200).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence

import torch

from zonal.dkm.sparse import SparseDKM
from zonal.models.training import check_targets, minibatch_indices


def fit_dkm(
    model: SparseDKM,
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
    epoch_callback: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Maximise eq. 76 over ``epochs`` epochs; returns the objective (to maximise) per step.

    ``milestones``: epochs after which the learning rate is multiplied by ``gamma``;
    ``epoch_callback(epoch, mean objective)`` runs after every epoch (checkpoints, evaluations).
    A tqdm bar (``progress``) shows the objective and the points per second.
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
    num_train = len(x)
    per_epoch = max(1, math.ceil(num_train / batch_size))
    generator = torch.Generator(device=x.device).manual_seed(seed)
    history: list[float] = []
    bar = tqdm(total=epochs * per_epoch, disable=not progress, leave=False, file=sys.stderr)
    started = time.monotonic()
    model.train()
    for step, index in enumerate(
        minibatch_indices(num_train, batch_size, epochs * per_epoch, seed)
    ):
        optimiser.zero_grad()
        objective = model.objective(x[index], y[index], num_train, generator)
        (-objective).backward()
        optimiser.step()
        history.append(float(objective.detach()))
        bar.update(1)
        if progress:
            rate = (step + 1) * batch_size / max(time.monotonic() - started, 1e-9)
            bar.set_postfix({"objective": f"{history[-1]:.4g}", "points/s": f"{rate:.0f}"})
        if (step + 1) % per_epoch == 0:
            schedule.step()
            if epoch_callback is not None:
                epoch = (step + 1) // per_epoch - 1
                epoch_callback(epoch, sum(history[-per_epoch:]) / per_epoch)
    bar.close()
    model.eval()
    return history
