"""Bayesian optimisation on spheres (seed 004 ch. 4): seconds per BO step, and acquisition
optimisers compared.

(a) Seconds per BO step of zonal's shallow exact GP (intrinsic Matérn-5/2 of the sphere) and
    residual deep GP against BoTorch's SingleTaskGP with a Matérn-5/2 ARD kernel on the ambient
    coordinates. All three run the same step on the same problems, seeds and initial designs
    (5 uniform points): standardise the targets, fit the surrogate (warm-started from the
    previous step's parameters), build log expected improvement (fixed quasi-random base
    samples) and maximise it on the sphere with ``zonal.bo.optimize_acqf_sphere``; only the
    surrogate differs. Printed: mean seconds per step, the ratio to BoTorch's, and the final
    regret (median over seeds) of each.
(b) Acquisition optimisers on the same log EI (zonal's exact sphere GP fitted to 30 uniform
    points of each function, one per seed): zonal's Riemannian steepest ascent, geoopt's
    Riemannian Adam and BoTorch's ``optimize_acqf`` on the box [-1, 1]^d of a(x / ||x||)
    (normalised afterwards), same restarts and raw samples. Printed: seconds, the acquisition
    value reached (median over seeds) and its gap to the best of the three.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bo_sphere.py [--steps 10] [--seeds 2]
        [--part steps|optimisers|both]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from pathlib import Path

import torch
from botorch.exceptions import InputDataWarning
from botorch.models import SingleTaskGP
from gpytorch.kernels import MaternKernel, ScaleKernel

from zonal.bo import (
    exact_sphere_gp,
    fit_exact_gp,
    optimize_acqf_normalised,
    optimize_acqf_sphere,
    sphere_objective,
    uniform_sphere,
)
from zonal.bo.loop import LoopSettings, fit_surrogate, make_acquisition, standardise, step_seed

SURROGATES = ("zonal shallow", "zonal deep", "botorch ambient Matern")
SETTINGS = LoopSettings(
    num_restarts=4,
    raw_samples=64,
    mc_samples=32,
    num_inducing=20,
    deep_steps=60,
    deep_warm_steps=15,
    deep_lr=0.05,
    posterior_samples=8,
)


def ambient_gp(X: torch.Tensor, targets: torch.Tensor, previous) -> SingleTaskGP:
    """BoTorch's SingleTaskGP, Matérn-5/2 ARD on the coordinates of R^d, fitted by L-BFGS-B."""
    kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=X.shape[-1])).to(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputDataWarning)
        model = SingleTaskGP(X, targets.unsqueeze(-1), covar_module=kernel, outcome_transform=None)
    if previous is not None:
        model.load_state_dict(previous.state_dict())
    return fit_exact_gp(model)


def run(name: str, function, steps: int, seed: int) -> dict:
    """One BO run with surrogate ``name``: seconds per step and the regret trace's last value."""
    generator = torch.Generator().manual_seed(seed)
    X = uniform_sphere(5, function.ambient_dim, generator)
    Y = function(X)
    previous, seconds = None, []
    for step in range(steps):
        started = time.perf_counter()
        seed_of_step = step_seed(seed, step)
        torch.manual_seed(seed_of_step)
        targets = standardise(Y, minimize=True)
        if name == "botorch ambient Matern":
            model = ambient_gp(X, targets, previous)
        else:
            kind = "shallow" if name == "zonal shallow" else "deep"
            model = fit_surrogate(kind, X, targets, SETTINGS, seed_of_step, previous)
        acquisition = make_acquisition("qlogei", model, targets, SETTINGS, seed_of_step)
        candidate, _ = optimize_acqf_sphere(
            acquisition,
            function.ambient_dim,
            q=1,
            num_restarts=SETTINGS.num_restarts,
            raw_samples=SETTINGS.raw_samples,
            anchors=X[targets.argsort(descending=True)[:3]],
            seed=seed_of_step,
        )
        X = torch.cat([X, candidate.detach()])
        Y = torch.cat([Y, function(candidate.detach())])
        previous = model
        seconds.append(time.perf_counter() - started)
    return {
        "seconds_per_step": statistics.fmean(seconds),
        "final_regret": float(Y.min() - function.optimum_value),
    }


def compare_optimisers(function, seed: int) -> dict[str, dict[str, float]]:
    """Seconds and acquisition value of each optimiser on one fitted model's log EI."""
    generator = torch.Generator().manual_seed(seed)
    X = uniform_sphere(30, function.ambient_dim, generator)
    targets = standardise(function(X), minimize=True)
    model = fit_exact_gp(exact_sphere_gp(X, targets.unsqueeze(-1)))
    acquisition = make_acquisition("qlogei", model, targets, SETTINGS, seed)
    anchors = X[targets.argsort(descending=True)[:3]]
    common = {"q": 1, "num_restarts": SETTINGS.num_restarts, "raw_samples": SETTINGS.raw_samples}
    runs = {
        "zonal Riemannian ascent": lambda: optimize_acqf_sphere(
            acquisition, function.ambient_dim, anchors=anchors, seed=seed, **common
        ),
        "geoopt Riemannian Adam": lambda: optimize_acqf_sphere(
            acquisition,
            function.ambient_dim,
            anchors=anchors,
            seed=seed,
            optimizer="geoopt",
            **common,
        ),
        "botorch optimize_acqf, normalised": lambda: optimize_acqf_normalised(
            acquisition, function.ambient_dim, **common
        ),
    }
    results = {}
    for name, optimise in runs.items():
        started = time.perf_counter()
        _, value = optimise()
        results[name] = {"seconds": time.perf_counter() - started, "value": float(value)}
    return results


def optimiser_rows(functions: list[str], seeds: int) -> list[dict]:
    rows = []
    for function_name in functions:
        function = sphere_objective(function_name)
        per_seed = [compare_optimisers(function, seed) for seed in range(seeds)]
        best = [max(r["value"] for r in result.values()) for result in per_seed]
        for name in per_seed[0]:
            rows.append(
                {
                    "function": function_name,
                    "optimiser": name,
                    "seconds": statistics.fmean(r[name]["seconds"] for r in per_seed),
                    "value_median": statistics.median(r[name]["value"] for r in per_seed),
                    "gap_to_best_median": statistics.median(
                        b - r[name]["value"] for r, b in zip(per_seed, best, strict=True)
                    ),
                }
            )
    print(f"{'function':<12} {'optimiser':<34} {'seconds':>8} {'log EI':>9} {'gap':>9}")
    for row in rows:
        print(
            f"{row['function']:<12} {row['optimiser']:<34} {row['seconds']:>8.2f} "
            f"{row['value_median']:>9.4f} {row['gap_to_best_median']:>9.2e}"
        )
    return rows


def step_rows(functions: list[str], steps: int, seeds: int, device: str) -> list[dict]:
    rows = []
    for function_name in functions:
        function = sphere_objective(function_name)
        for name in SURROGATES:
            runs = [run(name, function, steps, seed) for seed in range(seeds)]
            rows.append(
                {
                    "function": function_name,
                    "surrogate": name,
                    "seconds_per_step": statistics.fmean(r["seconds_per_step"] for r in runs),
                    "final_regret_median": statistics.median(r["final_regret"] for r in runs),
                }
            )
    print(f"{steps} BO steps after 5 initial points, {seeds} seeds, {device}")
    print(f"{'function':<12} {'surrogate':<24} {'s / step':>9} {'ratio':>7} {'final regret':>13}")
    for row in rows:
        peer = next(
            r
            for r in rows
            if r["function"] == row["function"] and r["surrogate"] == "botorch ambient Matern"
        )
        row["ratio_to_botorch"] = row["seconds_per_step"] / peer["seconds_per_step"]
        print(
            f"{row['function']:<12} {row['surrogate']:<24} {row['seconds_per_step']:>9.3f} "
            f"{row['ratio_to_botorch']:>7.2f} {row['final_regret_median']:>13.4g}"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--functions", nargs="+", default=["singular-s2", "ackley-s3"])
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/bo_sphere.json"))
    parser.add_argument("--part", choices=["steps", "optimisers", "both"], default="both")
    args = parser.parse_args()
    threads = torch.get_num_threads()
    device = f"cpu ({platform.processor() or platform.machine()}), {threads} thread(s)"
    report: dict = {"device": device, "steps": args.steps, "seeds": args.seeds}
    if args.part in ("steps", "both"):
        report["bo_steps"] = step_rows(args.functions, args.steps, args.seeds, device)
    if args.part in ("optimisers", "both"):
        report["optimisers"] = optimiser_rows(args.functions, args.seeds)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
