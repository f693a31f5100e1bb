"""The dataset-shift experiment in a tiny configuration on synthetic 8 x 8 images: every model is
evaluated at every shift level (the clean set reported under each family), the ADGP starts at its
network, the summaries are the level averages, and the verdicts are paired differences."""

from __future__ import annotations

import csv
import math

import pytest
import torch

from zonal.experiments import dataset_shift as shift_module
from zonal.experiments import run_experiment
from zonal.experiments.dataset_shift import summarise, verdicts
from zonal.experiments.run_directory import RunDirectory

TINY = {
    "rotation_datasets": ["digits-like"],
    "rotation_angles": [0, 90],
    "corruption_dataset": "digits-like",
    "corruptions": ["contrast"],
    "intensities": [2, 5],
    "num_train": 40,
    "num_test": 12,
    "channels": [2, 3],
    "feature_dim": 4,
    "hidden_width": 2,
    "num_inducing": 6,
    "network_epochs": 1,
    "elbo_epochs": 1,
    "batch_size": 20,
    "dropout_passes": 3,
    "ensemble_size": 2,
    "posterior_samples": 2,
    "softmax_samples": 2,
}


def _synthetic_images(name, config, seed):
    """Bright squares whose row encodes one of 10 classes (a stand-in for MNIST)."""
    generator = torch.Generator().manual_seed(seed)
    parts = []
    for count in (config["num_train"], config["num_test"]):
        labels = torch.randint(0, 10, (count,), generator=generator)
        images = 0.1 * torch.rand(count, 1, 8, 8, generator=generator)
        for index, label in enumerate(labels.tolist()):
            images[index, 0, label % 7, 2 + label // 7 * 3 : 5 + label // 7 * 3] = 1.0
        parts += [images, labels]
    return tuple(parts)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(shift_module, "load_images", _synthetic_images)
    try:
        yield run_experiment(
            "dataset-shift", overrides=TINY, runs_root=tmp_path_factory.mktemp("shift")
        )
    finally:
        monkeypatch.undo()


def _read_csv(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_every_model_is_evaluated_at_every_level(tiny_run):
    """5 models x (rotation: 0, 90; contrast: 0, 2, 5) rows; the clean row is the same numbers
    under both families; the ADGP's copy reproduces the network's logits to 1e-8."""
    rows = _read_csv(tiny_run.path / "results.csv")
    cells = {(r["model"], r["shift"], float(r["level"])) for r in rows}
    expected = {
        (model, shift, level)
        for model in shift_module.MODELS
        for shift, levels in (("rotation", (0, 90)), ("contrast", (0, 2, 5)))
        for level in levels
    }
    assert cells == expected and len(rows) == len(expected)
    clean = {(r["model"], r["shift"]): (r["tll"], r["ece"]) for r in rows if float(r["level"]) == 0}
    for model in shift_module.MODELS:
        assert clean[(model, "rotation")] == clean[(model, "contrast")]
    assert tiny_run.metrics["adgp_copy_error_max"] < 1e-8
    speed = {r["model"]: r for r in _read_csv(tiny_run.path / "speed.csv")}
    assert float(speed["network"]["ratio_to_network"]) == pytest.approx(1.0)
    assert int(speed["ensemble"]["head_bytes"]) == 2 * int(speed["network"]["head_bytes"])
    files = {p.name for p in tiny_run.path.iterdir()}
    assert {"summary.csv", "reliability.csv", "report.md"} <= files
    pytest.importorskip("matplotlib")
    assert {"shift_digits-like_rotation.png", "reliability_digits-like.png"} <= files


def test_summary_averages_levels_and_verdicts_are_paired_differences():
    """Two repeats: the summary is the mean over levels then over repeats with the standard error
    of the per-repeat means; the verdict is the paired difference (ECE: lower is better)."""
    rows = []
    values = {("adgp", 0): (-1.0, -0.5), ("adgp", 1): (-0.8, -0.6), ("network", 0): (-1.5, -1.0),
              ("network", 1): (-1.1, -0.9)}  # fmt: skip
    for (model, repeat), (at_zero, at_ninety) in values.items():
        for level, tll in ((0.0, at_zero), (90.0, at_ninety)):
            rows.append({"dataset": "d", "repeat": repeat, "model": model, "shift": "rotation",
                         "level": level, "accuracy": 0.5, "tll": tll, "ece": -tll / 10,
                         "entropy": 1.0})  # fmt: skip
    summary = {entry["model"]: entry for entry in summarise(rows)}
    assert summary["adgp"]["tll"] == pytest.approx((-0.75 - 0.7) / 2)
    assert summary["adgp"]["tll_se"] == pytest.approx(abs(-0.75 + 0.7) / 2)
    verdict = verdicts(rows)["d.rotation"]["vs_network"]
    gains = [-0.75 + 1.25, -0.7 + 1.0]  # paired per repeat
    mean, error = sum(gains) / 2, abs(gains[0] - gains[1]) / 2
    assert f"tll better by {mean:.3g} +- {error:.3g}" in verdict
    assert f"ece better by {mean / 10:.3g}" in verdict
    assert verdict.endswith("accuracy equal")
    assert math.isnan(summarise(rows[:2])[0]["tll_se"])


def test_bad_config_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="unknown corruptions"):
        run_experiment("dataset-shift", overrides={"corruptions": ["fog"]}, runs_root=tmp_path)
    with pytest.raises(ValueError, match="unknown models"):
        run_experiment("dataset-shift", overrides={"models": ["svm"]}, runs_root=tmp_path)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("shift-mnist", (["mnist"], [])),
        ("shift-fashion", (["fashion-mnist"], ["gaussian-noise", "contrast"])),
    ],
)
@pytest.mark.parametrize("full", [False, True])
def test_the_per_dataset_experiments_train_on_their_dataset_only(name, expected, full):
    from zonal.experiments.config import resolve_config
    from zonal.experiments.registry import get_experiment

    config = resolve_config(get_experiment(name), full=full)
    datasets, quick_corruptions = expected
    assert shift_module.datasets(config) == datasets
    corrupted = config["corruptions"] if config["corruption_dataset"] else []
    if full and quick_corruptions:
        assert corrupted == ["gaussian-noise", "gaussian-blur", "contrast", "impulse-noise"]
    else:
        assert corrupted == quick_corruptions


def test_the_level_means_are_what_the_summary_averages(tiny_run):
    """level_means.csv holds one row per (dataset, repeat, shift, model), each metric the mean of
    results.csv over the shift's levels, and under "corruptions" over every corruption family's
    rows; summary.csv is their mean over repeats."""
    rows = _read_csv(tiny_run.path / "results.csv")
    means = _read_csv(tiny_run.path / "level_means.csv")
    cells = {(r["dataset"], r["repeat"], r["shift"], r["model"]) for r in rows}
    corrupted = {(d, k, "corruptions", m) for d, k, shift, m in cells if shift != "rotation"}
    assert {(e["dataset"], e["repeat"], e["shift"], e["model"]) for e in means} == cells | corrupted
    assert len(means) == len(cells | corrupted)
    for entry in means:
        levels = [
            float(r["tll"])
            for r in rows
            if (r["repeat"], r["model"]) == (entry["repeat"], entry["model"])
            and (r["shift"] == entry["shift"]
                 or (entry["shift"] == "corruptions" and r["shift"] != "rotation"))
        ]  # fmt: skip
        assert float(entry["tll"]) == pytest.approx(sum(levels) / len(levels))
    summary = _read_csv(tiny_run.path / "summary.csv")
    adgp = next(e for e in summary if (e["shift"], e["model"]) == ("corruptions", "adgp"))
    found = [float(e["tll"]) for e in means if (e["shift"], e["model"]) == ("corruptions", "adgp")]
    assert float(adgp["tll"]) == pytest.approx(sum(found) / len(found))


def test_early_stopping_holds_out_validation_images_and_saves_the_curves(tmp_path, monkeypatch):
    """With validation_share > 0 every network trains on the rest of the training images until
    its validation score stops improving (or the epoch cap): curves.csv has each network's
    validation curve from epoch 0, and the metrics count the networks and ELBO stages judged."""
    seen = []
    real = shift_module.train_models

    def spying(config, images, labels, test, seed, validation=None):
        seen.append((len(images), None if validation is None else len(validation[0])))
        return real(config, images, labels, test, seed, validation)

    monkeypatch.setattr(shift_module, "load_images", _synthetic_images)
    monkeypatch.setattr(shift_module, "train_models", spying)
    settings = {**TINY, "corruption_dataset": "", "validation_share": 0.25, "patience": 1,
                "network_epochs": 3, "models": ["network", "dropout", "adgp"],
                "elbo_until_plateau": True, "elbo_epochs": 4}  # fmt: skip
    run = run_experiment("dataset-shift", overrides=settings, runs_root=tmp_path)
    assert seen == [(30, 10)]  # 40 training images: 10 held out
    curves = _read_csv(run.path / "curves.csv")
    assert {c["part"] for c in curves} == {"network", "dropout"}
    for part in ("network", "dropout"):
        epochs = [int(c["epoch"]) for c in curves if c["part"] == part]
        assert epochs == list(range(len(epochs))) and 2 <= len(epochs) <= 4
    assert run.metrics["networks_stopped_early"].endswith("of 2")
    assert run.metrics["elbo_stages_converged"].endswith("of 1")
    unit = next(iter(RunDirectory(run.path).load_checkpoint()["units"].values()))
    # 2 ELBO steps per epoch: 8 steps by the cap, too few for the plateau rule to stop it earlier
    assert unit["info"]["adgp_elbo_epochs"] == 4
    with pytest.raises(ValueError, match="validation_share"):
        run_experiment("dataset-shift", overrides={**settings, "validation_share": 1.0},
                       runs_root=tmp_path)  # fmt: skip
