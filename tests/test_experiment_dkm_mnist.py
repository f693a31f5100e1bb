"""The dkm-mnist experiment in a tiny configuration on the 8x8 digits: one row per nu, the seed's
numbers beside ours in the report, a resumed run with the metrics of an uninterrupted one, and bad
settings refused by name."""

import csv
import math

import pytest
import torch

from zonal.experiments import create_run, execute_run, resume_experiment, run_experiment

TINY = {
    "dataset": "digits",
    "num_train": 200,
    "num_test": 200,
    "num_inducing": 20,
    "nus": ["inf", "1"],
    "epochs": 3,
    "batch_size": 100,
    "learning_rate": 0.05,
    "train_samples": 8,
    "eval_samples": 64,
}


class SimulatedCrashError(RuntimeError):
    """Stands for a run killed part way."""


def _without_times(value):
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if "seconds" not in k}
    return value


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return run_experiment("dkm-mnist", overrides=TINY, runs_root=tmp_path_factory.mktemp("dkm"))


def test_experiment_writes_one_row_per_nu_and_the_seed_beside_ours(reference):
    with (reference.path / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["nu"] for row in rows] == ["inf", "1"]
    assert all(float(row["accuracy_percent"]) > 50 for row in rows)  # chance is 10%
    report = (reference.path / "report.md").read_text()
    assert "| accuracy_percent.nu=1 |" in report and "99.2" in report
    assert "-0.9026" in report  # seed 003 table 4, nu = inf


def test_resumed_run_has_the_metrics_of_an_uninterrupted_one(reference, tmp_path, monkeypatch):
    """A run killed in the second epoch of its second model resumes from the checkpoint after its
    first epoch and ends with the same accuracies and log likelihoods."""
    from zonal.dkm import sparse

    calls = {"count": 0}
    original = sparse.SparseDKM.objective

    def crashing(self, *args, **kwargs):
        calls["count"] += 1
        if calls["count"] == 3 * 2 + 3:  # model 1: 3 epochs x 2 steps; model 2: into epoch 2
            raise SimulatedCrashError("killed")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(sparse.SparseDKM, "objective", crashing)
    run = create_run("dkm-mnist", overrides=TINY, runs_root=tmp_path)
    with pytest.raises(SimulatedCrashError):
        execute_run(run)
    calls["count"] = -1000
    resumed = resume_experiment(run.directory.path)
    assert calls["count"] == -1000 + 2 * 2  # only the last two epochs of the second model
    assert _without_times(resumed.metrics) == _without_times(reference.metrics)


def test_bad_settings_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="nu must be a number >= 0 or 'inf'"):
        run_experiment("dkm-mnist", overrides={**TINY, "nus": ["-1"]}, runs_root=tmp_path)
    with pytest.raises(ValueError, match="dataset must be 'mnist', 'fashion-mnist' or 'digits'"):
        run_experiment("dkm-mnist", overrides={**TINY, "dataset": "cifar"}, runs_root=tmp_path)


def test_convolutional_architecture_runs_the_resnet_stack_on_whitened_digits(tmp_path):
    """architecture = conv: a 7-layer ResNet-like stack (one block per stage) with 4 / 4 / 4
    inducing points, global average pooling, ZCA-whitened 8x8 digits with random crops, a Gaussian
    likelihood on one-hot labels; finite test metrics."""
    overrides = {
        **TINY,
        "architecture": "conv",
        "conv_inducing": [4, 4, 4],
        "conv_blocks": 1,
        "nus": ["1"],
        "epochs": 1,
        "crop_padding": 1,
        "likelihood": "gaussian",
    }
    result = run_experiment("dkm-mnist", overrides=overrides, runs_root=tmp_path)
    assert result.metrics["model"] == "convolutional DKM"
    assert math.isfinite(result.metrics["test_log_likelihood"]["nu=1"])


def test_zca_whitening_whitens_the_training_images():
    """With epsilon -> 0 the whitened training pixels have identity covariance on the span of the
    data (ZCA: the symmetric inverse square root of the covariance)."""
    from zonal.experiments.dkm_mnist import prepare_inputs

    pixels = torch.randn(500, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    pixels = pixels @ torch.randn(
        6, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    config = {"architecture": "conv", "zca_epsilon": 1e-12}
    whitened, _ = prepare_inputs(config, pixels, pixels[:3])
    covariance = whitened.mT @ whitened / len(whitened)
    torch.testing.assert_close(covariance, torch.eye(6, dtype=torch.float64), rtol=0, atol=1e-8)


@pytest.mark.parametrize(
    ("name", "dataset", "architecture"),
    [
        ("dkm-digits", "digits", "fc"),
        ("cdkm-mnist", "mnist", "conv"),
        ("cdkm-fashion", "fashion-mnist", "conv"),
    ],
)
@pytest.mark.parametrize("full", [False, True])
def test_the_named_presets_run_their_dataset_and_architecture(name, dataset, architecture, full):
    from zonal.experiments.config import resolve_config
    from zonal.experiments.registry import get_experiment

    config = resolve_config(get_experiment(name), full=full)
    assert (config["dataset"], config["architecture"]) == (dataset, architecture)
    if architecture == "conv" and full:  # the seed's protocol: 128/256/512, 100 epochs, 60k images
        assert (config["conv_inducing"], config["epochs"], config["num_train"]) == (
            [128, 256, 512],
            100,
            60000,
        )
