"""The activated DGP's network stage in float32 against float64 (``zonal.tabular.recipes.network``).

Times Adam steps of ``zonal.models.activated_dgp.train_network`` on the network of ``zonal fit``'s
``adgp`` recipe (2 layers of 128 activated features, input scales, minibatches of 1,024 rows) on
standard normal inputs of a table's shape, alternating the two dtypes on the same threads, and
prints each dtype's milliseconds per step and the ratio float32 / float64, with the largest
difference of the two networks' outputs at the start (the same weights in both dtypes).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/network_dtype.py --rows 7373 --inputs 32
"""

from __future__ import annotations

import argparse
import time

import torch

from zonal.models.activated_dgp import train_network
from zonal.tabular.recipes import build_deep, resolve_spec


def milliseconds_per_step(
    network: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int
) -> float:
    """Wall-clock milliseconds per Adam step of ``train_network`` on (x, y)."""
    started = time.perf_counter()
    train_network(network, x, y, num_steps=steps, batch_size=1024, lr=0.01, seed=0)
    return 1e3 * (time.perf_counter() - started) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=7373)
    parser.add_argument("--inputs", type=int, default=32)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(args.rows, args.inputs, dtype=torch.float64, generator=generator)  # [N, D]
    y = torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(args.rows, dtype=torch.float64,
                                                   generator=generator)  # fmt: skip
    model = build_deep(resolve_spec(args.inputs, model="adgp", seed=0, ard=True), x)
    with torch.no_grad():
        start64, start32 = model.network_like(0), model.network_like(0).to(torch.float32)
        difference = float((start64(x) - start32(x.float()).double()).abs().max())
    times: dict[torch.dtype, list[float]] = {torch.float64: [], torch.float32: []}
    for _ in range(args.repeats):
        for dtype in times:
            network = model.network_like(0).to(dtype)
            times[dtype].append(
                milliseconds_per_step(network, x.to(dtype), y.to(dtype), args.steps)
            )
    best = {dtype: min(values) for dtype, values in times.items()}
    threads = torch.get_num_threads()
    print(f"{args.rows} rows x {args.inputs} inputs, {args.steps} steps x {args.repeats}, "
          f"{threads} thread(s); outputs at the start differ by {difference:.1e}")  # fmt: skip
    for dtype, value in best.items():
        print(f"  {dtype!s:14s} {value:7.2f} ms per step (best of {args.repeats})")
    print(f"  float32 / float64: {best[torch.float32] / best[torch.float64]:.2f}")


if __name__ == "__main__":
    main()
