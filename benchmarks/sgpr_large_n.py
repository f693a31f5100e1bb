"""Large N: the one-pass harmonic SGPR against minibatch SVGPs (zonal's, with the same harmonic
features and kernel, and GPyTorch's with learned inducing points and an RBF-ARD kernel), on the
flights regression (the airline-delay stand-in, 273,853 x 8) at growing N; optionally the SGPR's
statistics pass alone on synthetic data streamed from a memory-mapped file at 10^6 / 10^7 rows.

The claim under test (seed 001 ch. 3, VISH): on a 6-million-point airline regression the harmonic
SGPR was two orders of magnitude faster than SVGP at the same accuracy. Here, for each N (a
random subset of the training rows; a fixed 20% of the rows is the test set, or ``--test-rows``
of them; inputs and target standardised with the training statistics):

- SGPR: one statistics pass (``fit_statistics``, chunks of ``--chunk-size``), then
  ``--lbfgs-steps`` L-BFGS iterations on the collapsed bound. Its test RMSE is the target.
- each SVGP: Adam (lr 0.01, minibatches of 1024) from its default initialisation, the test RMSE
  evaluated every ``--eval-every`` steps (off the clock) until it is at most the SGPR's (matched),
  or has not improved for ``--patience`` evaluations (plateau), or ``--max-seconds`` have passed.

Printed: the SGPR's time and RMSE, each SVGP's time to match (or its best RMSE and the time it
stopped) and the ratio SVGP time / SGPR time, all in one run on the same data and threads. Times
are CPU seconds of the process (``time.process_time``, one thread: on a shared machine the wall
clock measures the neighbours), except the Dask passes (wall clock: the work is in the workers). JSON
goes to ``benchmarks/results/sgpr_large_n.json``. ``--stream 1000000 10000000`` adds the streamed
statistics pass (time and peak resident memory of a process that only does that pass; the rows are
never all in memory), and ``--dask-workers 1 2`` the same pass as a Dask map-reduce
(``zonal.distributed``) on a LocalCluster of that many single-threaded worker processes (for the
streamed sizes up to ``--dask-max-rows``).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sgpr_large_n.py [--quick] [--stream 1000000]
        [--dask-workers 1 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch

from zonal.datasets import Standardizer, load_dataset, train_test_split
from zonal.experiments._baselines import InducingPointSVGP
from zonal.experiments.seed002_common import continuous_depth_kernel, harmonic_features
from zonal.models import SGPR, SVGP
from zonal.models.training import StopTraining, fit_svgp
from zonal.recipes import gaussian_likelihood

FREQUENCIES = 5  # complete harmonics of degrees 0..4: 660 features in d = 9
KERNEL_DEGREE = 8
INITIAL_BETA = None  # d, the ReLU NTK's decay (seed002_common.continuous_depth_kernel)
BATCH_SIZE = 1024
STREAM_INPUT_DIM = 8


def rmse(model, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        mean, _ = model.predict(x)
    return float(((mean - y) ** 2).mean().sqrt())


def zonal_parts(input_dim: int):
    kernel = continuous_depth_kernel(input_dim + 1, KERNEL_DEGREE, INITIAL_BETA)
    features = harmonic_features("complete", input_dim + 1, FREQUENCIES, 0, seed=0)
    return kernel, features


def run_sgpr(x, y, x_test, y_test, chunk_size: int, steps: int) -> dict:
    kernel, features = zonal_parts(x.shape[1])
    model = SGPR(kernel, features, x.shape[1])
    start = time.process_time()
    model.fit_statistics(x, y, chunk_size=chunk_size)
    data_pass = time.process_time() - start
    model.fit(max_iter=steps)
    seconds = time.process_time() - start
    return {
        "M": features.num_inducing,
        "data_pass_s": data_pass,
        "seconds": seconds,
        "test_rmse": rmse(model, x_test, y_test),
        "matched": True,
    }


def run_svgp(model, num_inducing: int, x, y, x_test, y_test, target: float, args) -> dict:
    """Adam until the test RMSE reaches ``target``, plateaus, or the time budget is spent: the
    time at which it reached the target, else its best RMSE and the time it stopped."""
    clock = {"seconds": 0.0, "started": time.process_time()}
    history: list[tuple[float, float, int]] = []  # (seconds, rmse, step)

    def callback(step: int, loss: float) -> None:
        if (step + 1) % args.eval_every:
            return
        clock["seconds"] += time.process_time() - clock["started"]
        value = rmse(model, x_test, y_test)
        model.train()
        history.append((clock["seconds"], value, step + 1))
        best = min(h[1] for h in history)
        stalled = len(history) > args.patience and all(
            h[1] > best for h in history[-args.patience :]
        )
        if value <= target or stalled or clock["seconds"] > args.max_seconds:
            raise StopTraining
        clock["started"] = time.process_time()

    fit_svgp(
        model, x, y, num_steps=10**9, batch_size=BATCH_SIZE, lr=0.01, seed=0, callback=callback
    )
    reached = next((h for h in history if h[1] <= target), None)
    seconds, value, step = reached or (history[-1][0], min(h[1] for h in history), history[-1][2])
    return {
        "M": num_inducing,
        "data_pass_s": 0.0,
        "seconds": seconds,
        "test_rmse": value,
        "steps": step,
        "matched": reached is not None,
    }


def write_synthetic(num_rows: int, chunk_size: int, folder: Path) -> tuple[Path, Path]:
    """A synthetic table x [num_rows, 8], y [num_rows] written to .npy files chunk by chunk."""
    paths = folder / f"x{num_rows}.npy", folder / f"y{num_rows}.npy"
    x = np.lib.format.open_memmap(paths[0], "w+", np.float64, (num_rows, STREAM_INPUT_DIM))
    y = np.lib.format.open_memmap(paths[1], "w+", np.float64, (num_rows,))
    generator = np.random.default_rng(0)
    for start in range(0, num_rows, chunk_size):
        rows = generator.standard_normal((min(chunk_size, num_rows - start), STREAM_INPUT_DIM))
        x[start : start + len(rows)] = rows
        y[start : start + len(rows)] = np.sin(rows[:, 0]) * rows[:, 1] + 0.1 * rows[:, 2]
    x.flush()
    y.flush()
    return paths


def streamed_pass(paths: tuple[Path, Path], chunk_size: int) -> dict:
    """The SGPR's statistics pass over memory-mapped files (run in a fresh process, so that its
    peak resident memory is the pass's own plus the interpreter's)."""
    x, y = (np.load(path, mmap_mode="r") for path in paths)
    kernel, features = zonal_parts(STREAM_INPUT_DIM)
    model = SGPR(kernel, features, STREAM_INPUT_DIM)
    start = time.process_time()
    model.fit_statistics(x, y, chunk_size=chunk_size)
    seconds = time.process_time() - start
    return {
        "N": len(x),
        "data_bytes_mib": x.nbytes / 2**20 + y.nbytes / 2**20,
        "data_pass_s": seconds,
        "rows_per_s": len(x) / seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def read_rows(path: Path, start: int, stop: int) -> np.ndarray:
    return np.array(np.load(path, mmap_mode="r")[start:stop])


def dask_pass(paths: tuple[Path, Path], chunk_size: int, workers: int) -> dict:
    """The same pass as a Dask map-reduce (``zonal.distributed``) on a LocalCluster of
    ``workers`` single-threaded processes; each task reads its rows from the files itself."""
    from dask import array as da
    from dask import delayed
    from distributed import Client, LocalCluster

    from zonal.distributed import fit_statistics_distributed

    num_rows = len(np.load(paths[1], mmap_mode="r"))
    starts = range(0, num_rows, chunk_size)
    x = da.concatenate(
        [
            da.from_delayed(
                delayed(read_rows)(paths[0], i, min(i + chunk_size, num_rows)),
                (min(chunk_size, num_rows - i), STREAM_INPUT_DIM),
                np.float64,
            )
            for i in starts
        ]
    )
    y = da.concatenate(
        [
            da.from_delayed(
                delayed(read_rows)(paths[1], i, min(i + chunk_size, num_rows)),
                (min(chunk_size, num_rows - i),),
                np.float64,
            )
            for i in starts
        ]
    )
    kernel, features = zonal_parts(STREAM_INPUT_DIM)
    model = SGPR(kernel, features, STREAM_INPUT_DIM)
    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        client.run(torch.set_num_threads, 1)
        start = time.perf_counter()
        fit_statistics_distributed(model, x, y, scheduler=client)
        seconds = time.perf_counter() - start
    return {"N": num_rows, "workers": workers, "seconds": seconds, "rows_per_s": num_rows / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--chunk-size", type=int, default=16384)
    parser.add_argument("--lbfgs-steps", type=int, default=50)
    parser.add_argument("--num-inducing", type=int, default=500, help="GPyTorch SVGP's M")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--patience", type=int, default=5)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--test-rows", type=int, default=0, help="evaluate on a subset (0: all)")
    parser.add_argument("--stream", type=int, nargs="*", default=[])
    parser.add_argument("--dask-workers", type=int, nargs="*", default=[])
    parser.add_argument(
        "--dask-max-rows", type=int, default=200_000, help="largest streamed N on Dask"
    )
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/sgpr_large_n.json"))
    args = parser.parse_args()
    if args.quick:
        args.max_seconds = min(args.max_seconds, 60.0)
    data = load_dataset("flights")
    train, test = train_test_split(data.num_points, 0.2, seed=0)
    if args.test_rows:
        test = np.sort(np.random.default_rng(2).permutation(test)[: args.test_rows])
    sizes = args.sizes or ([10_000, 30_000] if args.quick else [10_000, 100_000, len(train)])
    threads = torch.get_num_threads()
    print(f"flights {data.X.shape}, threads={threads}, test rows={len(test)}")
    header = "       N | model              |    M |  seconds | test RMSE | matched | SVGP/SGPR"
    print(header)
    rows = []
    order = np.random.default_rng(1).permutation(train)
    for size in sizes:
        rows_used = np.sort(order[:size])
        x_scaler = Standardizer.fit(data.X[rows_used])
        y_scaler = Standardizer.fit(data.y[rows_used])
        x = torch.as_tensor(x_scaler.transform(data.X[rows_used]))
        y = torch.as_tensor(y_scaler.transform(data.y[rows_used]))
        x_test = torch.as_tensor(x_scaler.transform(data.X[test]))
        y_test = torch.as_tensor(y_scaler.transform(data.y[test]))
        torch.manual_seed(0)
        sgpr = run_sgpr(x, y, x_test, y_test, args.chunk_size, args.lbfgs_steps)
        results = {"zonal SGPR (1 pass)": sgpr}
        kernel, features = zonal_parts(x.shape[1])
        zonal_svgp = SVGP(kernel, features, x.shape[1], likelihood=gaussian_likelihood())
        results["zonal SVGP"] = run_svgp(
            zonal_svgp, features.num_inducing, x, y, x_test, y_test, sgpr["test_rmse"], args
        )
        start = torch.randperm(size, generator=torch.Generator().manual_seed(0))
        peer = InducingPointSVGP(x[start[: args.num_inducing]], "rbf")
        results["GPyTorch SVGP RBF"] = run_svgp(
            peer, args.num_inducing, x, y, x_test, y_test, sgpr["test_rmse"], args
        )
        for name, result in results.items():
            ratio = result["seconds"] / sgpr["seconds"]
            rows.append({"num_points": size, "model": name, "ratio_to_sgpr": ratio, **result})
            print(
                f"{size:8d} | {name:18s} | {result['M']:4d} | {result['seconds']:8.2f} | "
                f"{result['test_rmse']:9.4f} | {'yes' if result['matched'] else 'no':7s} | "
                f"{ratio:8.1f}x"
            )
    streamed, distributed = [], []
    with tempfile.TemporaryDirectory() as folder:
        for size in args.stream:
            paths = write_synthetic(size, args.chunk_size, Path(folder))
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(1, mp_context=context) as pool:
                entry = pool.submit(streamed_pass, paths, args.chunk_size).result()
            streamed.append(entry)
            print(
                f"streamed N={size}: {entry['data_bytes_mib']:.0f} MiB on disk, pass "
                f"{entry['data_pass_s']:.1f} s ({entry['rows_per_s']:.0f} rows/s), peak RSS of "
                f"the pass's process {entry['peak_rss_mib']:.0f} MiB"
            )
            for workers in args.dask_workers if size <= args.dask_max_rows else []:
                distributed.append(dask_pass(paths, args.chunk_size, workers))
                entry = distributed[-1]
                print(
                    f"  dask LocalCluster, {workers} worker process(es) of 1 thread on "
                    f"{os.cpu_count()} cores: {entry['seconds']:.1f} s "
                    f"({entry['rows_per_s']:.0f} rows/s)"
                )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "threads": threads,
        "rows": rows,
        "streamed": streamed,
        "dask": distributed,
        "cores": os.cpu_count(),
        "settings": {k: v for k, v in vars(args).items() if k != "output"},
    }
    args.output.write_text(json.dumps(record, indent=2, default=str))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
