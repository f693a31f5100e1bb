r"""The factored form of the harmonic features: zonal functions, then one small matrix per level.

Both harmonic feature sets (complete levels, ``SphericalHarmonicFeatures``; phase-truncated,
``SparseSphericalHarmonicFeatures``) are orthonormalised zonal functions of the same shape
(seed 001 theorems 3-4, seed 002 sec. 5.2): with directions :math:`\eta_m` grouped by degree and,
per degree :math:`n`, the inverse Cholesky factor :math:`F_n = L_n^{-1}` of
:math:`G_n = Z_n(\eta_i \cdot \eta_j)`,

.. math::

    \phi(x) = Z(x) F^\top, \qquad Z(x)_m = Z_{n(m)}(\eta_m \cdot x) \ [M], \qquad
    F = \operatorname{blockdiag}(F_n) \ [M, M].

Evaluating :math:`Z` is one matrix product (the cosines :math:`\eta_m \cdot x`) and one fused
Gegenbauer recurrence; applying :math:`F` costs :math:`\sum_n N_n^2` per row, as much as half of a
Gram product :math:`\phi^\top \phi`. Because :math:`F` is linear, sums over rows can be taken in the
zonal basis and transformed once:

.. math::

    \sum_i \phi(x_i) \phi(x_i)^\top = F \Big(\sum_i Z(x_i) Z(x_i)^\top\Big) F^\top,

which is what the SGPR's statistics pass does (``zonal.models.sgpr_statistics``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from zonal.harmonics.recurrence import zonal_by_level, zonal_by_level_

#: rows per block of the in-place recurrence on a CPU: its three buffers stay in a core's L2 cache
RECURRENCE_ROWS = 256
#: rows per block on an accelerator, which has no core's cache to fit and pays a dozen kernel
#: launches per block: blocks of 256 rows made a 10^7-row statistics pass 14.7x slower on an H200
#: (``benchmarks/statistics_pass.py --recurrence-rows 256``); this many bound the buffers (three
#: of rows x M) while the launches cost nothing beside the work
ACCELERATOR_RECURRENCE_ROWS = 65536


def recurrence_rows(device: torch.device) -> int:
    """Rows per block of the in-place recurrence on ``device`` (CPU: cache-sized blocks)."""
    return RECURRENCE_ROWS if device.type == "cpu" else ACCELERATOR_RECURRENCE_ROWS


def zonal_columns(
    x: torch.Tensor,
    directions: torch.Tensor,
    level_sizes: Sequence[int],
    ambient_dim: int,
    *,
    row_scale: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Z_{n(m)}(eta_m . x) [..., N, M] for x [..., N, d] and directions eta [M, d] grouped by degree
    (``level_sizes[n]`` of degree n), in x's dtype, each row times ``row_scale`` [..., N] if given.

    Differentiable when x or eta need gradients. Otherwise, blocks of ``recurrence_rows(device)``
    rows are finished one at a time (on a CPU while they are in cache): the cosines by one matrix
    product, the fused in-place recurrence, the row scale, written into ``out`` ([N, M], e.g. a
    buffer reused from chunk to chunk: a fresh N x M tensor costs about as much in page faults as
    the work itself);
    on a CPU with several torch threads, the blocks are shared out among them.
    """
    directions = directions.to(x.dtype)  # [M, d]
    sizes = list(level_sizes)
    if torch.is_grad_enabled() and (x.requires_grad or directions.requires_grad):
        zonal = zonal_by_level((x @ directions.mT).clamp(-1, 1), sizes, ambient_dim)
        return zonal if row_scale is None else zonal * row_scale.unsqueeze(-1)
    with torch.no_grad():
        flat_x = x.reshape(-1, x.shape[-1])  # [B N, d]
        if out is None:
            out = flat_x.new_empty(len(flat_x), len(directions))  # [B N, M]
        transposed = directions.mT.contiguous()  # [d, M]
        scales = None if row_scale is None else row_scale.reshape(-1, 1).to(x.dtype)  # [B N, 1]

        block_rows = recurrence_rows(flat_x.device)

        def finish_rows(first: int, stop: int) -> None:
            for start in range(first, stop, block_rows):
                rows = slice(start, min(start + block_rows, stop))
                block = torch.mm(flat_x[rows], transposed, out=out[rows]).clamp_(-1, 1)  # [n, M]
                zonal_by_level_(block, sizes, ambient_dim)
                if scales is not None:
                    block.mul_(scales[rows])

        threads = torch.get_num_threads()
        if flat_x.device.type != "cpu" or threads == 1 or len(flat_x) < 2 * RECURRENCE_ROWS:
            finish_rows(0, len(flat_x))
        else:
            _finish_in_threads(finish_rows, len(flat_x), threads)
        return out.reshape(*x.shape[:-1], len(directions))


def _finish_in_threads(finish_rows: Callable[[int, int], None], count: int, threads: int) -> None:
    """``finish_rows(first, stop)`` over ``threads`` contiguous ranges of whole blocks of the
    ``count`` rows, one Python thread each (torch ops release the GIL), each thread's ops on one
    intra-op thread: the blocks are too small for OpenMP to split them cheaply (a fork and a join
    per operation, about 20 per block), but independent of each other. The workers run in the
    caller's grad and inference modes (both are per thread in torch); their thread counts (per
    thread in OpenMP and MKL) end with them, and torch's stored count is put back afterwards."""
    blocks = -(-count // RECURRENCE_ROWS)
    workers = min(threads, blocks)
    edges = [min(count, (blocks * k // workers) * RECURRENCE_ROWS) for k in range(workers + 1)]
    inference = torch.is_inference_mode_enabled()

    def serially(first: int, stop: int) -> None:
        torch.set_num_threads(1)
        with torch.inference_mode(inference), torch.no_grad():
            finish_rows(first, stop)

    try:
        with ThreadPoolExecutor(workers) as pool:
            done = [pool.submit(serially, a, b) for a, b in itertools.pairwise(edges) if b > a]
            for future in done:
                future.result()
    finally:
        torch.set_num_threads(threads)


def apply_level_factors(zonal: torch.Tensor, factors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Z F^T: zonal columns [..., M] grouped by level times each level's factor F_n [m_n, m_n]."""
    blocks = zonal.split([len(factor) for factor in factors], dim=-1)
    return torch.cat(
        [block @ factor.to(block.dtype).mT for block, factor in zip(blocks, factors, strict=True)],
        dim=-1,
    )  # [..., M]
