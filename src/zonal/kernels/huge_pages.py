"""Large CPU buffers on transparent huge pages (Linux ``madvise(MADV_HUGEPAGE)``).

Filling a fresh dense Gram matrix is bound by page faults: the first write to each 4 KiB page of a
new buffer traps into the kernel, which zeroes the page. A 4096 x 4096 float64 matrix (128 MiB) is
32,768 faults, 50-60 ms on one thread of the development machine (an AMD EPYC virtual machine),
as long as GPyTorch's whole ``RBFKernel`` evaluation without them. Advised as huge pages, the same
buffer takes 64 faults of 2 MiB and about 15 ms (``benchmarks/kernels.py`` measures the kernels
built on it; ``THP_MEM_ALLOC_ENABLE=1`` makes PyTorch's own allocator do the same for every
tensor).

A buffer of at least ``MIN_BYTES`` gets an anonymous private mapping of its own (Python's
``mmap``), advised before its first write and viewed as a tensor (``torch.frombuffer``, which
keeps the mapping alive): the advice ends with the buffer and never reaches memory that the
allocator later hands to other tensors. The advice is a hint: with transparent huge pages set to
``never``, or on another operating system (an ordinary ``torch.empty`` there), nothing changes but
the page size.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import sys

import torch

#: buffers at least this large get a mapping of their own, advised as huge pages
MIN_BYTES = 32 << 20


def huge_pages_supported() -> bool:
    """Whether this platform has private anonymous mappings and ``MADV_HUGEPAGE`` (Linux)."""
    return sys.platform.startswith("linux") and all(
        hasattr(mmap, name) for name in ("MADV_HUGEPAGE", "MAP_PRIVATE", "MAP_ANONYMOUS")
    )


def empty_on_huge_pages(
    *shape: int, dtype: torch.dtype, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` (``torch.empty``); on the CPU and at least
    ``MIN_BYTES``, in a private mapping advised as huge pages (module docstring)."""
    device = torch.device(device)
    num_bytes = math.prod(shape) * dtype.itemsize
    if device.type != "cpu" or num_bytes < MIN_BYTES or not huge_pages_supported():
        return torch.empty(*shape, dtype=dtype, device=device)
    mapping = mmap.mmap(-1, num_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    with contextlib.suppress(OSError):  # transparent huge pages unavailable: ordinary pages
        mapping.madvise(mmap.MADV_HUGEPAGE)
    return torch.frombuffer(mapping, dtype=dtype).view(*shape)
