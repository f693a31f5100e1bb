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
the yardstick, so the per-row time before and after are compared in this run (CPU only).

``--device`` (default ``cpu``; ``cuda`` or ``cuda:<i>``): the model, the rows and every buffer on
that device, and every timing synchronises the device before it reads the clock. The thread
counts are the CPU's: on a GPU the table is measured once, at the host's thread count as it is,
and the GPU's name is recorded.

``--pass-rows N`` (default 0: off): after the table, one whole statistics pass over N rows through
the library's own pass, ``SGPR.fit_statistics`` over an iterator of chunks of ``--rows`` rows
(the distribution of ``make_rows``, drawn chunk by chunk on the device by a seeded generator there,
so that 10^7 rows never sit on the host; the same rows for both dtypes), once in float64 and once
with the float32 option (``SGPR.statistics_dtype = torch.float32``: float32 per-chunk work, float64
totals), each after an untimed one-chunk pass (warm-up), on the CPU at the last of ``--threads``.
Per dtype: seconds (synchronised; drawing the rows is included, a small share), rows per second,
peak device memory of the timed pass (CUDA: ``torch.cuda.max_memory_allocated``; null on the CPU)
and the collapsed bound (``SGPR.elbo``) of the model as constructed (no training); float32 against
float64: the relative Frobenius difference of the statistics Phi_r^T Phi_r and Phi_r^T y, and the
bound's difference (absolute, per row and relative).

``--recurrence-rows R`` (default 0: off; needs ``--pass-rows``): a what-if, not the user's path,
then the same whole pass again with the features finished in blocks of R rows instead of the
library's ``zonal.features.zonal_basis.recurrence_rows(device)``: 256 on a CPU (sized for a core's
cache), 65,536 on a GPU, where each block costs a dozen kernel launches; R = 256 on a GPU shows
what the CPU's blocks cost there (14.7x slower on an H200: the reason for the GPU's size).

The JSON (``--output``, default ``benchmarks/results/statistics_pass.json``) is rewritten after
every stage, atomically (a temporary file beside it, then ``os.replace``); a stage that fails
records its traceback in the JSON and the next stage still runs; the exit status is then 1.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/statistics_pass.py [--rows 16384]
        [--threads 1 2] [--before /tmp/zonal_before/src] [--pass-rows 1000000]
        [--device cpu] [--recurrence-rows 16384] [--output benchmarks/results/statistics_pass.json]

On a GPU (an H200: well under a minute of work after the start-up), from the repository root:

    PYTHONPATH=src python benchmarks/statistics_pass.py --device cuda --rows 262144 \
        --pass-rows 10000000 --repeats 3 --recurrence-rows 256 \
        --output $OUT/statistics_pass_cuda.json
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

INPUT_DIM = 8
FREQUENCIES = 5  # degrees 0..4: 660 harmonics on S^8
KERNEL_DEGREE = 8
CPU = torch.device("cpu")


def make_model():
    """The SGPR of ``benchmarks/sgpr_large_n.py`` (continuous-depth kernel, 660 harmonics)."""
    from zonal.experiments.seed002_common import continuous_depth_kernel, harmonic_features
    from zonal.models import SGPR

    kernel = continuous_depth_kernel(INPUT_DIM + 1, KERNEL_DEGREE, None)
    features = harmonic_features("complete", INPUT_DIM + 1, FREQUENCIES, 0, seed=0)
    return SGPR(kernel, features, INPUT_DIM)


def synthetic_rows(
    rows: int, generator: torch.Generator, device: torch.device = CPU
) -> tuple[torch.Tensor, torch.Tensor]:
    """x ~ N(0, I_8), y = sin(x_1) x_2 + 0.1 x_3 + 0.1 eps: [rows, 8], [rows] (float64), drawn on
    ``device`` by ``generator`` (a generator of that device)."""
    x = torch.randn(rows, INPUT_DIM, generator=generator, dtype=torch.float64, device=device)
    noise = torch.randn(rows, generator=generator, dtype=torch.float64, device=device)
    return x, torch.sin(x[:, 0]) * x[:, 1] + 0.1 * x[:, 2] + 0.1 * noise


def make_rows(rows: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``synthetic_rows`` on the CPU from ``seed``: [rows, 8], [rows] (float64)."""
    return synthetic_rows(rows, torch.Generator().manual_seed(seed))


def device_chunks(
    rows: int, chunk_rows: int, device: torch.device, seed: int = 0
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``rows`` rows of ``synthetic_rows`` in chunks of ``chunk_rows`` (the last one shorter), each
    drawn on ``device`` when it is asked for, by one generator on that device seeded ``seed``: the
    same rows on every call."""
    generator = torch.Generator(device=device).manual_seed(seed)
    for start in range(0, rows, chunk_rows):
        yield synthetic_rows(min(chunk_rows, rows - start), generator, device)


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (a GPU's kernels run asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(function: Callable[[], object], repeats: int, device: torch.device = CPU) -> float:
    """Median wall-clock seconds of ``repeats`` calls (after one warm-up call), the device
    synchronised before each reading of the clock."""
    function()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        function()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: torch.device) -> int | None:
    """Bytes of device memory at most allocated since ``reset_peak_memory`` (None on the CPU)."""
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def measure(rows: int, repeats: int, device: torch.device = CPU) -> dict:
    """Per-chunk seconds of the parts (module docstring) at the current thread count."""
    from zonal.models.sgpr_statistics import add_upper_gram_

    model = make_model().to(device)
    x, y = (values.to(device) for values in make_rows(rows))
    checked = model._checked_rows(x, y, 0)
    result: dict = {"M": model.features.num_inducing, "rows": rows}
    for dtype in (torch.float64, torch.float32):
        name = str(dtype).removeprefix("torch.")
        kernel = model.statistics_kernel(dtype)
        totals = kernel.empty()
        zonal, _ = kernel._zonal_rows(checked[0])  # [n, M]
        result[name] = {
            "features_s": timed(lambda k=kernel: k._zonal_rows(checked[0]), repeats, device),
            "gram_s": timed(lambda z=zonal, t=totals: add_upper_gram_(t[0], z), repeats, device),
            "matmul_s": timed(lambda z=zonal: torch.matmul(z.mT, z), repeats, device),
            "pass_s": timed(
                lambda k=kernel, t=totals: k.add_(t, *model._checked_rows(x, y, 0)),
                repeats,
                device,
            ),
            "finish_s": timed(lambda k=kernel, t=totals: k.finish(t), repeats, device),
        }
        part = result[name]
        part["pass_us_per_row"] = part["pass_s"] / rows * 1e6
        part["pass_rows_per_s"] = rows / part["pass_s"]
        part["features_over_matmul"] = part["features_s"] / part["matmul_s"]
        part["gram_over_matmul"] = part["gram_s"] / part["matmul_s"]
    result["features32_over_matmul64"] = (
        result["float32"]["features_s"] / result["float64"]["matmul_s"]
    )
    return result


def relative_difference(value: torch.Tensor, reference: torch.Tensor) -> float:
    """||value - reference||_F / ||reference||_F."""
    return float(torch.linalg.norm(value - reference) / torch.linalg.norm(reference))


def measure_pass(rows: int, chunk_rows: int, device: torch.device = CPU, seed: int = 0) -> dict:
    """One whole ``SGPR.fit_statistics`` pass over ``rows`` rows drawn on ``device``
    (``device_chunks``) in float64 and with the float32 option (module docstring)."""
    model = make_model().to(device)
    result: dict = {"rows": rows, "chunk_rows": chunk_rows, "chunks": -(-rows // chunk_rows)}
    statistics_of: dict[str, tuple[torch.Tensor, torch.Tensor, float]] = {}
    for dtype in (torch.float64, torch.float32):
        name = str(dtype).removeprefix("torch.")
        model.statistics_dtype = dtype  # the user's option (float64 totals either way)
        # warm-up: one chunk of other rows (kernels loaded, the allocator's blocks cached)
        model.fit_statistics(
            chunks=device_chunks(min(rows, chunk_rows), chunk_rows, device, seed + 1)
        )
        synchronize(device)
        reset_peak_memory(device)
        start = time.perf_counter()
        model.fit_statistics(chunks=device_chunks(rows, chunk_rows, device, seed))
        synchronize(device)
        seconds = time.perf_counter() - start
        part: dict = {
            "seconds": seconds,
            "rows_per_s": rows / seconds,
            "us_per_row": seconds / rows * 1e6,
            "peak_memory_bytes": peak_memory(device),
            "counted_rows": int(model.stat_count),
        }
        result[name] = part
        with torch.no_grad():
            try:
                bound = float(model.elbo())
            except Exception:  # the timings stand without the bound
                part["elbo_error"] = traceback.format_exc()
                bound = float("nan")
        part["elbo"] = bound
        part["elbo_per_row"] = bound / rows
        statistics_of[name] = (model.stat_gram.clone(), model.stat_cross.clone(), bound)
    gram64, cross64, bound64 = statistics_of["float64"]
    gram32, cross32, bound32 = statistics_of["float32"]
    result["float32_vs_float64"] = {
        "gram_relative_frobenius": relative_difference(gram32, gram64),
        "cross_relative_frobenius": relative_difference(cross32, cross64),
        "elbo_difference": bound32 - bound64,
        "elbo_difference_per_row": (bound32 - bound64) / rows,
        "elbo_relative_difference": abs(bound32 - bound64) / abs(bound64),
        "speed_up": result["float64"]["seconds"] / result["float32"]["seconds"],
    }
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


def write_json(path: Path, data: dict) -> None:
    """``data`` as JSON at ``path``, atomically (``zonal._files.write_json_atomic``)."""
    from zonal._files import write_json_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)


def resolve_device(name: str) -> torch.device:
    """The device named ``name`` (``cpu``, ``cuda``, ``cuda:<i>``); a bare ``cuda`` is the current
    GPU, given its index so that generators and tensors agree."""
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: CUDA is not available")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    elif device.type != "cpu":
        raise ValueError(f"--device {name}: only cpu and cuda are timed (synchronised)")
    return device


def environment(device: torch.device) -> dict:
    """What ran the benchmark: torch, its threads, the float32 matmul setting, the device (a GPU
    by name); a setting torch cannot tell is recorded as the error it gave."""

    def setting(read: Callable[[], object]) -> object:
        try:
            return read()
        except Exception as error:  # a setting is a note, never a reason to stop
            return f"unknown ({type(error).__name__}: {error})"

    described = {"torch": torch.__version__, "device": str(device)}
    described["host_threads"] = torch.get_num_threads()
    described["float32_matmul_precision"] = setting(torch.get_float32_matmul_precision)
    if device.type == "cuda":
        described["device_name"] = torch.cuda.get_device_name(device)
        described["cuda"] = torch.version.cuda
        described["tf32_matmul"] = setting(lambda: torch.backends.cuda.matmul.allow_tf32)
    return described


def print_table(results: dict, args: argparse.Namespace, device: torch.device) -> None:
    """The per-chunk table at each thread count (one count on a GPU): printed and stored."""
    header = (
        f"{'thr':>3} {'dtype':>7} {'feat s':>8} {'gram s':>8} {'matmul s':>8} {'feat/mm':>7} "
        f"{'gram/mm':>7} {'pass s':>8} {'us/row':>7} {'rows/s':>10}"
    )
    where = results["environment"].get("device_name", str(device))
    print(
        f"per chunk of {args.rows} rows, M = 660 on {where} (wall clock, median of {args.repeats})"
    )
    print(header)
    thread_counts = args.threads if device.type == "cpu" else [torch.get_num_threads()]
    reset_peak_memory(device)
    for threads in thread_counts:
        if device.type == "cpu":
            torch.set_num_threads(threads)
        entry = measure(args.rows, args.repeats, device)
        for name in ("float64", "float32"):
            part = entry[name]
            print(
                f"{threads:>3} {name:>7} {part['features_s']:8.4f} {part['gram_s']:8.4f} "
                f"{part['matmul_s']:8.4f} {part['features_over_matmul']:7.3f} "
                f"{part['gram_over_matmul']:7.3f} {part['pass_s']:8.4f} "
                f"{part['pass_us_per_row']:7.2f} {part['pass_rows_per_s']:10.4g}"
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
        results["table_peak_memory_bytes"] = peak_memory(device)
        write_json(args.output, results)
    first = results["by_threads"][str(thread_counts[0])]
    for threads in thread_counts[1:]:
        entry = results["by_threads"][str(threads)]
        print(
            f"{threads} threads vs {thread_counts[0]}: pass float64 "
            f"{first['float64']['pass_s'] / entry['float64']['pass_s']:.2f}x faster, float32 "
            f"{first['float32']['pass_s'] / entry['float32']['pass_s']:.2f}x, bare matmul "
            f"{first['float64']['matmul_s'] / entry['float64']['matmul_s']:.2f}x"
        )


@contextlib.contextmanager
def overridden_recurrence_rows(rows: int, device: torch.device = CPU) -> Iterator[None]:
    """Within the block, the features on ``device`` finish blocks of ``rows`` rows instead of the
    library's (``zonal.features.zonal_basis.recurrence_rows``: 256 on a CPU, sized for a core's
    cache, 65,536 on an accelerator; 0: unchanged)."""
    module = importlib.import_module("zonal.features.zonal_basis")
    name = "RECURRENCE_ROWS" if device.type == "cpu" else "ACCELERATOR_RECURRENCE_ROWS"
    saved = getattr(module, name)
    if rows:
        setattr(module, name, rows)
    try:
        yield
    finally:
        setattr(module, name, saved)


def print_pass(
    results: dict, args: argparse.Namespace, device: torch.device, blocks: int = 0
) -> None:
    """The whole pass over ``--pass-rows`` rows in both dtypes (the features in blocks of
    ``blocks`` rows, 0: the library's): printed and stored."""
    where = results["environment"].get("device_name", str(device))
    threads = "" if device.type != "cpu" else f", {torch.get_num_threads()} thread(s)"
    what = "" if not blocks else f", the recurrence in blocks of {blocks} rows (not the default)"
    print(
        f"whole pass (SGPR.fit_statistics) over {args.pass_rows} rows in chunks of {args.rows} "
        f"on {where}{threads}{what}"
    )
    with overridden_recurrence_rows(blocks, device):
        entry = measure_pass(args.pass_rows, args.rows, device)
    entry["host_threads"] = torch.get_num_threads()
    entry["recurrence_rows"] = blocks or importlib.import_module(
        "zonal.features.zonal_basis"
    ).recurrence_rows(device)
    results["pass" if not blocks else "pass_recurrence_rows"] = entry
    print(f"{'dtype':>7} {'seconds':>9} {'rows/s':>10} {'us/row':>7} {'peak MiB':>9} {'bound':>14}")
    for name in ("float64", "float32"):
        part = entry[name]
        peak = part["peak_memory_bytes"]
        peak_text = "-" if peak is None else f"{peak / 2**20:.0f}"
        print(
            f"{name:>7} {part['seconds']:9.3f} {part['rows_per_s']:10.4g} "
            f"{part['us_per_row']:7.3f} {peak_text:>9} {part['elbo']:14.6e}"
        )
    compared = entry["float32_vs_float64"]
    print(
        f"float32 vs float64: {compared['speed_up']:.2f}x faster; Phi^T Phi relative Frobenius "
        f"difference {compared['gram_relative_frobenius']:.2e}, Phi^T y "
        f"{compared['cross_relative_frobenius']:.2e}; bound {compared['elbo_difference']:+.4e} "
        f"({compared['elbo_difference_per_row']:+.2e} per row, relative "
        f"{compared['elbo_relative_difference']:.2e})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16384, help="rows per chunk")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="torch threads (CPU only)"
    )
    parser.add_argument("--before", type=Path, default=None, help="src folder of an older zonal")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:<i>")
    parser.add_argument(
        "--pass-rows", type=int, default=0, help="rows of a whole pass after the table (0: none)"
    )
    parser.add_argument(
        "--recurrence-rows",
        type=int,
        default=0,
        help="also the whole pass with the features in blocks of this many rows (0: not run)",
    )
    parser.add_argument(
        "--output", type=Path, default=Path("benchmarks/results/statistics_pass.json")
    )
    args = parser.parse_args()
    if args.rows < 1 or args.repeats < 1 or args.pass_rows < 0 or args.recurrence_rows < 0:
        parser.error("--rows and --repeats must be positive, --pass-rows and --recurrence-rows not")
    if args.recurrence_rows and not args.pass_rows:
        parser.error("--recurrence-rows times a whole pass: give --pass-rows too")
    try:
        device = resolve_device(args.device)
    except ValueError as error:
        parser.error(str(error))
    if args.before is not None and device.type != "cpu":
        parser.error("--before times the older zonal on the CPU: use it with --device cpu")
    results: dict = {
        "rows": args.rows,
        "pass_rows": args.pass_rows,
        "environment": environment(device),
        "by_threads": {},
    }
    failed = False
    stages = [("table", print_table)]
    if args.pass_rows:
        stages.append(("pass", print_pass))
    if args.recurrence_rows:
        stages.append(
            (
                "pass_recurrence_rows",
                lambda *arguments: print_pass(*arguments, blocks=args.recurrence_rows),
            )
        )
    for stage, run in stages:
        try:
            run(results, args, device)
        except Exception:  # the other stages still run, every figure is kept
            failed = True
            results.setdefault("errors", {})[stage] = traceback.format_exc()
            print(f"{stage} failed:\n{results['errors'][stage]}", file=sys.stderr)
        write_json(args.output, results)
    print(f"wrote {args.output}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
