"""The ``exact`` recipe of ``zonal fit`` and its place in ``auto``: a named exact GP fits, saves
and reloads to the same predictions, conditioned on the validation rows; ``auto`` trains it after
the SGPR on a small table and its component then holds every row; "auto" stacks the kernel
families by their leave-one-out densities (weights checked against scipy's optimiser on
leave-one-out densities computed by deleting each row), on a subsample above its size; the
stacked exact GP joins ``auto``'s stack as its kernels; the size rule extrapolates timed
evaluations by (N / n)^2 and (N / n)^3 against the share of the budget; options it cannot use
are refused by name.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
import scipy.stats
import torch

from zonal.cli import main
from zonal.models import ExactZonalGP, StackedModel
from zonal.tabular import candidates, fitting
from zonal.tabular.fitting import fit_data
from zonal.tabular.predict import predict_data
from zonal.tabular.recipes import (
    EXACT_AUTO_KERNELS,
    EXACT_EVALUATIONS,
    EXACT_MAX_ROWS,
    exact_fits_budget,
)
from zonal.tabular.recipes import exact as exact_recipe
from zonal.tabular.saved import load_model, save_model


def table(num_rows: int = 150, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_rows, 3))
    y = np.sin(2 * x[:, 0]) + 0.3 * x[:, 1] + 0.05 * rng.standard_normal(num_rows)
    return x, y


def members_of(model) -> list:
    """The exact GPs of a fitted exact model: a stack's components, or the model itself."""
    return list(model.components) if isinstance(model, StackedModel) else [model]


def test_a_named_exact_gp_fits_conditions_on_every_row_and_reloads_the_same(tmp_path):
    x, y = table()
    fitted = fit_data(x, y, feature_columns=list("abc"), model="exact", ard=True)
    spec, model = fitted.spec, fitted.trained.model
    members = members_of(model)
    assert all(isinstance(member, ExactZonalGP) for member in members)
    assert all(len(member.train_y) == len(y) for member in members)  # validation rows too
    kernels = fitted.trained.candidates  # kernel -> log p(y) / N of each family
    assert list(kernels) == list(EXACT_AUTO_KERNELS)
    if isinstance(model, StackedModel):
        assert spec["kernel"] == "stacked" and set(spec["kernels"]) < set(kernels)
        weights = spec["kernel_weights"]
        assert model.weights.tolist() == weights and sum(weights) == pytest.approx(1.0)
        shown = " + ".join(f"{w:.2f} {k}" for w, k in zip(weights, spec["kernels"], strict=True))
        assert (
            fitted.describe() == f"exact (stacked {shown} kernels, 150 training rows, input scales)"
        )
        assert fitted.trained.objective == pytest.approx(
            sum(w * kernels[k] for w, k in zip(weights, spec["kernels"], strict=True))
        )
    else:
        assert spec["kernel"] in kernels
        assert (
            fitted.describe() == f"exact ({spec['kernel']} kernel, 150 training rows, input scales)"
        )
    assert fitted.validation["mse"] < 0.1 * np.var(y)  # in the target's units
    save_model(fitted, tmp_path / "exact.pt")
    loaded = load_model(tmp_path / "exact.pt")
    assert loaded.describe() == fitted.describe()
    before, after = predict_data(fitted, x[:30]), predict_data(loaded, x[:30])
    for key in before:
        np.testing.assert_allclose(after[key], before[key], rtol=1e-12, atol=1e-12)


def deleted_row_log_densities(model: ExactZonalGP) -> np.ndarray:
    """log p(y_i | y_-i) [N] by conditioning a copy on the other rows, row by row."""
    x, y = model.train_x, model.train_y
    densities = []
    for row in range(len(y)):
        others = torch.cat([torch.arange(row), torch.arange(row + 1, len(y))])
        copy = exact_recipe.build_exact({"kernel": "arccos", "input_dim": 3, "ard": True})
        copy.kernel, copy.input_map, copy.likelihood = (
            model.kernel,
            model.input_map,
            model.likelihood,
        )
        copy.constant = model.constant
        copy.set_training_data(x[others], y[others])
        mean, variance = copy.predict(x[row : row + 1], include_noise=True)
        densities.append(
            scipy.stats.norm(float(mean), float(variance) ** 0.5).logpdf(float(y[row]))
        )
    return np.array(densities)


def test_the_kernel_families_are_stacked_by_their_leave_one_out_densities():
    """The weights maximise the mixture's mean LOO log density: scipy's optimiser over the
    simplex on densities computed by deleting each row agrees within the rounding to 1/20."""
    x, y = table(60, seed=0)  # an interior optimum: 0.75 / 0.25
    inputs, targets = torch.from_numpy(x), torch.from_numpy((y - y.mean()) / y.std())
    models = {}
    for kernel in ("arccos", "chordal-se"):
        spec = {"kernel": kernel, "input_dim": 3, "ard": True, "learning_rate": 1.0}
        models[kernel], _ = exact_recipe.fitted_exact_gp(spec, kernel, inputs, targets, 15, None)
    weights = exact_recipe.leave_one_out_weights(models)
    densities = np.stack([deleted_row_log_densities(model) for model in models.values()], 1)

    def minus_mixture(share: np.ndarray) -> float:
        w = np.array([share[0], 1 - share[0]])
        return -float(np.mean(np.log(np.exp(densities) @ w)))

    best = scipy.optimize.minimize_scalar(lambda a: minus_mixture(np.array([a])),
                                          bounds=(0, 1), method="bounded").x  # fmt: skip
    assert 0.05 < best < 0.95
    assert weights["arccos"] == pytest.approx(best, abs=0.5 / 20 + 1e-6)
    assert sum(weights.values()) == pytest.approx(1.0)


def test_auto_trains_the_exact_gp_after_the_sgpr_and_its_component_holds_every_row():
    x, y = table(120)
    fitted = fit_data(x, y, feature_columns=list("abc"), budget=30.0)
    candidates = [name for name in fitted.scores if name != "stacked"]
    assert candidates[:3] == ["sgpr", "exact", "adgp"]
    model = fitted.trained.model
    members = model.components if isinstance(model, StackedModel) else [model]
    exact = [member for member in members if isinstance(member, ExactZonalGP)]
    assert all(len(member.train_y) == len(y) for member in exact)


def test_auto_judges_the_exact_gp_at_its_turn_against_the_share_it_then_gets(monkeypatch):
    """The size rule runs after the SGPR, with the time left over the two candidates left (the
    exact GP and the activated DGP): more than a third of the budget. Refused, the exact GP is
    not trained and the activated DGP follows the SGPR."""
    shares = []

    def refuse(x, share):
        shares.append(share)
        return share is None  # only the size cap, asked before training, passes

    monkeypatch.setattr(candidates, "exact_fits_budget", refuse)
    monkeypatch.setattr(fitting, "exact_fits_budget", refuse)
    x, y = table(120)
    fitted = fit_data(x, y, feature_columns=list("abc"), budget=30.0)
    assert shares[0] is None and len(shares) == 2  # the cap before, the share at its turn
    sgpr_seconds = fitted.scores["sgpr"]["seconds"]
    assert 10.0 < shares[1] <= (30.0 - sgpr_seconds) / 2 + 1e-6
    assert [name for name in fitted.scores if name != "stacked"][:2] == ["sgpr", "adgp"]


def test_ctrl_c_while_the_exact_gp_is_judged_keeps_the_sgpr(monkeypatch):
    def interrupted(x, share):
        if share is not None:
            raise KeyboardInterrupt
        return True

    monkeypatch.setattr(candidates, "exact_fits_budget", interrupted)
    x, y = table(120)
    fitted = fit_data(x, y, feature_columns=list("abc"), budget=30.0)
    assert fitted.interrupted and list(fitted.scores) == ["sgpr"]
    assert fitted.describe().startswith("sgpr")


def test_the_size_rule_decides_when_the_square_and_cube_extrapolations_agree(monkeypatch):
    x = torch.zeros(2048, 3, dtype=torch.float64)
    probed = []

    def cubic(x, rows):  # two kernels, evaluations costing 1e-9 s and 2e-9 s * rows^3
        probed.append(rows)
        return [1e-9 * rows**3, 2e-9 * rows**3], rows

    monkeypatch.setattr(exact_recipe, "evaluation_seconds", cubic)
    # the choice on 512 rows (both kernels) and the costlier kernel's fit on 2048: 8.1 + 515 s
    choice = 3e-9 * 512**3 * EXACT_EVALUATIONS
    at_full_size = choice + 2e-9 * 2048**3 * EXACT_EVALUATIONS
    # the cube's bound from 512 rows holds: one probe
    assert exact_fits_budget(x, at_full_size * 1.01) and probed == [512]
    # even the square's bound from 512 rows fails: one probe
    probed.clear()
    assert not exact_fits_budget(x, choice + (at_full_size - choice) / 4 / 1.01)
    assert probed == [512]
    # between the bounds: doubled until the table itself is timed
    probed.clear()
    assert not exact_fits_budget(x, at_full_size * 0.999) and probed == [512, 1024, 2048]
    assert exact_fits_budget(x, None)
    too_many = torch.zeros(EXACT_MAX_ROWS + 1, 3, dtype=torch.float64)
    assert not exact_fits_budget(too_many, None)


def test_up_to_the_subsample_size_the_rule_charges_both_kernels_at_n(monkeypatch):
    x = torch.zeros(400, 3, dtype=torch.float64)
    monkeypatch.setattr(exact_recipe, "evaluation_seconds",
                        lambda x, rows: ([1e-9 * rows**3, 2e-9 * rows**3], rows))  # fmt: skip
    both = 3e-9 * 400**3 * EXACT_EVALUATIONS
    assert exact_fits_budget(x, both * 1.01) and not exact_fits_budget(x, both * 0.99)


def test_a_cost_that_grows_as_the_square_is_found_by_the_larger_probe(monkeypatch):
    x = torch.zeros(2048, 3, dtype=torch.float64)
    monkeypatch.setattr(exact_recipe, "evaluation_seconds",
                        lambda x, rows: ([1e-6 * rows**2], rows))  # fmt: skip
    at_full_size = 1e-6 * (512**2 + 2048**2) * EXACT_EVALUATIONS
    assert exact_fits_budget(x, at_full_size * 1.01)  # the cube from 512 rows predicted 4x


def test_the_timed_evaluation_is_of_the_subsample(monkeypatch):
    probed: list[int] = []
    build = exact_recipe.exact_gp

    def recorded(spec, x, y):
        probed.append(len(x))
        return build(spec, x, y)

    monkeypatch.setattr(exact_recipe, "exact_gp", recorded)
    seconds, rows = exact_recipe.evaluation_seconds(torch.randn(40, 2, dtype=torch.float64), 16)
    assert rows == 16 and probed == [16] * len(EXACT_AUTO_KERNELS)  # the first 16 of 40 rows
    assert len(seconds) == len(EXACT_AUTO_KERNELS) and all(0 < value < 10 for value in seconds)
    probed.clear()
    assert exact_recipe.evaluation_seconds(torch.randn(40, 2, dtype=torch.float64))[1] == 40
    assert probed == [40] * len(EXACT_AUTO_KERNELS)  # fewer rows than the probe's: all of them


def test_a_broken_leave_one_out_density_gets_weight_zero_and_all_broken_fall_back_to_log_p_y(
    monkeypatch,
):
    x, y = table(40, seed=1)
    inputs, targets = torch.from_numpy(x), torch.from_numpy(y)
    models = {}
    for kernel in ("arccos", "polynomial-decay", "chordal-se"):
        spec = {"kernel": kernel, "input_dim": 3, "ard": True, "learning_rate": 1.0}
        models[kernel], _ = exact_recipe.fitted_exact_gp(spec, kernel, inputs, targets, 10, None)
    original = ExactZonalGP.leave_one_out_log_density
    broken = {"arccos"}

    def density(model):
        values = original(model)
        return values.clone().fill_(math.nan) if model.kernel_name in broken else values

    for kernel, model in models.items():
        model.kernel_name = kernel
    monkeypatch.setattr(ExactZonalGP, "leave_one_out_log_density", density)
    weights = exact_recipe.leave_one_out_weights(models)
    assert weights["arccos"] == 0 and sum(weights.values()) == pytest.approx(1.0)
    broken.update(models)
    weights = exact_recipe.leave_one_out_weights(models)
    best = max(models, key=lambda kernel: exact_recipe.per_row_log_likelihood(models[kernel]))
    assert weights == {kernel: float(kernel == best) for kernel in models}


def test_above_the_subsample_size_families_are_weighted_there_and_continued_on_every_row(
    monkeypatch,
):
    """Each family is fitted on the same 64 random rows; those of positive LOO weight there are
    continued on all 150 rows from the hyperparameters they reached, and weighted again by their
    LOO densities on all rows."""
    monkeypatch.setattr(exact_recipe, "EXACT_PROBE_ROWS", 64)
    continued = []
    original = exact_recipe.stacked_fit

    def recorded(spec, models):
        continued.append(dict(models))
        return original(spec, models)

    monkeypatch.setattr(exact_recipe, "stacked_fit", recorded)
    x, y = table()
    fitted = fit_data(x, y, feature_columns=list("abc"), model="exact", ard=True,
                      validation_fraction=0.0)  # fmt: skip
    (models,) = continued
    inputs, targets = models[next(iter(models))].train_x, models[next(iter(models))].train_y
    rows = torch.randperm(150, generator=torch.Generator().manual_seed(0))[:64].sort().values
    on_subsample = {}
    for kernel in EXACT_AUTO_KERNELS:
        spec = {"kernel": kernel, "input_dim": 3, "ard": True, "seed": 0}
        model = exact_recipe.exact_gp(spec, inputs[rows], targets[rows])
        model.fit(max_iter=exact_recipe.EXACT_EVALUATIONS, lr=1.0)
        on_subsample[kernel] = model
    subsample_weights = exact_recipe.leave_one_out_weights(on_subsample)
    assert list(models) == [kernel for kernel, w in subsample_weights.items() if w > 0]
    for kernel, model in models.items():
        assert len(model.train_y) == 150
        # continued on every row: log p(y) / N at least what the subsample's parameters give there
        on_subsample[kernel].set_training_data(inputs, targets)
        start = exact_recipe.per_row_log_likelihood(on_subsample[kernel])
        assert exact_recipe.per_row_log_likelihood(model) >= start - 1e-9
    weights = exact_recipe.leave_one_out_weights(models)  # again, on all rows
    kept = [kernel for kernel in models if weights[kernel] > 0]
    assert members_of(fitted.trained.model) == [models[kernel] for kernel in kept]
    if len(kept) == 1:
        assert fitted.spec["kernel"] == kept[0]
    else:
        assert fitted.spec["kernels"] == kept
        assert fitted.spec["kernel_weights"] == [weights[kernel] for kernel in kept]


def test_a_stacked_exact_gp_joins_autos_stack_as_its_kernels(monkeypatch):
    """``auto``'s stack holds plain models: a stacked exact GP (0.25 arc-cosine, 0.75 chordal SE)
    given weight 0.5 beside a plain model of weight 0.5 enters as its two kernels with weights
    0.125 and 0.375, rounded to 1/20 again (largest remainder: 0.15 and 0.35)."""
    from zonal.tabular import stacking
    from zonal.tabular.split import Split
    from zonal.tabular.targets import REGRESSION

    x, y = (torch.from_numpy(array) for array in table(60))
    two = {"model": "exact", "kernel": "stacked", "kernels": ["arccos", "chordal-se"],
           "kernel_weights": [0.25, 0.75], "input_dim": 3, "ard": True}  # fmt: skip
    plain = {**exact_recipe.kernel_components(two)[0], "kernel": "polynomial-decay"}
    fits = {"exact": exact_recipe.Fit(exact_recipe.build_exact(two, x[:40]), two, 0.0),
            "other": exact_recipe.Fit(exact_recipe.build_exact(plain, x[:40]), plain, 0.0)}  # fmt: skip
    monkeypatch.setattr(stacking, "validation_weights",
                        lambda densities, seed, concentration: torch.tensor(
                            [0.5, 0.5], dtype=torch.float64))  # fmt: skip
    scores = {"exact": {"seconds": 0.0}, "other": {"seconds": 0.0}}
    fit, _ = stacking.stack_fits(fits, scores, Split(x[:40], y[:40], x[40:], y[40:]), REGRESSION,
                                 fallback="exact")  # fmt: skip
    assert [component["kernel"] for component in fit.spec["components"]] == [
        "arccos", "chordal-se", "polynomial-decay"]  # fmt: skip
    assert fit.spec["weights"] == pytest.approx([0.15, 0.35, 0.5])
    assert all("kernels" not in component for component in fit.spec["components"])
    exact_members = list(fits["exact"].model.components)
    assert list(fit.model.components) == [*exact_members, fits["other"].model]


def test_auto_leaves_the_exact_gp_out_of_classification(monkeypatch):
    x, _ = table(80)
    labels = (x[:, 0] > 0).astype(int)
    called = []
    monkeypatch.setattr(fitting, "exact_fits_budget", lambda *args: called.append(1) or True)
    fitted = fit_data(x, labels, feature_columns=list("abc"), likelihood="bernoulli",
                      budget=10.0, steps=20)  # fmt: skip
    assert "exact" not in fitted.scores and not called


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--num-inducing", "64"], "the exact GP uses every training row: drop --num-inducing"),
        (["--likelihood", "bernoulli"], "exact is the closed-form posterior of a Gaussian"),
    ],
)
def test_options_the_exact_gp_cannot_use_are_refused_by_name(extra, message, tmp_path, capsys):
    x, y = table(40)
    data = tmp_path / "t.csv"
    target = (y > 0).astype(int) if "bernoulli" in extra else y
    data.write_text("a,b,c,y\n" + "\n".join(",".join(map(str, [*row, t]))
                                            for row, t in zip(x, target, strict=True)) + "\n")  # fmt: skip
    code = main(["fit", str(data), "--target", "y", "--model", "exact", "--quiet",
                 "-o", str(tmp_path / "m.pt"), *extra])  # fmt: skip
    assert code == 1 and message in capsys.readouterr().err


@pytest.mark.parametrize("kernel", EXACT_AUTO_KERNELS)
def test_a_named_kernel_is_the_only_one_fitted(kernel):
    x, y = table(80)
    fitted = fit_data(x, y, feature_columns=list("abc"), model="exact", kernel=kernel, steps=20)
    assert set(fitted.trained.candidates) == {kernel}
    assert fitted.describe() == f"exact ({kernel} kernel, 80 training rows)"
    assert isinstance(fitted.trained.model, ExactZonalGP)


def test_the_chordal_kernels_are_the_exact_gps_only():
    x, y = table(40)
    with pytest.raises(ValueError, match="drop --kernel chordal-se"):
        fit_data(x, y, feature_columns=list("abc"), model="sgpr", kernel="chordal-se")
