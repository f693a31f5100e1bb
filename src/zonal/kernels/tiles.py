r"""Dense zonal Gram matrices tile by tile, without an autograd graph.

:math:`K_{ij} = \mathrm{scale}_i\, \mathrm{scale}'_j\, v(x_i \cdot x'_j)` for a function :math:`v`
of the cosine (the closed-form shape or the truncated Mercer sum, seed 000 eq. 10) and, for the
homogeneous extension, the norms :math:`\mathrm{scale}, \mathrm{scale}'` (seed 000 eq. 7). Building
:math:`K` the obvious way (a matmul, then elementwise passes over :math:`N \times M` temporaries) is
bound by memory: every fresh :math:`N \times M` float64 buffer costs page faults and every pass a
trip to main memory. Here the output is the only :math:`N \times M` allocation (on huge pages, see
``zonal.kernels.huge_pages``): the cosines of one tile (x1[rows] @ x2[cols]^T) are computed,
clamped to :math:`[-1, 1]` and copied into their block of the output, where :math:`v` maps them in
place while they sit in cache (``zonal.kernels.compile.in_place``). For :math:`K(X, X)` only tiles
on and above the diagonal are computed, each written twice (:math:`K_{ji} = K_{ij}`), so :math:`K`
is exactly symmetric, its diagonal is :math:`v(1)` exactly, and :math:`v` runs on about half the
entries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from zonal.kernels.compile import recompile_limit_raises, tile_runner
from zonal.kernels.huge_pages import empty_on_huge_pages

#: rows (and columns) of a tile: a 256 x 256 float64 tile and its temporaries stay in L2 cache
TILE = 256


@dataclass(frozen=True)
class CosineMap:
    """v(t) = f^L(t, ..., t)[0] / output_divisor: a map f of ``state`` copies of the cosines, applied
    ``repeat`` = L times, elementwise in the cosines t [..., R, C].

    ``function(work, *arguments)`` maps a tile [..., R, C] (``state`` = 1) or a tuple of ``state``
    tiles to the same structure; it is a module-level function and ``arguments`` are tensors
    (hyperparameters, broadcasting as [*batch_shape, 1, 1]) and Python constants, so that it is
    compiled once and reused (``zonal.kernels.compile``); ``compilable=False`` keeps it eager.
    ``repeat`` composes it (a deep kernel's layers) and ``state`` carries several quantities per
    entry through the layers (the NTK's Sigma_h and Theta_h): one layer is compiled, a graph L times
    smaller, which compiles in seconds where the whole composition took minutes.
    """

    function: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]
    arguments: tuple = ()
    compilable: bool = True
    repeat: int = 1
    state: int = 1
    output_divisor: float = 1.0


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
    with torch.no_grad(), recompile_limit_raises():
        num_rows, num_cols = unit1.shape[-2], unit2.shape[-2]
        batch = torch.broadcast_shapes(unit1.shape[:-2], unit2.shape[:-2], batch_shape)
        out = empty_on_huge_pages(
            *batch, num_rows, num_cols, dtype=unit1.dtype, device=unit1.device
        )
        on_cpu = unit1.device.type == "cpu"
        # an accelerator runs each elementwise pass at memory speed: one tile, the whole matrix
        size = TILE if on_cpu else max(num_rows, num_cols, 1)
        num_entries = out.numel() if values.compilable and on_cpu else 0
        run = tile_runner(values.function, num_entries)  # work -> function(work, *arguments)
        for row in range(0, num_rows, size):
            rows = slice(row, row + size)
            first_col = row if same else 0
            for col in range(first_col, num_cols, size):
                cols = slice(col, col + size)
                cosines = unit1[..., rows, :] @ unit2[..., cols, :].mT  # [*b, R, C]
                cosines.clamp_(-1, 1)
                if same and col == row:
                    _symmetrise_(cosines)
                block = out[..., rows, cols]  # [*B, R, C], a view of K
                work = _work_tiles(cosines, values.state)  # [*b, R, C] or a tuple of them
                for _ in range(values.repeat):
                    work = run(work, *values.arguments)  # in place, or broadcast: [*b', R, C]
                tile = work[0] if isinstance(work, tuple) else work  # contiguous, ours to modify
                if values.output_divisor != 1:
                    tile.div_(values.output_divisor)
                if scale1 is not None and scale2 is not None:
                    tile = tile * (scale1[..., rows, None] * scale2[..., None, cols])  # [*B', R, C]
                block.copy_(tile)  # broadcasts over the rest of B
                if same and col != row:  # from the tile in cache, not from the strided block
                    out[..., cols, rows] = tile.mT
        return out


def _work_tiles(cosines: torch.Tensor, state: int) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """The cosines [*b, R, C] themselves, or a tuple of ``state`` copies, for the tile function to
    map in place."""
    return cosines if state == 1 else (cosines, *(cosines.clone() for _ in range(state - 1)))
