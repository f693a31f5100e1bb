"""The minibatch Adam loop: epoch order from an int or a shared generator, the plateau schedule."""

import time

import numpy as np
import pytest
import torch

from zonal.models.training import (
    PlateauSchedule,
    TrainingControl,
    adam_on_minibatches,
    minibatch_indices,
)


def test_each_epoch_is_a_permutation_and_a_generator_carries_on():
    batches = list(minibatch_indices(10, 4, 6, seed=3))  # 3 batches an epoch
    assert [len(b) for b in batches] == [4, 4, 2, 4, 4, 2]
    for epoch in (batches[:3], batches[3:]):
        assert sorted(torch.cat(epoch).tolist()) == list(range(10))
    assert not torch.equal(torch.cat(batches[:3]), torch.cat(batches[3:]))
    assert all(
        torch.equal(a, b)
        for a, b in zip(batches, list(minibatch_indices(10, 4, 6, 3)), strict=True)
    )
    generator = torch.Generator().manual_seed(3)
    halves = [*minibatch_indices(10, 4, 3, generator), *minibatch_indices(10, 4, 3, generator)]
    assert all(torch.equal(a, b) for a, b in zip(batches, halves, strict=True))


def step_sizes(plateau):
    """Adam's step sizes on a loss whose value never improves but whose gradient is 1: each step
    moves the parameter by the current learning rate."""
    parameter = torch.nn.Parameter(torch.zeros((), dtype=torch.float64))
    values = []
    adam_on_minibatches(
        lambda index: parameter - parameter.detach() + 1.0,  # value 1, gradient 1
        [parameter],
        num_points=8,
        num_steps=12,
        batch_size=4,  # 2 steps an epoch
        lr=0.1,
        seed=0,
        plateau=plateau,
        callback=lambda step, loss: values.append(float(parameter)),
    )
    return -torch.diff(torch.tensor([0.0, *values]))


def test_the_plateau_schedule_cuts_the_learning_rate():
    constant = step_sizes(None)
    assert torch.allclose(constant, torch.full((12,), 0.1), rtol=1e-6)
    cut = step_sizes(PlateauSchedule(factor=0.5, patience=1))
    # best loss at epoch 1; epochs 2 and 3 do not improve -> cut after epoch 3 (step 6), and
    # after two more bad epochs again (step 10)
    assert torch.allclose(cut[:6], torch.full((6,), 0.1), rtol=1e-6)
    assert torch.allclose(cut[6:10], torch.full((4,), 0.05), rtol=1e-6)
    assert torch.allclose(cut[10:], torch.full((2,), 0.025), rtol=1e-6)


def test_bad_schedules_are_named():
    with pytest.raises(ValueError, match="factor"):
        PlateauSchedule(factor=1.5)
    with pytest.raises(ValueError, match="patience"):
        PlateauSchedule(patience=-1)


def test_a_numpy_integer_batch_size_is_taken():
    assert [len(batch) for batch in minibatch_indices(10, np.int64(4), 3, seed=0)] == [4, 4, 2]


@pytest.mark.parametrize("batch_size", [0, -5, 2.5, True])
def test_a_batch_size_that_is_not_a_positive_int_is_named(batch_size):
    """0 divided by zero and -5 trained on order[:-5], 25 of 30 rows, without a word."""
    parameter = torch.nn.Parameter(torch.zeros(1))
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        adam_on_minibatches(lambda index: parameter.sum(), [parameter], num_points=30,
                            num_steps=2, batch_size=batch_size, lr=0.1, seed=0)  # fmt: skip


def test_a_share_deadline_is_its_share_of_the_time_left_and_never_before_now():
    assert TrainingControl().share_deadline(0.5) is None  # no deadline: none for a part
    start = time.monotonic()
    deadline = TrainingControl(deadline=start + 100.0).share_deadline(0.25)
    assert deadline is not None and start + 24.9 < deadline < time.monotonic() + 25.0 + 1e-6
    past = TrainingControl(deadline=start - 10.0).share_deadline(0.5)
    assert past is not None and start <= past <= time.monotonic()
