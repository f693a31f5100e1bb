"""The README's Python code blocks run as written, each in a fresh namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_readme_is_an_entrance():
    """The README stays one screen deep: at most about 150 lines, with Python examples."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_code_block_runs(index: int):
    """Block ``index`` executes without error (imports, shapes and calls as documented)."""
    exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), {"__name__": "readme"})


SOURCES = Path(__file__).resolve().parents[1] / "src" / "zonal"
DOCTEST_MODULES = sorted(
    ".".join(path.relative_to(SOURCES.parent).with_suffix("").parts).removesuffix(".__init__")
    for path in SOURCES.rglob("*.py")
    if ">>>" in path.read_text(encoding="utf-8")
)


#: modules whose every example is marked ``+SKIP`` (they need a Dask cluster): only parsed
ALL_SKIPPED = {"zonal.scale.dask_statistics"}


@pytest.mark.parametrize("module_name", DOCTEST_MODULES)
def test_docstring_examples_run(module_name: str):
    """The ``>>>`` examples in the package's docstrings pass as doctests (those marked
    ``+SKIP`` need data or a cluster and are only parsed); a module with ``>>>`` runs at least
    one, unless it is one of ``ALL_SKIPPED`` (an example outside any docstring runs none)."""
    import doctest
    import importlib

    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert (result.attempted > 0) != (module_name in ALL_SKIPPED), result
