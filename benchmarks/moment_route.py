"""Could the SGPR's statistics pass skip the Gram product? The moment (Gaunt) route, costed per row.

For complete harmonic levels 0..L on S^{d-1}, a product Y_a Y_b of two harmonics is a polynomial of
degree at most 2L on the sphere, i.e. a combination of the harmonics of degrees 0..2L (Gaunt-type
coefficients G_abc). So the Gram matrix of the pass is a fixed linear map of the empirical moments,

    A_ab = sum_n Y_a(x_n) Y_b(x_n) = sum_c G_abc S_c,    S_c = sum_n Y_c(x_n),   c over degrees <= 2L,

and per row the pass would evaluate K = sum_{l <= 2L} N(d, l) harmonics instead of adding the
M (M + 1) / 2 products of the Gram triangle (M = sum_{l <= L} N(d, l)). This script times, per row
and in one process, at ``--threads`` torch threads (each the best of ``--repeats`` alternated
runs after a warm-up, ``exact_gradient.best_times``):

- ``triangle``: half of a bare ``torch.matmul`` Z^T Z of a [rows, M] chunk: the least the Gram
  triangle can cost at the machine's matmul rate (zonal's panels take 0.68-0.72 of the product);
- ``cosines``: the [rows, d] x [d, K] product that any evaluation of K zonal functions through a
  fundamental system starts with (``zonal.features.zonal_basis``), alone;
- ``moments``: those cosines, then the cheapest recurrence of degree 2L (one multiply-add per entry
  and degree: Chebyshev's T_k(t) = 2 t T_{k-1}(t) - T_{k-2}(t)) and the column sums S, in blocks of
  ``--block`` rows kept in cache as the library's pass does.

The zonal harmonics cost at least the ``moments`` figure (their recurrence has the same shape, plus
the level factors), so ``moments / triangle`` is a lower bound on how much slower the route is.
At d = 9, L = 4 (M = 660, the pass of ``benchmarks/statistics_pass.py``) K = 19,305: the cosines
alone are 174k multiply-adds per row against the triangle's 218k, at a far lower rate (inner
dimension 9), so the route cannot beat the triangle there (measured: 34-39x slower per row).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/moment_route.py [--inputs 8] [--degree 4]
        [--rows 16384] [--block 256] [--repeats 5] [--threads 1] [--output FILE.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from exact_gradient import best_times
from zonal._files import write_json_atomic
from zonal.harmonics.counts import num_harmonics


def harmonic_counts(ambient_dim: int, degree: int) -> tuple[int, int]:
    """(M, K): the harmonics of degrees 0..degree and of degrees 0..2 degree on S^{ambient_dim - 1}."""
    features = sum(num_harmonics(ambient_dim, level) for level in range(degree + 1))
    moments = sum(num_harmonics(ambient_dim, level) for level in range(2 * degree + 1))
    return features, moments


def chebyshev_moments(
    x: torch.Tensor, directions: torch.Tensor, degree: int, block: int
) -> torch.Tensor:
    """S_c = sum_n T_degree(x_n . eta_c) [K] for unit rows x [n, d] and directions [d, K], in blocks
    of ``block`` rows (three [block, K] buffers reused): the moments route's least per-row work."""
    count = directions.shape[1]
    buffers = [torch.empty(block, count, dtype=x.dtype, device=x.device) for _ in range(3)]
    total = torch.zeros(count, dtype=x.dtype, device=x.device)
    for start in range(0, len(x), block):
        rows = x[start : start + block]
        cosines = torch.matmul(rows, directions, out=buffers[0][: len(rows)])  # [b, K]
        previous = buffers[1][: len(rows)].fill_(1.0)  # T_0
        current = buffers[2][: len(rows)].copy_(cosines)  # T_1
        for _ in range(2, degree + 1):  # T_k = 2 t T_{k-1} - T_{k-2}, into T_{k-2}'s buffer
            previous.mul_(-1).addcmul_(cosines, current, value=2.0)
            previous, current = current, previous
        total += (current if degree >= 1 else previous).sum(0)
    return total


def measure(inputs: int, degree: int, rows: int, block: int, repeats: int) -> dict[str, float]:
    """Per-row seconds of the triangle, the cosines and the moments (module docstring), float64."""
    ambient = inputs + 1
    features, moments = harmonic_counts(ambient, degree)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(rows, ambient, dtype=torch.float64, generator=generator)
    x /= x.norm(dim=1, keepdim=True)  # [rows, d] on the sphere
    z = torch.randn(rows, features, dtype=torch.float64, generator=generator)  # [rows, M]
    directions = torch.randn(ambient, moments, dtype=torch.float64, generator=generator)
    directions /= directions.norm(dim=0, keepdim=True)  # [d, K]
    cosine_buffer = torch.empty(block, moments, dtype=torch.float64)

    def cosines_only() -> None:
        for start in range(0, rows, block):
            chunk = x[start : start + block]
            torch.matmul(chunk, directions, out=cosine_buffer[: len(chunk)])

    best = best_times(
        {
            "product": lambda: torch.matmul(z.mT, z),
            "cosines": cosines_only,
            "moments": lambda: chebyshev_moments(x, directions, 2 * degree, block),
        },
        repeats,
    )
    triangle, cosines, route = best["product"] / 2, best["cosines"], best["moments"]
    return {
        "ambient_dim": ambient,
        "degree": degree,
        "features": features,
        "moments": moments,
        "triangle_multiply_adds_per_row": features * (features + 1) // 2,
        "cosine_multiply_adds_per_row": ambient * moments,
        "triangle_us_per_row": triangle / rows * 1e6,
        "cosines_us_per_row": cosines / rows * 1e6,
        "moments_us_per_row": route / rows * 1e6,
        "cosines_over_triangle": cosines / triangle,
        "moments_over_triangle": route / triangle,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=8, help="inputs D (the sphere is S^D)")
    parser.add_argument("--degree", type=int, default=4, help="the features' highest degree L")
    parser.add_argument("--rows", type=int, default=16_384, help="rows of the timed chunk")
    parser.add_argument("--block", type=int, default=256, help="rows per cached block")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--output", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    for name in ("inputs", "degree", "rows", "block", "repeats", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    return args


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    figures = measure(args.inputs, args.degree, args.rows, args.block, args.repeats)
    figures["threads"] = args.threads
    print(
        f"S^{args.inputs}, degrees 0..{args.degree}: M = {figures['features']} features, "
        f"K = {figures['moments']} moments (degrees 0..{2 * args.degree}); {args.threads} thread(s)"
    )
    print("| per row | multiply-adds | us | / triangle |\n|---|---|---|---|")
    print(f"| Gram triangle (half a matmul) | {figures['triangle_multiply_adds_per_row']:,} | "
          f"{figures['triangle_us_per_row']:.2f} | 1.00 |")  # fmt: skip
    print(f"| cosines alone | {figures['cosine_multiply_adds_per_row']:,} | "
          f"{figures['cosines_us_per_row']:.2f} | {figures['cosines_over_triangle']:.2f} |")  # fmt: skip
    print(f"| moments (cosines, recurrence, sums) | | {figures['moments_us_per_row']:.2f} | "
          f"{figures['moments_over_triangle']:.2f} |")  # fmt: skip
    if args.output is not None:
        write_json_atomic(args.output, figures)
    return figures


if __name__ == "__main__":
    main()
