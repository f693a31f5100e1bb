"""Leave-one-table-out checks of ``zonal fit --model auto``'s rules (issue 27), from a development
suite run (``benchmarks/fit_suite.py``, whose zonal units carry ``diagnostics``:
``zonal.tabular.diagnostics``).

For each rule, on each regression table left out in turn, the rule's setting is chosen on the
other tables (the one that minimises the geometric mean over them of the test-MSE ratio
auto / RBF-ARD SVGP, means over splits) and applied to the table left out; the report gives, per
table, the setting chosen without it, its ratio there, the ratio at zonal's current setting and
the best among the settings tried (the fixed ones and the other tables' grid), and over the
suite the geometric mean of the left-out ratios against the current setting's. A rule
generalises when the left-out figures match the current setting's (or improve on them, which
says the constant should change).

Rules checked:

* **refinement gap** (``AUTO_REFINEMENT_GAP``): the harmonic SVGP joins the stack when the SGPR's
  validation log likelihood per row is within tau of the activated DGP's. Settings: tau at the
  midpoints between the other tables' observed gaps, and never / always.
* **SGPR input scales when a deep model follows** (``auto_uses_ard``): off (current), on (the
  SGPR with ARD replaces it), or both (stacking weighs them).
* **stacking against choosing** the candidate with the best validation log likelihood.
* **stacking weights** (``WEIGHTINGS``): fitted to the scoring rows as they are, the mean of
  their Bayesian bootstrap replicates (``STACKING_DRAWS``, ``auto``'s for regression), which the
  few scoring rows of a small table pull less far, or the posterior mean of the mixture weights
  under the uniform prior (``auto``'s for classifiers since session 29); no constant, so every
  table is out of sample (units with per-row records only). A classification run recorded
  before session 29 was stacked with the bootstrap weights.

The **selection ceiling** closes the regression report: per table, the ratio had every split taken
the test's best single model, or best stack, of the models ``auto`` trained and those its rules
left out. No rule can beat it, so a target it misses needs better models, not rules.

Classification: how often the candidate of the best validation log likelihood is the test's
best, the selection ceiling, and ``auto``'s stack of its classifiers under each weighting.

    .venv/bin/python benchmarks/fit_rules.py [benchmarks/results/fit_suite.json ...]
        [--baselines EARLIER.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zonal.tabular.diagnostics import REFINEMENT, SGPR_ARD
from zonal.tabular.recipes.auto import AUTO_REFINEMENT_GAP
from zonal.tabular.stacking import STACKING_DRAWS, validation_weights

RESULTS = Path(__file__).resolve().parent / "results" / "fit_suite.json"

Unit = dict[str, Any]
#: a rule's outcome on one unit: the set of models stacked
Outcome = Callable[[Unit], frozenset[str]]


def variant(unit: Unit, members: frozenset[str]) -> dict[str, Any]:
    """The test scores of the stack of ``members`` on a zonal unit."""
    for key, scores in unit["diagnostics"]["variants"].items():
        if frozenset(key.split("+")) == members:
            return scores
    raise KeyError(f"{unit['table']} split {unit['split']}: no variant {sorted(members)}")


def auto_candidates(unit: Unit) -> frozenset[str]:
    """The candidates ``auto`` trained, without its refinement (which follows a deep candidate)."""
    models = frozenset(unit["diagnostics"]["auto_models"])
    return models - {REFINEMENT} if "adgp" in models else models


def validation(unit: Unit, name: str) -> float:
    return float(variant(unit, frozenset([name]))["validation_log_likelihood"])


def with_refinement(unit: Unit, models: frozenset[str], tau: float) -> frozenset[str]:
    """``models`` plus the refinement when the best SGPR among them is within tau of the DGP,
    no exact GP is among them, and ``auto`` had the time left to train it (and it trained)."""
    shallow = [validation(unit, name) for name in models if name in ("sgpr", SGPR_ARD)]
    diagnostics = unit["diagnostics"]
    if ("adgp" not in models or "exact" in models or not shallow
            or not diagnostics["refinement_possible"]
            or REFINEMENT not in diagnostics["variants"]):  # fmt: skip
        return models
    gap = validation(unit, "adgp") - max(shallow)
    return models | {REFINEMENT} if gap < tau else models


def table_ratios(units: list[Unit], outcome: Outcome, svgp: dict[str, float]) -> dict[str, float]:
    """Per table: mean test MSE over its splits of ``outcome``'s stack / the SVGP's."""
    found: dict[str, list[float]] = {}
    for unit in units:
        found.setdefault(unit["table"], []).append(variant(unit, outcome(unit))["mse"])
    return {table: float(np.mean(values)) / svgp[table] for table, values in found.items()}


def geometric_mean(values: list[float]) -> float:
    return float(math.exp(np.mean(np.log(values)))) if values else math.nan


def leave_one_table_out(
    units: list[Unit],
    settings: dict[str, Outcome],
    current: str,
    svgp: dict[str, float],
    grid: Callable[[list[Unit]], dict[str, Outcome]] | None = None,
) -> list[dict[str, Any]]:
    """Per table left out: the setting chosen on the others (ties: the current one if among
    them, else the first), its ratio on the table, the current setting's and the best one's.
    ``grid`` builds settings from the other tables' units (a threshold's candidates)."""
    tables = list(dict.fromkeys(unit["table"] for unit in units))
    rows = []
    for left_out in tables:
        others = [unit for unit in units if unit["table"] != left_out]
        held = [unit for unit in units if unit["table"] == left_out]
        candidates = {**settings, **(grid(others) if grid else {})}
        scores = {name: geometric_mean(list(table_ratios(others, outcome, svgp).values()))
                  for name, outcome in candidates.items()}  # fmt: skip
        scores = {name: value for name, value in scores.items() if math.isfinite(value)}
        best = min(scores.values(), default=math.nan)
        tied = [name for name, value in scores.items() if value <= best * (1 + 1e-12)]
        chosen = current if current in tied or not tied else tied[0]
        on_table = {name: table_ratios(held, outcome, svgp)[left_out]
                    for name, outcome in candidates.items()}  # fmt: skip
        finite = [value for value in on_table.values() if math.isfinite(value)]
        rows.append({"table": left_out, "chosen": chosen, "loto": on_table[chosen],
                     "current": on_table[current], "best": min(finite, default=math.nan)})  # fmt: skip
    return rows


def print_rule(title: str, rows: list[dict[str, Any]], current: str) -> None:
    print(f"\n{title}\n{'table':<24}{'chosen without it':>22}{'LOTO ratio':>12}"
          f"{'current':>10}{'best':>10}")  # fmt: skip
    for row in rows:
        print(f"{row['table']:<24}{row['chosen']:>22}{row['loto']:>12.3f}{row['current']:>10.3f}"
              f"{row['best']:>10.3f}")  # fmt: skip
    loto = geometric_mean([row["loto"] for row in rows])
    now = geometric_mean([row["current"] for row in rows])
    best = geometric_mean([row["best"] for row in rows])
    worse = [row["table"] for row in rows if row["loto"] > row["current"] * 1.001]
    print(f"  geometric mean over tables left out: LOTO {loto:.4f}, current ({current}) {now:.4f}, "
          f"best per table {best:.4f}; LOTO worse than current on {worse or 'none'}")  # fmt: skip


def gap_grid(units: list[Unit]) -> dict[str, Outcome]:
    """tau at the midpoints between the observed gaps of ``units``."""
    gaps = sorted({unit["diagnostics"]["gap"] for unit in units
                   if math.isfinite(unit["diagnostics"]["gap"])})  # fmt: skip
    taus = [(a + b) / 2 for a, b in itertools.pairwise(gaps)]
    return {f"tau={tau:.6g}": (lambda unit, tau=tau: with_refinement(unit, auto_candidates(unit), tau))
            for tau in taus}  # fmt: skip


def swap_sgpr(models: frozenset[str], choice: str) -> frozenset[str]:
    if "sgpr" not in models:
        return models
    if choice == "on":
        return (models - {"sgpr"}) | {SGPR_ARD}
    return models | {SGPR_ARD} if choice == "both" else models


def regression_rules(units: list[Unit]) -> None:
    svgp = {}
    zonal = [u for u in units if u["method"] == "zonal" and u["task"] == "regression"
             and "diagnostics" in u]  # fmt: skip
    for table in dict.fromkeys(u["table"] for u in zonal):
        splits = {u["split"] for u in zonal if u["table"] == table}
        found = {u["split"]: u["mse"] for u in units
                 if (u["table"], u["method"]) == (table, "svgp") and "mse" in u}  # fmt: skip
        if splits <= set(found):  # the SVGP on the same splits as zonal's diagnostics
            svgp[table] = float(np.mean([found[split] for split in splits]))
    zonal = [u for u in zonal if u["table"] in svgp]
    if not zonal:
        print("no regression units with diagnostics and an SVGP baseline")
        return
    rounded = []  # relative differences where auto's mixture re-rounded an exact GP's kernels
    for unit in zonal:  # the recorded auto is the stack the diagnostics rebuild
        rebuilt = variant(unit, frozenset(unit["diagnostics"]["auto_models"]))["mse"]
        if unit["model"].startswith("stacked (") and "exact (" in unit["model"]:
            rounded.append(abs(rebuilt / unit["mse"] - 1))
        elif not math.isclose(rebuilt, unit["mse"], rel_tol=1e-6, abs_tol=1e-12):
            print(f"warning: {unit['table']} split {unit['split']}: auto's test MSE "
                  f"{unit['mse']:.6g} but its stack rebuilt gives {rebuilt:.6g}")  # fmt: skip
    if rounded:  # a stacked exact GP enters auto's stack as its kernels, rounded again
        print(
            f"note: {len(rounded)} units stack an exact GP with other models; where it stacked "
            "kernels, auto's mixture holds them, each weight rounded again to 1/20 "
            "(zonal.tabular.stacking.mixture_members), and the stack rebuilt from the exact GP's "
            f"own mixture differs by up to {100 * max(rounded):.1f}% in test MSE (median "
            f"{100 * float(np.median(rounded)):.2f}%)"
        )
    current = f"tau={AUTO_REFINEMENT_GAP}"
    settings: dict[str, Outcome] = {
        current: lambda u: with_refinement(u, auto_candidates(u), AUTO_REFINEMENT_GAP),
        "never": auto_candidates,
        "always": lambda u: with_refinement(u, auto_candidates(u), math.inf),
    }
    rows = leave_one_table_out(zonal, settings, current, svgp, grid=gap_grid)
    print_rule("rule: refinement gap (AUTO_REFINEMENT_GAP)", rows, current)

    ard: dict[str, Outcome] = {
        choice: (lambda u, c=choice: with_refinement(u, swap_sgpr(auto_candidates(u), c),
                                                     AUTO_REFINEMENT_GAP))
        for choice in ("off", "on", "both")
    }  # fmt: skip
    usable = [u for u in zonal if SGPR_ARD in u["diagnostics"]["variants"] or
              "sgpr" not in auto_candidates(u)]  # fmt: skip
    rows = leave_one_table_out(usable, ard, "off", svgp)
    print_rule("rule: the SGPR's input scales when a deep model follows (auto_uses_ard)", rows,
               "off")  # fmt: skip
    seconds = [(u["diagnostics"]["seconds"].get("sgpr"), u["diagnostics"]["seconds"].get(SGPR_ARD))
               for u in usable if SGPR_ARD in u["diagnostics"]["seconds"]]  # fmt: skip
    if seconds:
        print(
            f"  SGPR seconds without / with input scales (mean over units): "
            f"{np.mean([a for a, _ in seconds]):.1f} / {np.mean([b for _, b in seconds]):.1f}"
        )

    def chosen(unit: Unit) -> frozenset[str]:
        models = frozenset(unit["diagnostics"]["auto_models"])
        return frozenset([max(models, key=lambda name: validation(unit, name))])

    rows = leave_one_table_out(zonal, {"stack": lambda u: frozenset(u["diagnostics"]["auto_models"]),
                                       "choose": chosen}, "stack", svgp)  # fmt: skip
    print_rule("rule: stack the candidates, or choose the best by validation", rows, "stack")
    weighting_rule(zonal, svgp)
    selection_ceiling(zonal, svgp)
    gap_rows(units)


def gap_rows(units: list[Unit]) -> None:
    """Per regression table whose pooled test-MSE ratio to the SVGP is above 1.05: how much of the
    gap one test row carries. For each split, the row where zonal's squared error exceeds the
    SVGP's the most and its share of the split's gap sum_i (e_i - e'_i); then the pooled ratio
    with each split's such row left out. A ratio that falls to about 1 without one row a split is
    a few rows' matter (an anomaly, or a small test set), not the table's; the paired bootstrap
    interval of ``fit_suite.py`` says the same in another way."""
    zonal = {(u["table"], u["split"]): u for u in units
             if u["method"] == "zonal" and u["task"] == "regression" and "test_rows" in u}  # fmt: skip
    svgp = {(u["table"], u["split"]): u for u in units
            if u["method"] == "svgp" and u["task"] == "regression" and "test_rows" in u}  # fmt: skip
    header = False
    for table in dict.fromkeys(table for table, _ in zonal):
        splits = sorted(s for t, s in zonal if t == table and (t, s) in svgp)
        errors = [(np.asarray(zonal[table, s]["test_rows"]["squared_error"]),
                   np.asarray(svgp[table, s]["test_rows"]["squared_error"])) for s in splits]  # fmt: skip
        if not errors or any(len(ours) != len(theirs) for ours, theirs in errors):
            continue
        ratio = sum(ours.sum() for ours, _ in errors) / sum(theirs.sum() for _, theirs in errors)
        if ratio <= 1.05:
            continue
        if not header:
            print("\nrows carrying the gap (tables above 1.05): per split, the row of the largest "
                  "excess over the SVGP's squared error and its share of the split's gap")  # fmt: skip
            header = True
        shares, kept_ours, kept_theirs = [], 0.0, 0.0
        for split, (ours, theirs) in zip(splits, errors, strict=True):
            row = int(np.argmax(ours - theirs))
            gap = float((ours - theirs).sum())
            share = f"{(ours[row] - theirs[row]) / gap:.2f}" if gap > 0 else "(no gap)"
            shares.append(f"split {split} row {row}: {share}")
            kept_ours += float(ours.sum() - ours[row])
            kept_theirs += float(theirs.sum() - theirs[row])
        print(f"{table:<24}ratio {ratio:.3f}, without those rows {kept_ours / kept_theirs:.3f}; "
              + "; ".join(shares))  # fmt: skip


def test_best(unit: Unit, singles: bool) -> frozenset[str]:
    """The variant with the least test MSE on ``unit`` among its single models (``singles``) or
    among every variant (each stack too): what no rule that sees only the training rows can
    beat."""
    variants = unit["diagnostics"]["variants"]
    names = [name for name in variants if not singles or "+" not in name]
    return frozenset(min(names, key=lambda name: variants[name]["mse"]).split("+"))


def selection_ceiling(units: list[Unit], svgp: dict[str, float]) -> None:
    """Per table, ``auto``'s ratio against the ratio had every split taken the test's best single
    model, or the test's best stack, of the models ``auto`` trained and those its rules left out:
    the least any selection or stacking rule over these models could reach. When that ceiling
    misses a target, only better models (not rules) can meet it."""
    outcomes: dict[str, Outcome] = {
        "auto": lambda u: frozenset(u["diagnostics"]["auto_models"]),
        "best single": lambda u: test_best(u, singles=True),
        "best stack": lambda u: test_best(u, singles=False),
    }
    ratios = {name: table_ratios(units, outcome, svgp) for name, outcome in outcomes.items()}
    print(
        "\nthe selection ceiling: test-MSE ratio to the SVGP had each split taken the test's best"
    )
    print(f"{'table':<24}" + "".join(f"{name:>14}" for name in outcomes))
    for table in ratios["auto"]:
        print(f"{table:<24}" + "".join(f"{ratios[name][table]:>14.3f}" for name in outcomes))
    for name, values in ratios.items():
        above = sorted(table for table, ratio in values.items() if ratio > 1.05)
        print(f"  {name}: geometric mean {geometric_mean(list(values.values())):.4f}, worst "
              f"{max(values.values()):.3f}, above 1.05: {above or 'none'}")  # fmt: skip


#: the stacking weights compared (``validation_weights``): fitted to the scoring rows as they are
#: (``auto``'s until session 19), the mean of ``STACKING_DRAWS`` Bayesian-bootstrap replicates of
#: them (``auto``'s since), the posterior mean of the mixture weights under the Dirichlet(1) and
#: Dirichlet(1/2) priors (session 28: not adopted, docs/fit_evidence.md)
WEIGHTINGS: dict[str, dict[str, Any]] = {
    "plain": {"draws": 0},
    "bagged": {"draws": STACKING_DRAWS},
    "posterior": {"concentration": 1.0},
    "posterior 1/2": {"concentration": 0.5},
}


def recorded_weights(
    models: dict[str, Any], names: list[str], weighting: str, seed: int
) -> torch.Tensor:
    """The stacking weights [K] of the recorded models ``names`` from their validation log
    densities, by ``validation_weights`` with the settings of ``WEIGHTINGS[weighting]``."""
    densities = torch.tensor(
        [models[n]["validation_log_density"] for n in names], dtype=torch.float64
    ).T  # [n, K]
    weights = validation_weights(densities, seed=seed, **WEIGHTINGS[weighting])
    assert weights is not None
    return weights


def stack_scores(
    unit: Unit, members: frozenset[str], weighting: str = "plain", seed: int = 0
) -> tuple[float, float]:
    """(test MSE, test TLL) of the stack of ``members`` rebuilt from the unit's per-row records
    (the TLL of the Gaussian with the mixture's moments, as ``zonal fit`` scores a stack)
    (``suite_rows.model_rows``): weights by ``recorded_weights`` (``"bagged"`` with the fit's
    seed, the split, are ``auto``'s)."""
    diagnostics = unit["diagnostics"]
    names = [name for name in diagnostics["auto_models"] if name in members] + sorted(
        members - set(diagnostics["auto_models"])
    )
    models = diagnostics["models"]
    weights = recorded_weights(models, names, weighting, seed)  # [K]
    means = torch.tensor([models[n]["mean"] for n in names], dtype=torch.float64).T  # [T, K]
    variances = torch.tensor([models[n]["variance"] for n in names], dtype=torch.float64).T
    mean = means @ weights  # [T]
    variance = (variances + means.square()) @ weights - mean.square()  # [T]
    targets = torch.tensor(diagnostics["test_targets"], dtype=torch.float64)  # [T]
    tll = -0.5 * (torch.log(2 * math.pi * variance) + (targets - mean).square() / variance)
    return float((mean - targets).square().mean()), float(tll.mean())


def weighting_rule(units: list[Unit], svgp: dict[str, float]) -> None:
    """``auto``'s stack of its own candidates under each of ``WEIGHTINGS``, per table (means over
    splits): test MSE / SVGP's and test TLL; rules with no constant, so every table is out of
    sample. Units without per-row records are left out."""
    usable = [u for u in units if "models" in u["diagnostics"]]
    if not usable:
        print("\nrule: stacking weights: no units with per-row records (fit_suite.py's models)")
        return
    found: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for unit in usable:
        members = frozenset(unit["diagnostics"]["auto_models"])
        entry = found.setdefault(unit["table"], {name: [] for name in WEIGHTINGS})
        for name in WEIGHTINGS:
            entry[name].append(stack_scores(unit, members, name, seed=unit["split"]))
    print("\nrule: stacking weights (" + ", ".join(WEIGHTINGS) + "): test MSE / SVGP's, then "
          "test TLL, means over splits")  # fmt: skip
    print(f"{'table':<24}" + "".join(f"{name:>15}" for name in WEIGHTINGS)
          + "".join(f"{name + ' TLL':>19}" for name in WEIGHTINGS))  # fmt: skip
    ratios: dict[str, list[float]] = {name: [] for name in WEIGHTINGS}
    tlls: dict[str, list[float]] = {name: [] for name in WEIGHTINGS}
    for table, entry in found.items():
        for name in WEIGHTINGS:
            mse, tll = np.mean(entry[name], axis=0)
            ratios[name].append(float(mse) / svgp[table])
            tlls[name].append(float(tll))
        print(f"{table:<24}" + "".join(f"{ratios[name][-1]:>15.3f}" for name in WEIGHTINGS)
              + "".join(f"{tlls[name][-1]:>19.3f}" for name in WEIGHTINGS))  # fmt: skip
    for name in WEIGHTINGS:
        worst = max(range(len(found)), key=lambda index: ratios[name][index])
        print(f"  {name}: geometric mean {geometric_mean(ratios[name]):.4f}, mean TLL "
              f"{np.mean(tlls[name]):.4f}, worst {list(found)[worst]} "
              f"{ratios[name][worst]:.3f} ({len(found)} tables)")  # fmt: skip


def classification_choice(units: list[Unit]) -> None:
    zonal = [u for u in units if u["method"] == "zonal" and u["task"] == "classification"
             and "diagnostics" in u]  # fmt: skip
    if not zonal:
        return
    print("\nclassification: auto chooses the candidate with the best validation log likelihood")
    print(
        f"{'table':<24}{'split':>6}{'chosen':>16}{'test TLL':>10}{'best on test':>16}{'its TLL':>10}"
    )
    agree = 0
    for unit in zonal:
        variants = unit["diagnostics"]["variants"]
        picked = max(variants, key=lambda name: variants[name]["validation_log_likelihood"])
        best = max(variants, key=lambda name: variants[name]["tll"])
        agree += picked == best
        print(f"{unit['table']:<24}{unit['split']:>6}{picked:>16}{variants[picked]['tll']:>10.4f}"
              f"{best:>16}{variants[best]['tll']:>10.4f}")  # fmt: skip
    print(f"  validation picked the test's best on {agree} of {len(zonal)} splits")
    classification_ceiling(zonal)
    mixtures = [u for u in zonal if "models" in u["diagnostics"]]
    if mixtures:
        classifier_mixtures(mixtures)


def classification_ceiling(units: list[Unit]) -> None:
    """Per table, means over splits of ``auto``'s test accuracy and TLL against the test-best
    accuracy and the test-best TLL on each split among its models, their stacks (plain weights)
    and ``auto``'s own mixture (bootstrap weights): the selection ceiling of
    ``selection_ceiling``, per metric."""
    found: dict[str, list[tuple[float, float, float, float]]] = {}
    for unit in units:
        scores = [*unit["diagnostics"]["variants"].values(), unit]
        found.setdefault(unit["table"], []).append((
            unit["accuracy"], unit["tll"], max(v["accuracy"] for v in scores),
            max(v["tll"] for v in scores)))  # fmt: skip
    print("\nclassification: the selection ceiling (each split's test-best accuracy and TLL)")
    print(f"{'table':<24}{'auto accuracy':>15}{'ceiling':>10}{'auto TLL':>10}{'ceiling':>10}")
    for table, rows in found.items():
        accuracy, tll, best_accuracy, best_tll = np.mean(rows, axis=0)
        print(f"{table:<24}{accuracy:>15.4f}{best_accuracy:>10.4f}{tll:>10.3f}{best_tll:>10.3f}")


def mixture_scores(unit: Unit, weighting: str = "plain", seed: int = 0) -> tuple[float, float]:
    """(test accuracy, test TLL) of the mixture sum_k w_k p_k(class | x) of ``auto``'s
    classifiers, rebuilt from the unit's per-row records (``suite_rows.classifier_rows``), with
    the stacking weights ``recorded_weights`` gives their validation log densities, rounded as
    ``auto`` rounds stacks."""
    diagnostics = unit["diagnostics"]
    names = list(diagnostics["auto_models"])
    models = diagnostics["models"]
    weights = recorded_weights(models, names, weighting, seed)  # [K]
    probabilities = torch.stack(
        [torch.tensor(models[n]["probabilities"], dtype=torch.float64) for n in names], -1
    )  # [T, C, K]
    mixture = probabilities @ weights  # [T, C]
    labels = torch.tensor(diagnostics["test_targets"])  # [T]
    picked = (
        mixture.gather(1, labels[:, None]).squeeze(1).clamp(min=torch.finfo(torch.float64).tiny)
    )
    return float((mixture.argmax(-1) == labels).double().mean()), float(picked.log().mean())


def classifier_mixtures(units: list[Unit]) -> None:
    """``auto``'s choice of one classifier against the stacked mixture of its classifiers under
    each of ``WEIGHTINGS``, per table (means over splits); no constant, every table out of
    sample."""
    print("\nclassification: auto's choice against stacking its classifiers (weights: "
          + ", ".join(WEIGHTINGS) + "); accuracy / TLL")  # fmt: skip
    print(f"{'table':<24}{'chosen':>18}" + "".join(f"{name:>18}" for name in WEIGHTINGS))
    found: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for unit in units:
        entry = found.setdefault(unit["table"], {"chosen": []} | {name: [] for name in WEIGHTINGS})
        variants = unit["diagnostics"]["variants"]  # one model chosen: auto's rule before 20
        picked = max(variants, key=lambda name: variants[name]["validation_log_likelihood"])
        entry["chosen"].append((variants[picked]["accuracy"], variants[picked]["tll"]))
        for name in WEIGHTINGS:
            entry[name].append(mixture_scores(unit, name, seed=unit["split"]))
    totals: dict[str, list[tuple[float, float]]] = {}
    for table, entry in found.items():
        cells = ""
        for key, values in entry.items():
            accuracy, tll = np.mean(values, axis=0)
            totals.setdefault(key, []).append((float(accuracy), float(tll)))
            cells += f"{f'{accuracy:.4f} / {tll:.3f}':>18}"
        print(f"{table:<24}{cells}")
    print("  means over tables (accuracy / TLL): " + ", ".join(
        f"{key} {np.mean([a for a, _ in values]):.4f} / {np.mean([t for _, t in values]):.4f}"
        for key, values in totals.items()))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path, default=[RESULTS],
                        help="one or more fit_suite.py results, their units taken together")  # fmt: skip
    parser.add_argument("--baselines", type=Path,
                        help="the results whose svgp units the ratios divide by, for a run of "
                        "zonal alone (fit_suite.py --methods zonal --baselines); the tables it "
                        "has no svgp units of keep the results' own")  # fmt: skip
    args = parser.parse_args()
    units = [unit for path in args.results for unit in json.loads(path.read_text())["units"]]
    if args.baselines is not None:
        baselines = [u for u in json.loads(args.baselines.read_text())["units"]
                     if u["method"] == "svgp"]  # fmt: skip
        covered = {u["table"] for u in baselines}
        units = [u for u in units if u["method"] != "svgp" or u["table"] not in covered]
        units += baselines
    rows = max((u["num_train"] for u in units), default=0)
    print(
        f"{', '.join(map(str, args.results))}: {len(units)} units; the largest table has {rows} "
        "training rows (AUTO_DEEP_MAX_ROWS, a time rule, is only checked where a table exceeds it)"
    )
    regression_rules(units)
    classification_choice(units)


if __name__ == "__main__":
    main()
