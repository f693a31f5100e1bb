"""Large CPU buffers on transparent huge pages (Linux ``madvise(MADV_HUGEPAGE)``).

Filling a fresh dense Gram matrix is bound by page faults: the first write to each 4 KiB page of a
new buffer traps into the kernel, which zeroes the page. A 4096 x 4096 float64 matrix (128 MiB) is
32,768 faults, 50-60 ms on one thread of the development machine (an AMD EPYC virtual machine),
as long as GPyTorch's whole ``RBFKernel`` evaluation without them. Advised as huge pages, the same
buffer takes 64 faults of 2 MiB and about 15 ms (``benchmarks/kernels.py`` measures the kernels
built on it; ``THP_MEM_ALLOC_ENABLE=1`` makes PyTorch's own allocator do the same for every
tensor).

Only buffers of at least ``MIN_BYTES`` are advised: glibc serves those from a mapping of their own
(its mmap threshold is at most 32 MiB on 64-bit systems), so the advice ends with the buffer and
never applies to heap memory shared with small tensors. The advice is a hint: with transparent huge
pages set to ``never``, on another operating system, or if ``madvise`` is unavailable, the buffer is
an ordinary ``torch.empty``.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from functools import cache

import torch

#: huge page size on x86-64 and arm64 Linux (2 MiB)
HUGE_PAGE_BYTES = 2 << 20
#: buffers at least this large are advised (glibc's largest mmap threshold)
MIN_BYTES = 32 << 20


@cache
def _madvise():
    """libc's ``madvise(addr, length, advice)``, or None where it is not available."""
    if not sys.platform.startswith("linux") or not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def advise_huge_pages(buffer: torch.Tensor) -> bool:
    """Ask the kernel to back the untouched pages of ``buffer``'s storage with huge pages.

    Covers the whole 2 MiB-aligned pages inside the storage; returns whether the advice was given
    (a CPU tensor of at least ``MIN_BYTES`` on Linux, and ``madvise`` accepted it).
    """
    madvise = _madvise()
    size = buffer.untyped_storage().nbytes()
    if madvise is None or buffer.device.type != "cpu" or size < MIN_BYTES:
        return False
    address = buffer.untyped_storage().data_ptr()
    start = -(-address // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES  # first huge page inside the storage
    end = (address + size) // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
    return end > start and madvise(start, end - start, mmap.MADV_HUGEPAGE) == 0


def empty_on_huge_pages(
    *shape: int, dtype: torch.dtype, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """``torch.empty(shape)``, advised as huge pages when it is a large CPU buffer."""
    buffer = torch.empty(*shape, dtype=dtype, device=device)
    advise_huge_pages(buffer)
    return buffer
