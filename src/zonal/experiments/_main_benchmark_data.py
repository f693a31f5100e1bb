"""The data of the main benchmark (``zonal.experiments.main_benchmark``): a registered regression
dataset, maybe subsampled, or a made-up one that needs no download."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from zonal.experiments.errors import ExperimentError

if TYPE_CHECKING:
    import torch

SYNTHETIC = "synthetic"


def synthetic_regression(num_rows: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """x ~ N(0, I_3), y = sin(2 x_0) x_1 + 0.5 x_2 + 0.1 noise: a stand-in that needs no download."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_rows, 3))
    y = np.sin(2 * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] + 0.1 * rng.standard_normal(num_rows)
    return x, y


def load_data(name: str, config: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """(X [N, D], y [N]) float64 tensors of a registered regression dataset or ``"synthetic"``,
    maybe subsampled to ``max_rows`` rows."""
    import torch

    if name == SYNTHETIC:
        x, y = synthetic_regression(seed=config["seed"])
    else:
        from zonal.datasets import DatasetUnavailableError, load_dataset

        try:
            data = load_dataset(name)
        except DatasetUnavailableError as error:
            raise ExperimentError(
                f"dataset {name!r} is not available: {first_line(error)}"
            ) from error
        if data.task != "regression" or data.y.ndim != 1:
            raise ExperimentError(f"dataset {name!r} is not a single-target regression dataset")
        x, y = data.X, data.y
    limit = config["max_rows"]
    if 0 < limit < len(x):
        rows = np.sort(np.random.default_rng([config["seed"], 1]).choice(len(x), limit, False))
        x, y = x[rows], y[rows]
    return torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)


def first_line(error: BaseException) -> str:
    """The first line of an error's message (a KeyError's without the quotes ``str`` adds)."""
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    return (text.strip().splitlines() or [""])[0]
