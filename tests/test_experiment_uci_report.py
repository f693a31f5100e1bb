"""Seed 001's UCI protocol in a tiny configuration on the synthetic regression set: the
architecture is the protocol's, the baselines' predictive densities are the stated closed forms,
and every model gets one row per split."""

from __future__ import annotations

import csv
import math

import pytest
import torch
from scipy import stats

from zonal.experiments import create_run, execute_run, resume_experiment, run_experiment
from zonal.experiments.errors import ExperimentError
from zonal.experiments.uci_report import (
    QUICK,
    DropoutNetwork,
    _activated,
    dropout_passes,
    gaussian_log_density,
    mixture_log_density,
)

TINY = {
    "datasets": ["synthetic"],
    "num_splits": 2,
    "num_inducing": 6,
    "network_steps": 5,
    "elbo_steps": 3,
    "dgp_steps": 3,
    "eval_samples": 4,
    "dropout_passes": 5,
}


def test_the_architecture_is_the_protocols():
    """Three layers of widths D -> D -> D -> 1, 128 Softplus inducing functions each, truncated
    at level 20."""
    model = _activated(QUICK, 4, seed=0)
    assert model.widths == [4, 4, 4, 1]
    assert all(layer.features.num_inducing == 128 for layer in model.layers)
    assert model.activation == "softplus"
    assert all(layer.features.truncation_level == 20 for layer in model.layers)


def test_gaussian_density_matches_scipy():
    y = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    mean = torch.tensor([0.0, -1.0, 1.5], dtype=torch.float64)
    expected = stats.norm.logpdf(y.numpy(), mean.numpy(), math.sqrt(0.7))
    assert torch.allclose(gaussian_log_density(y, mean, 0.7), torch.as_tensor(expected))


def test_the_dropout_density_is_the_log_of_the_mixture_of_its_passes():
    """log((1/T) sum_t N(y | f_t, s^2)) from scipy's pdfs, summed before the log; it exceeds the
    mean of the passes' log densities (Jensen) where the passes disagree, so a mean of logs fails."""
    y = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    means = torch.tensor([[0.0, -1.0, 1.5], [1.5, -3.0, 3.0]], dtype=torch.float64)  # [T, N]
    pdfs = stats.norm.pdf(y.numpy(), means.numpy(), math.sqrt(0.4))  # [T, N]
    expected = torch.as_tensor(pdfs.mean(0)).log()
    density = mixture_log_density(y, means, 0.4)
    torch.testing.assert_close(density, expected, atol=1e-12, rtol=0)
    mean_of_logs = gaussian_log_density(y, means, 0.4).mean(0)
    assert bool((density - mean_of_logs > 0.1).all())


def test_dropout_passes_without_dropout_are_the_network():
    """Rate 0: every pass is the deterministic network, so the mixture is one Gaussian."""
    layers = _activated({**QUICK, "num_inducing": 5}, 3, seed=0).network_like(0)
    network = DropoutNetwork(layers, 0.0)
    x = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    passes = dropout_passes(network, x, 4, seed=0)
    with torch.no_grad():
        assert torch.equal(passes, layers(x).expand(4, 7))
    noisy = dropout_passes(DropoutNetwork(layers, 0.5), x, 4, seed=0)
    assert (noisy[0] - noisy[1]).abs().max() > 1e-6


def test_every_model_has_a_row_per_split(tmp_path):
    result = run_experiment("uci-report", overrides=TINY, runs_root=tmp_path)
    with (result.path / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["model"], r["split"]) for r in rows} == {
        (model, split) for model in ("ADGP", "Vanilla", "Dropout", "DGP") for split in ("0", "1")
    }
    assert all(math.isfinite(float(r["nlpd"])) and float(r["rmse"]) > 0 for r in rows)
    assert result.metrics["synthetic"]["ADGP"]["splits"] == 2
    refused = tmp_path / "refused"  # each bad setting is named before a run folder is made
    for override, message in (({"models": ["SVM"]}, "unknown models"),
                              ({"datasets": ["nosuch"]}, "unknown dataset 'nosuch'"),
                              ({"datasets": ["banana"]}, "'banana' is not a regression dataset"),
                              ({"test_fraction": 1.5}, "test_fraction must lie"),
                              ({"mean": "weird"}, "mean must be"),
                              ({"dropout": 2.0}, "dropout must lie")):  # fmt: skip
        with pytest.raises(ExperimentError, match=message):
            run_experiment("uci-report", overrides=override, runs_root=refused)
    assert not refused.exists() or not any(refused.iterdir())


def test_two_worker_processes_give_the_rows_of_one(tmp_path):
    """--jobs 2 fits the (dataset, split) units in two spawned processes; each seeds itself and
    the rows are put back in the units' order, so the table is the one-process run's."""
    reference = run_experiment("uci-report", overrides=TINY, runs_root=tmp_path / "one")
    parallel = execute_run(create_run("uci-report", overrides=TINY, runs_root=tmp_path / "two",
                                      jobs=2))  # fmt: skip

    def rows(path):
        with (path / "results.csv").open() as handle:
            return [{k: v for k, v in row.items() if "seconds" not in k}
                    for row in csv.DictReader(handle)]  # fmt: skip

    assert rows(parallel.path) == rows(reference.path)


def _rows_without_times(path):
    with (path / "results.csv").open() as handle:
        return [{k: v for k, v in row.items() if "seconds" not in k}
                for row in csv.DictReader(handle)]  # fmt: skip


def test_a_run_killed_after_its_first_model_group_resumes_with_the_others_only(
    tmp_path, monkeypatch
):
    """Killed in its second unit (dropout on split 0), after the ADGP and its network on split 0
    were checkpointed: the resumed run trains only the (split, model group) units not done, and
    its rows are an uninterrupted run's (each model seeds itself)."""
    from zonal.experiments import uci_report

    reference = run_experiment("uci-report", overrides=TINY, runs_root=tmp_path / "one")
    original, calls = uci_report.fit_split, []

    def crashing_once(config, data, dataset, split, models=None):
        calls.append((split, models))
        if len(calls) == 2 and not resumed:
            raise KeyboardInterrupt
        return original(config, data, dataset, split, models)

    resumed = False
    monkeypatch.setattr(uci_report, "fit_split", crashing_once)
    run = create_run("uci-report", overrides=TINY, runs_root=tmp_path / "two")
    with pytest.raises(KeyboardInterrupt):
        execute_run(run)
    calls.clear()
    resumed = True
    result = resume_experiment(run.directory.path)
    assert calls == [(0, ("Dropout",)), (0, ("DGP",)),
                     (1, ("ADGP", "Vanilla")), (1, ("Dropout",)), (1, ("DGP",))]  # fmt: skip
    assert _rows_without_times(result.path) == _rows_without_times(reference.path)
