"""``zonal fit --chunk-size``: the one-pass SGPR fitted to a table too large for memory.

The collapsed SGPR (``zonal.models.SGPR``; seed 000 sec. 3.3, seed 002 sec. 5) sees the training
rows only through the sums

    A = sum_i phi_r(x_i) phi_r(x_i)^T [M, M],  c = sum_i phi_r(x_i) y_i [M],  y^T y,  sum_i r_i^2,  N,

and the standardisation of ``zonal fit`` only through per-column moments, so the table is read in
chunks of ``chunk_size`` rows and never held whole:

1. **Pass 1** reads every chunk, checks it (a missing, non-numeric or infinite cell, or a CSV row
   with the wrong number of cells, is a ``PartitionError`` naming the partition file, the line and
   the global row, before any optimisation) and accumulates, over the training rows, the column
   moments that ``Standardizer.fit`` computes in memory (``RunningMoments``: the same
   magnitude-relative, overflow-safe rule), the distinct target values (a classification target
   is refused: the SGPR is Gaussian only), each column's smallest and largest value (a target of
   one value is a named error, input columns of one value and more columns than rows are
   ``DataWarning`` notes, as in memory: ``zonal.tabular.checks``) and, with ARD, the training
   rows of the ``ARD_SUBSAMPLE`` smallest hash keys (a uniform subsample without replacement).
2. **Pass 2** adds each chunk's statistics (the kernel of work ``SGPR.statistics_kernel``, shared
   with the in-memory and Dask passes, on the standardised training rows; the next chunk is read
   while the current one is added) for every candidate kernel; they are committed to the models only
   when the pass has ended. Every ``checkpoint_every`` chunks (and on Ctrl-C) the running totals and
   the position reached are written together, atomically, to a state file beside the output, so an
   interrupted pass resumes after the last saved chunk and counts no row twice; a state file from
   other data (size, modification time or a hash of the first and last MiB of a partition) or other
   settings is refused (``ResumeError``), ``restart=True`` discards it.
3. **The bound** is maximised by L-BFGS (``SGPR.fit``), the kernel with the larger bound is kept
   (as ``zonal.tabular.recipes.train_sgpr`` does) and the checkpoint is written in the format of
   ``zonal.tabular.saved``, so ``zonal predict`` reads it unchanged.
4. **Pass 3** scores the fitted model on the held-out rows (mean log predictive density and MSE
   in the target's units).

The validation rows are chosen per row, streaming-compatibly: global row g (0-based, counted over
the partitions in order, header lines excluded) is held out when u(seed, g) < fraction, with u a
splitmix64 hash mapped to [0, 1). So the split differs from the in-memory ``zonal fit``'s
(a seeded permutation of all rows), and holds out about, not exactly, ``fraction`` of the rows.

Inputs: one CSV file, several CSV / Parquet partitions, or a folder of them (its ``*.csv`` and
``*.parquet`` files in name order). Every partition has the first one's columns. CSV cells follow
``zonal.tabular.tables``' rules (read with pandas' C parser; a chunk with anything unusual is re-read
with the csv module and checked by ``zonal.tabular.tables.Table.numeric``).
"""

from __future__ import annotations

from zonal.scale.dask_statistics import PartitionError
from zonal.tabular.streamed.fit import streamed_fit
from zonal.tabular.streamed.partitions import (
    PARTITION_SUFFIXES,
    Chunk,
    PartitionReader,
    list_partitions,
    partition_columns,
)
from zonal.tabular.streamed.passes import (
    CHECKPOINT_EVERY,
    accumulate_chunk,
    first_pass,
    second_pass,
    third_pass,
)
from zonal.tabular.streamed.rows import RELATIVE_TOLERANCE, RunningMoments, held_out, row_uniforms
from zonal.tabular.streamed.state import (
    FINGERPRINT_BYTES,
    STATE_FORMAT,
    STATE_VERSION,
    ResumeError,
    fingerprint,
    state_path_for,
)

__all__ = [
    "CHECKPOINT_EVERY",
    "FINGERPRINT_BYTES",
    "PARTITION_SUFFIXES",
    "RELATIVE_TOLERANCE",
    "STATE_FORMAT",
    "STATE_VERSION",
    "Chunk",
    "PartitionError",
    "PartitionReader",
    "ResumeError",
    "RunningMoments",
    "accumulate_chunk",
    "fingerprint",
    "first_pass",
    "held_out",
    "list_partitions",
    "partition_columns",
    "row_uniforms",
    "second_pass",
    "state_path_for",
    "streamed_fit",
    "third_pass",
]
