"""``zonal fit``'s validation split, early stopping, time budget, model choice, progress bar and
Ctrl-C (``zonal.tabular.fitting``, ``zonal.models.training.TrainingControl``)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

from zonal.cli import main
from zonal.models import SGPR
from zonal.models.training import TrainingControl, adam_on_minibatches
from zonal.tabular import recipes
from zonal.tabular.fitting import fit_data
from zonal.tabular.model import STACKED
from zonal.tabular.recipes import auto_candidates, harmonic_layout
from zonal.tabular.saved import load_model
from zonal.tabular.split import (
    MONITORED_VALIDATION_ROWS,
    Split,
    validation_roles,
    validation_split,
)
from zonal.tabular.targets import Target


def test_the_validation_split_is_seeded_stratified_and_disjoint():
    codes = np.repeat([0, 1, 2], [50, 30, 1])
    target = Target("softmax", ("a", "b", "c"))
    train, valid = validation_split(codes, target, 0.2, seed=3)
    assert np.intersect1d(train, valid).size == 0
    np.testing.assert_array_equal(np.union1d(train, valid), np.arange(len(codes)))
    # round(0.2 n) rows of each class; a class of one row stays in the training rows
    assert [int(np.sum(codes[valid] == c)) for c in range(3)] == [10, 6, 0]
    again, _ = validation_split(codes, target, 0.2, seed=3)
    other, _ = validation_split(codes, target, 0.2, seed=4)
    np.testing.assert_array_equal(train, again)
    assert not np.array_equal(train, other)
    with pytest.raises(ValueError, match=r"validation fraction must lie in \[0, 1\)"):
        validation_split(codes, target, 1.0, seed=0)


def _quadratic_module() -> torch.nn.Module:
    module = torch.nn.Module()
    module.value = torch.nn.Parameter(torch.tensor([4.0], dtype=torch.float64))
    return module


def test_early_stopping_keeps_the_best_validation_state():
    """Adam with a large rate oscillates around the optimum of the loss (value - 1)^2 while the
    validation score -(value - 1.5)^2 peaks elsewhere: the state left in the module is the one
    whose evaluated score was the highest, not the last one."""
    module = _quadratic_module()
    seen: list[tuple[float, float]] = []

    def score(watched: torch.nn.Module) -> float:
        value = float(watched.value)
        seen.append((value, -((value - 1.5) ** 2)))
        return seen[-1][1]

    control = TrainingControl(score=score, patience=1000)
    with control.watch(module, 300, stage="test") as watch:
        adam_on_minibatches(lambda index: ((module.value - 1.0) ** 2).sum(), module.parameters(),
                            1, num_steps=300, batch_size=1, lr=0.3, seed=0,
                            callback=watch)  # fmt: skip
    best_value, best_score = max(seen, key=lambda pair: pair[1])
    assert len(seen) > 5 and best_score > seen[-1][1]
    assert float(module.value) == best_value


def test_a_stage_shorter_than_one_evaluation_interval_keeps_its_final_state():
    """Ten steps (fewer than the twenty between evaluations) that improve the score: leaving the
    stage scores the final state, which beats the starting one and stays."""
    module = _quadratic_module()
    control = TrainingControl(score=lambda watched: -float((watched.value - 1.0) ** 2))
    with control.watch(module, 10, stage="short") as watch:
        adam_on_minibatches(lambda index: ((module.value - 1.0) ** 2).sum(), module.parameters(),
                            1, num_steps=10, batch_size=1, lr=0.1, seed=0,
                            callback=watch)  # fmt: skip
    assert float(module.value) < 4.0 - 0.5  # ten steps of 0.1 towards 1, not the start


def test_the_deadline_and_the_patience_end_a_stage():
    module = _quadratic_module()

    def loss(index):
        time.sleep(0.002)
        return ((module.value - 1.0) ** 2).sum()

    control = TrainingControl(deadline=time.monotonic() + 0.3)
    started = time.monotonic()
    with control.watch(module, 10**6, stage="budget") as watch:
        losses = adam_on_minibatches(loss, module.parameters(), 1, num_steps=10**6, batch_size=1,
                                     lr=0.01, seed=0, callback=watch)  # fmt: skip
    assert time.monotonic() - started < 2.0 and 10 < len(losses) < 10**6
    # a score that never improves: the stage ends after `patience` evaluations past the first
    flat = TrainingControl(score=lambda watched: 0.0, patience=3)
    with flat.watch(module, 10**6, stage="patience") as watch:
        losses = adam_on_minibatches(lambda index: ((module.value - 1.0) ** 2).sum(),
                                     module.parameters(), 1, num_steps=10**6, batch_size=1,
                                     lr=0.01, seed=0, callback=watch)  # fmt: skip
    assert len(losses) == 60  # evaluations at steps 19, 39, 59 (every 20 steps at least)


def test_without_early_stopping_a_flat_score_runs_every_step_and_keeps_the_best_state():
    """A validation score that never improves ends a stage after ``patience`` evaluations; with
    ``early_stopping=False`` the same stage runs all its steps (no deadline here) and the best
    (first) state is the one left, since an equal score is no gain."""
    module = _quadratic_module()
    value = module.value

    def run(early_stopping: bool) -> int:
        with torch.no_grad():
            value.fill_(4.0)
        control = TrainingControl(score=lambda watched: 0.0, patience=3)
        with control.watch(module, 500, stage="flat", early_stopping=early_stopping) as watch:
            losses = adam_on_minibatches(lambda index: ((value - 1.0) ** 2).sum(), [value], 1,
                                         num_steps=500, batch_size=1, lr=0.01, seed=0,
                                         callback=watch)  # fmt: skip
        return len(losses)

    assert run(early_stopping=True) == 60  # evaluations at steps 19, 39, 59: patience 3
    assert run(early_stopping=False) == 500
    assert float(value) == 4.0  # Adam moved it at every step; the best state came back


def test_without_early_stopping_the_time_patience_is_off_but_the_deadline_holds():
    control = TrainingControl(deadline=time.monotonic() + 10.0)
    module = torch.nn.Linear(1, 1)
    watch = control.watch(module, 10, stage="a", early_stopping=False)
    assert math.isinf(watch.time_patience) and math.isinf(watch.patience)
    assert watch.deadline == pytest.approx(time.monotonic() + 10.0, abs=0.5)


def test_a_plateau_ends_a_stage_after_its_share_of_the_time_and_keeps_the_best_state():
    """Under a 2 s deadline, with evaluation patience out of reach (10^6): a flat validation
    score ends the stage at the first evaluation found ``patience_share`` (0.2, so 0.4 s) after
    its best, long before the deadline, and the starting state (the best: an equal score is no
    gain) is the one left; a score that improves at every evaluation runs to the deadline."""
    module = _quadratic_module()

    def slow_loss(index):
        time.sleep(0.002)
        return ((module.value - 1.0) ** 2).sum()

    def run(control: TrainingControl) -> float:
        started = time.monotonic()
        with control.watch(module, 10**6, stage="plateau") as watch:
            adam_on_minibatches(slow_loss, module.parameters(), 1, num_steps=10**6, batch_size=1,
                                lr=0.001, seed=0, callback=watch)  # fmt: skip
        return time.monotonic() - started

    run(TrainingControl(deadline=time.monotonic() + 0.2))  # warm-up: first steps are slower
    module.value.data.fill_(4.0)
    budget = 2.0
    flat = TrainingControl(deadline=time.monotonic() + budget, score=lambda watched: 0.0,
                           patience=10**6, patience_share=0.2)  # fmt: skip
    seconds = run(flat)
    assert 0.2 * budget <= seconds < 0.6 * budget
    assert float(module.value) == 4.0  # Adam moved it at every step; the best state came back
    improving = TrainingControl(deadline=time.monotonic() + budget,
                                score=lambda watched: -float((watched.value - 1.0) ** 2),
                                patience=10**6, patience_share=0.2)  # fmt: skip
    seconds = run(improving)
    assert seconds >= 0.95 * budget and float(module.value) < 4.0


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5, math.nan])
def test_a_patience_share_outside_the_unit_interval_is_named(share):
    with pytest.raises(ValueError, match=r"patience_share must lie in \(0, 1\]"):
        TrainingControl(patience_share=share)


def test_the_auto_rule_and_the_feature_layout():
    assert auto_candidates(300, 6, "gaussian") == ["sgpr", "adgp"]
    assert auto_candidates(300, 6, "gaussian", exact=True) == ["sgpr", "exact", "adgp"]
    assert auto_candidates(50_000, 6, "softmax", exact=True) == ["svgp", "svgp-points"]
    assert auto_candidates(100_000, 9, "gaussian") == ["sgpr", "svgp-activated"]
    assert auto_candidates(100_000, 32, "gaussian") == ["sgpr", "svgp"]
    assert auto_candidates(5_000, 64, "softmax") == ["svgp", "svgp-points", "adgp"]
    assert auto_candidates(50_000, 2, "bernoulli") == ["svgp", "svgp-points"]
    # complete levels while they reach degree 3; phase-truncated beyond (about 11 inputs)
    assert harmonic_layout(9, 512) == (3, None)
    kernel = recipes.build_kernel("arccos", 33, 512)
    degree, phases = harmonic_layout(33, 512, kernel)
    assert degree == recipes.SPARSE_MAX_DEGREE and phases is not None
    features = recipes.harmonic_features(kernel, 33, 512)
    assert features.num_inducing <= 512 and features.max_degree == 6


@pytest.mark.slow
def test_learned_phase_truncated_harmonics_fit_a_32_input_product():
    """y = x0 x1 on 32 inputs is a degree-2 harmonic with no part of degree 0 or 1: the complete
    levels SGPR can hold on S^32 stop at degree 1 and cannot fit it (nor can fixed random phases:
    a random 159-dimensional part of the 560-dimensional degree-2 space), while an SVGP with
    learned phase-truncated harmonics (125 features) turns its phases towards it (measured
    validation MSE 0.66 against SGPR's 1.43; about 20 s)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 32))
    y = x[:, 0] * x[:, 1] + 0.05 * rng.normal(size=600)
    columns = [f"x{j}" for j in range(32)]
    sgpr = fit_data(x, y, feature_columns=columns, model="sgpr", kernel="arccos", steps=60,
                    validation_fraction=0.2)  # fmt: skip
    svgp = fit_data(x, y, feature_columns=columns, model="svgp", num_inducing=128, steps=300,
                    validation_fraction=0.2)  # fmt: skip
    assert svgp.trained.model.features.max_degree == recipes.SPARSE_MAX_DEGREE
    assert svgp.validation["mse"] < 0.6 * sgpr.validation["mse"]


def test_auto_stacks_its_regression_candidates_within_the_budget():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 2))
    y = np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=200)
    started = time.monotonic()
    fitted = fit_data(x, y, feature_columns=["a", "b"], budget=8.0, num_inducing=16)
    assert time.monotonic() - started < 8.0 + 6.0  # the budget, plus the final validation pass
    candidates = [name for name in fitted.scores if name != STACKED]
    assert candidates[:3] == ["sgpr", "exact", "adgp"] and set(candidates[3:]) <= {"svgp"}
    assert sum(fitted.scores[name]["weight"] for name in candidates) == pytest.approx(1.0)
    kept = fitted.spec["model"]  # the stack, or the one candidate the weights picked
    assert kept == STACKED or fitted.scores[kept]["weight"] == 1.0
    assert fitted.validation["log_likelihood"] == fitted.scores[kept]["log_likelihood"]
    assert math.isfinite(fitted.validation["mse"]) and fitted.num_validation_rows == 20


def test_progress_bar_shows_the_objective_the_validation_score_and_the_budget(capsys):
    x = np.random.default_rng(2).normal(size=(60, 2))
    fit_data(x, x[:, 0], feature_columns=["a", "b"], model="svgp-activated", num_inducing=8,
             steps=30, budget=30.0, progress=True)  # fmt: skip
    err = capsys.readouterr().err
    assert "svgp-activated phase 1" in err
    assert "objective=" in err and "validation=" in err and "budget=" in err


def test_ctrl_c_keeps_the_best_model_as_a_complete_checkpoint(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(80, 2))
    data = tmp_path / "table.csv"
    rows = [f"{p},{q},{np.sin(p) + q}" for p, q in x]
    data.write_text("a,b,y\n" + "\n".join(rows) + "\n")
    steps_taken, interrupt_at = 0, 80  # adgp: 50 network steps, then the ELBO's
    real_step = torch.optim.Adam.step

    def interrupted_step(self, *args, **kwargs):
        nonlocal steps_taken
        steps_taken += 1
        if steps_taken == interrupt_at:
            raise KeyboardInterrupt
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", interrupted_step)
    checkpoint = tmp_path / "model.pt"
    args = ["fit", str(data), "--target", "y", "--model", "adgp", "--num-inducing", "8"]
    assert main([*args, "--steps", "50", "-o", str(checkpoint), "--quiet"]) == 130
    err = capsys.readouterr().err
    assert "interrupted: kept the best adgp so far" in err and "Traceback" not in err
    fitted = load_model(checkpoint)  # complete: it loads, checksum and all, and predicts
    assert fitted.interrupted and fitted.spec["model"] == "adgp"
    output = tmp_path / "pred.csv"
    assert main(["predict", str(checkpoint), str(data), "-o", str(output)]) == 0
    assert len(output.read_text().splitlines()) == 81
    # interrupted in the network stage: the best network so far is copied in and saved
    steps_taken, interrupt_at = 0, 30
    early = tmp_path / "early.pt"
    assert main([*args, "--steps", "50", "-o", str(early), "--quiet"]) == 130
    assert load_model(early).interrupted


def test_ctrl_c_before_any_model_exists_saves_nothing(tmp_path, capsys, monkeypatch):
    data = tmp_path / "table.csv"
    data.write_text("a,y\n" + "\n".join(f"{i},{i % 3}.5" for i in range(30)) + "\n")

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(SGPR, "fit_statistics", interrupt)
    checkpoint = tmp_path / "model.pt"
    assert (
        main(["fit", str(data), "--target", "y", "--model", "sgpr", "-o", str(checkpoint)]) == 130
    )
    assert "interrupted before any model was trained; nothing saved" in capsys.readouterr().err
    assert not checkpoint.exists()


def test_without_a_deadline_the_evaluations_do_not_depend_on_the_clock():
    """No deadline (``--budget none``): evaluations every ``MIN_EVALUATION_INTERVAL`` steps
    however long a validation pass takes, so a seeded fit is reproducible; with a deadline a slow
    pass spaces them out."""

    def evaluated_steps(deadline, pause):
        module, steps_done, evaluated = _quadratic_module(), [0], []

        def loss(index):
            steps_done[0] += 1
            return ((module.value - 1.0) ** 2).sum()

        def score(watched):
            evaluated.append(steps_done[0])
            time.sleep(pause)
            return 0.0

        control = TrainingControl(deadline=deadline, score=score, patience=10**6)
        with control.watch(module, 100, stage="clock") as watch:
            adam_on_minibatches(loss, module.parameters(), 1, num_steps=100, batch_size=1,
                                lr=0.01, seed=0, callback=watch)  # fmt: skip
        return evaluated

    fixed = [0, 20, 40, 60, 80, 100]  # steps done: at entry, then every 20 steps
    assert evaluated_steps(None, 0.0) == fixed
    assert evaluated_steps(None, 0.02) == fixed
    assert evaluated_steps(time.monotonic() + 60, 0.02) != fixed


def test_budget_none_is_parsed_and_a_bad_budget_is_a_usage_error(tmp_path, capsys):
    data = tmp_path / "table.csv"
    data.write_text("a,y\n" + "\n".join(f"{i},{i % 3}.5" for i in range(30)) + "\n")
    checkpoint = tmp_path / "model.pt"
    args = ["fit", str(data), "--target", "y", "--model", "sgpr", "-o", str(checkpoint), "--quiet"]
    assert main([*args, "--budget", "none"]) == 0 and checkpoint.exists()
    for bad in ("-1", "0", "soon", "nan"):
        assert main([*args, "--force", "--budget", bad]) == 2
        assert "expected a positive number of seconds, 'auto' or 'none'" in capsys.readouterr().err


def test_a_stage_can_have_its_own_patience_in_time():
    """``watch(patience_share=...)`` replaces the control's share for that stage: with 10 s left
    the default stage waits 2 s for a gain, one with share 0.1 waits 1 s; the activated DGP's
    ELBO stage uses ``ADGP_ELBO_PATIENCE_SHARE``."""
    control = TrainingControl(deadline=time.monotonic() + 10.0)
    module = torch.nn.Linear(1, 1)
    default = control.watch(module, 10, stage="a")
    short = control.watch(module, 10, stage="b", patience_share=0.1)
    assert default.time_patience == pytest.approx(2.0, abs=0.05)
    assert short.time_patience == pytest.approx(1.0, abs=0.05)
    with pytest.raises(ValueError, match=r"patience_share must lie in \(0, 1\]"):
        control.watch(module, 10, stage="c", patience_share=0.0)
    shares = {}
    watch = TrainingControl.watch

    def recording(self, module, steps, *, stage, **options):
        stage_watch = watch(self, module, steps, stage=stage, **options)
        shares[stage] = stage_watch.time_patience / (stage_watch.deadline - stage_watch.started)
        return stage_watch

    x = torch.randn(40, 2, dtype=torch.float64)
    spec = recipes.resolve_spec(2, model="adgp", num_inducing=8, steps=4, batch_size=20)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TrainingControl, "watch", recording)
        recipes.train(spec, x, x[:, 0], TrainingControl(deadline=time.monotonic() + 30.0))
    assert shares["ELBO"] == pytest.approx(recipes.ADGP_ELBO_PATIENCE_SHARE, rel=1e-9)
    assert shares["network 1"] == pytest.approx(TrainingControl().patience_share, rel=1e-9)


def test_the_fit_line_names_the_units_of_its_validation_metrics(tmp_path, capsys):
    """Regression metrics are printed in the target's units (mse * std^2), and the line says so;
    the saved ones are the same numbers."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=60)
    rows = [f"{p},{100 * p + rng.normal()}" for p in a]  # a target of std about 100
    data = tmp_path / "scaled.csv"
    data.write_text("a,price\n" + "\n".join(rows) + "\n")
    arguments = ["--model", "svgp-activated", "--num-inducing", "8", "--steps", "5", "--quiet"]
    assert main(["fit", str(data), "--target", "price", *arguments]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert "validation (6 rows, in the units of 'price'): " in line
    fitted = load_model(tmp_path / "scaled.zonal.pt")
    assert f"mse {fitted.validation['mse']:.4g}" in line


def test_auto_scores_its_fits_on_validation_rows_early_stopping_did_not_watch():
    """validation_roles: under auto every other validation row (at most
    MONITORED_VALIDATION_ROWS) watches and the others score, disjoint and together all of them;
    a named model's rows do both."""
    x = torch.arange(30, dtype=torch.float64).reshape(15, 2)
    y = torch.arange(15, dtype=torch.float64)
    split = Split(x[:5], y[:5], x[5:], y[5:])  # 10 validation rows
    watched, scoring = validation_roles(split, True)
    assert torch.equal(watched[0], x[5::2])
    assert watched[1].tolist() == [5, 7, 9, 11, 13]
    assert scoring.y_valid.tolist() == [6, 8, 10, 12, 14]
    assert torch.equal(scoring.x_valid, x[6::2]) and torch.equal(scoring.x_train, split.x_train)
    everything, same = validation_roles(split, False)
    assert everything[1].tolist() == list(range(5, 15)) and same is split
    one = Split(x[:5], y[:5], x[5:6], y[5:6])
    watched, scoring = validation_roles(one, True)
    assert watched is None and scoring.y_valid.tolist() == [5]


def test_both_roles_hold_each_class_of_a_table_sorted_by_class():
    """A table listing its classes in turn (MAGIC's file: 65% of one class, then the other): the
    watching and scoring rows each hold every class in the validation rows' proportions (+- 1
    row); the first half, as before, held one class only."""
    labels = torch.tensor([0] * 130 + [1] * 70)  # validation rows in the table's order
    x = torch.zeros(200, 2, dtype=torch.float64)
    split = Split(x[:3], labels[:3], x, labels)
    watched, scoring = validation_roles(split, True)
    assert len(watched[1]) == 100 and len(scoring.y_valid) == 100
    for rows in (watched[1], scoring.y_valid):
        assert abs(int((rows == 1).sum()) - 35) <= 1
    capped = Split(x[:3], labels[:3], x.repeat(12, 1), labels.repeat_interleave(12))
    watched, _ = validation_roles(capped, False)  # 2,400 rows, 2,000 watch
    assert len(watched[1]) == MONITORED_VALIDATION_ROWS
    assert abs(int((watched[1] == 1).sum()) - 0.35 * MONITORED_VALIDATION_ROWS) <= 1


def test_the_fit_lines_name_the_scoring_rows_and_each_objective(tmp_path, capsys):
    """Under ``auto`` the candidates' metrics are over the scoring half of the validation rows,
    and the output says so once; the fit line names the kind of training objective, and gives
    none for a stack (its components' objectives are of different kinds)."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=80), rng.normal(size=80)
    data = tmp_path / "t.csv"
    rows = [f"{p},{q},{np.sin(p) + 0.1 * q}" for p, q in zip(a, b, strict=True)]
    data.write_text("a,b,y\n" + "\n".join(rows))
    assert main(["fit", str(data), "--target", "y", "--budget", "4", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "the candidates are scored on 4 of the 8 validation rows; the other 4 watched" in out[1]
    assert all("validation (4 rows, in the units of 'y')" in line for line in out[2:])
    fitted = load_model(tmp_path / "t.zonal.pt")  # the saved model keeps the rows' roles
    assert (fitted.num_validation_rows, fitted.num_scoring_rows) == (8, 4)
    assert ("per training row" in out[0]) == (fitted.spec["model"] != "stacked")
    arguments = ["--model", "sgpr", "--num-inducing", "16", "--quiet", "-o", str(tmp_path / "s.pt")]
    assert main(["fit", str(data), "--target", "y", *arguments]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "(collapsed bound (Titsias 2009) per training row " in out[0]
    assert "validation (8 rows, in the units of 'y')" in out[1]  # a named model: all rows score
