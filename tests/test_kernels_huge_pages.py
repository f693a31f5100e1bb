"""Large Gram matrix buffers are advised as transparent huge pages; small ones are left alone.

The independent truth is the kernel's own record: /proc/self/smaps lists, for every mapping, the
flag ``hg`` when madvise(MADV_HUGEPAGE) was applied to it.
"""

import sys
from pathlib import Path

import pytest
import torch

from zonal.kernels.huge_pages import HUGE_PAGE_BYTES, MIN_BYTES, empty_on_huge_pages

THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def vm_flags_at(address: int) -> set[str]:
    """The VmFlags of the mapping of this process that contains ``address``."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            start, end = (int(part, 16) for part in fields[0].split("-"))
            inside = start <= address < end
        elif inside and line.startswith("VmFlags:"):
            return set(fields[1:])
    raise AssertionError(f"no mapping contains {address:#x}")


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not THP_SETTING.exists(),
    reason="transparent huge pages are a Linux feature",
)
def test_a_large_cpu_buffer_is_advised_as_huge_pages():
    buffer = empty_on_huge_pages(MIN_BYTES // 8 + 1000, dtype=torch.float64)  # just above 32 MiB
    first_huge_page = -(-buffer.data_ptr() // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    assert "hg" in vm_flags_at(first_huge_page)
    buffer.fill_(2.0)  # usable as any tensor
    assert float(buffer.sum()) == 2.0 * buffer.numel()


def test_a_small_buffer_is_a_plain_empty_tensor_without_the_advice():
    small = empty_on_huge_pages(4, 5, dtype=torch.float32)
    assert small.shape == (4, 5) and small.dtype == torch.float32 and small.is_contiguous()
    if sys.platform.startswith("linux"):
        assert "hg" not in vm_flags_at(small.data_ptr())
