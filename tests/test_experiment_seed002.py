"""sparse-phases-magic (seed 002 table 1 on MAGIC) and sparse-phases-regression (fig. 2 on protein and
flights) in tiny configurations on synthetic data: the AUC is the Mann-Whitney probability, the
feature budgets are the docstrings', the runs write their tables beside the seed's numbers,
metrics in original units transform as they must, and an interrupted run resumes with the metrics
of an uninterrupted one."""

from __future__ import annotations

import csv
import itertools
import json

import numpy as np
import pytest
import torch

from zonal.experiments import create_run, execute_run, resume_experiment, run_experiment
from zonal.experiments import seed002_magic as magic_module
from zonal.experiments import seed002_regression as regression_module
from zonal.experiments.seed002_common import first_step_reaching, harmonic_features, roc_auc
from zonal.harmonics import num_harmonics

TINY_MAGIC = {
    "dataset": "synthetic",
    "repeats": 1,
    "sparse_frequencies": 3,
    "max_phases": 5,
    "complete_frequencies": 2,
    "kernel_degree": 4,
    "steps": 6,
    "batch_size": 128,
    "eval_every": 3,
    "network_layers": 2,
    "network_width": 8,
    "network_steps": 5,
}
TINY_REGRESSION = {
    "datasets": ["synthetic"],
    "num_splits": 2,
    "sparse_frequencies": 4,
    "max_phases": 4,
    "complete_frequencies": 2,
    "kernel_degree": 6,
    "init_rows": 200,
    "steps": 4,
    "batch_size": 128,
}


class SimulatedCrashError(RuntimeError):
    """Stands for a run killed part way."""


def _without_times(value):
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if "seconds" not in k}
    if isinstance(value, list):
        return [_without_times(item) for item in value]
    return value


def _rows(path):
    with path.open() as handle:
        return _without_times(list(csv.DictReader(handle)))


def test_auc_is_the_probability_a_positive_outranks_a_negative() -> None:
    """Against the brute-force pair count (ties 1/2) and scikit-learn's roc_auc_score."""
    generator = np.random.default_rng(0)
    labels = generator.integers(0, 2, 300)
    scores = np.round(generator.normal(size=300) + labels, 1)  # rounding makes ties
    positives, negatives = scores[labels == 1], scores[labels == 0]
    pairs = positives[:, None] - negatives[None, :]
    brute = ((pairs > 0) + 0.5 * (pairs == 0)).mean()
    assert roc_auc(scores, labels) == pytest.approx(brute, abs=1e-14)
    metrics = pytest.importorskip("sklearn.metrics")
    assert roc_auc(scores, labels) == pytest.approx(metrics.roc_auc_score(labels, scores), 1e-14)
    with pytest.raises(ValueError, match="both classes"):
        roc_auc(scores[:3], np.ones(3))


@pytest.mark.parametrize(
    ("ambient_dim", "frequencies", "phases", "budget"),
    [(11, 7, 100, 477), (10, 15, 100, 1265), (9, 15, 100, 1254)],
)
def test_sparse_budgets_are_the_docstrings(ambient_dim, frequencies, phases, budget) -> None:
    """min(m-hat, N_n^d) features per degree 0..F-1: 477 for MAGIC, 1,265 / 1,254 for protein /
    flights; the complete truncations count N_n^d per degree (352, 935, 660)."""
    sparse = harmonic_features("sparse", ambient_dim, frequencies, phases, seed=0)
    assert sparse.num_inducing == budget
    assert budget == sum(min(phases, num_harmonics(ambient_dim, n)) for n in range(frequencies))
    complete_frequencies = 4 if ambient_dim == 11 else 5
    complete = harmonic_features("complete", ambient_dim, complete_frequencies, phases, seed=0)
    expected = {11: 352, 10: 935, 9: 660}[ambient_dim]
    assert complete.num_inducing == expected
    assert expected == sum(num_harmonics(ambient_dim, n) for n in range(complete_frequencies))


def test_first_step_reaching() -> None:
    trace = [{"step": 0, "auc": 0.5}, {"step": 10, "auc": 0.8}, {"step": 20, "auc": 0.79}]
    assert first_step_reaching(trace, "auc", 0.8) == 10
    assert first_step_reaching(trace, "auc", 0.81) is None


@pytest.fixture(scope="module")
def magic_reference(tmp_path_factory):
    return run_experiment(
        "sparse-phases-magic", overrides=TINY_MAGIC, runs_root=tmp_path_factory.mktemp("magic")
    )


def test_magic_writes_results_traces_and_the_seed_beside_ours(magic_reference) -> None:
    """One row per model; the GP traces every ``eval_every`` steps plus the start; the seed's
    SUSY AUCs in the report; the traced AUC at the last step is the final AUC."""
    path = magic_reference.path
    with (path / "results.csv").open() as handle:
        results = list(csv.DictReader(handle))
    assert [r["model"] for r in results] == ["sparse", "complete", "network"]
    with (path / "traces.csv").open() as handle:
        traces = list(csv.DictReader(handle))
    assert [int(t["step"]) for t in traces if t["model"] == "sparse"] == [0, 3, 6]
    for model in ("sparse", "complete"):
        last = [t for t in traces if t["model"] == model][-1]
        final = next(r for r in results if r["model"] == model)
        assert float(last["auc"]) == pytest.approx(float(final["auc"]), abs=1e-12)
    report = (path / "report.md").read_text()
    assert "| sparse.auc |" in report and "0.87 |" in report
    metrics = json.loads((path / "metrics.json").read_text())
    # the GPs' steps to the complete features' final AUC: the first traced step at or above it
    complete_auc = float(next(r["auc"] for r in results if r["model"] == "complete"))
    for row in results:
        trace = [t for t in traces if t["model"] == row["model"]]
        if row["model"] == "network":
            assert row["steps_to_complete_auc"] == ""
            continue
        reached = [int(t["step"]) for t in trace if float(t["auc"]) >= complete_auc]
        assert row["steps_to_complete_auc"] == (str(reached[0]) if reached else "")
    assert metrics["steps_to_complete_auc"]["complete"][0] <= TINY_MAGIC["steps"]


def test_magic_gps_learn_input_scales_when_asked() -> None:
    """``input_scales`` (claim 5's ablation): the GPs embed [s * x, 1] with one learned s per
    input, which training moves from 1; without it there are none."""
    import torch

    from zonal.models import fit_svgp

    config = {**magic_module.QUICK, **TINY_MAGIC, "input_scales": True}
    x_train, y_train, _, _ = magic_module.load_data(config)
    model = magic_module.build_gp("sparse", x_train.shape[1], config, seed=0)
    scales = model.input_map.input_scales
    assert scales.shape == (x_train.shape[1],) and scales.requires_grad
    fit_svgp(model, x_train, y_train, num_steps=5, batch_size=128, lr=0.05, seed=0)
    learned = model.input_map.input_scales.detach()  # a softplus of the raw parameter
    assert not torch.allclose(learned, torch.ones_like(learned))
    plain = magic_module.build_gp("sparse", x_train.shape[1], {**config, "input_scales": False}, 0)
    assert getattr(plain.input_map, "input_scales", None) is None


def test_magic_network_early_stopped_keeps_its_best_validation_state() -> None:
    """``network_validation_fraction`` (claim 5's ablation): the network trains without a seeded
    share of the training rows and keeps the state of best AUC on them among the checks every
    ``eval_every`` steps; without it the network is trained to the last step (the seed's)."""
    from zonal.datasets import train_test_split
    from zonal.experiments._dgp_common import Stopwatch

    config = {**magic_module.QUICK, **TINY_MAGIC, "network_steps": 40, "eval_every": 10,
              "network_validation_fraction": 0.25}  # fmt: skip
    data = magic_module.load_data(config)
    row, network = magic_module.fit_network(data, config, seed=3, clock=Stopwatch())
    _, held_out = train_test_split(len(data[0]), 0.25, 3)
    with torch.no_grad():
        probability = torch.special.ndtr(network(data[0][held_out])).numpy()
    assert roc_auc(probability, data[1][held_out]) == pytest.approx(row["validation_auc"])
    assert row["best_step"] in (0, 10, 20, 30, 40)
    test_probability, _ = magic_module.network_scores(network, data[2], data[3])
    assert row["auc"] == pytest.approx(roc_auc(test_probability, data[3]))
    plain, _ = magic_module.fit_network(
        data, {**config, "network_validation_fraction": 0.0}, seed=3, clock=Stopwatch()
    )
    assert plain["best_step"] == 40 and np.isnan(plain["validation_auc"])


def test_magic_resumes_with_the_metrics_of_an_uninterrupted_run(
    magic_reference, tmp_path, monkeypatch
) -> None:
    real_fit = magic_module.fit_one
    calls = itertools.count()

    def crashing_fit(*args, **kwargs):
        if next(calls) == 2:
            raise SimulatedCrashError("killed")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(magic_module, "fit_one", crashing_fit)
    with pytest.raises(SimulatedCrashError):
        run_experiment("sparse-phases-magic", overrides=TINY_MAGIC, runs_root=tmp_path)
    refits = itertools.count()

    def counted_fit(*args, **kwargs):
        next(refits)
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(magic_module, "fit_one", counted_fit)
    (run_path,) = list(tmp_path.iterdir())
    resumed = resume_experiment(run_path)
    assert next(refits) == 1  # only the unit the crash lost is fitted again
    assert _without_times(resumed.metrics) == _without_times(magic_reference.metrics)


def test_magic_in_two_worker_processes_gives_the_rows_of_one(magic_reference, tmp_path) -> None:
    """--jobs 2 fits the (model, repeat) units in two spawned processes, finishing in any order;
    each seeds itself and the rows are put back in the units' order, so the tables and metrics are
    those of the one-process run."""
    run = create_run("sparse-phases-magic", overrides=TINY_MAGIC, runs_root=tmp_path, jobs=2)
    parallel = execute_run(run)
    assert _without_times(parallel.metrics) == _without_times(magic_reference.metrics)
    for table in ("results.csv", "traces.csv"):
        assert _rows(parallel.path / table) == _rows(magic_reference.path / table)


def test_regression_in_two_worker_processes_gives_the_rows_of_one(tmp_path) -> None:
    """The same for sparse-phases-regression's (dataset, split, model) units."""
    reference = run_experiment(
        "sparse-phases-regression", overrides=TINY_REGRESSION, runs_root=tmp_path / "one"
    )
    run = create_run(
        "sparse-phases-regression", overrides=TINY_REGRESSION, runs_root=tmp_path / "two", jobs=2
    )
    parallel = execute_run(run)
    assert _without_times(parallel.metrics) == _without_times(reference.metrics)
    assert _rows(parallel.path / "results.csv") == _rows(reference.path / "results.csv")


def test_regression_metrics_are_in_the_targets_units() -> None:
    """Training sees standardised targets, so scaling y by c (and shifting it) scales the RMSE by
    c and adds log c to the NLL, exactly up to floating point."""
    config = {**regression_module.QUICK, **TINY_REGRESSION}
    x, y = regression_module.load_table("synthetic")
    arrays = (x[:500], y[:500], x[500:], y[500:])
    scale, shift = 10.0, 3.0
    moved = (x[:500], scale * y[:500] + shift, x[500:], scale * y[500:] + shift)
    base = regression_module.fit_one("sparse", arrays, config, seed=1)
    scaled = regression_module.fit_one("sparse", moved, config, seed=1)
    assert scaled["rmse"] == pytest.approx(scale * base["rmse"], rel=1e-8)
    assert scaled["nll"] == pytest.approx(base["nll"] + np.log(scale), rel=1e-8)


def test_regression_run_writes_rows_summary_and_resumes(tmp_path, monkeypatch) -> None:
    """2 splits x 2 models; killed after 3 fits, the resumed run equals an uninterrupted one."""
    reference = run_experiment(
        "sparse-phases-regression", overrides=TINY_REGRESSION, runs_root=tmp_path / "reference"
    )
    with (reference.path / "results.csv").open() as handle:
        results = list(csv.DictReader(handle))
    assert [(r["split"], r["model"]) for r in results] == [
        ("0", "sparse"), ("0", "complete"), ("1", "sparse"), ("1", "complete"),
    ]  # fmt: skip
    assert set(reference.metrics["synthetic"]) == {"sparse", "complete"}
    real_fit = regression_module.fit_one
    calls = itertools.count()

    def crashing_fit(*args, **kwargs):
        if next(calls) == 3:
            raise SimulatedCrashError("killed")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(regression_module, "fit_one", crashing_fit)
    with pytest.raises(SimulatedCrashError):
        run_experiment(
            "sparse-phases-regression", overrides=TINY_REGRESSION, runs_root=tmp_path / "run"
        )
    refits = itertools.count()

    def counted_fit(*args, **kwargs):
        next(refits)
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(regression_module, "fit_one", counted_fit)
    (run_path,) = list((tmp_path / "run").iterdir())
    resumed = resume_experiment(run_path)
    assert next(refits) == 1  # the three finished fits are read back, the fourth is fitted
    assert _without_times(resumed.metrics) == _without_times(reference.metrics)


@pytest.mark.parametrize("kind", ["complete", "sparse"])
def test_prior_variance_share_is_the_mean_of_the_features_q_over_the_sphere(kind):
    """The share of k(x, x) the features hold, Q(x, x) = k_u(x)^T K_uu^{-1} k_u(x), averaged over
    20,000 uniform points on S^3: exact for complete levels (Q is constant), within 4 Monte Carlo
    standard errors for 3 phases per degree (degrees 2 and 3 truncated)."""
    from zonal.experiments.seed002_common import prior_variance_share
    from zonal.kernels import PolynomialDecayKernel

    ambient_dim, frequencies, phases, degree, beta = 4, 4, 3, 8, 2.0
    kernel = PolynomialDecayKernel(ambient_dim, max_degree=degree, beta=beta).double()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(20000, ambient_dim, dtype=torch.float64, generator=generator)
    x = torch.nn.functional.normalize(x, dim=-1)  # uniform on S^3
    features = harmonic_features(kind, ambient_dim, frequencies, phases, seed=0)
    with torch.no_grad():
        kuf = features.kuf(kernel, x)  # [M, N]
        kuu = features.kuu(kernel).diagonal()  # [M]
        share = (kuf**2 / kuu[:, None]).sum(0) / kernel(x[:1], x[:1]).to_dense().reshape(())
    expected = prior_variance_share(kind, ambient_dim, beta, frequencies, phases, degree)
    error = float(share.std()) / len(share) ** 0.5
    assert abs(float(share.mean()) - expected) <= max(4 * error, 1e-12)
    if kind == "sparse":  # 3 of 9 and of 16 harmonics at degrees 2 and 3: strictly less
        complete = prior_variance_share("complete", ambient_dim, beta, frequencies, phases, degree)
        assert expected < complete - 0.1
