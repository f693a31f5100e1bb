"""The SGPR's sufficient statistics as one map-reduce on Dask (the optional extra
``zonal[scale]``).

The collapsed bound of ``zonal.models.SGPR`` (seed 000 sec. 3.3, seed 002 sec. 5) sees the data
only through sums over rows,

    A = sum_i phi_r(x_i) phi_r(x_i)^T [M, M],  c = sum_i phi_r(x_i) y_i [M],  y^T y,  sum_i r_i^2,  N,

so the pass over the data splits over any partitioning of the rows: *map* each partition p to its
partial sums with the model's own kernel of work ``SGPR.statistics_kernel`` (the same code as the
in-memory and streamed passes: sums in the features' zonal basis, one triangle of the Gram product,
the model's ``statistics_dtype``), *reduce* by adding them (a tree of fan-in ``split_every``, so
that no node holds more than ``split_every`` partial [M, M] matrices), and finish them once on the
driver (mirror the triangle, apply the level factors). The totals are committed to the model as
``SGPR.fit_statistics`` commits its own: all at once, after every partition has succeeded. A bad
partition (a NaN or infinite value, a wrong column count, a missing column) stops the pass with a
``PartitionError`` naming the partition and the row, and leaves the model's statistics untouched; so
an interrupted pass is restarted from scratch and never counts a row twice. The collapsed-bound
optimisation (``SGPR.fit``) then runs on the driver at a cost independent of N.

Inputs: a Dask array x [N, D] with targets y (a Dask array [N], or anything array-like of length
N), or a Dask DataFrame with the target column named by ``target`` (the inputs are the other
columns, or those named by ``features``). The scheduler is Dask's choice unless given: the
threaded scheduler for a plain session, the cluster of an active ``dask.distributed.Client``
(``Client(LocalCluster(...))`` or ``Client("tcp://scheduler:8786")``).

>>> from dask import array as da                                    # doctest: +SKIP
>>> x = da.from_zarr("x.zarr"); y = da.from_zarr("y.zarr")           # doctest: +SKIP
>>> fit_statistics_distributed(model, x, y); model.fit()             # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from zonal.models.sgpr import SGPR

#: partial results added per node of the reduction tree
SPLIT_EVERY = 8


class DistributedExtraMissingError(ImportError):
    """Dask is needed: ``pip install 'zonal[scale]'``."""


class PartitionError(ValueError):
    """One partition of a distributed statistics pass holds bad data (the message names it)."""


def _dask() -> Any:
    """The ``dask`` module, or a ``DistributedExtraMissingError`` saying how to install it."""
    try:
        return importlib.import_module("dask")
    except ImportError as error:
        raise DistributedExtraMissingError(
            "the distributed statistics pass needs Dask: pip install 'zonal[scale]'"
        ) from error


# ------------------------------------------------------------------------------------ map
def _partition_statistics(
    model: SGPR, index: int, first_row: int | None, x_block: Any, y_block: Any
) -> tuple[np.ndarray, ...]:
    """The map: the zonal-basis totals (``StatisticsKernel.add_``) of one partition, as numpy
    arrays. ``first_row`` is the
    partition's first row in the whole data where known (arrays), None for a DataFrame (rows are
    then counted within the partition)."""
    where = (
        f"partition {index} (rows counted from {first_row} in the whole data)"
        if first_row is not None
        else f"partition {index} (rows counted within the partition)"
    )
    try:
        x = torch.from_numpy(np.require(x_block, np.float64, ["C", "W"]))  # [n, D]
        y = torch.from_numpy(np.require(y_block, np.float64, ["C", "W"]))  # [n]
        kernel = model.statistics_kernel()
        parts = kernel.empty()
        kernel.add_(parts, *model._checked_rows(x, y, first_row or 0))
    except (ValueError, TypeError) as error:
        raise PartitionError(f"{where}: {error}") from error
    return tuple(part.detach().cpu().numpy() for part in parts)


def _frame_statistics(
    model: SGPR, index: int, frame: Any, features: Sequence[str], target: str
) -> tuple[np.ndarray, ...]:
    """The map for a DataFrame partition: columns ``features`` against ``target``."""
    missing = [name for name in (*features, target) if name not in frame.columns]
    if missing:
        raise PartitionError(f"partition {index}: no column(s) {missing}")
    # converted to float64 inside the map's checks, so that a text cell is named by partition
    return _partition_statistics(
        model, index, None, frame[list(features)].to_numpy(), frame[target].to_numpy()
    )


# ------------------------------------------------------------------------------------ reduce
def _add(*parts: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The reduce: entry-wise sums of partial statistics."""
    return tuple(np.sum(values, axis=0) for values in zip(*parts, strict=True))


def _tree_sum(delayed: Any, parts: list[Any], split_every: int) -> Any:
    """A delayed sum of ``parts`` by a tree of fan-in ``split_every``."""
    if split_every < 2:
        raise ValueError(f"split_every must be >= 2, got {split_every}")
    while len(parts) > 1:
        parts = [
            delayed(_add, pure=True)(*parts[i : i + split_every])
            for i in range(0, len(parts), split_every)
        ]
    return parts[0]


# ------------------------------------------------------------------------------------ graphs
def _array_tasks(dask: Any, model_node: Any, x: Any, y: Any) -> list[Any]:
    from dask import array as da

    if x.ndim != 2:
        raise ValueError(f"x must be a Dask array [N, D], got {x.ndim} dimension(s)")
    x = x.rechunk({1: -1})  # whole rows in every partition
    if not isinstance(y, da.Array):
        y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"y must have shape [{x.shape[0]}], got {tuple(y.shape)}")
    if not isinstance(y, da.Array):
        y = da.from_array(y, chunks=(x.chunks[0],))
    y = y.rechunk((x.chunks[0],))
    offsets = np.concatenate([[0], np.cumsum(x.chunks[0])[:-1]]).astype(int)
    x_blocks = x.to_delayed().reshape(-1)
    y_blocks = y.to_delayed().reshape(-1)
    return [
        dask.delayed(_partition_statistics, pure=True)(model_node, i, int(offset), xb, yb)
        for i, (offset, xb, yb) in enumerate(zip(offsets, x_blocks, y_blocks, strict=True))
    ]


def _frame_tasks(
    dask: Any, model_node: Any, frame: Any, target: str | None, features: Sequence[str] | None
) -> list[Any]:
    if target is None:
        raise ValueError("a DataFrame needs target=<the column of y>")
    columns = [c for c in frame.columns if c != target] if features is None else list(features)
    return [
        dask.delayed(_frame_statistics, pure=True)(model_node, i, part, columns, target)
        for i, part in enumerate(frame.to_delayed())
    ]


def statistics_map_reduce(
    model: SGPR,
    x: Any,
    y: Any = None,
    *,
    target: str | None = None,
    features: Sequence[str] | None = None,
    split_every: int = SPLIT_EVERY,
    scheduler: Any = None,
) -> tuple[torch.Tensor, ...]:
    """The sufficient statistics (in ``SGPR.STATISTICS`` order) of a Dask array (x [N, D], y [N])
    or a Dask DataFrame (``target`` column against the others), computed as a map-reduce over its
    partitions; the model is not changed. ``scheduler`` is passed to ``dask.compute`` (None:
    Dask's default, the active distributed client if there is one).
    """
    dask = _dask()
    from dask import array as da

    model_node = dask.delayed(model, name=f"zonal-sgpr-{uuid.uuid4().hex}", traverse=False)
    if isinstance(x, da.Array):
        if y is None:
            raise ValueError("give y with a Dask array x")
        tasks = _array_tasks(dask, model_node, x, y)
    elif hasattr(x, "to_delayed") and hasattr(x, "columns"):
        if y is not None:
            raise ValueError("a DataFrame carries its targets: name the column with target=")
        tasks = _frame_tasks(dask, model_node, x, target, features)
    else:
        raise TypeError(f"x must be a Dask array or a Dask DataFrame, got {type(x).__name__}")
    if not tasks:
        raise ValueError("no data: the input has no partitions")
    (totals,) = dask.compute(_tree_sum(dask.delayed, tasks, split_every), scheduler=scheduler)
    if float(totals[-1]) == 0:
        raise ValueError("no data: the statistics are empty")
    device = model.stat_gram.device
    return model.statistics_kernel().finish([torch.as_tensor(value).to(device) for value in totals])


def fit_statistics_distributed(
    model: SGPR,
    x: Any,
    y: Any = None,
    *,
    target: str | None = None,
    features: Sequence[str] | None = None,
    split_every: int = SPLIT_EVERY,
    scheduler: Any = None,
) -> None:
    """``SGPR.fit_statistics`` over a Dask array or DataFrame: the map-reduce of
    ``statistics_map_reduce``, then the totals replace the model's statistics (all at once; a
    failed pass leaves them as they were)."""
    totals = statistics_map_reduce(
        model,
        x,
        y,
        target=target,
        features=features,
        split_every=split_every,
        scheduler=scheduler,
    )
    model.commit_statistics(totals)


__all__ = [
    "DistributedExtraMissingError",
    "PartitionError",
    "fit_statistics_distributed",
    "statistics_map_reduce",
]
