"""Benchmark: dense kernel matrices of zonal's kernels against GPyTorch's RBF and geometric-kernels.

For N random float64 points on S^{d-1} (default N = 4096, d = 3) every kernel builds the dense
N x N matrix K(X, X): construction of the kernel object, its eigenvalues where it needs them, and
the matrix (``kernel(X).to_dense()`` under ``torch.no_grad()``), with a fresh kernel object every
run (so eigenvalue caches and, for geometric-kernels, its spherical-harmonic set-up are rebuilt:
"build time included"). After one warm-up run each (it includes ``torch.compile``, see
``zonal.kernels.compile``), a zonal kernel and GPyTorch's ``RBFKernel`` are timed in alternation
``--repeats`` times and each keeps its best time: on a shared machine the least-disturbed run is
the one that measures the code, and alternating exposes both to the same load.

Ratios are quoted against peers measured in the same process on the same points and threads:

* ``/ RBF``: zonal time / GPyTorch ``RBFKernel`` time (the cheapest dense kernel there is), the
  RBF time being the one measured in alternation with that kernel;
* ``/ GK``: zonal time / geometric-kernels time for the *same* kernel (the intrinsic Matérn and
  heat kernels, ``MaternKarhunenLoeveKernel`` on ``Hypersphere`` with ``num_levels = L + 1``). The
  column is skipped when geometric-kernels (an optional peer, torch backend) is not installed.
  It stacks one N x N matrix per level, so it needs about 8 N^2 (L + 1) bytes (1.5 GB at the
  defaults); zonal's Mercer sum holds three N x N matrices.

Huge pages: zonal allocates large Gram matrices on transparent huge pages
(``zonal.kernels.huge_pages``), which removes most of the page-fault cost of a fresh N x N buffer;
GPyTorch's RBF gets the same only when PyTorch's allocator is told to, at start-up
(``THP_MEM_ALLOC_ENABLE=1``). Run the benchmark both ways to see both comparisons; the setting is
printed and stored.

Run (the thread count is printed and stored):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/kernels.py [--num-points 4096] [--threads 1]
    THP_MEM_ALLOC_ENABLE=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/kernels.py

Results go to benchmarks/results/kernels.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import gpytorch
import torch

from zonal.kernels import (
    ArcCosineKernel,
    ChordalMaternKernel,
    ChordalRBFKernel,
    DeepArcCosineKernel,
    IntrinsicHeatKernel,
    IntrinsicMaternKernel,
    PolynomialDecayKernel,
    ReLUNTKernel,
    SpectralZonalKernel,
)
from zonal.kernels.compile import SETTINGS as COMPILE_SETTINGS

RESULTS = Path(__file__).resolve().parent / "results" / "kernels.json"


def huge_pages_everywhere() -> bool:
    """Whether PyTorch's CPU allocator puts every large tensor on huge pages (read at start-up)."""
    return os.environ.get("THP_MEM_ALLOC_ENABLE", "0") not in ("", "0")


def random_unit_points(num_points: int, ambient_dim: int, seed: int = 0) -> torch.Tensor:
    """Uniform random points on S^{d-1}: [N, d] float64."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def best_seconds(*functions: Callable[[], torch.Tensor], repeats: int) -> list[float]:
    """Best wall-clock seconds of each function over ``repeats`` alternating runs after a warm-up."""
    for function in functions:
        function()
    times: list[list[float]] = [[] for _ in functions]
    for _ in range(repeats):
        for function, record in zip(functions, times, strict=True):
            start = time.perf_counter()
            function()
            record.append(time.perf_counter() - start)
    return [min(record) for record in times]


def zonal_cases(ambient_dim: int, max_degree: int) -> dict[str, tuple[Callable, str | None]]:
    """name -> (kernel factory, matching geometric-kernels nu or None)."""
    d, big_l = ambient_dim, max_degree
    return {
        "arccos order 0": (lambda: ArcCosineKernel(d, order=0), None),
        "arccos order 1": (lambda: ArcCosineKernel(d, order=1), None),
        "arccos order 2": (lambda: ArcCosineKernel(d, order=2), None),
        "deep arccos depth 3": (lambda: DeepArcCosineKernel(d, depth=3), None),
        "ReLU NTK depth 3": (lambda: ReLUNTKernel(d, depth=3), None),
        "chordal Matern-1/2": (lambda: ChordalMaternKernel(d, nu=0.5), None),
        "chordal Matern-5/2": (lambda: ChordalMaternKernel(d, nu=2.5), None),
        "chordal RBF": (lambda: ChordalRBFKernel(d), None),
        f"arccos order 1, Mercer L={big_l}": (
            lambda: ArcCosineKernel(d, order=1, evaluation="mercer", max_degree=big_l),
            None,
        ),
        f"intrinsic Matern-3/2 L={big_l}": (
            lambda: IntrinsicMaternKernel(d, nu=1.5, max_degree=big_l),
            "1.5",
        ),
        f"heat L={big_l}": (lambda: IntrinsicHeatKernel(d, max_degree=big_l), "inf"),
        f"polynomial decay L={big_l}": (lambda: PolynomialDecayKernel(d, max_degree=big_l), None),
        f"spectral L={big_l}": (
            lambda: SpectralZonalKernel(d, torch.linspace(1, 0.01, big_l + 1)),
            None,
        ),
    }


def geometric_kernels_builder(ambient_dim: int, max_degree: int, nu: str, x: torch.Tensor):
    """A function that builds geometric-kernels' kernel and its matrix, or None if not installed."""
    try:
        import geometric_kernels.torch  # noqa: F401  (registers the torch backend)
        from geometric_kernels.kernels import MaternKarhunenLoeveKernel
        from geometric_kernels.spaces import Hypersphere
    except ImportError:
        return None
    params = {
        "nu": torch.tensor([float(nu)], dtype=torch.float64),
        "lengthscale": torch.tensor([0.6931471805599453], dtype=torch.float64),  # softplus(0)
    }

    def build_and_evaluate() -> torch.Tensor:
        kernel = MaternKarhunenLoeveKernel(Hypersphere(ambient_dim - 1), num_levels=max_degree + 1)
        return kernel.K(params, x)

    return build_and_evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-points", type=int, default=4096)
    parser.add_argument("--ambient-dim", type=int, default=3)
    parser.add_argument("--max-degree", type=int, default=20, help="truncation L of Mercer sums")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--no-peer", action="store_true", help="skip geometric-kernels")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    x = random_unit_points(args.num_points, args.ambient_dim)
    n, d, big_l = args.num_points, args.ambient_dim, args.max_degree
    print(
        f"Kernel matrix {n} x {n}, d = {d} (S^{d - 1}), float64, torch threads = "
        f"{torch.get_num_threads()} (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}), "
        f"best of {args.repeats} alternating runs after a warm-up, torch.compile "
        f"{'on' if COMPILE_SETTINGS.enabled else 'off'}, PyTorch's allocator on huge pages "
        f"(THP_MEM_ALLOC_ENABLE) {'on' if huge_pages_everywhere() else 'off'}"
    )

    def rbf() -> torch.Tensor:
        kernel = gpytorch.kernels.RBFKernel().to(torch.float64)
        return kernel(x).to_dense()

    with torch.no_grad():
        (rbf_seconds,) = best_seconds(rbf, repeats=args.repeats)
        peer_available = False
        rows = []
        for name, (factory, gk_nu) in zonal_cases(d, big_l).items():
            seconds, rbf_beside = best_seconds(
                lambda f=factory: f()(x).to_dense(), rbf, repeats=args.repeats
            )
            row = {
                "kernel": name,
                "seconds": seconds,
                "rbf_seconds": rbf_beside,
                "ratio_to_rbf": seconds / rbf_beside,
            }
            if gk_nu is not None and not args.no_peer:
                builder = geometric_kernels_builder(d, big_l, gk_nu, x)
                if builder is not None:
                    peer_available = True
                    ours = IntrinsicMaternKernel if gk_nu != "inf" else IntrinsicHeatKernel
                    kwargs = {"nu": float(gk_nu)} if gk_nu != "inf" else {}
                    reference = ours(d, max_degree=big_l, **kwargs)(x[:64]).to_dense()
                    small = geometric_kernels_builder(d, big_l, gk_nu, x[:64])()
                    agreement = float((small - reference).abs().max())
                    (peer_seconds,) = best_seconds(builder, repeats=args.repeats)
                    row.update(
                        gk_seconds=peer_seconds,
                        ratio_to_gk=seconds / peer_seconds,
                        gk_max_abs_difference_64pts=agreement,
                    )
            rows.append(row)

    header = f"{'kernel':<32} {'seconds':>9} {'RBF s':>7} {'/ RBF':>6}"
    if peer_available:
        header += f" {'GK seconds':>11} {'/ GK':>7}"
    print(header)
    print("-" * len(header))
    print(
        f"{'GPyTorch RBFKernel (reference)':<32} {rbf_seconds:>9.3f} {rbf_seconds:>7.3f} {1:>6.2f}"
    )
    for row in rows:
        line = (
            f"{row['kernel']:<32} {row['seconds']:>9.3f} {row['rbf_seconds']:>7.3f} "
            f"{row['ratio_to_rbf']:>6.2f}"
        )
        if peer_available:
            if "gk_seconds" in row:
                line += f" {row['gk_seconds']:>11.3f} {row['ratio_to_gk']:>7.3f}"
            else:
                line += f" {'':>11} {'':>7}"
        print(line)
    if not peer_available and not args.no_peer:
        print("(geometric-kernels not installed: its column is skipped)")

    versions = {}
    for package in ("torch", "gpytorch", "geometric_kernels"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    result = {
        "num_points": n,
        "ambient_dim": d,
        "max_degree": big_l,
        "repeats": args.repeats,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "platform": platform.platform(),
        "processor": platform.processor(),
        "versions": versions,
        "rbf_seconds": rbf_seconds,
        "torch_compile": COMPILE_SETTINGS.enabled,
        "torch_allocator_huge_pages": huge_pages_everywhere(),
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
