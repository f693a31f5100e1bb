"""Benchmark: the convolutional DKM's Gram algebra against a naive PyTorch peer, and the memory of
one ConvDKM training step.

The Gram blocks of a kernelised convolution with inter-domain inducing points (seed 003 eqs. 25-27,
66) are, for offsets d in the filter D and mixing matrices C_d [M, M'],

    Gamma_ii = (1 / |D|) sum_d C_d Omega_ii C_d^T                        [M, M]
    Gamma_{i,js} = (1 / |D|) sum_d sum_i' C_{d,i i'} Omega_{i', j(s+d)}    [P, H', W', M]
    Gamma_{js,js} = (1 / |D|) sum_d Omega_{j(s+d), j(s+d)}                 [P, H', W']

zonal computes them with one batched matmul (``convolve_inducing``) and ``conv2d``
(``convolve_cross``, ``convolve_diagonal``). The peer written here is the naive reading of the
equations: a Python loop over the |D| offsets, each an explicit einsum on a zero-padded, strided
slice of Omega. Both run in the same process on the same random float64 inputs and threads; the
script prints their largest absolute difference and the best time of each over ``--repeats``
alternating runs after a warm-up (ratio = naive / zonal).

Memory: each inducing configuration in ``--inducing`` (M per stage, e.g. 16/32/64, seed 003
table 2) and each dtype in ``--dtypes`` runs one training step (objective of eq. 76 and its
backward pass) of a ``ConvDKM`` on a batch of B random MNIST-sized images [B, 1, 28, 28] (B = 256,
the seed's batch, by default) in a fresh subprocess, whose peak resident set size (``ru_maxrss``)
is reported together with the resident size just before the step (model built, imports done) and
the ratio of the float64 to the float32 step increase. The stack is the seed's ResNet layout with
``--blocks-per-stage`` blocks per stage (nu = inf in the first layer when it has more than 9
inducing patches, its kernel having rank <= 9, and 1 elsewhere), a global-average-pooling top and
the 10-class softmax likelihood. The model is built in float64 and cast for float32 (the seed
trains in float64 and expects float32 to be much cheaper).

Run (the thread count is printed and stored):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dkm.py [--batch 256] [--inducing 16/32/64]

Results go to benchmarks/results/dkm.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import torch
import torch.nn.functional as functional
from gpytorch.likelihoods import SoftmaxLikelihood

from kernels import best_seconds  # benchmarks/kernels.py: one timing helper for the benchmarks
from zonal._files import write_json_atomic
from zonal.dkm.conv_model import ConvDKM, resnet_layers
from zonal.dkm.convolution import (
    ConvGeometry,
    convolve_cross,
    convolve_diagonal,
    convolve_inducing,
)

RESULTS = Path(__file__).resolve().parent / "results" / "dkm.json"
#: (images P, feature map side H, inducing points below M', inducing points M, stride)
ALGEBRA_SIZES = ((32, 28, 16, 16, 1), (32, 14, 32, 32, 1), (32, 14, 32, 64, 2), (64, 7, 64, 64, 1))
IMAGE_SHAPE = (1, 28, 28)


# ---------------------------------------------------------------------- the naive peer
def offsets(geometry: ConvGeometry) -> list[tuple[int, int]]:
    """The filter offsets d = (a, b) of D, row-major like a conv2d weight's last two axes."""
    rows, columns = geometry.kernel_size
    return [(a, b) for a in range(rows) for b in range(columns)]


def strided_window(
    padded: torch.Tensor, offset: tuple[int, int], out_shape: tuple[int, int], stride: int
) -> torch.Tensor:
    """padded[:, a + stride r, b + stride c, ...] for output locations (r, c): the s + d of eq. 27."""
    a, b = offset
    rows = slice(a, a + stride * (out_shape[0] - 1) + 1, stride)
    columns = slice(b, b + stride * (out_shape[1] - 1) + 1, stride)
    return padded[:, rows, columns]


def naive_inducing(omega_ii: torch.Tensor, mixing: torch.Tensor) -> torch.Tensor:
    """Eq. 26 with a loop over d: (1 / |D|) sum_d sum_{i'j'} C_{d,ii'} C_{d,jj'} Omega_{i'j'}."""
    total = omega_ii.new_zeros(mixing.shape[0], mixing.shape[0])  # [M, M]
    kh, kw = mixing.shape[2:]
    for a in range(kh):
        for b in range(kw):
            c_d = mixing[:, :, a, b]  # [M, M']
            total = total + torch.einsum("ik,kl,jl->ij", c_d, omega_ii, c_d)
    return total / (kh * kw)


def naive_cross(
    omega_ti: torch.Tensor, mixing: torch.Tensor, geometry: ConvGeometry
) -> torch.Tensor:
    """Eq. 27 with a loop over d on the zero-padded Omega_ti [P, H, W, M'] -> [P, H', W', M]."""
    p = geometry.padding
    padded = functional.pad(omega_ti, (0, 0, p, p, p, p))  # [P, H + 2p, W + 2p, M']
    out_shape = geometry.output_shape(*omega_ti.shape[1:3])
    total = omega_ti.new_zeros(omega_ti.shape[0], *out_shape, mixing.shape[0])
    for a, b in offsets(geometry):
        window = strided_window(padded, (a, b), out_shape, geometry.stride)  # [P, H', W', M']
        total = total + torch.einsum("phwk,mk->phwm", window, mixing[:, :, a, b])
    return total / geometry.patch_size


def naive_diagonal(omega_tt: torch.Tensor, geometry: ConvGeometry) -> torch.Tensor:
    """Eq. 66 with a loop over d: (1 / |D|) sum_d Omega_{j(s+d), j(s+d)} [P, H', W']."""
    p = geometry.padding
    padded = functional.pad(omega_tt, (p, p, p, p))  # [P, H + 2p, W + 2p]
    out_shape = geometry.output_shape(*omega_tt.shape[1:])
    total = omega_tt.new_zeros(omega_tt.shape[0], *out_shape)
    for offset in offsets(geometry):
        total = total + strided_window(padded, offset, out_shape, geometry.stride)
    return total / geometry.patch_size


def algebra_case(size: tuple[int, ...], repeats: int, seed: int) -> dict:
    """Agreement and timings of the three blocks at one size (random PSD-like float64 inputs)."""
    images, side, previous, inducing, stride = size
    generator = torch.Generator().manual_seed(seed)
    geometry = ConvGeometry((3, 3), stride, 1)
    features = torch.randn(previous, 2 * previous, generator=generator, dtype=torch.float64)
    omega_ii = features @ features.mT / (2 * previous)  # [M', M']
    omega_ti = torch.randn(images, side, side, previous, generator=generator, dtype=torch.float64)
    omega_tt = torch.rand(images, side, side, generator=generator, dtype=torch.float64)
    mixing = torch.randn(inducing, previous, 3, 3, generator=generator, dtype=torch.float64)
    pairs = {
        "inducing": (
            lambda: convolve_inducing(omega_ii, mixing),
            lambda: naive_inducing(omega_ii, mixing),
        ),
        "cross": (
            lambda: convolve_cross(omega_ti, mixing, geometry),
            lambda: naive_cross(omega_ti, mixing, geometry),
        ),
        "diagonal": (
            lambda: convolve_diagonal(omega_tt, geometry),
            lambda: naive_diagonal(omega_tt, geometry),
        ),
    }
    case = {"P": images, "H": side, "M_below": previous, "M": inducing, "stride": stride}
    with torch.no_grad():
        for name, (zonal, naive) in pairs.items():
            difference = (zonal() - naive()).abs().max().item()
            zonal_s, naive_s = best_seconds(zonal, naive, repeats=repeats)
            case[name] = {
                "max_abs_difference": difference,
                "zonal_s": zonal_s,
                "naive_s": naive_s,
                "ratio_naive_over_zonal": naive_s / zonal_s,
            }
    return case


# ---------------------------------------------------------------------- memory of one step
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def parse_inducing(text: str) -> tuple[int, int, int]:
    """(16, 32, 64) from "16/32/64": inducing points of the three stages."""
    try:
        counts = tuple(int(part) for part in text.split("/"))
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"expected M per stage like 16/32/64, got {text!r}"
        ) from error
    if len(counts) != 3 or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            f"expected three positive counts like 16/32/64, got {text!r}"
        )
    return counts


def training_step(inducing: tuple[int, ...], batch: int, blocks_per_stage: int, dtype: str) -> dict:
    """One objective + backward of a ConvDKM (this process): peak RSS and the RSS before it."""
    generator = torch.Generator().manual_seed(0)
    layers = resnet_layers(inducing, blocks_per_stage)
    first = layers[0].num_inducing
    patches = torch.randn(first, 1, 3, 3, generator=generator, dtype=torch.float64)
    model = ConvDKM(
        IMAGE_SHAPE,
        layers,
        SoftmaxLikelihood(num_classes=10, mixing_weights=False),
        inducing_patches=patches,
        nu=[math.inf if first > 9 else 1.0] + [1.0] * (len(layers) - 1),
    ).to(DTYPES[dtype])
    images = torch.rand(batch, *IMAGE_SHAPE, generator=generator, dtype=DTYPES[dtype])
    labels = torch.randint(10, (batch,), generator=generator)
    inputs = model.images_to_inputs(images)
    before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    objective = model.objective(inputs, labels, num_train=60000)
    objective.backward()
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "M": "/".join(map(str, inducing)),
        "dtype": dtype,
        "batch": batch,
        "layers": len(layers),
        "step_s": seconds,
        "rss_before_step_mib": before_kib / 1024,
        "peak_rss_mib": peak_kib / 1024,
        "step_increase_mib": (peak_kib - before_kib) / 1024,
    }


def measured_step(
    inducing: tuple[int, ...], batch: int, blocks_per_stage: int, dtype: str, threads: int
) -> dict:
    """``training_step`` in a fresh subprocess, so that ru_maxrss is that step's peak alone."""
    command = [
        sys.executable,
        __file__,
        "--step-only",
        "/".join(map(str, inducing)),
        "--dtypes",
        dtype,
        "--batch",
        str(batch),
        "--blocks-per-stage",
        str(blocks_per_stage),
        "--threads",
        str(threads),
    ]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def versions() -> dict[str, str]:
    found = {}
    for package in ("torch", "gpytorch", "zonal"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def algebra_table(repeats: int) -> list[dict]:
    """Agreement and speed of zonal's Gram algebra against the naive peer at ``ALGEBRA_SIZES``."""
    print(
        f"Convolutional DKM Gram algebra, float64, 3x3 filters, padding 1, torch threads = "
        f"{torch.get_num_threads()} (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}), "
        f"best of {repeats} alternating runs after a warm-up"
    )
    header = f"{'P':>3} {'H':>3} {'M_below':>7} {'M':>3} {'str':>3}  {'block':<9}"
    print(f"{header} {'max|diff|':>10} {'zonal s':>10} {'naive s':>10} {'naive/zonal':>11}")
    cases = []
    for index, size in enumerate(ALGEBRA_SIZES):
        case = algebra_case(size, repeats, seed=index)
        cases.append(case)
        for name in ("inducing", "cross", "diagonal"):
            row = case[name]
            print(
                f"{case['P']:>3} {case['H']:>3} {case['M_below']:>7} {case['M']:>3} "
                f"{case['stride']:>3}  {name:<9} {row['max_abs_difference']:>10.1e} "
                f"{row['zonal_s']:>10.2e} {row['naive_s']:>10.2e} "
                f"{row['ratio_naive_over_zonal']:>11.1f}"
            )
    return cases


def memory_table(args: argparse.Namespace) -> list[dict]:
    """Peak memory of one training step per inducing configuration and dtype, each in a fresh
    process, and the float64 / float32 ratio of the step's increase."""
    layers = len(resnet_layers((1, 1, 1), args.blocks_per_stage))
    print(
        f"\nOne ConvDKM training step (objective + backward), B = {args.batch} random "
        f"{IMAGE_SHAPE} images, ResNet stack with {args.blocks_per_stage} block(s) per stage "
        f"({layers} Gram layers), M inducing points per stage, GAP top, 10-class softmax, "
        f"each in a fresh process"
    )
    print(
        f"{'M':>11} {'dtype':>8} {'step s':>8} {'RSS before MiB':>15} {'peak RSS MiB':>13} "
        f"{'increase MiB':>13} {'f64/f32':>8}"
    )
    steps = []
    for inducing in args.inducing:
        by_dtype = {}
        for dtype in args.dtypes:
            step = measured_step(inducing, args.batch, args.blocks_per_stage, dtype, args.threads)
            by_dtype[dtype] = step
            steps.append(step)
            ratio = math.nan
            if dtype == "float32" and "float64" in by_dtype and step["step_increase_mib"] > 0:
                ratio = by_dtype["float64"]["step_increase_mib"] / step["step_increase_mib"]
                step["increase_ratio_float64_over_float32"] = ratio
            print(
                f"{step['M']:>11} {dtype:>8} {step['step_s']:>8.2f} "
                f"{step['rss_before_step_mib']:>15.0f} {step['peak_rss_mib']:>13.0f} "
                f"{step['step_increase_mib']:>13.0f} {ratio:>8.2f}"
            )
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--batch", type=int, default=256, help="images in the training step")
    parser.add_argument(
        "--inducing",
        type=parse_inducing,
        nargs="+",
        default=[(16, 32, 64), (32, 64, 128)],
        help="inducing points per stage, e.g. 16/32/64 (seed 003 table 2)",
    )
    parser.add_argument("--dtypes", nargs="+", choices=tuple(DTYPES), default=list(DTYPES))
    parser.add_argument("--blocks-per-stage", type=int, default=3, help="3 is the seed's stack")
    parser.add_argument("--skip-algebra", action="store_true", help="the memory table only")
    parser.add_argument("--step-only", type=parse_inducing, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.step_only is not None:
        step = training_step(args.step_only, args.batch, args.blocks_per_stage, args.dtypes[0])
        print(json.dumps(step))
        return

    cases = [] if args.skip_algebra else algebra_table(args.repeats)
    steps = memory_table(args)
    result = {
        "algebra": cases,
        "training_step": steps,
        "repeats": args.repeats,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "platform": platform.platform(),
        "processor": platform.processor(),
        "versions": versions(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(RESULTS, result)
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
