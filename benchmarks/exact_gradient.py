"""Benchmark: one evaluation of an exact GP's log marginal likelihood and its gradient, zonal's
``ExactZonalGP`` (the kernels ``zonal fit``'s exact GP stacks: arc-cosine, 20-level
polynomial-decay, chordal squared exponential and Matérn-5/2; one input scale per input)
against GPyTorch's exact GP with an RBF-ARD kernel (Cholesky, as zonal), on the same rows.

This evaluation is the unit of work of ``zonal fit``'s ``exact`` recipe (L-BFGS calls it 20-60
times per kernel) and of its size rule (``zonal.tabular.recipes.exact.exact_fits_budget``). For N
random float64 rows of D standard-normal inputs and a smooth target, each model's
``-log p(y) / N`` and its backward pass are timed; after one warm-up the models are timed in
alternation ``--repeats`` times and each keeps its best time (the least-disturbed run on a shared
machine). The ratio column is zonal's time / GPyTorch's.

Run (the thread count is printed and stored; compare two versions of zonal by running this file
with ``PYTHONPATH`` set to each one's ``src``):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/exact_gradient.py [--rows 500 1000 2000]

Results go to benchmarks/results/exact_gradient.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import gpytorch
import torch

from zonal.tabular.recipes.exact import EXACT_AUTO_KERNELS, exact_gp

ZONAL_KERNELS = EXACT_AUTO_KERNELS


class RBFExactGP(gpytorch.models.ExactGP):
    """GPyTorch's exact GP: constant mean, scaled RBF kernel with one lengthscale per input."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(ard_num_dims=x.shape[1])
        )
        self.double()

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def evaluations(x: torch.Tensor, y: torch.Tensor) -> dict[str, Callable[[], None]]:
    """name -> one evaluation of -log p(y) / N and its gradient, for every model compared."""
    runs: dict[str, Callable[[], None]] = {}
    for kernel in ZONAL_KERNELS:
        model = exact_gp({"kernel": kernel, "input_dim": x.shape[1], "ard": True}, x, y)
        model.train()

        def zonal_step(model: torch.nn.Module = model) -> None:
            model.zero_grad()
            (-model.marginal_log_likelihood() / len(y)).backward()

        runs[f"zonal exact, {kernel}"] = zonal_step
    peer = RBFExactGP(x, y)
    peer.train()
    objective = gpytorch.mlls.ExactMarginalLogLikelihood(peer.likelihood, peer)

    def peer_step() -> None:
        peer.zero_grad()
        with gpytorch.settings.max_cholesky_size(10**6):
            (-objective(peer(x), y)).backward()

    runs["GPyTorch exact, RBF-ARD"] = peer_step
    return runs


def best_times(runs: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Each run's best wall-clock seconds over ``repeats`` alternated calls, after a warm-up."""
    for run in runs.values():
        run()
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--inputs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--output", type=Path, default=Path("benchmarks/results/exact_gradient.json")
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"torch threads {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    )
    results = []
    print("| rows | model | seconds per evaluation | / GPyTorch |")
    print("|---|---|---|---|")
    for rows in args.rows:
        generator = torch.Generator().manual_seed(rows)
        x = torch.randn(rows, args.inputs, generator=generator, dtype=torch.float64)  # [N, D]
        y = torch.sin(x[:, 0]) + x[:, 1] * x[:, 2] / 2  # [N]
        y = y + 0.1 * torch.randn(rows, generator=generator, dtype=torch.float64)
        best = best_times(evaluations(x, y), args.repeats)
        peer = best["GPyTorch exact, RBF-ARD"]
        for name, seconds in best.items():
            print(f"| {rows} | {name} | {seconds:.4f} | {seconds / peer:.2f} |")
            results.append(
                {"rows": rows, "model": name, "seconds": seconds, "ratio": seconds / peer}
            )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    stored = {"threads": args.threads, "inputs": args.inputs, "repeats": args.repeats,
              "results": results}  # fmt: skip
    args.output.write_text(json.dumps(stored, indent=1) + "\n")


if __name__ == "__main__":
    main()
