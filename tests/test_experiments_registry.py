"""The experiment registry and config resolution."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys

import pytest

from zonal.experiments import Experiment, ExperimentError, get_experiment, list_experiments
from zonal.experiments import registry as registry_module
from zonal.experiments.config import parse_assignment, resolve_config


def _noop(config, run_dir):
    return {}


def test_builtin_experiments_are_listed():
    names = [experiment.name for experiment in list_experiments()]
    assert "toy-regression" in names
    assert "spectra" in names
    assert names == sorted(names)


def test_spectra_is_registered_with_its_seed_figures_without_importing_its_module():
    spectra = get_experiment("spectra")
    assert spectra.reproduces == ("seed 002 figure 1", "seed 000 figure 8")
    assert spectra.module == "zonal.experiments.spectra_registration"


def test_unknown_experiment_names_the_known_ones():
    with pytest.raises(ExperimentError, match=r"unknown experiment 'nope'.*toy-regression"):
        get_experiment("nope")


def test_importing_the_package_imports_no_experiment_module():
    code = (
        "import sys, zonal.experiments; "
        "print(any(m in sys.modules for m in "
        "('zonal.experiments.toy_regression', 'zonal.experiments.spectra_registration')))"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert output.stdout.strip() == "False"


def test_register_experiment_decorator_registers_and_returns_the_function(monkeypatch):
    monkeypatch.setattr(registry_module, "_EXPERIMENTS", dict(registry_module._EXPERIMENTS))

    @registry_module.register_experiment(
        "example-one", summary="an example", quick={"seed": 0}, paper={"seed 000 table 2": {}}
    )
    def run_example(config, run_dir):
        return {"value": 1.0}

    experiment = get_experiment("example-one")
    assert experiment.run is run_example
    assert experiment.reproduces == ("seed 000 table 2",)
    assert experiment.module == __name__


def test_same_name_from_another_module_is_refused(monkeypatch):
    monkeypatch.setattr(registry_module, "_EXPERIMENTS", dict(registry_module._EXPERIMENTS))
    clash = Experiment("toy-regression", "a clash", _noop, module="somewhere.else")
    with pytest.raises(ValueError, match="registered twice"):
        registry_module.add_experiment(clash)


@pytest.mark.parametrize("name", ["Toy", "toy_regression", "-toy", "toy-", ""])
def test_experiment_names_are_kebab_case(name):
    with pytest.raises(ValueError, match="kebab-case"):
        Experiment(name, "summary", _noop)


def test_full_config_may_only_override_quick_keys():
    with pytest.raises(ValueError, match=r"\['extra'\]"):
        Experiment("bad", "summary", _noop, quick={"steps": 1}, full={"extra": 2})


def test_defaults_are_read_only():
    experiment = Experiment("frozen", "summary", _noop, quick={"steps": 1})
    with pytest.raises(TypeError):
        experiment.quick["steps"] = 2  # type: ignore[index]


EXAMPLE = Experiment(
    "config-example",
    "summary",
    _noop,
    quick={"seed": 0, "steps": 10, "rate": 0.1, "name": "a", "flag": False, "sizes": [1, 2]},
    full={"steps": 1000},
)


def test_full_overrides_quick_and_overrides_override_both():
    assert resolve_config(EXAMPLE)["steps"] == 10
    assert resolve_config(EXAMPLE, full=True)["steps"] == 1000
    assert resolve_config(EXAMPLE, full=True, overrides={"steps": 5})["steps"] == 5


def test_text_overrides_are_parsed_to_the_default_type():
    config = resolve_config(
        EXAMPLE,
        overrides={"steps": "20", "rate": "1", "name": "123", "flag": "true", "sizes": "[3, 4]"},
    )
    assert config["steps"] == 20
    assert config["rate"] == 1.0 and isinstance(config["rate"], float)
    assert config["name"] == "123"
    assert config["flag"] is True
    assert config["sizes"] == [3, 4]


def test_bad_overrides_name_the_key():
    with pytest.raises(ExperimentError, match=r"unknown config key 'step'.*known keys: flag"):
        resolve_config(EXAMPLE, overrides={"step": 1})
    with pytest.raises(ExperimentError, match="'steps' expects a value of type int"):
        resolve_config(EXAMPLE, overrides={"steps": "0.5"})
    with pytest.raises(ExperimentError, match="'flag' expects a value of type bool"):
        resolve_config(EXAMPLE, overrides={"flag": "1"})


def test_parse_assignment():
    assert parse_assignment("steps=10") == ("steps", "10")
    assert parse_assignment("name=a=b") == ("name", "a=b")
    with pytest.raises(ExperimentError, match="key=value"):
        parse_assignment("steps")


def test_a_module_that_fails_to_import_does_not_hide_the_others(monkeypatch):
    real_iter_modules = pkgutil.iter_modules

    def with_a_broken_module(path, prefix=""):
        yield from real_iter_modules(path, prefix)
        yield pkgutil.ModuleInfo(None, f"{prefix}missing_example", False)

    monkeypatch.setattr(pkgutil, "iter_modules", with_a_broken_module)
    monkeypatch.setattr(registry_module, "_discovered", False)
    monkeypatch.setattr(registry_module, "_DISCOVERY_FAILURES", {})
    assert "toy-regression" in [experiment.name for experiment in list_experiments()]
    failures = registry_module.discovery_failures()
    assert list(failures) == ["zonal.experiments.missing_example"]
    assert "ModuleNotFoundError" in failures["zonal.experiments.missing_example"]
    with pytest.raises(
        ExperimentError, match=r"failed to import: zonal\.experiments\.missing_example"
    ):
        get_experiment("nope")
