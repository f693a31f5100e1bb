"""``benchmarks/sgpr_large_n.py --before SRC`` runs the SGPR's pass in an older zonal by importing
the script there (``in_older_zonal``), so the script's top level may only import what that zonal
has. The older zonal here is issue 24's reference, commit 6db9c60 (the pass before it was made
faster), taken from this repository's history; without that history the test is skipped."""

import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = "6db9c60"


@pytest.fixture(scope="module")
def older_source(tmp_path_factory) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", REFERENCE, "src"], capture_output=True, check=False
    )
    if archive.returncode:
        pytest.skip(f"commit {REFERENCE} is not in this checkout's history")
    folder = tmp_path_factory.mktemp("older")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def test_the_script_imports_in_the_older_zonal(older_source):
    driver = (
        f"import sys; sys.path[:0] = [{str(older_source)!r}, {str(ROOT / 'benchmarks')!r}]\n"
        "import zonal, sgpr_large_n\n"
        f"assert zonal.__file__.startswith({str(older_source)!r}), zonal.__file__\n"
        "print('imported')\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", driver], capture_output=True, text=True, timeout=300
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == "imported"
