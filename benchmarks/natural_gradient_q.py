"""Benchmark: q(u) of a probit SVGP classifier to the ELBO's optimum at fixed hyperparameters,
zonal's damped natural-gradient steps (``SVGP.set_natural_gradient_optimum``) against GPyTorch's
``NGD`` optimiser on its natural-parameter family and Adam on the Cholesky family, on the same
rows, features and kernel.

For N rows of two standard-normal inputs with a banana-like class boundary, the three start from
the prior q(u) of the same SVGP (arc-cosine kernel on the sphere embedding, spherical-harmonic
features); zonal's steps run to their tolerance; GPyTorch's full-batch NGD (step size
``--ngd-lr``) and Adam (``--adam-lr``) step until they come within ``--gap`` nats of zonal's ELBO or reach
``--max-steps``. Every ELBO is GPyTorch's ``VariationalELBO`` times N (Gauss-Hermite
quadrature), so the three are scored by the same function. The ratio column is each peer's
seconds / zonal's.

Run (the thread count is printed and stored):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/natural_gradient_q.py [--rows 2000]

Results go to benchmarks/results/natural_gradient_q.json.
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
from gpytorch.likelihoods import BernoulliLikelihood

from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import ArcCosineKernel
from zonal.models import SVGP

INPUT_DIM = 2
OUTPUT = Path(__file__).parent / "results" / "natural_gradient_q.json"


def banana_rows(num_rows: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N, 2] standard normal, y [N] in {0, 1}: which side of a bent boundary, 10% flipped."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_rows, INPUT_DIM, generator=generator, dtype=torch.float64)
    side = (x[:, 1] - 0.6 * x[:, 0] ** 2 + 0.5 > 0).double()
    flip = (torch.rand(num_rows, generator=generator, dtype=torch.float64) < 0.1).double()
    return x, (side + flip) % 2


def classifier(family: str, num_inducing: int) -> SVGP:
    """The SVGP every method starts from (the prior q(u)), in the given variational family."""
    kernel = gpytorch.kernels.ScaleKernel(ArcCosineKernel(INPUT_DIM + 1, homogeneous=True))
    kernel.outputscale = 4.0
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, num_inducing=num_inducing, kernel=kernel)
    return SVGP(kernel, features, INPUT_DIM, likelihood=BernoulliLikelihood(),
                variational_family=family).double()  # fmt: skip


def elbo(model: SVGP, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """GPyTorch's ELBO times N, nats (a graph for the optimisers)."""
    model.train()
    return gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(x))(
        model(x), y
    ) * len(x)


def step_until(
    step: Callable[[], float], target: float, gap: float, max_steps: int
) -> tuple[int, float, float]:
    """Call ``step`` (one optimiser step, returning the ELBO before it) until the ELBO is within
    ``gap`` of ``target`` or ``max_steps``; (steps, seconds, last ELBO)."""
    started, value = time.perf_counter(), -float("inf")
    for count in range(1, max_steps + 1):
        value = step()
        if value >= target - gap:
            return count, time.perf_counter() - started, value
    return max_steps, time.perf_counter() - started, value


def peer_step(model: SVGP, optimiser: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor):
    def step() -> float:
        optimiser.zero_grad()
        loss = -elbo(model, x, y) / len(x)  # per row, the scale GPyTorch's NGD expects
        loss.backward()
        optimiser.step()
        return -float(loss.detach()) * len(x)

    return step


def run(num_rows: int, args: argparse.Namespace) -> dict[str, float]:
    x, y = banana_rows(num_rows)
    zonal = classifier("cholesky", args.inducing)
    started = time.perf_counter()
    result = zonal.set_natural_gradient_optimum(x, y, tolerance=1e-7)
    zonal_seconds = time.perf_counter() - started
    target = float(elbo(zonal, x, y).detach())
    natural = classifier("natural", args.inducing)
    ngd = gpytorch.optim.NGD(natural.variational_parameters(), num_data=num_rows, lr=args.ngd_lr)
    ngd_steps, ngd_seconds, ngd_elbo = step_until(
        peer_step(natural, ngd, x, y), target, args.gap, args.max_steps
    )
    adam_model = classifier("cholesky", args.inducing)
    adam = torch.optim.Adam(adam_model.variational_parameters(), lr=args.adam_lr)
    adam_steps, adam_seconds, adam_elbo = step_until(
        peer_step(adam_model, adam, x, y), target, args.gap, args.max_steps
    )
    row = {
        "rows": num_rows,
        "inducing": zonal.features.num_inducing,
        "zonal_elbo": target,
        "zonal_steps": result.steps,
        "zonal_seconds": zonal_seconds,
        "ngd_elbo": ngd_elbo,
        "ngd_steps": ngd_steps,
        "ngd_seconds": ngd_seconds,
        "adam_elbo": adam_elbo,
        "adam_steps": adam_steps,
        "adam_seconds": adam_seconds,
    }
    print(f"N {num_rows:6d} M {row['inducing']}: zonal {target:.2f} nats, {result.steps} steps, "
          f"{zonal_seconds:.2f} s | GPyTorch NGD {ngd_elbo:.2f}, {ngd_steps} steps, "
          f"{ngd_seconds:.2f} s ({ngd_seconds / zonal_seconds:.1f}x) | Adam {adam_elbo:.2f}, "
          f"{adam_steps} steps, {adam_seconds:.2f} s ({adam_seconds / zonal_seconds:.1f}x)")  # fmt: skip
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[2000])
    parser.add_argument("--inducing", type=int, default=256)
    parser.add_argument("--ngd-lr", type=float, default=0.5)
    parser.add_argument("--adam-lr", type=float, default=0.05)
    parser.add_argument("--gap", type=float, default=0.1, help="nats from zonal's ELBO")
    parser.add_argument("--max-steps", type=int, default=300)
    args = parser.parse_args()
    threads = torch.get_num_threads()
    print(f"torch threads {threads} (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')})")
    rows = [run(num_rows, args) for num_rows in args.rows]
    OUTPUT.parent.mkdir(exist_ok=True)
    OUTPUT.write_text(json.dumps({"threads": threads, "settings": vars(args), "rows": rows},
                                 indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
