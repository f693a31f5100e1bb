"""The exact GP's input scales chosen by the Bayesian information criterion (``ard_by_bic``,
``zonal.tabular.recipes.exact.choose_input_scales``; ``zonal fit --ard-by-bic``)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

from zonal.cli import main
from zonal.models.training import TrainingControl
from zonal.tabular import fitting
from zonal.tabular.candidates import recipe_options, screened_start, small_table_options
from zonal.tabular.diagnostics import FitDiagnostics
from zonal.tabular.fitting import fit_data
from zonal.tabular.recipes import exact as exact_recipe
from zonal.tabular.recipes import resolve_spec
from zonal.tabular.recipes.exact import train_exact
from zonal.tabular.recipes.registry import Fit, TrainingInterrupted
from zonal.tabular.saved import load_model
from zonal.tabular.split import Split
from zonal.tabular.targets import REGRESSION


def relevant_first_input(rows: int, dims: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised rows x [rows, dims] whose target depends on the first input alone."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, dims, generator=generator, dtype=torch.float64)  # [N, D]
    y = torch.sin(2 * x[:, 0]) + 0.05 * torch.randn(rows, generator=generator, dtype=torch.float64)
    return x, (y - y.mean()) / y.std()


def test_auto_gives_ard_by_bic_to_its_exact_gp_alone():
    among = ["sgpr", "exact", "adgp"]
    exact = recipe_options("exact", {"ard_by_bic": True}, True, among)
    assert exact["ard_by_bic"] is True and exact["ard"] is False
    assert "ard_by_bic" not in recipe_options("sgpr", {"ard_by_bic": True}, True, among)
    assert recipe_options("exact", {}, True, among)["ard"] is True  # auto's default: scales


def test_ard_by_bic_is_the_exact_gps_option_without_ard_and_in_the_spec_only_when_on():
    assert "ard_by_bic" not in resolve_spec(3, model="exact")
    assert resolve_spec(3, model="exact", ard_by_bic=True)["ard_by_bic"] is True
    with pytest.raises(
        ValueError, match=r"ard_by_bic \(--ard-by-bic\) is for the exact GP's fit, not sgpr's"
    ):
        resolve_spec(3, model="sgpr", ard_by_bic=True)
    with pytest.raises(ValueError, match="chooses the exact GP's input scales itself"):
        resolve_spec(3, model="exact", ard=True, ard_by_bic=True)


@pytest.mark.parametrize("ard", [True, False])
def test_ard_by_bic_with_ard_given_is_refused_before_anything_trains(ard, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a candidate trained")

    monkeypatch.setattr(fitting, "train_candidates", never)
    x = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(ValueError, match=r"drop ard \(--ard or --no-ard\)"):
        fit_data(x, x[:, 0], feature_columns=list("abc"), ard_by_bic=True, ard=ard)


def fake_fits(monkeypatch, per_row: dict[bool, float], calls: list[bool], late: bool = False):
    """Replace the exact recipe's ``train_exact`` (as ``choose_input_scales`` calls it) by fits
    whose best family has log p(y) / N ``per_row[ard]``; ``late`` makes each take 0.1 s."""

    def fitted(spec, x, y, control):
        calls.append(spec["ard"])
        if late:
            time.sleep(0.1)
        return Fit(None, dict(spec), per_row[spec["ard"]], {"chordal-se": per_row[spec["ard"]]})

    monkeypatch.setattr(exact_recipe, "train_exact", fitted)


@pytest.mark.parametrize("margin, kept", [(0.01, True), (-0.01, False)])
def test_the_scales_cost_half_log_n_per_column_that_varies(margin, kept, monkeypatch):
    """40 rows of 5 columns, 2 constant: the fit with scales is kept exactly when its log p(y)
    exceeds the other's by more than (3 / 2) log 40 nats (a count of 5, or of 6, fails)."""
    x = torch.randn(40, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x[:, 3:] = 0.0  # constant columns, standardised
    gain = 0.5 * 3 * math.log(40) + margin
    calls: list[bool] = []
    fake_fits(monkeypatch, {False: 0.0, True: gain / 40}, calls)
    spec = resolve_spec(5, model="exact", kernel="chordal-se", ard_by_bic=True)
    fit = exact_recipe.choose_input_scales(spec, x, torch.zeros(40, dtype=torch.float64),
                                           TrainingControl())  # fmt: skip
    assert fit.spec["ard"] is kept and calls == [False, True]
    assert exact_recipe.information_criterion(10.0, 3, 40) == pytest.approx(10 - 1.5 * math.log(40))


def test_a_first_fit_that_spends_the_time_keeps_it_and_warns(monkeypatch):
    calls: list[bool] = []
    fake_fits(monkeypatch, {False: 0.0, True: 100.0}, calls, late=True)
    spec = resolve_spec(2, model="exact", kernel="chordal-se", ard_by_bic=True)
    x = torch.randn(20, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    control = TrainingControl(deadline=time.monotonic() + 0.05)  # the first fit outlasts it
    with pytest.warns(UserWarning, match="the fit with them was not trained"):
        fit = exact_recipe.choose_input_scales(spec, x, torch.zeros(20, dtype=torch.float64),
                                               control)  # fmt: skip
    assert fit.spec["ard"] is False and calls == [False]


def test_the_fit_with_scales_starts_at_the_screens_scales_and_the_fit_without_has_none(
    monkeypatch,
):
    """Under ``auto`` with ``ard_by_bic`` given on more than 500 rows the relevance screen's
    start (``initial_input_scales``, ``screened_start``) reaches the exact GP's fit with scales
    and not the one without (which has no scales)."""
    names = ["sgpr", "exact", "adgp"]
    x, y = relevant_first_input(600, 3, seed=3)
    split = Split(x, y, x[:0], y[:0])
    screened = screened_start(names, split, REGRESSION, 0, {"ard_by_bic": True})
    start = screened["initial_input_scales"]
    assert len(start) == 3 and start[0] > max(start[1:])  # the relevant input leads
    options = recipe_options("exact", screened, True, names)
    assert options["ard"] is False and options["initial_input_scales"] == start
    spec = resolve_spec(3, model="exact", kernel="chordal-se", **options)
    with pytest.raises(ValueError, match="give them with ard"):
        resolve_spec(3, model="exact", initial_input_scales=start)
    specs: list[dict] = []

    def fitted(spec, x, y, control):
        specs.append(dict(spec))
        return Fit(None, dict(spec), 0.0, {"chordal-se": 0.0})

    monkeypatch.setattr(exact_recipe, "train_exact", fitted)
    x = torch.randn(30, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    exact_recipe.choose_input_scales(spec, x, torch.zeros(30, dtype=torch.float64),
                                     TrainingControl())  # fmt: skip
    assert [s["ard"] for s in specs] == [False, True]
    assert "initial_input_scales" not in specs[0] and specs[1]["initial_input_scales"] == start


def test_ctrl_c_in_the_fit_with_scales_keeps_the_fit_without_them(monkeypatch):
    def fitted(spec, x, y, control):
        if spec["ard"]:
            raise KeyboardInterrupt
        return Fit(None, dict(spec), -1.0, {"chordal-se": -1.0})

    monkeypatch.setattr(exact_recipe, "train_exact", fitted)
    spec = resolve_spec(2, model="exact", kernel="chordal-se", ard_by_bic=True)
    x = torch.randn(20, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with pytest.raises(TrainingInterrupted) as interrupt:
        exact_recipe.choose_input_scales(spec, x, torch.zeros(20, dtype=torch.float64),
                                         TrainingControl())  # fmt: skip
    assert interrupt.value.fit.spec["ard"] is False and interrupt.value.fit.objective == -1.0


def test_ctrl_c_in_the_first_fit_is_the_users_interrupt(monkeypatch):
    def fitted(spec, x, y, control):
        raise KeyboardInterrupt

    monkeypatch.setattr(exact_recipe, "train_exact", fitted)
    spec = resolve_spec(2, model="exact", kernel="chordal-se", ard_by_bic=True)
    x = torch.randn(20, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with pytest.raises(KeyboardInterrupt):
        exact_recipe.choose_input_scales(spec, x, torch.zeros(20, dtype=torch.float64),
                                         TrainingControl())  # fmt: skip


@pytest.mark.parametrize("rows, dims, seed", [(12, 6, 0), (100, 4, 1)])
def test_the_choice_keeps_the_fit_of_the_larger_bic(rows, dims, seed):
    """The kept fit is the one of larger BIC between the two fits trained separately (an
    independent path: ``train_exact`` with ``ard`` False and True), N max_k log p(y)/N - k/2 log N
    with k = D for the input scales."""
    x, y = relevant_first_input(rows, dims, seed)
    spec = resolve_spec(dims, model="exact", kernel="chordal-se", hyperpriors=True)
    chosen = train_exact({**spec, "ard_by_bic": True}, x, y, TrainingControl())
    separate = {ard: train_exact({**spec, "ard": ard}, x, y, TrainingControl())
                for ard in (False, True)}  # fmt: skip
    bic = {ard: rows * max(fit.candidates.values()) - (0.5 * dims * math.log(rows) if ard else 0)
           for ard, fit in separate.items()}  # fmt: skip
    best = max(bic, key=lambda ard: bic[ard])
    assert chosen.spec["ard"] is best and "ard_by_bic" not in chosen.spec
    assert chosen.objective == pytest.approx(separate[best].objective, abs=1e-8)
    assert abs(bic[True] - bic[False]) > 1.0  # the case is not a tie


def test_input_scales_are_learned_where_the_rows_carry_them_and_not_where_they_do_not():
    """One relevant input of 4 on 100 rows: the scales; a target of noise alone: none."""
    spec = resolve_spec(4, model="exact", kernel="chordal-se", hyperpriors=True, ard_by_bic=True)
    x, y = relevant_first_input(100, 4, 1)
    assert train_exact(spec, x, y, TrainingControl()).spec["ard"] is True
    noise = torch.randn(100, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert train_exact(spec, x, noise, TrainingControl()).spec["ard"] is False


def test_zonal_fit_ard_by_bic_fits_the_named_exact_gp_and_saves_the_choice(tmp_path, monkeypatch):
    chosen = []
    choose = exact_recipe.choose_input_scales

    def recorded(spec, x, y, control):
        fit = choose(spec, x, y, control)
        chosen.append(fit.spec["ard"])
        return fit

    monkeypatch.setattr(exact_recipe, "choose_input_scales", recorded)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 3))
    y = np.sin(2 * x[:, 0]) + 0.05 * rng.normal(size=30)
    table = tmp_path / "t.csv"
    np.savetxt(table, np.column_stack([x, y]), delimiter=",", header="a,b,c,y", comments="")
    output = tmp_path / "m.pt"
    code = main(["fit", str(table), "--target", "y", "--model", "exact", "--ard-by-bic",
                 "--output", str(output), "--quiet"])  # fmt: skip
    assert code == 0 and len(chosen) == 1
    spec = load_model(output).spec
    assert spec["ard"] is chosen[0] and "ard_by_bic" not in spec


@pytest.mark.parametrize(
    "extra, message",
    [(["--model", "sgpr"], "is for the exact GP's fit, not sgpr's"),
     (["--model", "exact", "--ard"], "chooses the exact GP's input scales itself"),
     (["--no-ard"], "chooses the exact GP's input scales itself"),
     (["--chunk-size", "10"], "which the streamed fit (--chunk-size) does not train")],
)  # fmt: skip
def test_zonal_fit_ard_by_bic_is_refused_where_it_cannot_hold(extra, message, tmp_path, capsys):
    table = tmp_path / "t.csv"
    rng = np.random.default_rng(1)
    np.savetxt(table, rng.normal(size=(20, 3)), delimiter=",", header="a,b,y", comments="")
    code = main(["fit", str(table), "--target", "y", "--ard-by-bic", *extra,
                 "--output", str(tmp_path / "m.pt"), "--quiet"])  # fmt: skip
    assert code != 0 and message in capsys.readouterr().err


def test_auto_fits_its_exact_gp_by_map_with_scales_by_bic_on_at_most_128_training_rows():
    """``small_table_options``: on at most 128 training rows with the exact GP among ``auto``'s
    candidates, hyperpriors and ard_by_bic are on unless the user set them or ard."""
    names = ["sgpr", "exact", "adgp"]

    def split(rows: int) -> Split:
        x = torch.zeros(rows, 2, dtype=torch.float64)
        return Split(x, torch.zeros(rows, dtype=torch.float64), x[:0], x[:0, 0])

    assert small_table_options(names, split(128), {}) == {"hyperpriors": True, "ard_by_bic": True}
    assert small_table_options(names, split(129), {}) == {}
    assert small_table_options(["sgpr", "adgp"], split(100), {}) == {}
    told = small_table_options(names, split(100), {"hyperpriors": False, "ard": True})
    assert told == {"hyperpriors": False, "ard": True}
    assert small_table_options(names, split(100), {"ard": None})["ard_by_bic"] is True


def test_auto_on_a_small_table_trains_the_map_exact_gp_beside_its_other_candidates():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4))
    y = np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=60)
    diagnostics = FitDiagnostics()
    fit_data(x, y, feature_columns=list("abcd"), budget=12, seed=0, diagnostics=diagnostics)
    exact = diagnostics.fits["exact"].spec
    assert exact["hyperpriors"] is True and isinstance(exact["ard"], bool)
    assert "ard_by_bic" not in exact
    assert {"sgpr", "adgp"} <= set(diagnostics.fits)
    assert all("hyperpriors" not in diagnostics.fits[name].spec for name in ("sgpr", "adgp"))
