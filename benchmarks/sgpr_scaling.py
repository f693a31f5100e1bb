"""One-pass SGPR with spherical-harmonic features against GPyTorch's SGPR, as N grows.

zonal's SGPR reads the data once (sufficient statistics), then every L-BFGS step costs O(M^3)
whatever N is. GPyTorch's SGPR (``InducingPointKernel`` in an ``ExactGP``) pays O(N M^2) per step.
Both get M inducing variables, the same data, the same thread count and the same number of
optimiser steps; we report the time of the data pass, the time per step, the total, and test RMSE.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sgpr_scaling.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gpytorch
import torch

from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import PolynomialDecayKernel
from zonal.models import SGPR

INPUT_DIM = 3


def make_data(num_points: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, INPUT_DIM, dtype=torch.float64, generator=generator)
    f = torch.sin(2 * x[:, 0]) * torch.cos(x[:, 1]) + 0.5 * x[:, 2]
    return x, f + 0.1 * torch.randn(num_points, dtype=torch.float64, generator=generator)


def run_zonal(x, y, x_test, y_test, num_inducing: int, steps: int) -> dict:
    kernel = gpytorch.kernels.ScaleKernel(
        PolynomialDecayKernel(INPUT_DIM + 1, max_degree=12, homogeneous=True)
    ).double()
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, num_inducing=num_inducing)
    model = SGPR(kernel, features, INPUT_DIM)
    start = time.perf_counter()
    model.fit_statistics(x, y, chunk_size=16384)
    data_pass = time.perf_counter() - start
    start = time.perf_counter()
    trace = model.fit(max_iter=steps)
    optimise = time.perf_counter() - start
    mean, _ = model.predict(x_test)
    return {
        "M": features.num_inducing,
        "data_pass_s": data_pass,
        "steps": len(trace),
        "per_step_s": optimise / max(len(trace), 1),
        "total_s": data_pass + optimise,
        "test_rmse": float(((mean - y_test) ** 2).mean().sqrt()),
    }


class GPyTorchSGPR(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, inducing):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=INPUT_DIM))
        self.covar_module = gpytorch.kernels.InducingPointKernel(
            base, inducing_points=inducing, likelihood=likelihood
        )

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def run_gpytorch(x, y, x_test, y_test, num_inducing: int, steps: int) -> dict:
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    inducing = x[torch.randperm(len(x), generator=torch.Generator().manual_seed(0))[:num_inducing]]
    model = GPyTorchSGPR(x, y, likelihood, inducing.clone()).double()
    objective = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.05)
    model.train()
    start = time.perf_counter()
    for _ in range(steps):
        optimiser.zero_grad()
        loss = -objective(model(x), y)
        loss.backward()
        optimiser.step()
    optimise = time.perf_counter() - start
    model.eval()
    with torch.no_grad(), gpytorch.settings.fast_pred_var():
        mean = model(x_test).mean
    return {
        "M": num_inducing,
        "data_pass_s": 0.0,
        "steps": steps,
        "per_step_s": optimise / steps,
        "total_s": optimise,
        "test_rmse": float(((mean - y_test) ** 2).mean().sqrt()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--num-inducing", type=int, default=300)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/sgpr_scaling.json"))
    args = parser.parse_args()
    sizes = [2_000, 20_000] if args.quick else [10_000, 100_000, 1_000_000]
    peer_limit = 20_000 if args.quick else 100_000
    x_test, y_test = make_data(2000, seed=1)
    threads = torch.get_num_threads()
    print(f"threads={threads}, M~{args.num_inducing}, steps={args.steps}")
    print("       N | model        |    M | data pass | per step | total s | test RMSE")
    rows = []
    for size in sizes:
        x, y = make_data(size, seed=0)
        results = {"zonal SGPR-SH": run_zonal(x, y, x_test, y_test, args.num_inducing, args.steps)}
        if size <= peer_limit:
            results["GPyTorch SGPR"] = run_gpytorch(
                x, y, x_test, y_test, args.num_inducing, args.steps
            )
        for name, result in results.items():
            rows.append({"num_points": size, "model": name, **result})
            print(
                f"{size:8d} | {name:12s} | {result['M']:4d} | {result['data_pass_s']:8.2f}s | "
                f"{result['per_step_s']:7.4f}s | {result['total_s']:7.2f} | {result['test_rmse']:.4f}"
            )
        if "GPyTorch SGPR" in results:
            ratio = results["GPyTorch SGPR"]["per_step_s"] / results["zonal SGPR-SH"]["per_step_s"]
            total = results["GPyTorch SGPR"]["total_s"] / results["zonal SGPR-SH"]["total_s"]
            print(f"{'':8s}   per-step ratio GPyTorch / zonal = {ratio:.1f}x, total = {total:.1f}x")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"threads": threads, "rows": rows}, indent=2))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
