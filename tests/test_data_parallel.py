"""Data-parallel training (``zonal.scale.data_parallel``): the ranks' shard losses average to GPyTorch's
one-process ELBO on the whole batch, and so do their gradients (in-process, and across two gloo
processes, to 1e-10 in float64, for an SVGP, a doubly stochastic DGP and a residual DGP, with
unequal and empty shards); two processes train to the parameters of ``fit_svgp`` (SVGP) and of one
process (DGP); shards that do not make up the batch raise the same named error on every rank."""

from __future__ import annotations

import datetime
import traceback
from pathlib import Path

import gpytorch
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import ArcCosineKernel
from zonal.models import SVGP, fit_svgp
from zonal.models.activated_dgp import ActivatedDGP
from zonal.models.dgp import DGP, inducing_point_dgp
from zonal.models.residual_dgp import residual_dgp
from zonal.scale.data_parallel import (
    DistributedNotInitialisedError,
    ShardError,
    SharedNoise,
    UnsupportedModelError,
    WorldSizeMismatchError,
    data_parallel_step,
    shard_loss,
    shard_positions,
    train_data_parallel,
)

NUM_DATA = 40
BATCH_SIZE = 13  # split 7 / 6 over two ranks, 5 / 4 / 4 over three
NUM_SAMPLES = 3
NOISE_SEED = 11
CASES = ("svgp", "dgp", "activated", "residual")
TRAIN_STEPS = 4
TRAIN_BATCH = 15  # batches 15, 15, 10, 15: shards 8 / 7 and 5 / 5
TIMEOUT = datetime.timedelta(seconds=120)  # a rank left waiting fails instead of hanging


def data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(NUM_DATA, 2, dtype=torch.float64, generator=generator)
    noise = 0.1 * torch.randn(NUM_DATA, dtype=torch.float64, generator=generator)
    return x, torch.sin(2 * x[:, 0]) * x[:, 1] + noise


def build(name: str) -> torch.nn.Module:
    """A small model in training mode with every parameter moved off its starting value (q(u)
    initialised first, so that the first training call does not reset it)."""
    x, _ = data()
    if name == "svgp":
        kernel = gpytorch.kernels.ScaleKernel(ArcCosineKernel(3, homogeneous=True)).double()
        model = SVGP(kernel, SphericalHarmonicFeatures(3, num_inducing=9, kernel=kernel), 2)
    elif name == "dgp":
        model = inducing_point_dgp(x, [2, 2, 1], num_inducing=6, inner_scale=0.5)
    elif name == "activated":
        likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
        model = ActivatedDGP(2, [2], likelihood, num_inducing=6, mean="constant")
        model.set_variational_scale(0.5)
    else:
        model = residual_dgp(2, 1, 9, max_degree=10, hidden_variance=0.3, hidden_scale=0.7)
    model.train()
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(1), torch.random.fork_rng():
        torch.manual_seed(2)  # GPyTorch jitters a new q(u)'s mean with the global RNG
        model(x[:2])  # initialises every q(u)
        generator = torch.Generator().manual_seed(5)
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn(parameter.shape, dtype=parameter.dtype,
                                             generator=generator))  # fmt: skip
    return model


def global_batch(batch_size: int) -> torch.Tensor:
    return torch.randperm(NUM_DATA, generator=torch.Generator().manual_seed(1))[:batch_size]


def one_process_loss(model: torch.nn.Module, name: str, index: torch.Tensor) -> torch.Tensor:
    """GPyTorch's -ELBO / N on the whole batch (``DeepApproximateMLL`` for a deep model), the
    hidden layers drawn by the model's own forward pass from ``torch.manual_seed(NOISE_SEED)``."""
    x, y = data()
    objective = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=NUM_DATA)
    if name != "svgp":
        objective = gpytorch.mlls.DeepApproximateMLL(objective)
    torch.manual_seed(NOISE_SEED)
    with gpytorch.settings.num_likelihood_samples(NUM_SAMPLES):
        return -objective(model(x[index]), y[index])


def gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {
        name: torch.zeros_like(parameter) if parameter.grad is None else parameter.grad.clone()
        for name, parameter in model.named_parameters()
    }


def largest_difference(first: dict, second: dict) -> float:
    assert first.keys() == second.keys()
    return max(float((first[key] - second[key]).abs().max()) for key in first)


# ------------------------------------------------------------------------------ in one process
@pytest.mark.parametrize("batch_size", [BATCH_SIZE, 2])
@pytest.mark.parametrize("name", CASES)
def test_shard_losses_average_to_the_gpytorch_elbo_and_its_gradient(name, batch_size):
    """(1/R) sum_r loss_r = -ELBO/N and the same for the gradients, R = 3 ranks with shards of
    5 / 4 / 4 rows, or 1 / 1 / 0 (an empty shard counts only the KL)."""
    x, y = data()
    index = global_batch(batch_size)
    model = build(name)
    reference = one_process_loss(model, name, index)
    reference.backward()
    expected = gradients(model)
    model.zero_grad()
    world_size = 3
    total = 0.0
    for rank in range(world_size):
        positions = shard_positions(batch_size, rank, world_size)
        loss = shard_loss(model, x[index[positions]], y[index[positions]], num_data=NUM_DATA,
                          global_batch_size=batch_size, world_size=world_size,
                          num_samples=NUM_SAMPLES,
                          noise=SharedNoise(NOISE_SEED, positions, batch_size))  # fmt: skip
        (loss / world_size).backward()
        total += float(loss.detach()) / world_size
    assert abs(total - float(reference.detach())) < 1e-10
    assert largest_difference(gradients(model), expected) < 1e-10


def test_shared_noise_gives_a_row_the_same_draws_on_any_shard():
    """Shards' draws put back in place are the one-process draws, which are the global RNG's
    after ``torch.manual_seed`` (what a model's own forward pass would draw)."""
    batch_size, shape = 7, (4, 7, 3)
    torch.manual_seed(NOISE_SEED)
    expected = [torch.randn(shape, dtype=torch.float64) for _ in range(2)]  # two layers' draws
    world_size = 3
    pieces = [torch.empty(shape, dtype=torch.float64) for _ in range(2)]
    for rank in range(world_size):
        positions = shard_positions(batch_size, rank, world_size)
        noise = SharedNoise(NOISE_SEED, positions, batch_size)
        for piece in pieces:
            piece[:, positions] = noise(torch.Size([4, len(positions), 3]))
    for piece, truth in zip(pieces, expected, strict=True):
        assert torch.equal(piece, truth)
    with pytest.raises(ValueError, match="shard of 3 rows"):
        SharedNoise(0, shard_positions(batch_size, 0, world_size), batch_size)(torch.Size([4, 2]))


def test_a_deep_model_with_its_own_forward_pass_is_refused_shared_draws():
    """Shared draws reproduce ``DGP.forward``; a subclass that samples otherwise is named."""

    class OwnSampling(DGP):
        def forward(self, x, *, are_samples=False):
            return super().forward(x, are_samples=are_samples)

    x, y = data()
    model = OwnSampling(list(build("dgp").layers))
    positions = shard_positions(4, 0, 1)
    with pytest.raises(UnsupportedModelError, match=r"OwnSampling overrides DGP\.forward"):
        shard_loss(model, x[:4], y[:4], num_data=NUM_DATA, global_batch_size=4, world_size=1,
                   noise=SharedNoise(NOISE_SEED, positions, 4))  # fmt: skip


def test_without_a_process_group_the_error_is_named():
    assert not dist.is_initialized()
    x, y = data()
    model = build("svgp")
    with pytest.raises(DistributedNotInitialisedError, match="init_process_group"):
        data_parallel_step(model, x, y, num_data=NUM_DATA, global_batch_size=NUM_DATA)
    with pytest.raises(DistributedNotInitialisedError, match="init_process_group"):
        train_data_parallel(model, x, y, num_steps=1)


# ------------------------------------------------------------------------------ two processes
def _error_of(call) -> tuple[str, str] | None:
    try:
        call()
    except (ShardError, WorldSizeMismatchError) as error:
        return type(error).__name__, str(error)
    return None


def _two_rank_checks(rank: int) -> dict:
    """Everything rank ``rank`` of two computes: one step per (model, batch size), the training
    runs, and the errors of shards that do not fit together."""
    x, y = data()
    results: dict = {"gradients": {}, "losses": {}, "trained": {}, "errors": {}}
    for name in CASES:
        for batch_size in (BATCH_SIZE, 1):
            model = build(name)
            index = global_batch(batch_size)
            positions = shard_positions(batch_size, rank, 2)
            step = data_parallel_step(model, x[index[positions]], y[index[positions]],
                                      num_data=NUM_DATA, global_batch_size=batch_size,
                                      num_samples=NUM_SAMPLES, world_size=2,
                                      noise=SharedNoise(NOISE_SEED, positions, batch_size))  # fmt: skip
            results["gradients"][name, batch_size] = gradients(model)
            results["losses"][name, batch_size] = step.loss
    for name in ("svgp", "dgp"):
        model = build(name)
        losses = train_data_parallel(model, x, y, num_steps=TRAIN_STEPS, batch_size=TRAIN_BATCH,
                                     num_samples=NUM_SAMPLES, seed=3, world_size=2)  # fmt: skip
        results["trained"][name] = (model.state_dict(), losses)
    model = build("svgp")
    positions = shard_positions(BATCH_SIZE, rank, 2)
    shard_x, shard_y = x[positions], y[positions].clone()
    sizes = {"num_data": NUM_DATA, "global_batch_size": BATCH_SIZE}
    too_many = {"num_data": NUM_DATA, "global_batch_size": BATCH_SIZE + 1}
    results["errors"]["sizes"] = _error_of(
        lambda: data_parallel_step(model, shard_x, shard_y, **too_many)
    )
    results["errors"]["world"] = _error_of(
        lambda: data_parallel_step(model, shard_x, shard_y, **sizes, world_size=2 + rank)
    )
    if rank == 1:
        shard_y[0] = float("nan")
    results["errors"]["bad data"] = _error_of(
        lambda: data_parallel_step(model, shard_x, shard_y, **sizes)
    )
    return results


def _worker(index: int, folder: str) -> None:
    """Ranks 0 and 1 of a two-process gloo group; afterwards, process 0 alone reruns the DGP
    training as a one-process group (the reference of the two-process run)."""
    torch.set_num_threads(1)
    folder = Path(folder)
    try:
        dist.init_process_group("gloo", init_method=f"file://{folder / 'store-2'}", rank=index,
                                world_size=2, timeout=TIMEOUT)  # fmt: skip
        results = _two_rank_checks(index)
        dist.destroy_process_group()
        if index == 0:
            dist.init_process_group("gloo", init_method=f"file://{folder / 'store-1'}", rank=0,
                                    world_size=1, timeout=TIMEOUT)  # fmt: skip
            x, y = data()
            model = build("dgp")
            losses = train_data_parallel(model, x, y, num_steps=TRAIN_STEPS,
                                         batch_size=TRAIN_BATCH, num_samples=NUM_SAMPLES, seed=3,
                                         world_size=1)  # fmt: skip
            results["one rank dgp"] = (model.state_dict(), losses)
            dist.destroy_process_group()
    except Exception:
        (folder / f"error-{index}.txt").write_text(traceback.format_exc())
        raise
    torch.save(results, folder / f"rank-{index}.pt")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> list[dict]:
    """One spawn of two processes for every two-process check (spawning costs seconds)."""
    folder = tmp_path_factory.mktemp("data-parallel")
    mp.spawn(_worker, args=(str(folder),), nprocs=2, join=True)
    return [torch.load(folder / f"rank-{index}.pt", weights_only=False) for index in range(2)]


@pytest.mark.parametrize("batch_size", [BATCH_SIZE, 1])
@pytest.mark.parametrize("name", CASES)
def test_two_processes_average_to_the_one_process_gradient(two_ranks, name, batch_size):
    """After ``data_parallel_step`` on shards of 7 / 6 rows (or 1 / 0), each rank holds the
    gradient of GPyTorch's one-process -ELBO/N on the whole batch, computed here (1e-10)."""
    model = build(name)
    reference = one_process_loss(model, name, global_batch(batch_size))
    reference.backward()
    for results in two_ranks:
        assert largest_difference(results["gradients"][name, batch_size], gradients(model)) < 1e-10
        assert abs(results["losses"][name, batch_size] - float(reference.detach())) < 1e-10


def test_two_processes_train_an_svgp_like_fit_svgp(two_ranks):
    """Four Adam steps on minibatches of 15 (shards 8 / 7, then 5 / 5) end at ``fit_svgp``'s
    parameters with its losses (1e-10)."""
    x, y = data()
    model = build("svgp")
    losses = fit_svgp(model, x, y, num_steps=TRAIN_STEPS, batch_size=TRAIN_BATCH, seed=3)
    for results in two_ranks:
        state, parallel_losses = results["trained"]["svgp"]
        assert largest_difference(state, model.state_dict()) < 1e-10
        assert max(abs(a - b) for a, b in zip(parallel_losses, losses, strict=True)) < 1e-10


def test_two_processes_train_a_dgp_like_one_process(two_ranks):
    """Two processes and one process of ``train_data_parallel`` (same batches, same shared draws)
    end at the same DGP parameters with the same losses (1e-10), away from the start."""
    one_state, one_losses = two_ranks[0]["one rank dgp"]
    assert largest_difference(one_state, build("dgp").state_dict()) > 1e-3
    for results in two_ranks:
        state, losses = results["trained"]["dgp"]
        assert largest_difference(state, one_state) < 1e-10
        assert max(abs(a - b) for a, b in zip(losses, one_losses, strict=True)) < 1e-10


def test_shards_that_do_not_fit_together_raise_on_every_rank(two_ranks):
    """A global batch size the shards do not add up to, a world size only rank 1 expects wrongly,
    and a NaN target on rank 1 only: both ranks raise the same named error (none waits)."""
    for results in two_ranks:
        errors = results["errors"]
        assert errors["sizes"][0] == "ShardError"
        assert "13 in all, but the global batch size is 14" in errors["sizes"][1]
        assert errors["world"] == (
            "WorldSizeMismatchError",
            "rank(s) [1] expect world sizes [3] but the process group has 2 ranks",
        )
        assert errors["bad data"][0] == "ShardError"
        assert "rank(s) [1] hold a bad shard" in errors["bad data"][1]
    assert "NaN" in two_ranks[1]["errors"]["bad data"][1]
