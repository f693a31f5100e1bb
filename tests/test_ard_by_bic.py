"""The exact GP's input scales chosen by the Bayesian information criterion (``ard_by_bic``,
``zonal.tabular.recipes.exact.choose_input_scales``; ``zonal fit --ard-by-bic``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zonal.cli import main
from zonal.models.training import TrainingControl
from zonal.tabular.candidates import recipe_options, small_table_options
from zonal.tabular.diagnostics import FitDiagnostics
from zonal.tabular.fitting import fit_data
from zonal.tabular.recipes import resolve_spec
from zonal.tabular.recipes.exact import train_exact
from zonal.tabular.saved import load_model
from zonal.tabular.split import Split


def relevant_first_input(rows: int, dims: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised rows x [rows, dims] whose target depends on the first input alone."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, dims, generator=generator, dtype=torch.float64)  # [N, D]
    y = torch.sin(2 * x[:, 0]) + 0.05 * torch.randn(rows, generator=generator, dtype=torch.float64)
    return x, (y - y.mean()) / y.std()


def test_auto_gives_ard_by_bic_to_its_exact_gp_alone_and_lets_ard_override_it():
    among = ["sgpr", "exact", "adgp"]
    exact = recipe_options("exact", {"ard_by_bic": True}, True, among)
    assert exact["ard_by_bic"] is True and exact["ard"] is False
    assert "ard_by_bic" not in recipe_options("sgpr", {"ard_by_bic": True}, True, among)
    told = recipe_options("exact", {"ard_by_bic": True, "ard": False}, True, among)
    assert told["ard"] is False and told["ard_by_bic"] is True
    assert recipe_options("exact", {}, True, among)["ard"] is True  # auto's default: scales


def test_ard_by_bic_is_the_exact_gps_option_without_ard_and_in_the_spec_only_when_on():
    assert "ard_by_bic" not in resolve_spec(3, model="exact")
    assert resolve_spec(3, model="exact", ard_by_bic=True)["ard_by_bic"] is True
    with pytest.raises(ValueError, match="ard_by_bic chooses whether the exact GP"):
        resolve_spec(3, model="sgpr", ard_by_bic=True)
    with pytest.raises(ValueError, match="without ard, got model 'exact' with ard=True"):
        resolve_spec(3, model="exact", ard=True, ard_by_bic=True)


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


def test_zonal_fit_ard_by_bic_fits_the_named_exact_gp_and_saves_the_choice(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 3))
    y = np.sin(2 * x[:, 0]) + 0.05 * rng.normal(size=30)
    table = tmp_path / "t.csv"
    np.savetxt(table, np.column_stack([x, y]), delimiter=",", header="a,b,c,y", comments="")
    output = tmp_path / "m.pt"
    code = main(["fit", str(table), "--target", "y", "--model", "exact", "--ard-by-bic",
                 "--output", str(output), "--quiet"])  # fmt: skip
    assert code == 0
    spec = load_model(output).spec
    assert isinstance(spec["ard"], bool) and "ard_by_bic" not in spec


def test_zonal_fit_ard_by_bic_with_another_model_or_with_ard_is_refused(tmp_path, capsys):
    table = tmp_path / "t.csv"
    rng = np.random.default_rng(1)
    np.savetxt(table, rng.normal(size=(20, 3)), delimiter=",", header="a,b,y", comments="")
    for extra in (["--model", "sgpr"], ["--model", "exact", "--ard"]):
        code = main(["fit", str(table), "--target", "y", "--ard-by-bic", *extra,
                     "--output", str(tmp_path / "m.pt"), "--quiet"])  # fmt: skip
        assert code != 0
        assert (
            "ard_by_bic chooses whether the exact GP learns input scales" in capsys.readouterr().err
        )


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
