"""The residual-dgp-sphere (seed 004 figs. 3.4-3.5) and residual-dgp-uci (fig. 5.1) experiments in
tiny configurations: the target has the cusps the docstring promises, the grid is near-uniform, the
runs write their tables, figures and the seed's numbers beside ours, and an interrupted run resumes
with the metrics of an uninterrupted one."""

from __future__ import annotations

import csv
import importlib
import json
import math

import pytest
import torch

from zonal.experiments import create_run, execute_run, resume_experiment, run_experiment
from zonal.experiments import residual_dgp_sphere as sphere_module
from zonal.experiments.residual_dgp_sphere import CUSPS, cusp_target, fibonacci_sphere

TINY_SPHERE = {
    "num_train": [24],
    "hidden_layers": [0, 1],
    "repeats": 2,
    "baseline_hidden_layers": [1],
    "baseline_num_train": 24,
    "baseline_repeats": 1,
    "num_test": 40,
    "num_inducing": 8,
    "steps": 3,
    "eval_samples": 4,
}
TINY_UCI = {
    "datasets": ["synthetic"],
    "depths": [1, 2],
    "num_splits": 1,
    "epochs": 2,
    "eval_samples": 4,
}


class SimulatedCrashError(RuntimeError):
    """Stands for a run killed part way."""


def _read_csv(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


def _without_times(value):
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if "seconds" not in k}
    if isinstance(value, list):
        return [_without_times(item) for item in value]
    return value


def test_the_target_has_square_root_cusps_at_the_tetrahedron_vertices():
    """Near a vertex c, |f(x) - f(c)| grows like |x - c|^{1/2} (a difference quotient that blows
    up as t^{-1/2}), while away from the vertices f is smooth (quotient ~ constant)."""
    centre = torch.tensor(CUSPS[0], dtype=torch.float64) / math.sqrt(3)
    tangent = torch.tensor([1.0, -1.0, 0.0], dtype=torch.float64) / math.sqrt(2)
    smooth_point = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)

    def quotient(point: torch.Tensor, step: float) -> float:
        moved = torch.cos(torch.tensor(step)) * point + torch.sin(torch.tensor(step)) * tangent
        values = cusp_target(torch.stack([point, moved]))
        return float((values[1] - values[0]).abs()) / step

    near = [quotient(centre, step) for step in (1e-2, 1e-4, 1e-6)]
    assert near[1] / near[0] == pytest.approx(10, rel=0.05)  # t^{-1/2}: x10 per factor 100
    assert near[2] / near[1] == pytest.approx(10, rel=0.05)
    far = [quotient(smooth_point, step) for step in (1e-4, 1e-6)]
    assert far[1] == pytest.approx(far[0], rel=1e-3)


def test_the_fibonacci_grid_is_on_the_sphere_and_balanced():
    """Unit vectors whose mean is near zero (a uniform spread has mean 0) and whose nearest
    neighbours are all about as far apart (no clumps)."""
    points = fibonacci_sphere(400)
    assert (points.norm(dim=-1) - 1).abs().max() < 1e-14
    assert points.mean(0).norm() < 1e-2
    distances = torch.cdist(points, points) + 10 * torch.eye(400, dtype=torch.float64)
    nearest = distances.min(-1).values
    assert nearest.max() / nearest.min() < 1.5


@pytest.fixture(scope="module")
def sphere_reference(tmp_path_factory):
    return run_experiment(
        "residual-dgp-sphere", overrides=TINY_SPHERE, runs_root=tmp_path_factory.mktemp("sphere")
    )


def test_sphere_experiment_writes_tables_figures_and_the_seed_beside_ours(sphere_reference):
    """One row per fit (residual: depths x repeats; baseline: its repeats), medians per cell in the
    summary and the metrics, figures 3.4 and 3.5, and the seed's LPD medians in the report."""
    path = sphere_reference.path
    files = {p.name for p in path.iterdir()}
    assert {"results.csv", "summary.csv", "report.md", "metrics.json"} <= files
    results = _read_csv(path / "results.csv")
    assert len(results) == 2 * 2 + 1
    assert {"model", "num_train", "hidden_layers", "repeat", "tll", "mse"} <= set(results[0])
    metrics = json.loads((path / "metrics.json").read_text())
    assert set(metrics["residual"]["n24"]) == {"hidden0", "hidden1"}
    assert set(metrics["baseline"]["n24"]) == {"hidden1"}
    report = (path / "report.md").read_text()
    assert "| residual.n800.hidden3.lpd_median | — | 2.03 |" in report
    pytest.importorskip("matplotlib")
    assert {"figure_3_4.png", "figure_3_5.png"} <= files


def test_sphere_experiment_resumes_with_the_metrics_of_an_uninterrupted_run(
    sphere_reference, tmp_path, monkeypatch
):
    """A run killed after 3 of its 5 fits resumes with the 2 left and ends with the same metrics
    and results (times aside)."""
    real_fit = sphere_module.fit_one
    calls = {"count": 0}

    def crashing_fit(*args, **kwargs):
        if calls["count"] == 3:
            raise SimulatedCrashError("killed after 3 fits")
        calls["count"] += 1
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(sphere_module, "fit_one", crashing_fit)
    run = create_run("residual-dgp-sphere", overrides=TINY_SPHERE, runs_root=tmp_path)
    with pytest.raises(SimulatedCrashError):
        execute_run(run)
    calls["count"] = -100
    resumed = resume_experiment(run.directory.path)
    assert calls["count"] == -100 + 2
    assert _without_times(resumed.metrics) == _without_times(sphere_reference.metrics)
    ours = _without_times(_read_csv(resumed.path / "results.csv"))
    assert ours == _without_times(_read_csv(sphere_reference.path / "results.csv"))


def test_uci_experiment_fits_both_models_at_every_depth(tmp_path):
    """Residual and Euclidean DGPs at depths 1 and 2 on the synthetic set: four rows, the same
    feature budget M for both models, medians in the metrics and figure 5.1."""
    result = run_experiment("residual-dgp-uci", overrides=TINY_UCI, runs_root=tmp_path)
    rows = _read_csv(result.path / "results.csv")
    assert {(r["model"], r["depth"]) for r in rows} == {
        ("residual", "1"),
        ("residual", "2"),
        ("euclidean", "1"),
        ("euclidean", "2"),
    }
    assert {r["num_inducing"] for r in rows} == {"16"}
    assert set(result.metrics["synthetic"]["residual"]) == {"depth1", "depth2"}
    assert all(math.isfinite(float(r["tll"])) for r in rows)
    with pytest.raises(ValueError, match="energy and kin8nm"):
        run_experiment("residual-dgp-uci", overrides={"datasets": ["energy"]}, runs_root=tmp_path)
    assert {"hidden_kl", "output_kl", "plateau_drop", "converged"} <= set(rows[0])
    curves = _read_csv(result.path / "curves.csv")
    assert {(c["model"], c["depth"]) for c in curves} == {(r["model"], r["depth"]) for r in rows}
    pytest.importorskip("matplotlib")
    assert (result.path / "figure_5_1.png").exists()
    assert (result.path / "training_curves.png").exists()


def test_layer_diagnostics_of_hidden_fields_at_their_prior_are_the_closed_form():
    """With every hidden q(u) equal to the prior (whitened N(0, I)) the hidden KL is 0, the mean
    fields vanish (shift 0), and each projected field's spread is E|v(h)|^2 = (d - 1) sigma_l^2
    exactly (trace of the tangent projection times the prior variance sigma_l^2 =
    hidden_variance / (L - 1))."""
    from zonal.experiments.residual_dgp_uci import layer_diagnostics
    from zonal.models.residual_dgp import residual_dgp

    torch.manual_seed(0)
    input_dim, hidden_layers, hidden_variance = 3, 2, 0.3
    model = residual_dgp(
        input_dim, hidden_layers, 20, hidden_variance=hidden_variance, hidden_scale=1.0
    )
    found = layer_diagnostics(model, torch.randn(30, input_dim, dtype=torch.float64))
    ambient_dim = input_dim + 1
    assert found["hidden_kl"] == pytest.approx(0.0, abs=1e-9)
    assert found["hidden_shift"] == pytest.approx(0.0, abs=1e-12)
    expected = math.sqrt((ambient_dim - 1) * hidden_variance / hidden_layers)
    assert found["hidden_spread"] == pytest.approx(expected, rel=1e-6)

    scale, points = 0.1, 30
    model = residual_dgp(input_dim, hidden_layers, 20, hidden_scale=scale)
    found = layer_diagnostics(model, torch.randn(points, input_dim, dtype=torch.float64))
    # whitened KL(N(0, s^2 I) || N(0, I)) = (s^2 - 1 - log s^2) / 2 per inducing variable
    variables = sum(
        field.variational_strategy._variational_distribution.variational_mean.numel()
        for field in model.fields
    )
    per_variable = (scale**2 - 1 - math.log(scale**2)) / 2
    assert found["hidden_kl"] == pytest.approx(variables * per_variable / points, rel=1e-9)


def test_layer_diagnostics_follow_the_mean_path_of_trained_looking_fields():
    """Fields with random variational means and scales (the frame construction, whose components
    differ): the shift is the RMS of each field's mean vector along the composed mean path and
    the spread the RMS trace of each point's dense 3x3 covariance block of q(v(X)), both averaged
    over the layers (an independent path: ``mean`` and ``joint_distribution``)."""
    from zonal.experiments.residual_dgp_uci import layer_diagnostics
    from zonal.geometry import exp_map
    from zonal.models.residual_dgp import residual_dgp

    torch.manual_seed(3)
    model = residual_dgp(2, 2, 9, construction="frame", hidden_variance=0.5, hidden_scale=0.3)
    with torch.no_grad():
        for field in model.fields:
            distribution = field.variational_strategy._variational_distribution
            distribution.variational_mean.normal_(0.0, 0.5)
            distribution.chol_variational_covar.mul_(
                torch.rand_like(distribution.chol_variational_covar) + 0.5
            )
    x = torch.randn(25, 2, dtype=torch.float64)
    found = layer_diagnostics(model, x)
    h, _ = model.to_sphere(x)
    shifts, spreads = [], []
    with torch.no_grad():
        for field in model.fields:
            mean = field.mean(h)  # [N, 3]
            covariance = field.joint_distribution(h).covariance_matrix  # [3 N, 3 N]
            blocks = covariance.reshape(len(h), 3, len(h), 3).diagonal(dim1=0, dim2=2)  # [3, 3, N]
            spreads.append(float(blocks.diagonal(dim1=0, dim2=1).sum(-1).mean().sqrt()))
            shifts.append(float(mean.pow(2).sum(-1).mean().sqrt()))
            h = exp_map(h, mean)
    assert found["hidden_shift"] == pytest.approx(sum(shifts) / 2, rel=1e-9)
    assert found["hidden_spread"] == pytest.approx(sum(spreads) / 2, rel=1e-6)
    assert found["hidden_shift"] > 0.01


def test_two_worker_processes_give_the_rows_of_one(sphere_reference, tmp_path):
    """--jobs 2 runs the fits in two spawned processes, finishing in any order; every fit seeds
    itself, so the rows (sorted) and the metrics are those of the one-process run."""
    run = create_run("residual-dgp-sphere", overrides=TINY_SPHERE, runs_root=tmp_path, jobs=2)
    parallel = execute_run(run)
    assert _without_times(parallel.metrics) == _without_times(sphere_reference.metrics)

    def key(row):
        return (row["model"], row["num_train"], row["hidden_layers"], row["repeat"])

    ours = sorted(_without_times(_read_csv(parallel.path / "results.csv")), key=key)
    reference = sorted(_without_times(_read_csv(sphere_reference.path / "results.csv")), key=key)
    assert ours == reference


def test_uci_experiment_in_two_worker_processes_gives_the_rows_of_one(tmp_path):
    """residual-dgp-uci's (dataset, split, model, depth) units in two spawned processes: the rows,
    put back in the units' order, and the metrics are those of the one-process run."""
    reference = run_experiment("residual-dgp-uci", overrides=TINY_UCI, runs_root=tmp_path / "one")
    run = create_run("residual-dgp-uci", overrides=TINY_UCI, runs_root=tmp_path / "two", jobs=2)
    parallel = execute_run(run)
    assert _without_times(parallel.metrics) == _without_times(reference.metrics)
    ours = _without_times(_read_csv(parallel.path / "results.csv"))
    assert ours == _without_times(_read_csv(reference.path / "results.csv"))


def test_a_run_with_fixed_baseline_inducing_locations(tmp_path, monkeypatch):
    """The claim 10b ablation's shape: one cheap residual cell and the baseline with its
    inducing locations fixed (the setting reaches the baseline's builder); the run writes both
    rows."""
    # the module (``zonal.models.residual_dgp`` as an attribute is the function of that name)
    residual_models = importlib.import_module("zonal.models.residual_dgp")
    built = residual_models.hybrid_dgp
    requested: list[object] = []

    def recorded(*args, **kwargs):
        requested.append(kwargs.get("learn_inducing"))
        return built(*args, **kwargs)

    monkeypatch.setattr(residual_models, "hybrid_dgp", recorded)
    settings = {**TINY_SPHERE, "hidden_layers": [0], "repeats": 1, "baseline_learn_inducing": False}
    result = run_experiment("residual-dgp-sphere", overrides=settings, runs_root=tmp_path)
    assert requested == [False]
    rows = _read_csv(result.path / "results.csv")
    assert [(r["model"], r["hidden_layers"]) for r in rows] == [
        ("residual", "0"),
        ("baseline", "1"),
    ]
    assert all(math.isfinite(float(r["tll"])) for r in rows)
