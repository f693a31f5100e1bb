"""The main-benchmark experiment (``zonal demo``) in tiny configurations: the files, rows and
columns it promises; that its summary, metrics and table are the mean and spread over splits of its
per-split results; the time to the target from a known trace and from the run's own traces; the
per-dataset verdicts naming whoever wins; seed 000 table 1 beside our counterparts; resuming; config
errors; and GPyTorch's deep GP answering the model contract through its own forward."""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

import gpytorch
import pytest
import torch

from zonal.experiments import get_experiment, run_experiment
from zonal.experiments._dgp_common import seconds_to_target
from zonal.experiments.main_benchmark import (
    FIGURE_FILE,
    MODEL_LABELS,
    MODELS,
    RESULT_COLUMNS,
    RESULTS_FILE,
    SEED_COUNTERPART,
    SEED_DATASETS,
    SUMMARY_COLUMNS,
    SUMMARY_FILE,
    TABLE_FILE,
    TRACE_COLUMNS,
    TRACES_FILE,
    metric_key,
    summarise,
    target_cell,
    verdicts,
)
from zonal.experiments.report import flatten_metrics, format_value
from zonal.experiments.uci_dgp import TABLE_1

TARGET = 0.9
TINY = {
    "datasets": ["synthetic"],
    "num_splits": 2,
    "max_rows": 60,
    "num_inducing": 6,
    "network_steps": 20,
    "elbo_steps": 4,
    "dgp_steps": 6,
    "svgp_num_inducing": 8,
    "svgp_steps": 10,
    "svgp_batch_size": 32,
    "eval_samples": 4,
    "trace_every": 2,
    "trace_samples": 4,
    "target_mse": {"synthetic": TARGET},
}
TABLE_HEADER = (
    "| dataset | model | M | steps | test MSE | test TLL | train s | s to target MSE | "
    "seed 000 MSE | seed 000 TLL |"
)


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def markdown_rows(text: str) -> list[list[str]]:
    """The cells of every row of the markdown tables in ``text``, headers included, rules left out."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    return [line.strip("| ").split(" | ") for line in lines if not set(line) <= set("|- ")]


def optional_float(text: str) -> float | None:
    return None if text == "" else float(text)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    return run_experiment("main-benchmark", overrides=TINY, runs_root=tmp_path_factory.mktemp("mb"))


# ------------------------------------------------------------------------------------ the run


def test_tiny_run_writes_the_promised_rows_columns_table_and_figure(tiny_run):
    """results.csv: one row per (split, model) with its columns; traces.csv: evaluations of every
    fit; summary.csv: one row per model; the markdown table: its header and one row per model
    labelled as promised; the figure is a PNG."""
    columns, rows = read_csv(tiny_run.path / RESULTS_FILE)
    assert tuple(columns) == RESULT_COLUMNS
    assert sorted((row["split"], row["model"]) for row in rows) == sorted(
        (str(split), model) for split in range(2) for model in MODELS
    )
    columns, traces = read_csv(tiny_run.path / TRACES_FILE)
    assert tuple(columns) == TRACE_COLUMNS
    assert {(row["split"], row["model"]) for row in traces} == {
        (row["split"], row["model"]) for row in rows
    }
    assert {row["stage"] for row in traces if row["model"] == "adgp"} == {"network", "elbo"}
    columns, summary = read_csv(tiny_run.path / SUMMARY_FILE)
    assert tuple(columns) == SUMMARY_COLUMNS
    assert [row["model"] for row in summary] == list(MODELS)
    table = (tiny_run.path / TABLE_FILE).read_text(encoding="utf-8")
    assert TABLE_HEADER in table
    cells = markdown_rows(table)
    assert [row[1] for row in cells[1:]] == [MODEL_LABELS[model] for model in MODELS]
    assert all(row[0] == f"synthetic (target {TARGET:g})" for row in cells[1:])
    pytest.importorskip("matplotlib")
    assert (tiny_run.path / FIGURE_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_metrics_and_table_are_mean_and_std_over_the_splits(tiny_run):
    """For every model, summary.csv, metrics.json and the markdown table hold the mean and the
    sample standard deviation over the splits of results.csv's MSE, TLL and seconds (the table
    to its digits), and the count and mean of the splits' seconds to the target."""
    _, results = read_csv(tiny_run.path / RESULTS_FILE)
    _, summary = read_csv(tiny_run.path / SUMMARY_FILE)
    metrics = json.loads((tiny_run.path / "metrics.json").read_text())
    table = {row[1]: row for row in markdown_rows((tiny_run.path / TABLE_FILE).read_text())}
    by_model = {row["model"]: row for row in summary}
    for model in MODELS:
        group = [row for row in results if row["model"] == model]
        ours = metrics["synthetic"][metric_key(model)]
        for metric, cell, digits in (("mse", 4, 4), ("tll", 5, 3), ("seconds", 6, 1)):
            values = [float(row[metric]) for row in group]
            mean, spread = statistics.mean(values), statistics.stdev(values)
            assert float(by_model[model][metric]) == pytest.approx(mean, rel=1e-12)
            assert float(by_model[model][f"{metric}_std"]) == pytest.approx(spread, rel=1e-12)
            assert ours[metric] == pytest.approx(mean, rel=1e-12)
            assert table[MODEL_LABELS[model]][cell] == f"{mean:.{digits}f} ± {spread:.{digits}f}"
        reached = [float(row["seconds_to_target"]) for row in group if row["seconds_to_target"]]
        assert ours["reached"] == int(by_model[model]["reached"]) == len(reached)
        if reached:
            assert ours["seconds_to_target"] == pytest.approx(statistics.mean(reached), rel=1e-12)
        else:
            assert ours["seconds_to_target"] is None
            assert table[MODEL_LABELS[model]][7].startswith("never (0/2")


def test_each_rows_time_to_target_is_read_from_its_own_trace(tiny_run):
    """results.csv's seconds_to_target of every fit is the training seconds of the first
    evaluation in traces.csv (in order) whose test MSE is at most the target; empty if none. With
    as many trace as final samples, the last evaluation of every fit is its final test MSE and
    its seconds the fit's training seconds (to the moment the clock stops after it)."""
    _, results = read_csv(tiny_run.path / RESULTS_FILE)
    _, traces = read_csv(tiny_run.path / TRACES_FILE)
    for row in results:
        assert float(row["target_mse"]) == TARGET
        points = [
            {"seconds": float(t["seconds"]), "test_mse": float(t["test_mse"])}
            for t in traces
            if (t["split"], t["model"]) == (row["split"], row["model"])
        ]
        expected = next((p["seconds"] for p in points if p["test_mse"] <= TARGET), None)
        assert optional_float(row["seconds_to_target"]) == expected
        assert points[-1]["test_mse"] == pytest.approx(float(row["mse"]), rel=1e-12)
        assert points[-1]["seconds"] == pytest.approx(float(row["seconds"]), abs=0.05)


def test_seconds_to_target_of_a_known_trace():
    """The first evaluation at or below the target counts, not the best nor a later one; a target
    never reached gives None."""
    trace = [
        {"seconds": 0.0, "test_mse": 1.0},
        {"seconds": 1.5, "test_mse": 0.4},
        {"seconds": 3.0, "test_mse": 0.2},
        {"seconds": 4.5, "test_mse": 0.25},  # back above 0.2: does not move the first crossing
        {"seconds": 6.0, "test_mse": 0.1},
    ]
    assert seconds_to_target(trace, 0.5) == 1.5
    assert seconds_to_target(trace, 0.3) == 3.0
    assert seconds_to_target(trace, 0.2) == 3.0  # at the target counts
    assert seconds_to_target(trace, 0.15) == 6.0
    assert seconds_to_target(trace, 0.05) is None
    assert seconds_to_target([], 1.0) is None


def test_time_to_target_summary_and_verdicts_name_whoever_wins():
    """From hand-made results in which GPyTorch's SVGP has the lowest MSE and reaches the target
    on every split while zonal's ADGP-3 reaches it sooner on two of three: the summary counts and
    averages only the splits that reached it, the table cell says so, a model that never got there
    says "never", and the verdict names GPyTorch's SVGP for MSE (with zonal's best beside) and
    the SVGP as first to the target (most splits first), with the others' ratios, marking a
    ratio whose means are closer than their spreads."""
    config = {"datasets": ["yacht"], "models": list(MODELS), "target_mse": {"yacht": 0.01}}

    def row(model, split, mse, tll, seconds, to_target):
        return {"dataset": "yacht", "split": split, "model": model, "num_inducing": 64,
                "steps": 100, "mse": mse, "tll": tll, "seconds": seconds,
                "target_mse": 0.01, "seconds_to_target": to_target}  # fmt: skip

    rows = [
        *(row("adgp", s, 0.004, 1.5, 10.0, t) for s, t in enumerate([2.0, None, 4.0])),
        *(row("dgp", s, 0.012, 0.5, 12.0, None) for s in range(3)),
        *(row("gpytorch-svgp", s, 0.002, 1.8, 8.0, 6.0) for s in range(3)),
        *(row("gpytorch-dgp", s, 0.03, 0.1, 20.0, None) for s in range(3)),
    ]
    summary = {entry["model"]: entry for entry in summarise(rows, config)}
    adgp = summary["adgp"]
    assert adgp["reached"] == 2
    assert adgp["seconds_to_target"] == pytest.approx(3.0)
    assert adgp["seconds_to_target_std"] == pytest.approx(math.sqrt(2.0))
    assert target_cell(adgp) == "3.0 ± 1.4 (2/3)"
    assert summary["dgp"]["seconds_to_target"] is None
    assert target_cell(summary["dgp"]) == "never (0/3; trained 12.0 s)"
    assert (adgp["seed_model"], adgp["seed_mse"]) == (
        "ADGP-3",
        TABLE_1["yacht"]["mse"]["ADGP-3"][0],
    )
    assert summary["gpytorch-svgp"]["seed_mse"] is None
    (line,) = verdicts(list(summary.values()))
    assert "lowest test MSE GPyTorch SVGP (0.0020), zonal's best ADGP-3 0.0040" in line
    assert "highest TLL GPyTorch SVGP (1.800), zonal's best ADGP-3 1.500" in line
    assert "first to the target GPyTorch SVGP (6.0 s, 3/3 splits)" in line
    assert "zonal ADGP-3 0.5x, " in line  # 3.0 s against 6.0 s, on fewer splits
    assert "zonal DGP-3 never, > 2.0x" in line  # trained 12 s without reaching it
    rows += [row("gpytorch-dgp", 3 + s, 0.03, 0.1, 20.0, t) for s, t in enumerate([3.0, 11.0])]
    summary = {entry["model"]: entry for entry in summarise(rows, config)}
    (line,) = verdicts(list(summary.values()))
    # 7.0 ± 5.7 s (2 of 5 splits) against the SVGP's 6.0 ± 0.0 s: closer than their spreads
    assert "GPyTorch DeepGP-3 1.2x (within the spread)" in line


def test_report_and_table_put_seed_000_beside_our_counterparts(tmp_path):
    """The registry records seed 000 table 1's ADGP-3 / DGP-3 under our counterparts' metric
    names for every obtainable dataset; on yacht the report's seed tables put them beside our
    metrics.json values, and the markdown table's seed columns hold them for the zonal models."""
    registry = get_experiment("main-benchmark").paper
    for model, seed_model in SEED_COUNTERPART.items():
        source = registry[f"seed 000 table 1 {seed_model}"]
        for dataset in SEED_DATASETS:
            for metric in ("mse", "tll"):
                expected = TABLE_1[dataset][metric][seed_model][0]
                assert source[f"{dataset}.{metric_key(model)}.{metric}"] == expected
    from zonal.datasets import DatasetUnavailableError, load_dataset

    try:
        load_dataset("yacht", timeout=20.0)
    except DatasetUnavailableError as error:
        pytest.skip(f"yacht cannot be fetched here: {str(error).splitlines()[0]}")
    overrides = {**TINY, "datasets": ["yacht"], "max_rows": 80, "num_splits": 1,
                 "models": list(SEED_COUNTERPART), "target_mse": {"yacht": 0.5}}  # fmt: skip
    result = run_experiment("main-benchmark", overrides=overrides, runs_root=tmp_path)
    flat = flatten_metrics(json.loads((result.path / "metrics.json").read_text()))
    report = (result.path / "report.md").read_text()
    table = {row[1]: row for row in markdown_rows((result.path / TABLE_FILE).read_text())}
    for model, seed_model in SEED_COUNTERPART.items():
        for metric, cell in (("mse", 8), ("tll", 9)):
            quantity = f"yacht.{metric_key(model)}.{metric}"
            seed = TABLE_1["yacht"][metric][seed_model]
            assert f"| {quantity} | {format_value(flat[quantity])} | {format_value(seed[0])} |" in (
                report
            )
            assert table[MODEL_LABELS[model]][cell] == f"{seed[0]:.3f} ± {seed[1]:.3f}"


def test_interrupted_run_resumes_without_refitting(tiny_run, tmp_path, monkeypatch):
    """A run (two models, two splits) interrupted in its third fit resumes with the two fits
    not finished, and its results (every column but the times) equal those of the same fits in
    an uninterrupted run."""
    from zonal.experiments import create_run, execute_run, main_benchmark, resume_experiment

    real_fit, calls, interrupt = main_benchmark.fit_and_score, [], [True]

    def interrupted(model, data, config, seed, trace=None):
        if trace is not None:  # a benchmark fit, not the warm-up
            calls.append(model)
            if len(calls) == 3 and interrupt.pop():
                raise KeyboardInterrupt
        return real_fit(model, data, config, seed, trace)

    monkeypatch.setattr(main_benchmark, "fit_and_score", interrupted)
    models = ["adgp", "gpytorch-dgp"]
    run = create_run("main-benchmark", overrides={**TINY, "models": models}, runs_root=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        execute_run(run)
    calls.clear()
    interrupt.append(False)
    resumed = resume_experiment(run.directory.path)
    assert calls == ["adgp", "gpytorch-dgp"]  # split 2's: split 1's two fits are not redone
    _, expected = read_csv(tiny_run.path / RESULTS_FILE)
    expected = [row for row in expected if row["model"] in models]
    _, got = read_csv(resumed.path / RESULTS_FILE)
    assert len(got) == len(expected)
    for before, after in zip(expected, got, strict=True):
        for key in ("dataset", "split", "model", "num_inducing", "steps", "num_train"):
            assert before[key] == after[key]
        for key in ("mse", "tll"):
            assert float(after[key]) == pytest.approx(float(before[key]), rel=1e-9, abs=1e-12)


def test_bad_config_is_an_experiment_error(tmp_path):
    """An unknown model, an unknown dataset, or a dataset without a positive target MSE is an
    ``ExperimentError`` naming the problem."""
    from zonal.experiments import ExperimentError

    with pytest.raises(ExperimentError, match="models must be"):
        run_experiment("main-benchmark", overrides={**TINY, "models": ["gp"]}, runs_root=tmp_path)
    with pytest.raises(ExperimentError, match=r"unknown dataset .nope.; known datasets"):
        run_experiment("main-benchmark", overrides={**TINY, "datasets": ["nope"]},
                       runs_root=tmp_path)  # fmt: skip
    for targets in ({"yacht": 0.01}, {"synthetic": -1.0}, {"synthetic": "low"}):
        with pytest.raises(ExperimentError, match="target_mse needs a positive number for"):
            run_experiment("main-benchmark", overrides={**TINY, "target_mse": targets},
                           runs_root=tmp_path)  # fmt: skip


# ------------------------------------------------------------------------------------ the peer


@pytest.fixture(scope="module")
def peer():
    from zonal.experiments._baselines import gpytorch_deep_gp
    from zonal.models import fit_dgp

    generator = torch.Generator().manual_seed(3)
    x = torch.randn(40, 3, generator=generator, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0]) + 0.5 * x[:, 1]
    model = gpytorch_deep_gp(x, 3, hidden_width=4, num_inducing=7, seed=5)
    fit_dgp(model, x, y, num_steps=5, batch_size=40)  # move q(u) away from its start
    model.num_posterior_samples = 6
    return model, x, y


def _own_forward(model, x, seed):
    """GPyTorch's deep GP as its tutorial evaluates it: S samples through the layers."""
    torch.manual_seed(seed)
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(model.num_posterior_samples):
        model.eval()
        return model(x)  # batch [S, *b], event [q]


def test_gpytorch_deep_gp_contract_posterior_is_its_own_forward(peer):
    """The contract's posterior components equal the model's own forward under the same seed (for
    X [q, D] and X [b1, b2, q, D], the samples moved next to q); predict is the moments of that
    mixture; log_predictive_density is the log-mean-exp over the components of the likelihood's
    marginal, as GPyTorch's deep-GP tutorial computes the test log likelihood."""
    model, x, y = peer
    samples = model.num_posterior_samples
    output = _own_forward(model, x[:9], model.posterior_seed)
    with torch.no_grad():
        posterior = model.posterior(x[:9])
    assert posterior.distribution.mean.shape == (samples, 9)
    torch.testing.assert_close(posterior.distribution.mean, output.mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        posterior.distribution.covariance_matrix, output.covariance_matrix, rtol=0, atol=1e-12
    )
    mean, variance = model.predict(x[:9])
    means, variances = output.mean, output.variance  # [S, q]
    torch.testing.assert_close(mean, means.mean(0), rtol=0, atol=1e-12)
    expected_variance = (variances + means**2).mean(0) - means.mean(0) ** 2
    torch.testing.assert_close(variance, expected_variance, rtol=1e-10, atol=1e-12)
    with torch.no_grad():
        log_marginal = model.likelihood.log_marginal(y[:9], output)  # [S, q]
    tutorial = log_marginal.logsumexp(0) - math.log(samples)
    torch.testing.assert_close(model.log_predictive_density(x[:9], y[:9]), tutorial)

    batched = torch.randn(2, 3, 5, 3, dtype=torch.float64)
    output = _own_forward(model, batched, model.posterior_seed)  # batch [S, 2, 3]
    with torch.no_grad():
        distribution = model.posterior(batched).distribution  # batch [2, 3, S]
    torch.testing.assert_close(distribution.mean, output.mean.permute(1, 2, 0, 3))
    torch.testing.assert_close(
        distribution.covariance_matrix, output.covariance_matrix.permute(1, 2, 0, 3, 4)
    )


def test_gpytorch_deep_gp_starts_as_zonal_dgp():
    """Built from the same seed, GPyTorch's deep GP has zonal's DGP-3 first-layer inducing points
    (without the lifted bias coordinate) and the same hidden-layer points for every output; its
    hidden layers' q(v) start at N(0, inner_scale^2 I) and its last layer's at N(0, I)."""
    from zonal.experiments._baselines import gpytorch_deep_gp
    from zonal.tabular.recipes import build_inducing_point_dgp, gaussian_likelihood

    x = torch.randn(30, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    options = {"hidden_width": 3, "num_inducing": 6, "seed": 11}
    theirs = gpytorch_deep_gp(x, 3, inner_scale=0.05, **options)
    ours = build_inducing_point_dgp(x, 3, gaussian_likelihood(), inner_scale=0.05, **options)
    for index, (their_layer, our_layer) in enumerate(zip(theirs.layers, ours.layers, strict=True)):
        points = their_layer.variational_strategy.inducing_points.detach()  # [(P,) M, D]
        our_points = our_layer.variational_strategy.features.points.detach()  # [M, D + 1]
        torch.testing.assert_close(points, our_points[:, :-1].expand_as(points), rtol=0, atol=0)
        scale = 1.0 if index == 2 else 0.05
        distribution = their_layer.variational_strategy.variational_distribution
        eye = torch.eye(6, dtype=torch.float64)
        torch.testing.assert_close(distribution.mean, torch.zeros_like(distribution.mean))
        torch.testing.assert_close(distribution.covariance_matrix, (scale**2 * eye).expand(
            distribution.covariance_matrix.shape))  # fmt: skip


@pytest.mark.parametrize("model", ["gpytorch-svgp", "gpytorch-dgp"])
def test_trace_evaluations_leave_the_peers_training_untouched(model):
    """Fitting a GPyTorch model with test-MSE evaluations every step gives the same model as
    fitting without
    (the evaluations run in eval mode, where GPyTorch caches Kzz's root: training must go on in
    train mode, on fresh caches, and on the same random streams). zonal's models are checked by
    the uci-dgp tests, whose ``fit_model`` trains them here."""
    from zonal.experiments.main_benchmark import QUICK, fit_and_score, synthetic_regression

    x, y = (torch.from_numpy(part) for part in synthetic_regression(50, seed=1))
    data = (x[:40], y[:40], x[40:], y[40:])
    config = {**QUICK, **TINY, "trace_every": 1}
    trace: list[dict] = []
    traced = fit_and_score(model, data, config, seed=4, trace=trace)
    plain = fit_and_score(model, data, config, seed=4, trace=None)
    assert len(trace) > 5
    for key in ("mse", "tll"):
        assert traced[key] == pytest.approx(plain[key], rel=1e-9, abs=1e-12)


def test_figure_legend_names_every_line_and_the_target_stands_for_the_seeds_dgp3(tmp_path):
    from zonal.experiments import RunDirectory
    from zonal.experiments.main_benchmark import QUICK, plot_traces

    pytest.importorskip("matplotlib")
    config = {**QUICK, "datasets": ["concrete"], "num_splits": 1, "models": ["adgp", "dgp"]}
    traces = [
        {"dataset": "concrete", "model": model, "split": 0, "stage": "elbo", "seconds": s,
         "test_mse": 0.2 / s}
        for model in ("adgp", "dgp")
        for s in (1.0, 2.0)
    ]  # fmt: skip
    run_dir = RunDirectory.create(tmp_path, "main-benchmark")
    saved = {}
    run_dir.save_figure = lambda name, figure: saved.update({name: figure})
    plot_traces(run_dir, traces, config)
    (figure,) = saved.values()
    labels = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    assert "seed 000 table 1 ADGP-3 (full protocol)" in labels
    assert "target test MSE = seed 000 table 1 DGP-3 (full protocol)" in labels
    assert TABLE_1["concrete"]["mse"]["DGP-3"][0] == config["target_mse"]["concrete"]
