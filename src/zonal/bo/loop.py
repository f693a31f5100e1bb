r"""The Bayesian optimisation loop on :math:`\mathbb{S}^{d-1}` with shallow and deep zonal models
(seed 004 ch. 4).

``optimize(objective, ambient_dim, budget, model=...)`` follows the seed's protocol (sec. 4.2 and
app. A.2): ``num_initial`` = 5 points drawn uniformly on the sphere, then one point per step chosen
by maximising an acquisition function (log expected improvement by default) over the sphere
(``optimize_acqf_sphere``), the surrogate retrained after every step (from the previous step's
parameters, ``LoopSettings.warm_start``; a resumed run starts its first fit afresh). The surrogate at
each step is chosen by ``model``:

* ``"shallow"``: the exact GP with the intrinsic Matérn-5/2 kernel (``exact_sphere_gp``);
* ``"deep"``: the residual DGP (``residual_deep_gp``);
* ``"switch"``: shallow for the first ``switch_after`` steps, deep after (the seed: 180 + 20);
* ``"adaptive"`` (zonal's own rule, the seed's ch. 6 suggestion): shallow until the deep model
  predicts the most recent points better. At a check, both models are fitted to all but the last
  ``holdout`` points and score the log predictive density of those points, which each model's
  predecessor chose before seeing them; when the deep model's sum is higher the run switches, for
  good. Checks run every ``check_every`` steps once ``adaptive_min_points`` points exist.

Targets are standardised (zero mean, unit variance over the points so far) and negated for
minimisation before a model sees them; BoTorch maximises. Every step starts from its own seed
(derived from ``seed`` and the step), so a run is reproducible and the ``"switch"`` run follows the
``"shallow"`` run exactly until it switches. With ``state_path`` the state (``BOState``) is written
atomically after every evaluation and an existing file is resumed. An objective returning NaN, a
point off the sphere and a budget smaller than the initial design are named errors
(``zonal.bo.errors``) carrying the state so far, which is also saved.
"""

from __future__ import annotations

import math
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from botorch.acquisition import (
    AcquisitionFunction,
    qExpectedImprovement,
    qLogExpectedImprovement,
    qUpperConfidenceBound,
)
from botorch.models import SingleTaskGP
from botorch.models.model import Model
from botorch.sampling import SobolQMCNormalSampler
from tqdm.auto import tqdm

from zonal._validation import check_ambient_dim, unit_tolerance
from zonal.bo.acquisition_optimization import optimize_acqf_sphere
from zonal.bo.design import sobol_sphere, uniform_sphere
from zonal.bo.errors import BudgetError, ObjectiveNaNError, OffSphereError
from zonal.bo.lookahead import LOOKAHEAD_ACQUISITIONS, lookahead_acquisition
from zonal.bo.models import exact_sphere_gp, fit_deep_gp, fit_exact_gp, residual_deep_gp
from zonal.bo.state import BOState
from zonal.bo.thompson import thompson_sampling
from zonal.models import ResidualDGP

STRATEGIES = ("shallow", "deep", "switch", "adaptive")
ACQUISITIONS = ("qlogei", "qei", "qucb", "thompson", *LOOKAHEAD_ACQUISITIONS)
#: largest | ||x|| - 1 | of a point the loop evaluates
SPHERE_TOLERANCE = 1e-10


@dataclass(frozen=True)
class LoopSettings:
    """Everything of the loop that is not the problem: acquisition optimisation, the models and
    the adaptive switch (module docstring). Defaults follow seed 004 app. A where it gives them."""

    num_restarts: int = 8
    raw_samples: int = 256
    mc_samples: int = 128
    ucb_beta: float = 2.0
    ascent_options: dict = field(default_factory=dict)
    nu: float = 2.5
    hidden_layers: int = 1
    num_inducing: int = 60
    deep_steps: int = 500
    deep_warm_steps: int = 100
    warm_start: bool = True
    deep_lr: float = 0.01
    deep_train_samples: int = 3
    posterior_samples: int = 32
    holdout: int = 5
    check_every: int = 1
    adaptive_min_points: int = 20
    num_anchors: int = 3
    num_fantasies: int = 16
    num_optima: int = 16
    num_candidates: int = 1024


Objective = Callable[[torch.Tensor], torch.Tensor]
#: where the loop saves its state (None: nowhere)
StatePath = str | os.PathLike[str] | None


def step_seed(seed: int, step: int) -> int:
    """The seed of BO step ``step`` of a run seeded ``seed`` (stable across runs and resumes)."""
    return zlib.crc32(f"zonal.bo/{seed}/{step}".encode())


def standardise(values: torch.Tensor, minimize: bool) -> torch.Tensor:
    """Targets for a maximising model: (t - mean) / std of t = -y (minimise) or y, [n]."""
    targets = -values if minimize else values
    scale = targets.std() if len(targets) > 1 else targets.new_ones(())
    scale = scale if float(scale) > 0 else torch.ones_like(scale)
    return (targets - targets.mean()) / scale


def fit_surrogate(
    kind: str,
    X: torch.Tensor,
    targets: torch.Tensor,
    settings: LoopSettings,
    seed: int,
    previous: torch.nn.Module | None = None,
) -> SingleTaskGP | ResidualDGP:
    """The shallow exact GP or the residual DGP fitted to (X [n, d], standardised targets [n]).

    With ``previous`` (the same kind of model from the step before) training starts from its
    parameters: the exact GP's hyperparameters, the deep model's hyperparameters and variational
    parameters (then ``deep_warm_steps`` Adam steps instead of ``deep_steps``)."""
    if kind == "shallow":
        model = exact_sphere_gp(X, targets.unsqueeze(-1), nu=settings.nu)
        if previous is not None:
            model.load_state_dict(previous.state_dict())
        return fit_exact_gp(model)
    model = residual_deep_gp(
        X.shape[-1],
        num_hidden_layers=settings.hidden_layers,
        num_inducing=settings.num_inducing,
        nu=settings.nu,
        posterior_samples=settings.posterior_samples,
        posterior_seed=seed,
        seed=seed,
        dtype=X.dtype,
        device=X.device,
    )
    if previous is not None:
        model.load_state_dict(previous.state_dict())
    return fit_deep_gp(
        model,
        X,
        targets,
        num_steps=settings.deep_steps if previous is None else settings.deep_warm_steps,
        lr=settings.deep_lr,
        num_samples=settings.deep_train_samples,
        seed=seed,
    )


def make_acquisition(
    name: str,
    model: Model,
    targets: torch.Tensor,
    settings: LoopSettings,
    seed: int,
    *,
    ambient_dim: int | None = None,
) -> AcquisitionFunction:
    """The acquisition function ``name`` (``ACQUISITIONS``) of ``model``; MC acquisitions use
    fixed quasi-random base samples (``seed``), so with a deep model's fixed inner draws they are
    deterministic functions of the candidates. The look-ahead ones (``zonal.bo.lookahead``) use
    ``settings.num_candidates`` Sobol points on S^{d-1} (``ambient_dim`` d) as the candidate set
    of MES's max values and JES's optima."""
    sampler = SobolQMCNormalSampler(torch.Size([settings.mc_samples]), seed=seed)
    best = targets.max()
    if name == "qlogei":
        return qLogExpectedImprovement(model, best_f=best, sampler=sampler)
    if name == "qei":
        return qExpectedImprovement(model, best_f=best, sampler=sampler)
    if name == "qucb":
        return qUpperConfidenceBound(model, beta=settings.ucb_beta, sampler=sampler)
    if name in LOOKAHEAD_ACQUISITIONS:  # MES's max values and JES's optima: on the sphere
        if ambient_dim is None:
            raise ValueError(f"acquisition {name!r} needs the ambient_dim of the sphere")
        candidates = sobol_sphere(settings.num_candidates, ambient_dim, seed=seed).to(targets)
        return lookahead_acquisition(
            name,
            model,
            candidates,
            num_fantasies=settings.num_fantasies,
            num_optima=settings.num_optima,
            seed=seed,
        )
    return thompson_sampling(model)


def held_out_log_density(
    kind: str, X: torch.Tensor, targets: torch.Tensor, settings: LoopSettings, seed: int
) -> float:
    """sum of log p(t_i | earlier points) over the last ``holdout`` points, the model (``kind``)
    fitted to the others; the targets standardised with the earlier points' statistics."""
    holdout = settings.holdout
    train, test = targets[:-holdout], targets[-holdout:]
    mean, scale = train.mean(), train.std().clamp(min=1e-12)
    model = fit_surrogate(kind, X[:-holdout], (train - mean) / scale, settings, seed)
    with torch.no_grad():
        if not isinstance(model, ResidualDGP):  # the shallow exact GP
            posterior = model.posterior(X[-holdout:], observation_noise=True)
            normal = torch.distributions.Normal(
                posterior.mean.squeeze(-1), posterior.variance.squeeze(-1).sqrt()
            )
            return float(normal.log_prob((test - mean) / scale).sum())
        return float(model.log_predictive_density(X[-holdout:], (test - mean) / scale).sum())


def check_on_sphere(X: torch.Tensor, name: str, state: BOState, tolerance: float) -> None:
    """Raise ``OffSphereError`` (carrying ``state``) if a row of X [n, d] is not a unit vector."""
    deviation = (X.norm(dim=-1) - 1).abs()
    if X.dim() != 2 or X.shape[-1] != state.ambient_dim:
        raise OffSphereError(
            f"{name} must have shape [n, {state.ambient_dim}], got {tuple(X.shape)}", state
        )
    if not torch.isfinite(X).all() or (deviation > tolerance).any():
        worst = float(deviation.nan_to_num(math.inf).max())
        raise OffSphereError(
            f"{name} must lie on the unit sphere S^{state.ambient_dim - 1}: the largest "
            f"| ||x|| - 1 | is {worst:.3g} (tolerance {tolerance:g})",
            state,
        )


def evaluate(
    objective: Objective, X: torch.Tensor, state: BOState, state_path: StatePath
) -> torch.Tensor:
    """The objective's values [n] at X [n, d]; ``ObjectiveNaNError`` for NaN or infinite values
    (after saving the state, which does not include the bad point)."""
    values = torch.as_tensor(objective(X)).to(X).reshape(-1)
    if values.shape != (len(X),):
        raise ValueError(
            f"the objective must return one value per point ({len(X)}), got {values.shape[0]}"
        )
    bad = ~torch.isfinite(values)
    if bad.any():
        _save(state, state_path)
        index = int(bad.nonzero()[0])
        raise ObjectiveNaNError(
            f"the objective returned {float(values[index])} at the point "
            f"{X[index].tolist()}; the {state.num_evaluations} evaluations before it are kept",
            state,
        )
    return values


def _save(state: BOState, state_path: StatePath) -> None:
    if state_path is not None:
        state.save(state_path)


def _record(state: BOState, X: torch.Tensor, values: torch.Tensor, source: str) -> None:
    state.X = X.clone() if state.num_evaluations == 0 else torch.cat([state.X, X])
    state.Y = torch.cat([state.Y.to(values), values])
    state.sources.extend([source] * len(X))


def choose_model(state: BOState, settings: LoopSettings, step: int, seed: int) -> str:
    """``"shallow"`` or ``"deep"`` for BO step ``step`` (module docstring); an adaptive check
    is recorded in ``state.adaptive_checks`` and a switch in ``state.switched_at``."""
    if state.switched_at is not None or state.strategy == "deep":
        return "deep"
    if state.strategy == "switch":
        assert state.switch_after is not None  # the loop refuses "switch" without it
        if step >= state.switch_after:
            state.switched_at = step
            return "deep"
        return "shallow"
    if state.strategy != "adaptive":
        return "shallow"
    enough = state.num_evaluations >= max(settings.adaptive_min_points, settings.holdout + 2)
    if not enough or step % settings.check_every:
        return "shallow"
    shallow = held_out_log_density("shallow", state.X, state.Y, settings, seed)
    deep = held_out_log_density("deep", state.X, state.Y, settings, seed)
    state.adaptive_checks.append({"step": step, "shallow": shallow, "deep": deep})
    if deep > shallow:
        state.switched_at = step
        return "deep"
    return "shallow"


def _start(
    objective: Objective,
    ambient_dim: int,
    strategy: str,
    seed: int,
    num_initial: int,
    minimize: bool,
    switch_after: int | None,
    optimum_value: float | None,
    initial_points: torch.Tensor | None,
    state_path: StatePath,
) -> BOState:
    state = BOState(
        ambient_dim=ambient_dim,
        strategy=strategy,
        seed=seed,
        num_initial=num_initial,
        minimize=minimize,
        switch_after=switch_after,
        optimum_value=optimum_value,
    )
    if initial_points is None:
        generator = torch.Generator().manual_seed(seed)
        initial_points = uniform_sphere(num_initial, ambient_dim, generator)
    else:
        initial_points = torch.as_tensor(initial_points, dtype=torch.float64)
        check_on_sphere(initial_points, "initial_points", state, unit_tolerance(torch.float64))
        if len(initial_points) != num_initial:
            raise ValueError(
                f"initial_points has {len(initial_points)} rows, num_initial is {num_initial}"
            )
        initial_points = initial_points / initial_points.norm(dim=-1, keepdim=True)
    values = evaluate(objective, initial_points, state, state_path)
    _record(state, initial_points, values, "initial")
    _save(state, state_path)
    return state


def _resume(path: Path, **expected: object) -> BOState:
    state = BOState.load(path)
    for name, value in expected.items():
        if getattr(state, name) != value:
            raise ValueError(
                f"the state file {path} belongs to another run: its {name} is "
                f"{getattr(state, name)!r}, this run's {value!r}"
            )
    return state


def optimize(
    objective: Objective,
    ambient_dim: int,
    budget: int,
    *,
    model: str = "switch",
    switch_after: int | None = None,
    num_initial: int = 5,
    acquisition: str = "qlogei",
    minimize: bool = True,
    optimum_value: float | None = None,
    seed: int = 0,
    initial_points: torch.Tensor | None = None,
    state_path: str | Path | None = None,
    settings: LoopSettings | None = None,
    optimizer: str = "riemannian",
    progress: bool = True,
) -> BOState:
    r"""Bayesian optimisation of ``objective`` on :math:`\mathbb{S}^{d-1}` (module docstring).

    Args:
        objective: :math:`X` [n, d] (unit vectors) -> values [n].
        ambient_dim: :math:`d`.
        budget: total evaluations, the initial design included (seed 004: 5 + 200).
        model: ``"shallow"``, ``"deep"``, ``"switch"`` (needs ``switch_after``) or
            ``"adaptive"``.
        switch_after: BO steps with the shallow model before the deep one (``"switch"``).
        num_initial: points of the uniform initial design.
        acquisition: ``"qlogei"`` (seed 004 app. A.2), ``"qei"``, ``"qucb"``, ``"thompson"``, or
            the look-ahead ``"kg"`` (one-shot knowledge gradient, its fantasies' maximisers on
            the sphere too), ``"mes"`` (max-value entropy) or ``"jes"`` (joint entropy search),
            ``zonal.bo.lookahead`` (MES and JES see a deep surrogate's moment-matched
            Gaussian).
        minimize: minimise (the seed's regret is of a minimum) or maximise.
        optimum_value: the known optimum, for the regret trace.
        seed: the run's seed (initial design and every step).
        initial_points: the initial design [num_initial, d] instead of uniform draws.
        state_path: a file to save the state to after every evaluation, resumed if it exists.
        settings: ``LoopSettings``.
        optimizer: ``optimize_acqf_sphere``'s optimizer (``"riemannian"`` or ``"geoopt"``).
        progress: show a tqdm progress bar.

    Returns:
        The final ``BOState`` (points, values, the model behind each point, regret trace).
    """
    ambient_dim = check_ambient_dim(ambient_dim)
    settings = settings or LoopSettings()
    if model not in STRATEGIES:
        raise ValueError(f"model must be one of {STRATEGIES}, got {model!r}")
    if acquisition not in ACQUISITIONS:
        raise ValueError(f"acquisition must be one of {ACQUISITIONS}, got {acquisition!r}")
    if model == "switch" and (switch_after is None or switch_after < 0):
        raise ValueError(f"model='switch' needs switch_after >= 0 BO steps, got {switch_after}")
    if num_initial < 1:
        raise ValueError(f"num_initial must be >= 1, got {num_initial}")
    path = None if state_path is None else Path(state_path)
    if path is not None and path.exists():
        state = _resume(
            path,
            ambient_dim=ambient_dim,
            strategy=model,
            seed=seed,
            num_initial=num_initial,
            minimize=minimize,
            switch_after=switch_after,
        )
    else:
        state = BOState(
            ambient_dim, model, seed, num_initial, minimize, switch_after, optimum_value
        )
    if budget < num_initial or budget < state.num_evaluations:
        raise BudgetError(
            f"budget {budget} is smaller than the initial design ({num_initial} points)"
            if budget < num_initial
            else f"budget {budget} is smaller than the {state.num_evaluations} evaluations done",
            state,
        )
    if state.num_evaluations == 0:
        state = _start(
            objective,
            ambient_dim,
            model,
            seed,
            num_initial,
            minimize,
            switch_after,
            optimum_value,
            initial_points,
            path,
        )
    bar = tqdm(
        total=budget,
        initial=state.num_evaluations,
        disable=None if progress else True,  # None: hidden when stderr is not a terminal
        desc=f"BO {model}",
        unit="eval",
    )
    fitted: dict[str, torch.nn.Module] = {}  # the last model of each kind, for warm starts
    try:
        while state.num_evaluations < budget:
            step = state.num_steps
            seed_of_step = step_seed(seed, step)
            started = time.perf_counter()
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed_of_step)
                kind = choose_model(state, settings, step, seed_of_step)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed_of_step)
                previous = fitted.get(kind) if settings.warm_start else None
                surrogate, candidate = _propose(
                    kind, state, settings, acquisition, optimizer, seed_of_step, previous
                )
                fitted[kind] = surrogate
            check_on_sphere(candidate, "the proposed candidate", state, SPHERE_TOLERANCE)
            values = evaluate(objective, candidate, state, path)
            _record(state, candidate, values, kind)
            state.step_seconds.append(time.perf_counter() - started)
            _save(state, path)
            bar.update(1)
            bar.set_postfix(best=f"{state.best_value:.4g}", model=kind)
    finally:
        bar.close()
    return state


def _propose(
    kind: str,
    state: BOState,
    settings: LoopSettings,
    acquisition: str,
    optimizer: str,
    seed: int,
    previous: torch.nn.Module | None,
) -> tuple[torch.nn.Module, torch.Tensor]:
    """(the fitted surrogate, the next point [1, d]): fit the surrogate (from ``previous``),
    maximise the acquisition on the sphere."""
    targets = standardise(state.Y, state.minimize)
    surrogate = fit_surrogate(kind, state.X, targets, settings, seed, previous)
    acq_function = make_acquisition(
        acquisition, surrogate, targets, settings, seed, ambient_dim=state.ambient_dim
    )
    best = targets.argsort(descending=True)[: settings.num_anchors]
    candidate, _ = optimize_acqf_sphere(  # a one-shot KG's fantasy points optimised there too
        acq_function,
        state.ambient_dim,
        q=1,
        num_restarts=settings.num_restarts,
        raw_samples=settings.raw_samples,
        options=settings.ascent_options,
        anchors=state.X[best],
        optimizer=optimizer,
        seed=seed,
    )
    return surrogate, candidate.detach()


__all__ = [
    "ACQUISITIONS",
    "STRATEGIES",
    "LoopSettings",
    "choose_model",
    "held_out_log_density",
    "optimize",
    "standardise",
    "step_seed",
]
