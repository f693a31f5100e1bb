"""``auto`` on tables of at most 64 training rows: the exact GP alone, by type-II MAP, with input
scales where the Bayesian information criterion prefers them (``exact_alone``,
``choose_input_scales``; docs/cli.md, session 40)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zonal.models.training import TrainingControl
from zonal.tabular.candidates import recipe_options
from zonal.tabular.fitting import fit_data
from zonal.tabular.recipes import auto_candidates, resolve_spec
from zonal.tabular.recipes.auto import exact_alone
from zonal.tabular.recipes.exact import train_exact


def relevant_first_input(rows: int, dims: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised rows x [rows, dims] whose target depends on the first input alone."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, dims, generator=generator, dtype=torch.float64)  # [N, D]
    y = torch.sin(2 * x[:, 0]) + 0.05 * torch.randn(rows, generator=generator, dtype=torch.float64)
    return x, (y - y.mean()) / y.std()


def test_auto_trains_the_exact_gp_alone_up_to_64_rows():
    assert exact_alone(64) and not exact_alone(65)
    assert auto_candidates(64, 6, "gaussian", exact=True) == ["exact"]
    assert auto_candidates(65, 6, "gaussian", exact=True) == ["sgpr", "exact", "adgp"]
    assert auto_candidates(100, 6, "gaussian") == ["sgpr", "adgp"]  # no exact GP offered
    assert auto_candidates(100, 6, "bernoulli", exact=True) == ["svgp", "svgp-points", "adgp"]


def test_the_exact_gp_alone_is_fitted_by_map_with_scales_by_bic_unless_told():
    alone = recipe_options("exact", {}, True, ["exact"])
    assert alone["hyperpriors"] is True and alone["ard_by_bic"] is True and alone["ard"] is False
    told = recipe_options("exact", {"ard": True, "hyperpriors": False}, True, ["exact"])
    assert told["ard"] is True and told["hyperpriors"] is False and "ard_by_bic" not in told
    assert recipe_options("exact", {"ard": False}, True, ["exact"])["ard"] is False
    among = recipe_options("exact", {}, True, ["sgpr", "exact", "adgp"])
    assert among["ard"] is True and "ard_by_bic" not in among and "hyperpriors" not in among


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


def test_a_tiny_table_fits_the_exact_gp_alone_even_on_a_spent_budget():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 3))
    y = np.sin(x[:, 0]) + 0.1 * rng.normal(size=30)
    fitted = fit_data(x, y, feature_columns=["a", "b", "c"], budget=1e-6, seed=0)
    assert fitted.spec["model"] == "exact" and fitted.spec["hyperpriors"] is True
    assert isinstance(fitted.spec["ard"], bool) and "ard_by_bic" not in fitted.spec
    assert fitted.describe().endswith(", MAP)")
    no_map = fit_data(x, y, feature_columns=["a", "b", "c"], seed=0, hyperpriors=False, ard=True)
    assert "hyperpriors" not in no_map.spec and no_map.spec["ard"] is True
    assert no_map.describe().endswith(" training rows, input scales)")
