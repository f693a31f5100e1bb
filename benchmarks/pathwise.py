"""Pathwise sampling with exact harmonic features (zonal.sampling; seed 004 sec. 2.2.2).

(a) Covariance error of a prior feature map with F features, exact harmonic (Karhunen-Loeve)
    features against BoTorch's random Fourier features of the same size, for the chordal Matérn-5/2
    kernel on S^2 (a Euclidean Matérn restricted to the sphere, so BoTorch's Matérn features
    approximate the very same kernel). Errors are exact algebra, not Monte Carlo: the prior error
    |psi psi^T - K| and the error of the covariance of Matheron draws from an exact GP's posterior,
        Cov = Kt(x, x) - W Kt(X, x) - Kt(x, X) W^T + W (Kt(X, X) + s^2 I) W^T,   Kt = psi psi^T,
    W = K(x, X) (K(X, X) + s^2 I)^{-1}, against K(x, x) - W K(X, x). Random features are averaged
    over seeds.
(b) Drawing S joint posterior samples at N test points from an SVGP with spherical-harmonic
    features: pathwise (draw once, evaluate at O(N (F + M)) per draw) against the joint posterior
    (dense N x N covariance and its Cholesky factor, O(N^3)). The joint is timed where it fits and
    extrapolated as N^3 from the largest size measured; pathwise is timed up to 10^5 points.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pathwise.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
from botorch.sampling.pathwise.features import gen_kernel_features
from gpytorch.kernels import MaternKernel, ScaleKernel

from zonal.features import SphericalHarmonicFeatures
from zonal.geometry import OnSphere
from zonal.kernels import ChordalMaternKernel
from zonal.linalg import cholesky
from zonal.models import SVGP
from zonal.sampling import HarmonicFeatureMap, choose_truncation, draw_posterior_paths

LENGTHSCALE = 0.5
NOISE = 1e-2


def sphere_points(count: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 3, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def target(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(3 * x[:, 0]) * x[:, 1] + torch.cos(2 * x[:, 2])


def kernels() -> tuple[ChordalMaternKernel, MaternKernel]:
    zonal = ChordalMaternKernel(3, nu=2.5)
    zonal.lengthscale = torch.tensor(LENGTHSCALE, dtype=torch.float64)
    euclidean = MaternKernel(nu=2.5).double()
    euclidean.lengthscale = torch.tensor(LENGTHSCALE, dtype=torch.float64)
    return zonal, euclidean


def covariance_errors(features_test, features_train, exact) -> dict:
    """Max |error| of the prior covariance and of the Matheron posterior covariance (docstring)."""
    k_test, k_cross, k_train = exact
    approx_test = features_test @ features_test.T
    approx_cross = features_test @ features_train.T
    approx_train = features_train @ features_train.T
    identity = torch.eye(len(k_train), dtype=k_train.dtype)
    weights = torch.linalg.solve(k_train + NOISE * identity, k_cross.T).T  # W [N, n]
    paths = (
        approx_test
        - weights @ approx_cross.T
        - approx_cross @ weights.T
        + weights @ (approx_train + NOISE * identity) @ weights.T
    )
    posterior = k_test - weights @ k_cross.T
    return {
        "prior_max_error": float((approx_test - k_test).abs().max()),
        "posterior_max_error": float((paths - posterior).abs().max()),
        "posterior_max_variance": float(posterior.diagonal().max()),
    }


@torch.no_grad()
def feature_comparison(budgets: list[int], seeds: int) -> list[dict]:
    zonal, euclidean = kernels()
    x_test, x_train = sphere_points(300, seed=1), sphere_points(100, seed=2)
    exact = (zonal(x_test).to_dense(), zonal(x_test, x_train).to_dense(), zonal(x_train).to_dense())
    rows = []
    for budget in budgets:
        truncation = choose_truncation(zonal, tolerance=0.0, max_features=budget)
        harmonic = HarmonicFeatureMap(zonal, truncation)
        size = harmonic.num_outputs
        exact_errors = covariance_errors(harmonic(x_test), harmonic(x_train), exact)
        random_errors = []
        for seed in range(seeds):
            torch.manual_seed(seed)
            fourier = gen_kernel_features(euclidean, num_inputs=3, num_outputs=size)
            random_errors.append(covariance_errors(fourier(x_test), fourier(x_train), exact))
        mean_random = {
            key: sum(errors[key] for errors in random_errors) / seeds for key in exact_errors
        }
        rows.append(
            {
                "features": size,
                "max_degree": truncation.max_degree,
                "missing_variance": float(truncation.missing_variance),
                "harmonic": exact_errors,
                "random_fourier_mean": mean_random,
            }
        )
    return rows


def fitted_svgp() -> SVGP:
    zonal, _ = kernels()
    kernel = ScaleKernel(zonal).double()
    x = sphere_points(2000, seed=3)
    y = target(x) + 0.1 * torch.randn(len(x), generator=torch.Generator().manual_seed(4))
    features = SphericalHarmonicFeatures(3, 9, kernel=kernel)  # M = 100
    model = SVGP(kernel, features, 3, input_map=OnSphere())
    model.likelihood.noise = NOISE
    model.set_optimal_variational_distribution(x, y)
    return model.eval()


def timed(function, repeats: int) -> float:
    """The fastest of ``repeats`` calls, wall-clock seconds (the machine is shared)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


@torch.no_grad()
def joint_draws(model: SVGP, x: torch.Tensor, num_draws: int) -> torch.Tensor:
    """mean + C^{1/2} e from the dense joint posterior covariance C [N, N]: [S, N]."""
    posterior = model.posterior(x)
    covariance = posterior.distribution.covariance_matrix  # [N, N]
    factor = cholesky(covariance, name="joint posterior covariance")
    noise = torch.randn(len(x), num_draws, dtype=covariance.dtype)  # [N, S]
    return (posterior.mean + factor @ noise).T


@torch.no_grad()
def sampling_comparison(
    path_sizes: list[int], joint_sizes: list[int], num_draws: int, repeats: int
) -> tuple[dict, list[dict]]:
    """Seconds to draw and evaluate paths, and to sample the joint; the joint is extrapolated as
    c N^3 with c the median of t / N^3 over the measured sizes >= 2000 (or all, if none)."""
    model = fitted_svgp()
    sample_shape = torch.Size([num_draws])
    paths = draw_posterior_paths(model, sample_shape)
    prior_map = paths.path["prior_paths"].feature_map
    draw = timed(lambda: draw_posterior_paths(model, sample_shape), repeats)
    points = {size: sphere_points(size, seed=5) for size in set(path_sizes) | set(joint_sizes)}
    evaluate = {n: timed(lambda n=n: paths(points[n]), repeats) for n in path_sizes}
    joint = {
        n: timed(lambda n=n: joint_draws(model, points[n], num_draws), repeats) for n in joint_sizes
    }
    large = [n for n in joint if n >= 2000] or list(joint)
    cubic = sorted(joint[n] / n**3 for n in large)[len(large) // 2]
    setup = {
        "prior_features": prior_map.num_outputs,
        "prior_degree": prior_map.truncation.max_degree,
        "relative_missing_variance": float(prior_map.truncation.relative_missing_variance),
        "inducing_features": model.features.num_inducing,
        "draw_s": draw,
    }
    rows = []
    for size in sorted(set(path_sizes) | set(joint_sizes)):
        pathwise = draw + evaluate[size] if size in evaluate else None
        joint_time = joint.get(size, cubic * size**3)
        rows.append(
            {
                "num_points": size,
                "evaluate_s": evaluate.get(size),
                "pathwise_s": pathwise,
                "joint_s": joint_time,
                "joint_measured": size in joint,
                "joint_memory_gb": size**2 * 8 / 1e9,
                "ratio": None if pathwise is None else joint_time / pathwise,
            }
        )
    return setup, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--draws", type=int, default=16)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/pathwise.json"))
    args = parser.parse_args()
    budgets = [64, 256] if args.quick else [64, 256, 1024]
    seeds = 2 if args.quick else 5
    joint_sizes = [500, 1000] if args.quick else [1000, 2000, 3000, 4000, 5000]
    path_sizes = [1000, 5000] if args.quick else [1000, 5000, 20_000, 100_000]
    repeats = 1 if args.quick else 3
    threads = torch.get_num_threads()
    device = f"cpu ({platform.processor() or platform.machine()}), {threads} thread(s)"
    print(f"device: {device}; chordal Matérn-5/2 on S^2, lengthscale {LENGTHSCALE}")

    print("\n(a) max covariance error, F features (random Fourier: mean over seeds)")
    print(
        "    F |  L | missing var | prior: harmonic  RFF      ratio | posterior: harmonic  RFF      ratio"
    )
    comparison = feature_comparison(budgets, seeds)
    for row in comparison:
        exact, random = row["harmonic"], row["random_fourier_mean"]
        prior_ratio = random["prior_max_error"] / max(exact["prior_max_error"], 1e-300)
        post_ratio = random["posterior_max_error"] / max(exact["posterior_max_error"], 1e-300)
        row["ratios"] = {"prior": prior_ratio, "posterior": post_ratio}
        print(
            f"{row['features']:5d} | {row['max_degree']:2d} | {row['missing_variance']:11.2e} | "
            f"{exact['prior_max_error']:15.2e} {random['prior_max_error']:8.2e} {prior_ratio:7.0f}x | "
            f"{exact['posterior_max_error']:19.2e} {random['posterior_max_error']:8.2e} "
            f"{post_ratio:7.0f}x"
        )

    print(f"\n(b) {args.draws} joint posterior draws at N points (best of {repeats} runs)")
    setup, rows = sampling_comparison(path_sizes, joint_sizes, args.draws, repeats)
    print(
        f"    SVGP with M = {setup['inducing_features']} harmonics; prior F = "
        f"{setup['prior_features']} features (degree {setup['prior_degree']}, missing variance "
        f"{setup['relative_missing_variance']:.1e} of k(1)); drawing the paths: "
        f"{setup['draw_s']:.3f} s"
    )
    print(
        "       N | evaluate s | pathwise s | joint s                    |  memory | joint / path"
    )
    for row in rows:
        evaluate = "" if row["evaluate_s"] is None else f"{row['evaluate_s']:.3f}"
        pathwise = "" if row["pathwise_s"] is None else f"{row['pathwise_s']:.3f}"
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.1f}x"
        kind = "measured" if row["joint_measured"] else "N^3 extrapolated"
        print(
            f"{row['num_points']:8d} | {evaluate:>10s} | {pathwise:>10s} | "
            f"{row['joint_s']:10.3f} {kind:16s}| {row['joint_memory_gb']:5.1f}GB | {ratio:>12s}"
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "device": device,
        "draws": args.draws,
        "lengthscale": LENGTHSCALE,
        "feature_comparison": comparison,
        "sampling_setup": setup,
        "sampling": rows,
    }
    args.output.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
