"""Running experiments: run folders, reports beside the paper, interruption and resume."""

from __future__ import annotations

import json
import sys
import types

import pytest

from zonal.experiments import (
    Experiment,
    ExperimentError,
    create_run,
    execute_run,
    resume_experiment,
    run_experiment,
    toy_regression,
)
from zonal.experiments.report import comparison_tables, flatten_metrics, format_value

FAST = {"steps": 40, "checkpoint_every": 10, "num_train": 32, "num_test": 32}


class SimulatedCrashError(RuntimeError):
    """Stands for a run killed part way."""


def _crash_after(monkeypatch, steps_done):
    """Make the toy experiment's training step raise once ``steps_done`` steps have run."""
    real_step = toy_regression.train_step
    calls = 0

    def crashing_step(*args, **kwargs):
        nonlocal calls
        if calls == steps_done:
            raise SimulatedCrashError(f"killed after {steps_done} steps")
        calls += 1
        return real_step(*args, **kwargs)

    monkeypatch.setattr(toy_regression, "train_step", crashing_step)


def _count_steps(monkeypatch):
    real_step = toy_regression.train_step
    counter = {"steps": 0}

    def counting_step(*args, **kwargs):
        counter["steps"] += 1
        return real_step(*args, **kwargs)

    monkeypatch.setattr(toy_regression, "train_step", counting_step)
    return counter


def test_run_writes_config_metrics_report_tables_and_figure(tmp_path):
    result = run_experiment("toy-regression", overrides=FAST, runs_root=tmp_path)
    assert result.path.parent == tmp_path
    assert result.path.name.startswith("toy-regression-")
    files = {path.name for path in result.path.iterdir()}
    assert {"config.json", "metrics.json", "report.md", "loss.csv", "checkpoint.pt"} <= files
    stored = json.loads((result.path / "config.json").read_text())
    assert stored["experiment"] == "toy-regression"
    assert stored["preset"] == "quick"
    assert stored["config"] == {**toy_regression.QUICK, **FAST}
    assert json.loads((result.path / "metrics.json").read_text()) == result.metrics
    assert result.metrics["steps"] == FAST["steps"]
    assert result.summary_line().startswith("toy-regression: test_rmse=")
    assert str(result.path / "report.md") in result.summary_line()
    report = (result.path / "report.md").read_text()
    assert "| test_rmse |" in report and "no paper reference" in report


def test_full_preset_is_recorded(tmp_path, monkeypatch):
    small_full = Experiment(
        "presets", "summary", lambda c, r: dict(c), quick={"n": 1}, full={"n": 2}
    )
    result = run_experiment(small_full, full=True, runs_root=tmp_path)
    assert result.metrics == {"n": 2}
    assert json.loads((result.path / "config.json").read_text())["preset"] == "full"


def test_two_runs_never_share_a_folder(tmp_path):
    quick = Experiment("instant", "summary", lambda config, run_dir: {"value": 1.0})
    first = run_experiment(quick, runs_root=tmp_path)
    second = run_experiment(quick, runs_root=tmp_path)
    assert first.path != second.path
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [first.path.name, second.path.name]
    )


def test_report_puts_our_numbers_beside_the_papers(tmp_path):
    def run(config, run_dir):
        run_dir.save_table("rows.csv", [{"a": 1}])
        return {"rmse": 0.123456, "nested": {"nlpd": -1.5}, "extra": 7}

    experiment = Experiment(
        "paper-example",
        "An experiment with reference values",
        run,
        paper={"seed 000 table 2": {"rmse": 0.12, "nested.nlpd": -1.4, "accuracy": 0.9}},
    )
    result = run_experiment(experiment, runs_root=tmp_path)
    report = (result.path / "report.md").read_text()
    # a quick number beside the paper's says it is one
    assert "| quantity | ours, quick (reduced) | paper (seed 000 table 2) |" in report
    assert "| rmse | 0.1235 | 0.12 |" in report
    assert "| nested.nlpd | -1.5 | -1.4 |" in report
    assert "| accuracy | — | 0.9 |" in report  # a quantity we did not measure
    assert "| extra | 7 |" in report  # a metric the paper does not have
    assert "[rows.csv](rows.csv)" in report


def test_comparison_tables_one_per_source():
    text = comparison_tables(
        {"a": 1.0, "b": 2.0},
        {"seed 002 figure 1": {"a": "< 1e-3"}, "seed 000 figure 8": {"b": 2}},
    )
    assert "| quantity | ours | paper (seed 002 figure 1) |" in text
    assert "| a | 1 | < 1e-3 |" in text
    assert "| quantity | ours | paper (seed 000 figure 8) |" in text
    assert "Other metrics" not in text


def test_report_helpers():
    assert flatten_metrics({"a": {"b": {"c": 1}}, "d": 2}) == {"a.b.c": 1, "d": 2}
    assert format_value(None) == "—"
    assert format_value(True) == "yes"
    assert format_value(1 / 3) == "0.3333"
    assert format_value(list(range(10))) == "[0, 1, 2, 3, 4, 5, 6, 7, ...]"


@pytest.mark.parametrize(
    "steps_done",
    [5, 20, 37],
    ids=["before-first-checkpoint", "at-a-checkpoint", "between-checkpoints"],
)
def test_interrupted_then_resumed_run_equals_uninterrupted_run(tmp_path, monkeypatch, steps_done):
    reference = run_experiment("toy-regression", overrides=FAST, runs_root=tmp_path / "whole")

    _crash_after(monkeypatch, steps_done)
    run = create_run("toy-regression", overrides=FAST, runs_root=tmp_path / "broken")
    with pytest.raises(SimulatedCrashError):
        execute_run(run)
    assert not (run.directory.path / "metrics.json").exists()
    last_checkpoint = steps_done // FAST["checkpoint_every"] * FAST["checkpoint_every"]
    assert run.directory.checkpoint_path.exists() == (last_checkpoint > 0)

    monkeypatch.undo()
    counter = _count_steps(monkeypatch)
    resumed = resume_experiment(run.directory.path)
    assert counter["steps"] == FAST["steps"] - last_checkpoint  # it did continue, not restart
    assert resumed.path == run.directory.path
    assert resumed.metrics == reference.metrics
    for name in ["loss.csv", "predictions.csv"]:
        assert (resumed.path / name).read_bytes() == (reference.path / name).read_bytes()


def test_resume_refuses_finished_and_foreign_runs(tmp_path):
    finished = run_experiment("toy-regression", overrides=FAST, runs_root=tmp_path)
    with pytest.raises(ExperimentError, match="already finished"):
        resume_experiment(finished.path)
    (finished.path / "metrics.json").unlink()
    with pytest.raises(
        ExperimentError, match="belongs to experiment 'toy-regression', not 'spectra'"
    ):
        resume_experiment(finished.path, experiment="spectra")
    with pytest.raises(ExperimentError, match="not a run folder"):
        resume_experiment(tmp_path)


def test_spectra_calls_run_spectra_in_the_run_folder(tmp_path, monkeypatch):
    calls = []

    def fake_run_spectra(output_dir, full=False):
        calls.append((output_dir, full))
        (output_dir / "spectra.csv").write_text("level,value\n0,1\n")
        return {"relu_zero_levels": "odd levels >= 3"}

    fake = types.ModuleType("zonal.experiments.spectra")
    fake.run_spectra = fake_run_spectra
    monkeypatch.setitem(sys.modules, "zonal.experiments.spectra", fake)
    result = run_experiment("spectra", full=True, runs_root=tmp_path)
    assert calls == [(result.path, True)]
    report = (result.path / "report.md").read_text()
    assert "| relu_zero_levels | odd levels >= 3 | odd levels >= 3 |" in report
    assert "paper (seed 002 figure 1)" in report
    assert "[spectra.csv](spectra.csv)" in report


def test_spectra_without_its_module_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "zonal.experiments.spectra", None)  # import now fails
    with pytest.raises(ExperimentError, match=r"needs zonal\.experiments\.spectra"):
        run_experiment("spectra", runs_root=tmp_path)


def test_a_run_folder_in_use_cannot_be_run_twice(tmp_path):
    """Two processes resuming one folder would interleave their checkpoints: the second is
    refused while the first holds the folder's lock, and runs once it is released."""
    run = create_run("toy-regression", overrides=FAST, runs_root=tmp_path)
    in_use = pytest.raises(ExperimentError, match="in use by another zonal process")
    with run.directory.exclusive(), in_use:
        execute_run(run)
    execute_run(run)


@pytest.mark.parametrize(
    ("name", "override", "message"),
    [
        ("uci-dgp", {"datasets": ["nosuch"]}, "not in seed 000 table 1"),
        ("residual-dgp-uci", {"datasets": ["nosuch"]}, "nosuch"),
        ("residual-dgp-sphere", {"baseline_num_train": 1}, "num_inducing <= baseline_num_train"),
        ("banana-elbo", {"num_inducing": [8, 4]}, "num_inducing must be increasing"),
        ("bo-sphere", {"functions": ["nosuch"]}, "unknown functions"),
        ("dataset-shift", {"corruptions": ["fog"]}, "unknown corruptions"),
        ("sparse-phases-magic", {"models": ["nosuch"]}, "unknown models"),
        ("main-benchmark", {"models": ["nosuch"]}, "models must be a non-empty list"),
        ("vish-flights", {"models": ["nosuch"]}, "models must be some of"),
    ],
)
def test_a_bad_setting_is_named_before_any_run_folder_is_made(tmp_path, name, override, message):
    """Each experiment's ``validate`` runs on the resolved config before ``create_run`` makes
    the folder: no dead folder, no resume hint for a run that cannot start."""
    from zonal.experiments import create_run

    with pytest.raises(ExperimentError, match=message):
        create_run(name, overrides=override, runs_root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
