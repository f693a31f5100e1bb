"""The layout of the fitting layer (``zonal.tabular``), the scale code (``zonal.scale``) and the
command line (``zonal.cli``): every module of theirs, and of ``zonal.models``, ``zonal.sampling``
and ``zonal.bo`` (the models import the sampling package, which registers zonal with BoTorch's
pathwise dispatchers), imports first in a fresh interpreter (no import cycles),
the fit options cost no torch, and the old module paths still import for one release, with a
``DeprecationWarning`` that names the new path (issue 27)."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import zonal.bo
import zonal.cli
import zonal.models
import zonal.sampling
import zonal.scale
import zonal.tabular

#: the old module paths and where their code lives now
MOVED = {
    "zonal.fitting": "zonal.tabular.fitting",
    "zonal.recipes": "zonal.tabular.recipes",
    "zonal.streamed_fit": "zonal.tabular.streamed",
    "zonal.targets": "zonal.tabular.targets",
    "zonal.saved_model": "zonal.tabular.saved",
    "zonal.sklearn": "zonal.tabular.sklearn",
    "zonal.fit_options": "zonal.tabular.options",
    "zonal.distributed": "zonal.scale.dask_statistics",
    "zonal.data_parallel": "zonal.scale.data_parallel",
}


def _modules() -> list[str]:
    names = []
    for package in (zonal.tabular, zonal.scale, zonal.cli, zonal.models, zonal.sampling, zonal.bo):
        names.append(package.__name__)
        prefix = f"{package.__name__}."
        names += [info.name for info in pkgutil.walk_packages(package.__path__, prefix)]
    return [name for name in names if not name.endswith("__main__")]


def test_every_module_imports_first_without_a_cycle():
    """Each module is imported first, with every zonal module forgotten before (torch and the
    other libraries stay loaded, so the check is quick): a cycle would fail its import."""
    code = (
        "import importlib, sys\n"
        f"for name in {_modules()!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'zonal' or m.startswith('zonal.')]:\n"
        "        del sys.modules[loaded]\n"
        "    importlib.import_module(name)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning:zonal", "-c", code],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_the_fit_options_and_the_package_import_no_torch():
    code = (
        "import sys\n"
        "import zonal.tabular, zonal.tabular.options, zonal.scale\n"
        "print(sorted(m for m in ('torch', 'numpy', 'gpytorch') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("old", "new"), list(MOVED.items()))
def test_an_old_path_still_imports_and_names_the_new_one(old, new, monkeypatch):
    if old == "zonal.sklearn":
        pytest.importorskip("sklearn")
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated .* import {new} instead"):
        module = importlib.import_module(old)
    importlib.import_module(new)
    package = new.rsplit(".", 1)[0]  # zonal.tabular or zonal.scale
    homes = [loaded for key, loaded in sys.modules.items() if key.startswith(f"{package}.")]
    assert module.__all__
    for name in module.__all__:  # each public name is the new modules' own object
        value = getattr(module, name)
        assert any(getattr(home, name, None) is value for home in homes), name


def test_old_names_of_zonal_tabular_still_work():
    from zonal.tabular import tables

    assert zonal.tabular.read_table is tables.read_table  # the package's own API: no warning
    with pytest.warns(DeprecationWarning, match=r"zonal.tabular.MISSING_TOKENS is deprecated"):
        assert zonal.tabular.MISSING_TOKENS is tables.MISSING_TOKENS
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = zonal.tabular.nope
