"""What ``auto``'s rules chose against what they left out, for checking the rules on tables they
were not chosen on (issue 27: ``benchmarks/fit_suite.py`` records it, ``benchmarks/fit_rules.py``
runs the leave-one-table-out checks).

``fit_data(..., diagnostics=FitDiagnostics())`` fits as it always does, then trains the models
two of ``auto``'s rules left out, each within the time the rule would have given it:

* the refinement (``zonal.tabular.recipes.auto_refinement``: the harmonic ``svgp`` with ARD),
  where the gap rule skipped it, within the time ``auto`` had left for it (at most
  ``AUTO_REFINEMENT_SHARE`` of the budget; not at all where too little was left, as
  ``train_refinement`` decides);
* the one-pass ``sgpr`` with input scales (``sgpr-ard``), where ``auto_uses_ard`` turned them off
  because a deep candidate follows (the share of the budget the SGPR had).

It keeps every model, trained by ``auto`` or left out, with its validation log densities measured
before any model conditions on the validation rows, and then lets each condition on all rows as
the chosen model does (``condition_on_all_rows``). ``test_scores`` scores on test rows every model
and every stack of them (the weights that ``auto``'s stacking would give that set, from the same
validation densities), so that a rule's outcome on a table can be read off for any threshold.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from zonal.tabular.candidates import auto_uses_ard, start_options, train_candidates
from zonal.tabular.metrics import class_probabilities, row_log_densities
from zonal.tabular.recipes import AUTO_REFINEMENT_SHARE, EXACT_ONLY_OPTIONS, Fit
from zonal.tabular.split import Split, validation_roles
from zonal.tabular.stacking import condition_on_all_rows, validation_weights
from zonal.tabular.targets import Target

#: the name of the counterfactual SGPR with input scales
SGPR_ARD = "sgpr-ard"
#: the refinement ``auto_refinement`` may add
REFINEMENT = "svgp"


@dataclass
class FitDiagnostics:
    """Filled by ``fit_data`` under ``model="auto"`` (module docstring); all on the fit's
    standardised scale.

    ``fits``: every model kept, by name (``auto``'s candidates, its refinement if trained, and the
    counterfactuals); ``auto_models``: the names ``auto`` itself trained, in order;
    ``candidates``: the recipes ``auto`` chose to train;
    ``validation_log_density``: per model, log p(y_i | x_i) of the validation rows [n_valid] before
    conditioning on them; ``validation_log_likelihood``: their means; ``seconds``: training time
    of each model; ``gap``: the activated DGP's validation log likelihood per row minus the
    SGPR's (what ``auto_refinement`` compares with ``AUTO_REFINEMENT_GAP``; NaN when not both);
    ``refinement_seconds``: the time ``auto``'s refinement had (what was left of its share of
    ``budget`` after the candidates; 0 when too little was left and it would have been skipped;
    None without a budget), the time the counterfactual refinement gets;
    ``overhead_seconds``: wall-clock time ``fit_data`` spent on the diagnostics (subtract it from
    a fit's time to get ``auto``'s own).
    """

    fits: dict[str, Fit] = field(default_factory=dict)
    auto_models: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    validation_log_density: dict[str, torch.Tensor] = field(default_factory=dict)
    validation_log_likelihood: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    gap: float = math.nan
    refinement_seconds: float | None = None
    budget: float | None = None
    overhead_seconds: float = 0.0
    target: Target | None = None
    #: the split whose validation rows ``auto`` scored its fits on (``validation_roles``)
    scoring: Split | None = None
    #: the fit's seed, which its stacking weights' bootstrap draws come from
    seed: int = 0

    @property
    def refinement_possible(self) -> bool:
        """Whether ``auto`` had the time to train its refinement had the gap rule asked for it
        (``train_refinement`` skips it when less than half its share of the budget is left)."""
        return self.refinement_seconds is None or self.refinement_seconds > 0

    def record(
        self,
        fits: dict[str, Fit],
        scores: dict[str, dict[str, float]],
        split: Split,
        target: Target,
        *,
        candidates: list[str],
        budget: float | None,
        time_left: float | None,
        seed: int = 0,
    ) -> None:
        """Keep ``auto``'s trained models with their validation densities (before conditioning),
        forgetting any earlier fit's. ``candidates``: the recipes ``auto`` chose to train (some may
        have failed); ``time_left``: the budget's seconds left after them, when the refinement
        would have started (None: no budget); ``seed``: the fit's (its stacking weights')."""
        started = time.perf_counter()
        self.fits, self.seconds = {}, {}
        self.validation_log_density, self.validation_log_likelihood = {}, {}
        self.target, self.budget, self.candidates = target, budget, list(candidates)
        self.seed = seed
        self.auto_models = list(fits)
        self.refinement_seconds = None
        if budget is not None and time_left is not None:
            share = AUTO_REFINEMENT_SHARE * budget
            self.refinement_seconds = min(share, time_left) if time_left >= share / 2 else 0.0
        self.scoring = validation_roles(split, True)[1]  # the rows auto scored its fits on
        for name, fit in fits.items():
            self._keep(name, fit, scores[name]["seconds"])
        sgpr = self.validation_log_likelihood.get("sgpr", math.nan)
        deep = self.validation_log_likelihood.get("adgp", math.nan)
        self.gap = deep - sgpr
        self.overhead_seconds = time.perf_counter() - started

    def train_counterfactuals(self, split: Split, seed: int, options: dict[str, Any]) -> None:
        """Train the models ``auto``'s rules left out (module docstring) and keep them."""
        started = time.perf_counter()
        try:
            self._train_counterfactuals(split, seed, options)
        finally:
            self.overhead_seconds += time.perf_counter() - started

    def _train_counterfactuals(self, split: Split, seed: int, options: dict[str, Any]) -> None:
        target = self.target
        if target is None or target.is_classification or "sgpr" not in self.fits:
            return
        trained = {name: self.fits[name] for name in self.auto_models}
        left_out: list[tuple[str, str, float | None, dict[str, Any], bool]] = []
        if (REFINEMENT not in self.auto_models and "adgp" in self.auto_models
                and self.refinement_possible):  # fmt: skip
            refinement_options = {**options, **start_options(REFINEMENT, trained, target)}
            left_out.append((REFINEMENT, REFINEMENT, self.refinement_seconds, refinement_options,
                             True))  # fmt: skip
        if not auto_uses_ard("sgpr", self.candidates) and options.get("ard") is not False:
            share = None if self.budget is None else self.budget / len(self.candidates)
            sgpr_options = {key: value for key, value in options.items()
                            if key not in EXACT_ONLY_OPTIONS}  # fmt: skip
            left_out.append((SGPR_ARD, "sgpr", share, {**sgpr_options, "ard": True}, False))
        for name, recipe, share, recipe_options, automatic in left_out:
            deadline = None if share is None else time.monotonic() + share
            try:
                fits, scores, interrupted = train_candidates(
                    [recipe], split, target, deadline, False, automatic=automatic, seed=seed,
                    options=recipe_options)  # fmt: skip
            except ValueError:  # a counterfactual that fails is left out of the record
                continue
            if interrupted:  # Ctrl-C: nothing half-trained is kept, and nothing more trained
                return
            self._keep(name, fits[recipe], scores[recipe]["seconds"])

    def condition_all(self, split: Split) -> None:
        """Let every kept model condition on the training and validation rows."""
        started = time.perf_counter()
        for fit in self.fits.values():
            condition_on_all_rows(fit.model, split)
        self.overhead_seconds += time.perf_counter() - started

    def _keep(self, name: str, fit: Fit, seconds: float) -> None:
        assert self.target is not None and self.scoring is not None
        split = self.scoring
        self.fits[name] = fit
        self.seconds[name] = seconds
        if len(split.y_valid) == 0:
            return
        density = row_log_densities(fit.model, self.target, split.x_valid, split.y_valid)
        self.validation_log_density[name] = density.detach()
        self.validation_log_likelihood[name] = float(density.mean())

    @torch.no_grad()
    def test_scores(
        self,
        x_test: torch.Tensor,
        y_test: torch.Tensor,
        seed: int = 0,
        *,
        predictions: dict[str, Any] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Test scores on standardised inputs x_test [T, D] and targets y_test [T] (standardised
        values, or indices into ``target.classes``). Regression: of every kept model and every
        stack of them (keys ``"a+b"`` in ``fits`` order), each ``{"mse", "tll", "weights"}``, the
        TLL that of the Gaussian with the predictive moments (as ``zonal fit`` scores a stack).
        Classification: of every model, ``{"accuracy", "tll"}``. Every entry also carries its
        ``validation_log_likelihood`` (a stack's: of its mixture, on the rows its weights were
        fitted to). ``predictions``: ``test_probabilities`` or ``test_moments`` of the same
        x_test and seed, when the caller has them (they are not computed again)."""
        assert self.target is not None
        names = list(self.fits)
        if self.target.is_classification:
            found: dict[str, dict[str, Any]] = {}
            if predictions is None:
                predictions = self.test_probabilities(x_test, seed)
            for name, probabilities in predictions.items():
                chosen = probabilities.gather(1, y_test.long()[:, None]).squeeze(1)  # [T]
                found[name] = {
                    "accuracy": float((probabilities.argmax(-1) == y_test).double().mean()),
                    "tll": float(chosen.clamp(min=1e-300).log().mean()),
                    "validation_log_likelihood": self.validation_log_likelihood.get(name, math.nan),
                }
            return found
        moments = self.test_moments(x_test, seed) if predictions is None else predictions
        found = {}
        for size in range(1, len(names) + 1):
            for members in itertools.combinations(names, size):
                found["+".join(members)] = self._stack_scores(members, moments, y_test)
        return found

    @torch.no_grad()
    def test_moments(
        self, x_test: torch.Tensor, seed: int = 0
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Per kept regression model, its predictive mean and variance with noise ([T], [T]) at
        standardised inputs x_test [T, D] (deep models' draws from ``seed``): with
        ``validation_log_density``, what any stack of them predicts, for weights chosen by any
        rule."""
        moments = {}
        for name, fit in self.fits.items():
            _seed_draws(fit.model, seed)
            moments[name] = fit.model.predict(x_test, include_noise=True)  # [T], [T]
        return moments

    @torch.no_grad()
    def test_probabilities(self, x_test: torch.Tensor, seed: int = 0) -> dict[str, torch.Tensor]:
        """Per kept classifier, its class probabilities [T, C] at standardised inputs x_test
        [T, D] (``class_probabilities`` with ``seed``; deep models' draws from it too): with
        ``validation_log_density``, what any mixture of them predicts."""
        assert self.target is not None
        found = {}
        for name, fit in self.fits.items():
            _seed_draws(fit.model, seed)
            found[name] = class_probabilities(fit.model, x_test, self.target, seed=seed)
        return found

    def _stack_scores(
        self,
        members: tuple[str, ...],
        moments: dict[str, tuple[torch.Tensor, torch.Tensor]],
        y_test: torch.Tensor,
    ) -> dict[str, Any]:
        """The test scores of the stack of ``members`` with the weights stacking gives them (the
        members of weight 0 left out, as ``StackedModel`` leaves them)."""
        if len(members) == 1:
            weights: torch.Tensor | None = torch.ones(1, dtype=torch.float64, device=y_test.device)
        elif self.validation_log_density:
            densities = torch.stack([self.validation_log_density[m] for m in members], 1)
            weights = validation_weights(densities, seed=self.seed)  # [K] or None
        else:
            weights = None
        if weights is None:
            return {"mse": math.nan, "tll": math.nan, "weights": [],
                    "validation_log_likelihood": math.nan}  # fmt: skip
        kept = [m for m, w in zip(members, weights.tolist(), strict=True) if w > 0]
        means = torch.stack([moments[m][0] for m in kept], 1)  # [T, K']
        variances = torch.stack([moments[m][1] for m in kept], 1)  # [T, K']
        w = weights[weights > 0].to(means)  # [K']
        mean = means @ w  # [T]
        variance = (variances + means.square()) @ w - mean.square()  # [T]
        variance = variance.clamp(min=torch.finfo(mean.dtype).tiny)
        tll = -0.5 * (torch.log(2 * math.pi * variance) + (y_test - mean).square() / variance)
        if len(members) == 1:
            valid = self.validation_log_likelihood.get(members[0], math.nan)
        else:
            densities = torch.stack([self.validation_log_density[m] for m in kept], 1)
            valid = float(torch.logsumexp(densities + w.log(), dim=1).mean())
        return {
            "mse": float((mean - y_test).square().mean()),
            "tll": float(tll.mean()),
            "weights": [float(value) for value in weights],
            "validation_log_likelihood": valid,
        }


def _seed_draws(model: Any, seed: int) -> None:
    """A deep model's predictive draws from ``seed``, as ``predict_data`` sets them."""
    if getattr(model, "_is_ensemble", False) and getattr(model, "draws_samples", True):
        setattr(model, "posterior_seed", seed)  # noqa: B010 (a plain attribute, not a Module)


__all__ = ["REFINEMENT", "SGPR_ARD", "FitDiagnostics"]
