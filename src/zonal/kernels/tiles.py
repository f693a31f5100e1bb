"""Dense zonal Gram matrices tile by tile, without an autograd graph.

K_ij = scale_i scale'_j v(x_i . x'_j) for a function v of the cosine (the closed-form shape or the
truncated Mercer sum, seed 000 eq. 10) and, for the homogeneous extension, the norms scale, scale'
(seed 000 eq. 7). Building K the obvious way (a matmul, then elementwise passes over N x M
temporaries) is bound by memory: every fresh N x M float64 buffer costs page faults and every pass
a trip to main memory. Here the output is the only N x M allocation: the cosines of one tile
(x1[rows] @ x2[cols]^T) are computed, clamped to [-1, 1], mapped through v while they sit in cache,
and written into the output. For K(X, X) only tiles on and above the diagonal are computed, each
written twice (K_ji = K_ij), so K is exactly symmetric, its diagonal is v(1) exactly, and v runs on
about half the entries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from zonal.kernels.compile import tile_runner

#: rows (and columns) of a tile: a 256 x 256 float64 tile and its temporaries stay in L2 cache
TILE = 256


@dataclass(frozen=True)
class CosineMap:
    """v(t) = function(t, *arguments), elementwise in the cosines t [..., R, C].

    ``function`` is a module-level function and ``arguments`` are tensors (hyperparameters,
    broadcasting as [*batch_shape, 1, 1]) and Python constants, so that ``function`` can be compiled
    once and reused (``zonal.kernels.compile``); ``compilable=False`` keeps it eager. ``repeat`` = L
    composes the map L times, v = f o ... o f (a deep kernel's layers): one layer is compiled, a
    graph L times smaller, which compiles in seconds where the whole composition took minutes.
    """

    function: Callable[..., torch.Tensor]
    arguments: tuple = ()
    compilable: bool = True
    repeat: int = 1


def _symmetrise_(tile: torch.Tensor) -> None:
    """Copy the upper triangle of a square tile [..., T, T] onto the lower one, diagonal := 1."""
    tile.copy_(torch.triu(tile) + torch.triu(tile, 1).mT)
    tile.diagonal(dim1=-2, dim2=-1).fill_(1.0)


def gram_no_grad(
    unit1: torch.Tensor,
    unit2: torch.Tensor,
    values: CosineMap,
    *,
    same: bool,
    batch_shape: tuple[int, ...] = (),
    scale1: torch.Tensor | None = None,
    scale2: torch.Tensor | None = None,
) -> torch.Tensor:
    """K [*B, N, M] with K_ij = scale1_i scale2_j values(unit1_i . unit2_j), without autograd.

    Args:
        unit1: unit vectors [*b1, N, d].
        unit2: unit vectors [*b2, M, d]; ``same=True`` promises ``unit2`` equals ``unit1``.
        values: elementwise map of cosines, t [*b, R, C] -> [*b', R, C] (it may broadcast against
            hyperparameters of shape [*batch_shape, 1, 1]); called on tiles of at most
            ``TILE`` x ``TILE`` cosines on the CPU (compiled for large matrices, see
            ``zonal.kernels.compile``), on the whole matrix on an accelerator.
        batch_shape: the kernel's batch shape; B = broadcast(b1, b2, batch_shape).
        scale1, scale2: the norms [*b1, N] and [*b2, M] of the homogeneous extension, or None.
    """
    with torch.no_grad():
        num_rows, num_cols = unit1.shape[-2], unit2.shape[-2]
        batch = torch.broadcast_shapes(unit1.shape[:-2], unit2.shape[:-2], batch_shape)
        out = torch.empty(*batch, num_rows, num_cols, dtype=unit1.dtype, device=unit1.device)
        on_cpu = unit1.device.type == "cpu"
        # an accelerator runs each elementwise pass at memory speed: one tile, the whole matrix
        size = TILE if on_cpu else max(num_rows, num_cols, 1)
        num_entries = out.numel() if values.compilable and on_cpu else 0
        run = tile_runner(values.function, num_entries)
        for row in range(0, num_rows, size):
            rows = slice(row, row + size)
            first_col = row if same else 0
            for col in range(first_col, num_cols, size):
                cols = slice(col, col + size)
                cosines = unit1[..., rows, :] @ unit2[..., cols, :].mT  # [*b, R, C]
                cosines.clamp_(-1, 1)
                if same and col == row:
                    _symmetrise_(cosines)
                tile = cosines
                for _ in range(values.repeat):
                    tile = run(tile, *values.arguments)  # [*b', R, C]
                if scale1 is not None and scale2 is not None:
                    tile = tile * (scale1[..., rows, None] * scale2[..., None, cols])
                out[..., rows, cols] = tile
                if same and col != row:
                    out[..., cols, rows] = tile.mT
        return out
