"""The SGPR's statistics pass per chunk: features, the Gram triangle and a bare matmul, side by side.

For one chunk of ``--rows`` rows (default 16,384) at M = 660 (8 inputs + bias: complete harmonics of
degrees 0..4 on S^8, the features of ``benchmarks/sgpr_large_n.py``), in one process:

- ``features``: the zonal functions r_i Z(z_i) [n, M] (``StatisticsKernel``: one n x d x M product,
  the fused recurrence, the radius), written into the buffer reused from chunk to chunk;
- ``gram``: the upper triangle of Z_r^T Z_r added to float64 totals (``add_upper_gram_``);
- ``matmul``: a bare ``torch.matmul`` of the same shape, [M, n] x [n, M] (the full product);
- ``pass``: the row checks and ``StatisticsKernel.add_`` (everything a chunk costs; ``finish``,
  once per pass, is timed apart) per row;

each in float64 and in float32 (the float32 option: per-chunk work in float32, float64 totals),
median of ``--repeats`` wall-clock timings, at each of ``--threads`` torch intra-op thread counts.
With ``--before SRC`` (a ``src`` folder of an older zonal, e.g. from ``git archive``) a child
process runs that version's ``SGPR.fit_statistics`` on the same rows, with its own bare matmul as
the yardstick, so the per-row time before and after are compared in this run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/statistics_pass.py [--rows 16384]
        [--threads 1 2] [--before /tmp/zonal_before/src]

JSON goes to ``benchmarks/results/statistics_pass.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

INPUT_DIM = 8
FREQUENCIES = 5  # degrees 0..4: 660 harmonics on S^8
KERNEL_DEGREE = 8


def make_model():
    """The SGPR of ``benchmarks/sgpr_large_n.py`` (continuous-depth kernel, 660 harmonics)."""
    from zonal.experiments.seed002_common import continuous_depth_kernel, harmonic_features
    from zonal.models import SGPR

    kernel = continuous_depth_kernel(INPUT_DIM + 1, KERNEL_DEGREE, None)
    features = harmonic_features("complete", INPUT_DIM + 1, FREQUENCIES, 0, seed=0)
    return SGPR(kernel, features, INPUT_DIM)


def make_rows(rows: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x ~ N(0, I_8), y = sin(x_1) x_2 + 0.1 x_3 + 0.1 eps: [rows, 8], [rows] (float64)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, INPUT_DIM, generator=generator, dtype=torch.float64)
    noise = torch.randn(rows, generator=generator, dtype=torch.float64)
    return x, torch.sin(x[:, 0]) * x[:, 1] + 0.1 * x[:, 2] + 0.1 * noise


def timed(function: Callable[[], object], repeats: int) -> float:
    """Median wall-clock seconds of ``repeats`` calls (after one warm-up call)."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(rows: int, repeats: int) -> dict:
    """Per-chunk seconds of the parts (module docstring) at the current thread count."""
    from zonal.models.sgpr_statistics import add_upper_gram_

    model = make_model()
    x, y = make_rows(rows)
    checked = model._checked_rows(x, y, 0)
    result: dict = {"M": model.features.num_inducing, "rows": rows}
    for dtype in (torch.float64, torch.float32):
        name = str(dtype).removeprefix("torch.")
        kernel = model.statistics_kernel(dtype)
        totals = kernel.empty()
        zonal, _ = kernel._zonal_rows(checked[0])  # [n, M]
        result[name] = {
            "features_s": timed(lambda k=kernel: k._zonal_rows(checked[0]), repeats),
            "gram_s": timed(lambda z=zonal, t=totals: add_upper_gram_(t[0], z), repeats),
            "matmul_s": timed(lambda z=zonal: torch.matmul(z.mT, z), repeats),
            "pass_s": timed(
                lambda k=kernel, t=totals: k.add_(t, *model._checked_rows(x, y, 0)), repeats
            ),
            "finish_s": timed(lambda k=kernel, t=totals: k.finish(t), repeats),
        }
        part = result[name]
        part["pass_us_per_row"] = part["pass_s"] / rows * 1e6
        part["features_over_matmul"] = part["features_s"] / part["matmul_s"]
        part["gram_over_matmul"] = part["gram_s"] / part["matmul_s"]
    result["features32_over_matmul64"] = (
        result["float32"]["features_s"] / result["float64"]["matmul_s"]
    )
    return result


def measure_before(source: Path, rows: int, repeats: int, threads: int) -> dict:
    """The older version's ``chunk_statistics`` (one chunk of ``rows``: checks, features, products)
    and a bare matmul of the same shape, timed in a child process importing zonal from ``source``."""
    child = f"""
import json, statistics, sys, time, torch
sys.path.insert(0, {str(Path(__file__).parent)!r})
torch.set_num_threads({threads})
from statistics_pass import make_model, make_rows, timed
model = make_model()
x, y = make_rows({rows})
phi = torch.randn({rows}, model.features.num_inducing, dtype=torch.float64)
out = {{"pass_s": timed(lambda: model.chunk_statistics(x, y), {repeats}),
        "matmul_s": timed(lambda: torch.matmul(phi.mT, phi), {repeats})}}
print(json.dumps(out))
"""
    environment = {**os.environ, "PYTHONPATH": str(source)}
    completed = subprocess.run(
        [sys.executable, "-c", child], env=environment, capture_output=True, text=True, check=True
    )
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    result["pass_us_per_row"] = result["pass_s"] / rows * 1e6
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16384, help="rows per chunk")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--before", type=Path, default=None, help="src folder of an older zonal")
    parser.add_argument(
        "--output", type=Path, default=Path("benchmarks/results/statistics_pass.json")
    )
    args = parser.parse_args()
    results = {"rows": args.rows, "by_threads": {}}
    header = (
        f"{'thr':>3} {'dtype':>7} {'feat s':>8} {'gram s':>8} {'matmul s':>8} {'feat/mm':>7} "
        f"{'gram/mm':>7} {'pass s':>8} {'us/row':>7}"
    )
    print(f"per chunk of {args.rows} rows, M = 660 (wall clock, median of {args.repeats})")
    print(header)
    for threads in args.threads:
        torch.set_num_threads(threads)
        entry = measure(args.rows, args.repeats)
        for name in ("float64", "float32"):
            part = entry[name]
            print(
                f"{threads:>3} {name:>7} {part['features_s']:8.4f} {part['gram_s']:8.4f} "
                f"{part['matmul_s']:8.4f} {part['features_over_matmul']:7.3f} "
                f"{part['gram_over_matmul']:7.3f} {part['pass_s']:8.4f} "
                f"{part['pass_us_per_row']:7.2f}"
            )
        if args.before is not None:
            before = measure_before(args.before, args.rows, args.repeats, threads)
            entry["before"] = before
            # per-row time over the same process's float64 matmul: robust to a busy machine
            yardstick = before["pass_s"] / before["matmul_s"]
            for name in ("float64", "float32"):
                part = entry[name]
                entry[f"speed_up_{name}"] = before["pass_s"] / part["pass_s"]
                entry[f"speed_up_{name}_in_matmuls"] = yardstick / (
                    part["pass_s"] / entry["float64"]["matmul_s"]
                )
            print(
                f"{threads:>3} {'before':>7} {'':>8} {'':>8} {before['matmul_s']:8.4f} {'':>7} "
                f"{'':>7} {before['pass_s']:8.4f} {before['pass_us_per_row']:7.2f}   speed-up "
                f"{entry['speed_up_float64']:.2f}x float64, {entry['speed_up_float32']:.2f}x "
                f"float32 (in units of each process's float64 matmul: "
                f"{entry['speed_up_float64_in_matmuls']:.2f}x, "
                f"{entry['speed_up_float32_in_matmuls']:.2f}x)"
            )
        results["by_threads"][str(threads)] = entry
    first = results["by_threads"][str(args.threads[0])]
    for threads in args.threads[1:]:
        entry = results["by_threads"][str(threads)]
        print(
            f"{threads} threads vs {args.threads[0]}: pass float64 "
            f"{first['float64']['pass_s'] / entry['float64']['pass_s']:.2f}x faster, float32 "
            f"{first['float32']['pass_s'] / entry['float32']['pass_s']:.2f}x, bare matmul "
            f"{first['float64']['matmul_s'] / entry['float64']['matmul_s']:.2f}x"
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
