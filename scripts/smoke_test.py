"""Smoke test of an installed zonal (CI runs it in a fresh venv outside the checkout, after
installing the built wheel): ``zonal --version``, a tiny ``zonal fit`` and ``zonal predict``, an
import of every public module, and the shipped fundamental systems read from the package.

    python scripts/smoke_test.py   # from any folder but the repository's
"""

from __future__ import annotations

import csv
import importlib
import pkgutil
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: modules that need an extra the smoke environment may lack (Dask, torch.distributed launchers)
OPTIONAL = {
    "zonal.distributed",
    "zonal.data_parallel",
    "zonal.scale.dask_statistics",
    "zonal.scale.data_parallel",
}


def main() -> None:
    import zonal

    location = Path(zonal.__file__).resolve()
    if (location.parents[2] / "pyproject.toml").exists():
        raise SystemExit(f"zonal imported from a checkout ({location}), not from the wheel")
    command = shutil.which("zonal", path=str(Path(sys.executable).parent))
    if command is None:
        raise SystemExit("the wheel installed no `zonal` command")
    version = subprocess.run([command, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == f"zonal {zonal.__version__}", version.stdout
    print(version.stdout.strip(), "from", location.parent)

    imported = 0
    for module in pkgutil.walk_packages(zonal.__path__, prefix="zonal."):
        if any(part.startswith("_") for part in module.name.split(".")[1:]):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:
            if module.name not in OPTIONAL:
                raise
        imported += 1
    print(f"imported {imported} public modules")

    from zonal.harmonics.fundamental_system import SHIPPED_ARCHIVE

    assert SHIPPED_ARCHIVE.is_file() and location.parent in SHIPPED_ARCHIVE.parents
    print("shipped fundamental systems:", SHIPPED_ARCHIVE.stat().st_size, "bytes")

    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "train.csv"
        with table.open("w", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(["a", "b", "y"])
            for row in range(120):
                a, b = (row % 12) / 6 - 1, (row // 12) / 5 - 1
                writer.writerow([a, b, a * b + 0.5 * a])
        model = Path(folder) / "model.pt"
        fit = [command, "fit", str(table), "--target", "y", "--model", "sgpr", "--budget", "5"]
        subprocess.run([*fit, "--quiet", "-o", str(model)], check=True)
        predictions = Path(folder) / "pred.csv"
        subprocess.run(
            [command, "predict", str(model), str(table), "-o", str(predictions)], check=True
        )
        with predictions.open() as stream:
            assert len(list(csv.DictReader(stream))) == 120
    print("zonal fit and zonal predict: ok")


if __name__ == "__main__":
    main()
