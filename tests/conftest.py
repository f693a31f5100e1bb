"""Shared fixtures."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def import_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module (its imports of sibling scripts resolved), for tests
    of a benchmark's own maths."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="session")
def benchmark_module() -> Callable[[str], ModuleType]:
    """``import_benchmark``: a benchmark script by name."""
    return import_benchmark


@pytest.fixture(scope="module")
def without_the_exact_gp() -> Iterator[None]:
    """``zonal fit --model auto`` without its exact-GP candidate, for a module's tests of how
    ``auto`` stacks its sparse and deep candidates (the exact GP's place among them has its own
    tests, tests/test_fit_exact.py). Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    from zonal.tabular import fitting

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fitting, "auto_offers_exact", lambda *args: False)
        yield
