"""The three passes of a streamed fit over the partitions: check and standardise, sum the SGPR's
statistics (saving the running totals as it goes), score the validation rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from zonal.datasets import Standardizer
from zonal.models import SGPR
from zonal.models.sgpr import add_statistics
from zonal.models.sgpr_statistics import StatisticsKernel, read_ahead
from zonal.tabular.checks import check_regression_target, warn_about_inputs
from zonal.tabular.metrics import validation_metrics
from zonal.tabular.model import TabularModel
from zonal.tabular.recipes import (
    ARD_SUBSAMPLE,
)
from zonal.tabular.streamed.partitions import PartitionReader
from zonal.tabular.streamed.rows import (
    RunningMoments,
    Subsample,
    check_regression,
    count_values,
    held_out,
    row_uniforms,
)
from zonal.tabular.streamed.state import save_state
from zonal.tabular.tables import TableError
from zonal.tabular.targets import (
    REGRESSION,
)

#: the running statistics are saved every this many chunks of pass 2
CHECKPOINT_EVERY = 16


def progress_bar(description: str, total: int | None, initial: int, progress: bool) -> tqdm:
    return tqdm(desc=description, total=total, initial=initial, unit=" rows", unit_scale=True,
                disable=not progress, dynamic_ncols=True)  # fmt: skip


def first_pass(
    reader: PartitionReader,
    *,
    validation_fraction: float,
    seed: int,
    ard: bool,
    likelihood: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Pass 1 (module docstring): check every chunk and return the training rows' scalers
    (``x_scaler``, ``y_scaler``), ``num_rows``, ``num_validation_rows``, ``partition_rows`` and,
    with ``ard``, the ``subsample`` (x, y) of raw training rows."""
    width = len(reader.features)
    x_moments, y_moments = RunningMoments(width), RunningMoments(1)
    counts: dict[float, int] | None = {}
    subsample = Subsample(ARD_SUBSAMPLE, width) if ard else None
    partition_rows: list[int] = []
    num_rows = num_valid = 0
    x_low, x_high = np.full(width, np.inf), np.full(width, -np.inf)  # [D], training rows
    y_low, y_high = np.inf, -np.inf
    with progress_bar("pass 1/3 check, standardise", None, 0, progress) as bar:
        for partition in range(len(reader.partitions)):
            start = num_rows
            for chunk in reader.chunks(partition, num_rows):
                rows = np.arange(chunk.first_global_row, chunk.first_global_row + len(chunk.y))
                valid = held_out(rows, seed, validation_fraction)  # [n]
                train = ~valid
                x_moments.update(chunk.x[train])
                y_moments.update(chunk.y[train, None])
                if train.any():
                    x_low = np.minimum(x_low, chunk.x[train].min(axis=0))
                    x_high = np.maximum(x_high, chunk.x[train].max(axis=0))
                if len(chunk.y):
                    y_low, y_high = min(y_low, chunk.y.min()), max(y_high, chunk.y.max())
                counts = count_values(counts, chunk.y)
                if subsample is not None:
                    subsample.add(row_uniforms(rows[train], seed, 1), chunk.x[train],
                                  chunk.y[train])  # fmt: skip
                num_valid += int(valid.sum())
                num_rows += len(rows)
                bar.update(len(rows))
            partition_rows.append(num_rows - start)
    source = reader.partitions[0] if len(reader.partitions) == 1 else "the partitions"
    if num_rows - num_valid < 2:
        raise TableError(
            f"{source}: {num_rows} rows, {num_rows - num_valid} for training; fitting needs at "
            "least 2 training rows"
        )
    if validation_fraction > 0 and num_valid == 0:
        raise TableError(
            f"the validation split is empty: {validation_fraction:g} of {num_rows} rows drew no "
            "row; use more rows, a larger --validation-fraction, or --validation-fraction 0"
        )
    check_regression_target(np.array([y_low, y_high]), reader.target, str(source))
    check_regression(counts, likelihood, reader.target)
    warn_about_inputs(reader.features, x_low == x_high, num_rows - num_valid, str(source))
    y_moments_scaler = y_moments.standardizer()
    y_scaler = Standardizer(mean=y_moments_scaler.mean[0], std=y_moments_scaler.std[0])
    with np.errstate(over="ignore"):
        if not np.isfinite(np.float64(y_scaler.std) ** 2):
            raise TableError(
                f"{source}: the target {reader.target!r} spreads over {float(y_scaler.std):.3g} "
                "units: its predictive variances would overflow float64; rescale the column"
            )
    return {
        "x_scaler": x_moments.standardizer(),
        "y_scaler": y_scaler,
        "num_rows": num_rows,
        "num_validation_rows": num_valid,
        "partition_rows": partition_rows,
        "subsample": None if subsample is None else (subsample.x, subsample.y),
    }


def accumulate_chunk(
    kernels: dict[str, StatisticsKernel],
    totals: dict[str, list[torch.Tensor]],
    x: torch.Tensor,
    y: torch.Tensor,
    first_row: int,
) -> dict[str, list[torch.Tensor]]:
    """New running totals (in the zonal basis of ``zonal.models.sgpr_statistics``): ``totals``
    plus each model's statistics of the standardised training rows x [n, D], y [n]; ``totals`` is
    not changed, so an interrupted call leaves the saved totals whole."""
    added = {}
    for name, kernel in kernels.items():
        parts = kernel.empty()
        kernel.add_(parts, *kernel.model._checked_rows(x, y, first_row))
        added[name] = add_statistics(totals.get(name), parts)
    return added


def second_pass(
    reader: PartitionReader,
    models: dict[str, SGPR],
    state: dict[str, Any],
    state_path: Path,
    *,
    checkpoint_every: int = CHECKPOINT_EVERY,
    progress: bool = False,
) -> dict[str, tuple[torch.Tensor, ...]]:
    """Pass 2 (module docstring) from the position saved in ``state``: the statistics of every
    model over the training rows (``SGPR.STATISTICS`` order). The running totals and the position
    after the last chunk added are saved together every ``checkpoint_every`` chunks and on
    Ctrl-C."""
    kernels = {name: model.statistics_kernel() for name, model in models.items()}
    settings, first = state["settings"], state["first_pass"]
    x_scaler = Standardizer(mean=first["x_mean"].numpy(), std=first["x_std"].numpy())
    y_scaler = Standardizer(mean=first["y_mean"].numpy(), std=first["y_std"].numpy())
    partition_starts = np.concatenate([[0], np.cumsum(first["partition_rows"])]).tolist()
    done = (state["totals"], state["position"])  # one name: updated in one step
    unsaved = 0

    def save() -> None:
        save_state(state_path, {**state, "totals": done[0], "position": done[1]})

    bar = progress_bar("pass 2/3 statistics", first["num_rows"], done[1]["rows"], progress)
    try:
        for partition in range(done[1]["partition"], len(reader.partitions)):
            skip = done[1]["chunks"] if partition == done[1]["partition"] else 0
            chunks = read_ahead(reader.chunks(partition, partition_starts[partition]))
            for index, chunk in enumerate(chunks):
                if index < skip:
                    continue
                rows = np.arange(chunk.first_global_row, chunk.first_global_row + len(chunk.y))
                train = ~held_out(rows, settings["seed"], settings["validation_fraction"])
                x = torch.from_numpy(x_scaler.transform(chunk.x[train]))  # [n, D]
                y = torch.from_numpy(y_scaler.transform(chunk.y[train]))  # [n]
                totals = done[0]
                if len(y):
                    totals = accumulate_chunk(kernels, totals, x, y, chunk.first_global_row)
                done = (totals, {"partition": partition, "chunks": index + 1,
                                 "rows": int(rows[-1]) + 1})  # fmt: skip
                bar.update(len(rows))
                unsaved += 1
                if unsaved >= checkpoint_every:
                    save()
                    unsaved = 0
            done = (done[0], {"partition": partition + 1, "chunks": 0,
                              "rows": partition_starts[partition + 1]})  # fmt: skip
    except KeyboardInterrupt:
        save()
        raise
    finally:
        bar.close()
    return {name: kernels[name].finish(totals) for name, totals in done[0].items()}


@torch.no_grad()
def third_pass(
    reader: PartitionReader,
    fitted: TabularModel,
    *,
    seed: int,
    validation_fraction: float,
    progress: bool = False,
) -> dict[str, float]:
    """Pass 3: the mean log predictive density and MSE of the held-out rows under the fitted
    model (``zonal.tabular.metrics.validation_metrics``, chunk by chunk), in standardised units."""
    model = fitted.trained.model
    sums = {"log_likelihood": 0.0, "mse": 0.0}
    count = 0
    with progress_bar("pass 3/3 validation", fitted.num_rows, 0, progress) as bar:
        start = 0
        for partition in range(len(reader.partitions)):
            for chunk in reader.chunks(partition, start):
                rows = np.arange(chunk.first_global_row, chunk.first_global_row + len(chunk.y))
                valid = held_out(rows, seed, validation_fraction)
                if valid.any():
                    x = torch.from_numpy(fitted.x_scaler.transform(chunk.x[valid]))  # [n, D]
                    y = torch.from_numpy(fitted.y_scaler.transform(chunk.y[valid]))  # [n]
                    metrics = validation_metrics(model, REGRESSION, x, y)
                    for key in sums:
                        sums[key] += metrics[key] * len(y)
                    count += len(y)
                start += len(rows)
                bar.update(len(rows))
    return {key: value / count for key, value in sums.items()}
