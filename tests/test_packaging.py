"""The package as a user installs it: one version number, and the files the wheel must carry.
(``make test-wheel`` builds the wheel and sdist and runs ``scripts/smoke_test.py`` in a fresh
venv outside the checkout; CI runs it.)"""

from __future__ import annotations

import fnmatch
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import zonal

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_number():
    """``zonal.__version__`` (and so ``zonal --version``) is pyproject.toml's version."""
    try:
        metadata.version("zonal")
    except metadata.PackageNotFoundError:  # run from src/ on PYTHONPATH: no version to compare
        pytest.skip("zonal is not installed (no distribution metadata)")
    with open(ROOT / "pyproject.toml", "rb") as stream:
        declared = tomllib.load(stream)["project"]["version"]
    assert zonal.__version__ == declared
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {declared}" in changelog


def test_typed_marker_and_shipped_systems_are_package_data():
    """``py.typed`` and the fundamental systems live inside the package, where the wheel takes
    them from (``[tool.setuptools.package-data]``)."""
    package = ROOT / "src" / "zonal"
    assert (package / "py.typed").exists()
    assert (package / "harmonics" / "data" / "fundamental_systems.npz").stat().st_size > 100_000
    with (ROOT / "pyproject.toml").open("rb") as stream:
        patterns = tomllib.load(stream)["tool"]["setuptools"]["package-data"]["zonal"]
    for shipped in ("py.typed", "harmonics/data/fundamental_systems.npz"):
        assert any(fnmatch.fnmatch(shipped, pattern) for pattern in patterns), shipped
