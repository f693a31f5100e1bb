"""Data-parallel minibatch training of zonal's variational models (``SVGP``, ``DGP``,
``ActivatedDGP``, ``ResidualDGP``) under ``torch.distributed``: each rank holds one shard of every
global minibatch, and the gradients are averaged over ranks before each Adam step.

The minibatch ELBO (seed 000 sec. 3.1-3.2), per data point as GPyTorch's ``VariationalELBO`` and
``zonal.models.fit_svgp`` / ``fit_dgp`` report it, is, for a global minibatch of B of the N rows,

    L / N = (1/B) sum_{i in batch} E_q[log p(y_i | f_i)] - KL(q(u) || p(u)) / N.

The batch is split into R shards, one per rank (rank r holds b_r rows, sum_r b_r = B; sizes may
differ, a shard may be empty). Rank r's loss is

    loss_r = -( (R/B) sum_{i in shard r} E_q[log p(y_i | f_i)] - KL / N ),

(i.e. -((N R / B) sum_{shard r} E log p - KL) / N), the KL counted in full on every rank. The mean
over ranks of loss_r is the one-process loss -L/N on the whole batch, hence so is the mean of the
gradients, which ``average_gradients`` forms with one ``all_reduce``: a data-parallel step is the
one-process step up to rounding, for any shard sizes, because B is the *global* batch size, never
the shard's. Registered priors (``-log p(theta) / N``) and added loss terms are parameter terms,
counted in full on every rank like the KL.

Monte Carlo. A deep model propagates S samples through its hidden layers (doubly stochastic
inference). With ``SharedNoise`` every rank draws the standard normals for the *whole* global batch
from one seed and keeps its own rows, so global row i gets the same draws whichever rank holds it
(or in a one-process run): the averaged gradient then equals the one-process gradient under those
draws exactly (with one rank, seed s gives the draws of ``torch.manual_seed(s)`` and the model's
own forward pass). ``train_data_parallel`` seeds each step's draws by (seed, step), so it follows
another random path than ``fit_dgp`` (one global RNG stream); both step along unbiased estimates of
the gradient of the same expected ELBO. Without ``SharedNoise`` a deep model draws from each
rank's global RNG, exact in expectation only. Likelihoods that integrate by Monte Carlo (softmax)
always draw from the global RNG: exact in expectation only. Gaussian and Bernoulli likelihoods
integrate in closed form or by fixed quadrature: exact.

Why an explicit ``all_reduce`` and not ``DistributedDataParallel``: DDP gives the same gradients
provided the module it wraps computes the whole loss, KL included, in its ``forward`` (a DDP over a
module whose forward is ``shard_loss`` agrees with the one-process gradient to 1e-14 for an SVGP and
a DGP, shards of 7 / 6 and of 1 / 0 rows: a zero-row forward pass still reaches every parameter).
One reduction after ``backward`` needs no wrapper module, carries the loss's mean in the same
message, and leaves grad None (so that Adam skips it, as in one process) on a parameter that no
rank's loss touches, where DDP needs ``find_unused_parameters``. Parameters and buffers are
broadcast from rank 0 once, at the start of training (DDP does so at construction).

Launch one process per rank, e.g. with torchrun (which sets RANK, WORLD_SIZE, MASTER_ADDR/PORT)::

    # train.py
    import torch.distributed as dist
    from zonal.scale.data_parallel import train_data_parallel

    dist.init_process_group("gloo")          # "nccl" for one GPU per rank
    model = ...                              # built alike on every rank (rank 0's state wins)
    losses = train_data_parallel(model, x, y, num_steps=1000, batch_size=1024, progress=True)
    dist.destroy_process_group()

    $ OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 train.py

Every rank holds (or memory-maps) the whole x, y; each global minibatch is that of ``fit_svgp`` for
the same seed, and rank r takes its rows r, r + R, r + 2R, ... (``DistributedSampler``'s split).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import gpytorch
import numpy as np
import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import Likelihood

from zonal.models.contract import ZonalModel
from zonal.models.dgp import DGP
from zonal.models.residual_dgp import ResidualDGP
from zonal.models.training import check_targets, minibatch_indices, stop_requested

#: Monte Carlo samples propagated through a deep model per step (``fit_dgp``'s default)
NUM_SAMPLES = 5


class DistributedNotInitialisedError(RuntimeError):
    """``torch.distributed`` has no default process group: call ``init_process_group`` first."""


class WorldSizeMismatchError(ValueError):
    """The world size a caller expects is not the process group's (on some rank)."""


class ShardError(ValueError):
    """The ranks' shards do not make up one global minibatch (sizes, N or B disagree) or a rank's
    shard holds bad data; raised on every rank alike, so that no rank waits forever."""


class UnsupportedModelError(TypeError):
    """A deep model whose sample propagation this module cannot reproduce with shared draws."""


class StepLosses(NamedTuple):
    """One data-parallel step's losses: this rank's ``loss_r`` and their mean over ranks (the
    one-process loss -L/N on the whole global batch)."""

    rank_loss: float
    loss: float


# ------------------------------------------------------------------------------------ process group
def process_group() -> tuple[int, int]:
    """(rank, world size) of the default process group; a named error without one. (A world size
    the caller expects is compared on every rank at once, in ``data_parallel_step``: a check on one
    rank alone would leave the others waiting.)"""
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        raise DistributedNotInitialisedError(
            "torch.distributed is not initialised: call torch.distributed.init_process_group "
            "(e.g. 'gloo', launched by torchrun) before data-parallel training"
        )
    return torch.distributed.get_rank(), torch.distributed.get_world_size()


def shard_positions(global_batch_size: int, rank: int, world_size: int) -> torch.Tensor:
    """Positions r, r + R, r + 2R, ... of rank r's rows in a global minibatch of B rows
    (``DistributedSampler``'s interleaved split: shard sizes differ by at most one)."""
    return torch.arange(
        rank, global_batch_size, world_size
    )  # [b_r], into the minibatch's CPU index


def trainable_parameters(*modules: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters that require gradients, each once, in the modules' order (the likelihood
    is usually a submodule of the model too)."""
    seen: dict[int, torch.nn.Parameter] = {}
    for module in modules:
        for parameter in module.parameters():
            if parameter.requires_grad:
                seen.setdefault(id(parameter), parameter)
    return list(seen.values())


@torch.no_grad()
def broadcast_state(module: torch.nn.Module, source: int = 0) -> None:
    """Copy rank ``source``'s parameters and buffers into every rank's ``module``."""
    for tensor in [*module.parameters(), *module.buffers()]:
        torch.distributed.broadcast(tensor.data, src=source)


def average_gradients(
    parameters: Iterable[torch.nn.Parameter], *values: torch.Tensor
) -> list[float]:
    """Replace every parameter's gradient by its mean over ranks, in one ``all_reduce``; returns
    the means of the scalar ``values`` reduced alongside.

    A rank whose loss does not depend on a parameter (grad None) counts zero for it; a parameter
    that no rank's loss touches keeps grad None, so that Adam skips it as in one process.
    """
    parameters = list(parameters)
    reference = parameters[0]
    present = [float(parameter.grad is not None) for parameter in parameters]
    pieces = [torch.tensor(present, dtype=torch.float64, device=reference.device)]
    for parameter in parameters:
        gradient = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
        pieces.append(gradient.reshape(-1).to(torch.float64))
    pieces.extend(value.detach().reshape(1).to(pieces[0]) for value in values)
    buffer = torch.cat(pieces)  # [P + sum of parameter sizes + V]
    torch.distributed.all_reduce(buffer)
    buffer /= torch.distributed.get_world_size()
    flags, offset = buffer[: len(parameters)], len(parameters)
    for flag, parameter in zip(flags.tolist(), parameters, strict=True):
        size = parameter.numel()
        if flag > 0:
            parameter.grad = (
                buffer[offset : offset + size].reshape(parameter.shape).to(parameter.dtype)
            )
        offset += size
    return buffer[offset:].tolist()


# ------------------------------------------------------------------------------------ shared draws
class SharedNoise:
    """Standard normal draws for one shard, cut from draws for the whole global minibatch.

    ``noise(shape)`` with shape [..., b_r, P] (b_r = the shard's rows) draws [..., B, P] from a
    generator seeded with ``seed`` and returns the rows at ``positions`` [b_r]. Every rank makes
    the same calls (the same model), so global row i gets the same draws on whichever rank holds
    it, and in a one-process run (positions = all rows) the draws are those of
    ``torch.manual_seed(seed)`` followed by the model's own forward pass.
    """

    def __init__(self, seed: int, positions: torch.Tensor, global_batch_size: int) -> None:
        self.generator = torch.Generator().manual_seed(int(seed))
        self.positions = torch.as_tensor(positions, dtype=torch.long)
        self.global_batch_size = int(global_batch_size)

    def __call__(
        self,
        shape: torch.Size,
        *,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        if len(shape) < 2 or shape[-2] != len(self.positions):
            raise ValueError(
                f"draws for a shard of {len(self.positions)} rows need a shape [..., "
                f"{len(self.positions)}, P], got {tuple(shape)}"
            )
        # drawn on the CPU generator, so that every rank and device sees the same numbers
        whole = torch.randn(
            (*shape[:-2], self.global_batch_size, shape[-1]),
            generator=self.generator,
            dtype=dtype,
        )  # [..., B, P]
        shard = whole.index_select(-2, self.positions)  # [..., b_r, P]
        return shard if device is None else shard.to(device)


def noise_seed(seed: int, step: int) -> int:
    """The seed of step ``step``'s shared draws: a hash of (seed, step), alike on every rank."""
    return int(np.random.SeedSequence([seed, step]).generate_state(1, np.uint64)[0])


def sampled_output(
    model: ZonalModel, x: torch.Tensor, noise: SharedNoise | None
) -> MultivariateNormal:
    """q(f) at a shard's inputs x [b_r, D]: batch [S] for a deep model (S =
    ``gpytorch.settings.num_likelihood_samples``), each hidden layer's output drawn as
    h = mu + sigma * eps with eps from ``noise`` (as ``DGP.forward`` / ``ResidualDGP.forward``
    draw from the global RNG; None: they do). A model without hidden layers is just called."""
    if not isinstance(model, DGP) or noise is None:
        return model(x)
    samples = gpytorch.settings.num_likelihood_samples.value()
    if isinstance(model, ResidualDGP):
        z, radius = model.to_sphere(model.check_inputs(x))  # [b_r, d], [b_r] or None
        z = z.expand(samples, *z.shape)  # [S, b_r, d]
        radius = None if radius is None else radius.expand(samples, *radius.shape)

        def draws(shape: torch.Size) -> torch.Tensor:
            return noise(shape, dtype=z.dtype, device=z.device)

        return model.output_distribution(model.hidden_points(z, draws), radius)
    if type(model).forward is not DGP.forward:
        raise UnsupportedModelError(
            f"{type(model).__name__} overrides DGP.forward: shared draws cannot reproduce its "
            "sampling (pass noise=None to draw from each rank's global RNG)"
        )
    x = model.check_inputs(x)
    output = model.layers[0](x, are_samples=True)  # [b_r, D_1] (no sample dimension yet)
    for layer in model.layers[1:]:
        mean, std = output.mean, output.variance.sqrt()  # [(S,) b_r, D_l]
        eps = noise(torch.Size([samples, *mean.shape[-2:]]), dtype=mean.dtype, device=mean.device)
        output = layer(mean + std * eps, are_samples=True)  # [S, b_r, D_{l+1}]
    return output


# ------------------------------------------------------------------------------------ the loss
def shard_loss(
    model: ZonalModel,
    x_shard: torch.Tensor,
    y_shard: torch.Tensor,
    *,
    num_data: int,
    global_batch_size: int,
    world_size: int,
    likelihood: Likelihood | None = None,
    beta: float = 1.0,
    num_samples: int = NUM_SAMPLES,
    noise: SharedNoise | None = None,
) -> torch.Tensor:
    """Rank r's loss (no communication):

        loss_r = -(R/B) sum_{i in shard} E_q[log p(y_i | f_i)] + beta KL / N
                 - sum_priors log p(theta) / N + added loss terms,

    the expectation averaged over the S samples of a deep model (``num_samples``, drawn by
    ``noise``). The mean of loss_r over R ranks whose shards make up the batch is GPyTorch's
    -``VariationalELBO`` (``DeepApproximateMLL`` for a deep model) on the whole batch.
    """
    likelihood = model.likelihood if likelihood is None else likelihood
    elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=num_data, beta=beta)
    with gpytorch.settings.num_likelihood_samples(num_samples):
        # the forward pass first: in training mode it clears the strategies' cached prior, which
        # the KL then recomputes in this step's graph (GPyTorch's own order)
        output = sampled_output(model, x_shard, noise)
        per_sample = likelihood.expected_log_prob(y_shard, output).sum(-1)  # [S] or []
        expected = per_sample.mean()
        strategy: Any = model.variational_strategy  # each model's own GPyTorch strategy
        kl = strategy.kl_divergence()
    log_prior = sum(
        (prior.log_prob(closure(module)).sum() for _, module, prior, closure, _ in
         elbo.named_priors()),
        start=kl.new_zeros(()),
    )  # fmt: skip
    gp_module: Any = model  # a GPyTorch module too, which keeps the added loss terms
    added = sum((term.loss() for term in gp_module.added_loss_terms()), start=kl.new_zeros(()))
    parameter_terms = (beta * kl - log_prior) / num_data + added
    return -(world_size / global_batch_size) * expected + parameter_terms


def _check_shards(
    model: ZonalModel,
    likelihood: Likelihood,
    x_shard: torch.Tensor,
    y_shard: torch.Tensor,
    num_data: int,
    global_batch_size: int,
    world_size: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate this rank's shard, then compare every rank's (b_r, B, N, expected R) in one
    ``all_gather`` and raise the same named error on every rank if they do not fit together."""
    problem: ValueError | None = None
    try:
        x_shard = model.check_inputs(torch.as_tensor(x_shard))
        y_shard = check_targets(likelihood, y_shard, len(x_shard)).to(device=x_shard.device)
        y_shard = y_shard.to(x_shard.dtype) if y_shard.is_floating_point() else y_shard
    except ValueError as error:
        problem = error
    device = next(model.parameters()).device  # where the backend can communicate
    facts = torch.tensor(
        [
            len(x_shard),
            global_batch_size,
            num_data,
            -1 if world_size is None else world_size,
            int(problem is not None),
        ],
        device=device,
    )  # [5] int64
    size = torch.distributed.get_world_size()
    gathered = [torch.empty_like(facts) for _ in range(size)]
    torch.distributed.all_gather(gathered, facts)
    table = torch.stack(gathered)  # [R, 5]
    expected = table[:, 3].tolist()
    wrong = [rank for rank in range(size) if expected[rank] not in (-1, size)]
    if wrong:
        raise WorldSizeMismatchError(
            f"rank(s) {wrong} expect world sizes {[expected[rank] for rank in wrong]} but the process group "
            f"has {size} ranks"
        )
    bad = table[:, 4].nonzero().reshape(-1).tolist()
    if bad:
        here = f" (this rank's: {problem})" if problem is not None else ""
        raise ShardError(f"rank(s) {bad} hold a bad shard{here}") from problem
    for column, name in ((1, "global batch size"), (2, "number of data N")):
        if (table[:, column] != table[0, column]).any():
            raise ShardError(f"the ranks disagree on the {name}: {table[:, column].tolist()}")
    if int(table[:, 0].sum()) != global_batch_size:
        raise ShardError(
            f"the shards hold {table[:, 0].tolist()} rows, {int(table[:, 0].sum())} in all, but "
            f"the global batch size is {global_batch_size}"
        )
    return x_shard, y_shard


def data_parallel_step(
    model: ZonalModel,
    x_shard: torch.Tensor,
    y_shard: torch.Tensor,
    *,
    num_data: int,
    global_batch_size: int,
    likelihood: Likelihood | None = None,
    num_samples: int = NUM_SAMPLES,
    noise: SharedNoise | None = None,
    world_size: int | None = None,
) -> StepLosses:
    """This rank's part of one step: check that the shards make up the global batch, compute
    ``shard_loss``, backpropagate, and average the gradients over ranks (``average_gradients``).
    The caller zeroes the gradients before and steps the optimiser after, as in one process.

    Args:
        x_shard, y_shard: this rank's rows [b_r, D], [b_r] of the global minibatch (b_r may be 0).
        num_data: N, the size of the training set.
        global_batch_size: B, the rows of the global minibatch over all ranks.
        likelihood: default ``model.likelihood``.
        num_samples: S, Monte Carlo samples of a deep model (and of MC likelihoods).
        noise: shared draws for a deep model (``SharedNoise``); None: each rank's global RNG.
        world_size: the number of ranks the caller split the batch for (checked if given).
    """
    process_group()
    likelihood = model.likelihood if likelihood is None else likelihood
    x_shard, y_shard = _check_shards(
        model, likelihood, x_shard, y_shard, num_data, global_batch_size, world_size
    )
    loss = shard_loss(
        model,
        x_shard,
        y_shard,
        num_data=num_data,
        global_batch_size=global_batch_size,
        world_size=torch.distributed.get_world_size(),
        likelihood=likelihood,
        num_samples=num_samples,
        noise=noise,
    )
    loss.backward()
    (mean_loss,) = average_gradients(trainable_parameters(model, likelihood), loss)
    return StepLosses(rank_loss=float(loss.detach()), loss=mean_loss)


def train_data_parallel(
    model: ZonalModel,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    num_steps: int = 1000,
    batch_size: int = 1024,
    lr: float = 0.01,
    num_samples: int = NUM_SAMPLES,
    seed: int = 0,
    progress: bool = False,
    callback: Callable[[int, float], None] | None = None,
    world_size: int | None = None,
) -> list[float]:
    """Adam on the minibatch ELBO of ``model`` and ``model.likelihood``, each global minibatch
    shared out over the ranks; returns the one-process loss -L/N per step (alike on every rank).

    The global minibatches are those of ``fit_svgp`` / ``fit_dgp`` for the same ``seed``
    (``zonal.models.training.minibatch_indices``); rank r takes positions r, r + R, ... of each.
    Rank 0's parameters and buffers (q(u) initialised) are first broadcast to every rank. A deep
    model's draws are ``SharedNoise`` seeded by (seed, step), so R ranks follow the one-process
    run of this function to rounding. ``progress`` shows a tqdm bar on rank 0;
    ``callback(step, loss)`` runs on every rank after every step and may end training by raising
    ``StopTraining`` (it must decide alike on every rank: it sees the same loss there).
    """
    from tqdm.auto import tqdm

    rank, size = process_group()  # ``world_size`` is checked at the first step, on every rank
    likelihood = model.likelihood
    x = model.check_inputs(torch.as_tensor(x))
    y = check_targets(likelihood, y, len(x)).to(device=x.device)
    y = y.to(x.dtype) if y.is_floating_point() else y
    model.train()
    likelihood.train()
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(1):
        model(x[:1])  # GPyTorch initialises q(u) on the first call, jittered by the global RNG:
    broadcast_state(model)  # done before rank 0's state is sent, so that no rank redoes it
    parameters = trainable_parameters(model, likelihood)
    optimiser = torch.optim.Adam(parameters, lr=lr)
    losses: list[float] = []
    bar = tqdm(total=num_steps, desc=f"data-parallel x{size}", disable=not progress or rank != 0,
               leave=False, dynamic_ncols=True, file=sys.stderr)  # fmt: skip
    with bar:
        for step, index in enumerate(minibatch_indices(len(x), batch_size, num_steps, seed)):
            positions = shard_positions(len(index), rank, size)
            rows = index[positions].to(x.device)  # [b_r]
            optimiser.zero_grad()
            step_losses = data_parallel_step(
                model,
                x[rows],
                y[rows],
                num_data=len(x),
                global_batch_size=len(index),
                num_samples=num_samples,
                noise=SharedNoise(noise_seed(seed, step), positions, len(index)),
                world_size=world_size,
            )
            optimiser.step()
            losses.append(step_losses.loss)
            bar.set_postfix({"objective": f"{-step_losses.loss:.4g}"}, refresh=step == 0)
            bar.update(1)
            if stop_requested(callback, step, losses[-1]):
                break
    return losses


__all__ = [
    "DistributedNotInitialisedError",
    "ShardError",
    "SharedNoise",
    "StepLosses",
    "UnsupportedModelError",
    "WorldSizeMismatchError",
    "average_gradients",
    "broadcast_state",
    "data_parallel_step",
    "process_group",
    "shard_loss",
    "shard_positions",
    "train_data_parallel",
]
