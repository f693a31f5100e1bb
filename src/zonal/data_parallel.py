"""Deprecated path of ``zonal.scale.data_parallel`` (kept for one release)."""

from zonal._deprecated import warn_moved
from zonal.scale.data_parallel import (
    NUM_SAMPLES,
    DistributedNotInitialisedError,
    ShardError,
    SharedNoise,
    StepLosses,
    UnsupportedModelError,
    WorldSizeMismatchError,
    average_gradients,
    broadcast_state,
    data_parallel_step,
    noise_seed,
    process_group,
    sampled_output,
    shard_loss,
    shard_positions,
    train_data_parallel,
    trainable_parameters,
)

warn_moved("zonal.data_parallel", "zonal.scale.data_parallel")

__all__ = [
    "NUM_SAMPLES",
    "DistributedNotInitialisedError",
    "ShardError",
    "SharedNoise",
    "StepLosses",
    "UnsupportedModelError",
    "WorldSizeMismatchError",
    "average_gradients",
    "broadcast_state",
    "data_parallel_step",
    "noise_seed",
    "process_group",
    "sampled_output",
    "shard_loss",
    "shard_positions",
    "train_data_parallel",
    "trainable_parameters",
]
