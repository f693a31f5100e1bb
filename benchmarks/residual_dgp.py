"""Benchmark: one training step of a residual deep GP (seed 004 eq. 3.3) against GPyTorch's DeepGP.

A step is the forward pass of ``-DeepApproximateMLL(VariationalELBO)`` with ``--samples`` samples
propagated through the layers, its backward pass and an Adam update, on a full batch, float64, one
thread. Two settings:

* ``sphere`` (seed 004 sec. 3.2): N = 800 points on S^2, M = 60 inducing points per layer. zonal:
  the residual DGP of ``zonal.models.residual_dgp.residual_dgp`` (projected vector fields of 3
  outputs, exp map, intrinsic Matérn-5/2 kernels of the sphere evaluated by their degree-30 Mercer
  sums, fixed inducing points on a Fibonacci grid);
* ``harmonic`` (seed 004 ch. 5, concrete-sized): N = 1024 points in R^8 embedded in S^8, M = 210
  spherical-harmonic features per layer (levels 0-3), vector fields of 9 outputs, heat kernels.

The peer is GPyTorch's own ``gpytorch.models.deep_gps.DeepGP`` written as in its documentation
(``DeepGPLayer`` + ``VariationalStrategy`` with per-output learned inducing points [P, M, D],
``ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=D))``, constant means) with the same depth, the
same width (hidden layers of 3, resp. 9, outputs) and the same M. The table gives the median
seconds per step over ``--repeats`` steps after ``--warmup`` and the ratio zonal / GPyTorch (< 1:
zonal faster).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/residual_dgp.py [--quick]

Results go to benchmarks/results/residual_dgp.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import gpytorch
import torch

from gpytorch_peer import PeerDeepGP, PeerLayer
from zonal.experiments.residual_dgp_sphere import cusp_target, fibonacci_sphere
from zonal.geometry import OnSphere, SphereEmbedding
from zonal.models.residual_dgp import residual_dgp

RESULTS = Path(__file__).resolve().parent / "results" / "residual_dgp.json"
SETTINGS = {
    "sphere": {"num_points": 800, "input_dim": 3, "num_inducing": 60},
    "harmonic": {"num_points": 1024, "input_dim": 8, "num_inducing": 210},
}


# ---------------------------------------------------------------------------------------- peer
class MaternDeepGP(PeerDeepGP):
    """GPyTorch's documented deep GP: ``depth`` layers, hidden ones of ``width`` outputs."""

    def __init__(self, x: torch.Tensor, depth: int, width: int, num_inducing: int) -> None:
        generator = torch.Generator().manual_seed(0)
        widths = [x.shape[-1], *([width] * (depth - 1)), 1]
        layers = []
        for index in range(depth):
            width_in, width_out = widths[index], widths[index + 1]
            last = index == depth - 1
            if index == 0:  # random training inputs, then standard normal points
                points = x[torch.randperm(len(x), generator=generator)[:num_inducing]]
            else:
                points = torch.randn(num_inducing, width_in, generator=generator, dtype=x.dtype)
            if not last:
                points = points.expand(width_out, *points.shape).clone()  # [P, M, D]
            layer = PeerLayer(width_in, None if last else width_out, points, kernel="matern52")
            layers.append(layer.double())
        super().__init__(layers)


# ---------------------------------------------------------------------------------------- timing
def data(setting: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(x [N, D], y [N]) for a setting: the Fibonacci grid and the cusp target on S^2, or standard
    normal inputs in R^8 with a smooth target."""
    spec = SETTINGS[setting]
    if setting == "sphere":
        x = fibonacci_sphere(spec["num_points"])
        return x, cusp_target(x)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(spec["num_points"], spec["input_dim"], generator=generator, dtype=torch.float64)
    return x, torch.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2]


def zonal_model(setting: str, depth: int):
    """The residual DGP with depth - 1 vector fields for a setting."""
    spec = SETTINGS[setting]
    if setting == "sphere":
        return residual_dgp(
            3, depth - 1, fibonacci_sphere(spec["num_inducing"]), input_map=OnSphere()
        )
    return residual_dgp(
        spec["input_dim"],
        depth - 1,
        spec["num_inducing"],
        input_map=SphereEmbedding(1.0),
        nu=math.inf,
    )


def seconds_per_step(
    model, x: torch.Tensor, y: torch.Tensor, samples: int, warmup: int, repeats: int
) -> list[float]:
    """Wall seconds of each of ``repeats`` Adam steps on the full-batch -ELBO (after ``warmup``)."""
    objective = gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(x))
    )
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    times = []
    for step in range(warmup + repeats):
        started = time.perf_counter()
        optimiser.zero_grad()
        with gpytorch.settings.num_likelihood_samples(samples):
            loss = -objective(model(x), y)
        loss.backward()
        optimiser.step()
        if step >= warmup:
            times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="depths 2 and 3, 5 repeats")
    parser.add_argument("--depths", type=int, nargs="+", default=None)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    args.depths = args.depths or ([2, 3] if args.quick else [1, 2, 3, 5])
    args.repeats = args.repeats or (5 if args.quick else 10)
    torch.set_num_threads(args.threads)
    print(
        f"float64, {args.samples} samples through the layers, median of {args.repeats} steps after "
        f"{args.warmup}; torch threads = {torch.get_num_threads()} "
        f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}), device cpu"
    )
    header = f"{'setting':<9} {'N':>5} {'M':>4} {'depth':>5} {'zonal s/step':>13}"
    print(f"{header} {'GPyTorch s/step':>16} {'ratio':>6}")
    results: list[dict[str, Any]] = []
    for setting, spec in SETTINGS.items():
        x, y = data(setting)
        width = spec["input_dim"] + int(setting == "harmonic")
        for depth in args.depths:
            torch.manual_seed(0)
            ours = seconds_per_step(
                zonal_model(setting, depth), x, y, args.samples, args.warmup, args.repeats
            )
            torch.manual_seed(0)
            peer_model = MaternDeepGP(x, depth, width, spec["num_inducing"])
            peer = seconds_per_step(peer_model, x, y, args.samples, args.warmup, args.repeats)
            row = {
                "setting": setting,
                "num_points": spec["num_points"],
                "num_inducing": spec["num_inducing"],
                "depth": depth,
                "width": width,
                "zonal_seconds": statistics.median(ours),
                "gpytorch_seconds": statistics.median(peer),
            }
            row["ratio"] = row["zonal_seconds"] / row["gpytorch_seconds"]
            results.append(row)
            print(
                f"{setting:<9} {spec['num_points']:>5} {spec['num_inducing']:>4} {depth:>5} "
                f"{row['zonal_seconds']:>13.4f} {row['gpytorch_seconds']:>16.4f} {row['ratio']:>6.2f}",
                flush=True,
            )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "settings": {**vars(args), "problems": SETTINGS},
                "torch_threads": torch.get_num_threads(),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                "versions": {
                    "torch": torch.__version__,
                    "gpytorch": metadata.version("gpytorch"),
                    "python": platform.python_version(),
                },
                "machine": platform.machine(),
                "device": "cpu",
                "results": results,
            },
            indent=1,
        )
    )
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
