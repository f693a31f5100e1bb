"""Large Gram matrix buffers live in a mapping of their own advised as transparent huge pages;
smaller ones are ordinary tensors.

The independent truth is the kernel's own record: /proc/self/smaps lists every mapping of the
process with its VmFlags, ``hg`` when madvise(MADV_HUGEPAGE) was applied to it.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zonal.kernels import ArcCosineKernel
from zonal.kernels.compile import compile_settings
from zonal.kernels.huge_pages import MIN_BYTES, empty_on_huge_pages, huge_pages_supported

pytestmark = pytest.mark.skipif(
    not huge_pages_supported() or not Path("/proc/self/smaps").exists(),
    reason="transparent huge pages are a Linux feature",
)


def mapping_at(address: int) -> tuple[int, int, set[str]]:
    """(start, end, VmFlags) of the mapping of this process that contains ``address``."""
    found = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            start, end = (int(part, 16) for part in fields[0].split("-"))
            found = (start, end) if start <= address < end else None
        elif found is not None and line.startswith("VmFlags:"):
            return (*found, set(fields[1:]))
    raise AssertionError(f"no mapping contains {address:#x}")


def test_a_large_buffer_is_a_mapping_of_its_own_advised_as_huge_pages():
    buffer = empty_on_huge_pages(MIN_BYTES // 8 + 1000, dtype=torch.float64)  # just above 32 MiB
    start, end, flags = mapping_at(buffer.data_ptr())
    assert "hg" in flags
    assert start == buffer.data_ptr() and end - start == (MIN_BYTES + 8000 + 4095) // 4096 * 4096
    buffer.fill_(2.0)  # usable as any tensor
    assert float(buffer.sum()) == 2.0 * buffer.numel()


# Run in a fresh process: NumPy advises its own large arrays as huge pages (``madvise`` on memory
# glibc's heap hands out, kept after they are freed), so in a process that ran other tests an
# ordinary tensor can land in heap pages some earlier array advised. The child checks both sides
# of the threshold, so the check itself is shown to see the flag.
BELOW_AND_ABOVE_THE_THRESHOLD = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import torch
from test_kernels_huge_pages import mapping_at
from zonal.kernels.huge_pages import MIN_BYTES, empty_on_huge_pages

below = empty_on_huge_pages(MIN_BYTES // 8 - 1000, dtype=torch.float64)
above = empty_on_huge_pages(MIN_BYTES // 8 + 1000, dtype=torch.float64)
print("hg" in mapping_at(below.data_ptr())[2], "hg" in mapping_at(above.data_ptr())[2])
"""


def test_a_buffer_below_the_threshold_is_an_ordinary_tensor():
    child = subprocess.run(
        [sys.executable, "-c", BELOW_AND_ABOVE_THE_THRESHOLD],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    below_advised, above_advised = child.stdout.split()
    assert above_advised == "True"  # the check sees an advised mapping
    assert below_advised == "False"


def test_a_large_gram_matrix_is_built_in_an_advised_mapping():
    x = torch.randn(2100, 3, dtype=torch.float64)  # 2100^2 float64 entries: 33.6 MB
    x = x / x.norm(dim=-1, keepdim=True)
    with torch.no_grad(), compile_settings(enabled=False):
        gram = ArcCosineKernel(3)(x).to_dense()
    assert "hg" in mapping_at(gram.data_ptr())[2]
