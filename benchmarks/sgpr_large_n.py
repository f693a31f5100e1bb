"""Large N: the one-pass harmonic SGPR against minibatch SVGPs (zonal's, with the same harmonic
features and kernel, and GPyTorch's with learned inducing points and an RBF-ARD kernel), on the
flights regression (the airline-delay stand-in, 273,853 x 8) at growing N, and end to end on
synthetic data streamed from memory-mapped files at N = 10^5 .. 10^7.

The claim under test (seed 001 ch. 3, VISH): on a 6-million-point airline regression the harmonic
SGPR was two orders of magnitude faster than SVGP at the same accuracy. For each N:

- SGPR: one statistics pass (``fit_statistics``, chunks of ``--chunk-size``), then
  ``--lbfgs-steps`` L-BFGS iterations on the collapsed bound. Its test RMSE is the target.
- each SVGP: Adam (lr 0.01, minibatches of 1024) from its default initialisation, the test RMSE
  evaluated every ``--eval-every`` steps (off the clock) until it is at most the SGPR's (matched),
  or has not improved for ``--patience`` evaluations (plateau), or ``--max-seconds`` have passed
  (time cap). Unmatched, the ratio SVGP time / SGPR time is a lower bound (printed ``>=``).

Flights (``--flights``, the default): a random subset of N training rows, a fixed 20% of the rows
(or ``--test-rows`` of them) as the test set, inputs and target standardised with the training
statistics; all in memory.

Synthetic (``--synthetic 100000 1000000 10000000``): x ~ N(0, I_8) and

    y = sin(x_1) x_2 + 0.1 x_3 + 0.1 eps,     eps ~ N(0, 1)    (noise variance 0.01, Var y ~ 0.45),

written chunk by chunk (never all in memory) into .npy files in a temporary folder: N training rows
followed by N / 4 test rows (20% of the file, a fixed slice), of which the first ``--test-rows``
(default 20,000) are the test set. The SGPR streams the training rows chunk by chunk; the SVGPs
draw their minibatches (epochs of a permutation) from the same files. Each fit runs in a fresh
process, so that its peak resident memory (``VmHWM``) is its own; every read or write maps the
file anew and copies only the rows it needs, so mapped pages never pile up in the resident set.
``--dask-workers 1 2`` repeats the SGPR's statistics pass as a Dask map-reduce
(``zonal.distributed``) on a LocalCluster of that many single-threaded worker processes for the
synthetic sizes up to ``--dask-max-rows``, and from its measured cost per row prints an estimate
for 10^9 rows on a cluster.

Times are CPU seconds of the fitting process (``time.process_time``, one thread: on a shared
machine the wall clock measures the neighbours), except the Dask passes (wall clock: the work is in
the workers). JSON goes to ``benchmarks/results/sgpr_large_n.json``.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sgpr_large_n.py [--quick] [--no-flights]
        [--synthetic 100000 1000000] [--dask-workers 1 2] [--max-seconds 300]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import gpytorch
import numpy as np
import torch
from tqdm.auto import tqdm

from zonal._files import write_json_atomic
from zonal.datasets import Standardizer, load_dataset, train_test_split
from zonal.experiments._baselines import InducingPointSVGP
from zonal.experiments.seed002_common import continuous_depth_kernel, harmonic_features
from zonal.models import SGPR, SVGP
from zonal.models.training import StopTraining, adam_on_minibatches, fit_svgp
from zonal.recipes import gaussian_likelihood

FREQUENCIES = 5  # complete harmonics of degrees 0..4: 660 features in d = 9
KERNEL_DEGREE = 8
INITIAL_BETA = None  # d, the ReLU NTK's decay (seed002_common.continuous_depth_kernel)
BATCH_SIZE = 1024
SYNTHETIC_INPUT_DIM = 8
SYNTHETIC_NOISE_SD = 0.1
ROWS_PER_TEST_ROW = 4  # N training rows, then N / 4 test rows: 20% of the file
#: the 10^9-row estimate: rows, rows per partition, cluster sizes (single-threaded workers)
ESTIMATE_ROWS = 10**9
ESTIMATE_PARTITION_ROWS = 10**6
ESTIMATE_WORKERS = (1, 100, 1000)

Paths = tuple[Path, Path]  # the .npy files of x [rows, 8] and y [rows]


def rmse(model, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        mean, _ = model.predict(x)
    return float(((mean - y) ** 2).mean().sqrt())


def zonal_parts(input_dim: int):
    kernel = continuous_depth_kernel(input_dim + 1, KERNEL_DEGREE, INITIAL_BETA)
    features = harmonic_features("complete", input_dim + 1, FREQUENCIES, 0, seed=0)
    return kernel, features


def memory_mib(field: str) -> float:
    """A memory figure of this process from /proc/self/status: ``VmRSS`` (resident now) or
    ``VmHWM`` (peak resident since the process's exec; unlike ``ru_maxrss``, which also keeps the
    peak of the parent that forked it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} line in /proc/self/status")


def run_sgpr(x_test: torch.Tensor, y_test: torch.Tensor, steps: int, **data) -> dict:
    """One statistics pass (``data``: the arguments of ``SGPR.fit_statistics``), then ``steps``
    L-BFGS iterations on the collapsed bound."""
    kernel, features = zonal_parts(x_test.shape[1])
    model = SGPR(kernel, features, x_test.shape[1])
    start = time.process_time()
    model.fit_statistics(**data)
    data_pass = time.process_time() - start
    model.fit(max_iter=steps)
    seconds = time.process_time() - start
    return {
        "M": features.num_inducing,
        "data_pass_s": data_pass,
        "seconds": seconds,
        "test_rmse": rmse(model, x_test, y_test),
        "matched": True,
        "stopped": "fitted",
    }


def run_svgp(
    model,
    num_inducing: int,
    train: Callable[..., object],
    x_test: torch.Tensor,
    y_test: torch.Tensor,
    target: float,
    args: argparse.Namespace,
) -> dict:
    """``train(callback=...)`` (Adam steps, each followed by ``callback(step, loss)``) until the test
    RMSE reaches ``target``, plateaus, or the time budget is spent: the time at which it reached
    the target, else its best RMSE and the time it stopped."""
    clock = {"seconds": 0.0, "started": time.process_time()}
    history: list[tuple[float, float, int]] = []  # (seconds, rmse, step)
    stopped = ["not stopped"]

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
        for reason, condition in (
            ("matched", value <= target),
            ("plateau", stalled),
            ("time cap", clock["seconds"] > args.max_seconds),
        ):
            if condition:
                stopped[0] = reason
                raise StopTraining(reason)
        clock["started"] = time.process_time()

    train(callback=callback)
    reached = next((h for h in history if h[1] <= target), None)
    seconds, value, step = reached or (history[-1][0], min(h[1] for h in history), history[-1][2])
    return {
        "M": num_inducing,
        "data_pass_s": 0.0,
        "seconds": seconds,
        "test_rmse": value,
        "steps": step,
        "matched": reached is not None,
        "stopped": stopped[0],
    }


def print_row(size: int, name: str, result: dict, sgpr_seconds: float) -> float:
    """One line of the table; returns the ratio of ``result``'s time to the SGPR's."""
    ratio = result["seconds"] / sgpr_seconds
    bound = "  " if result["matched"] else ">="
    memory = (
        f" | {result['peak_rss_mib']:8.0f} | {result['data_mib']:8.0f}"
        if "peak_rss_mib" in result
        else ""
    )
    print(
        f"{size:8d} | {name:18s} | {result['M']:4d} | {result['seconds']:8.2f} | "
        f"{result['test_rmse']:9.4f} | {result['stopped']:8s} | {bound}{ratio:7.1f}x{memory}"
    )
    return ratio


# ------------------------------------------------------------------------------- flights
def run_flights(args: argparse.Namespace) -> list[dict]:
    """The SGPR and both SVGPs at each N on flights, all in memory."""
    data = load_dataset("flights")
    train, test = train_test_split(data.num_points, 0.2, seed=0)
    if args.test_rows:
        test = np.sort(np.random.default_rng(2).permutation(test)[: args.test_rows])
    sizes = args.sizes or ([10_000, 30_000] if args.quick else [10_000, 100_000, len(train)])
    print(f"flights {data.X.shape}, test rows={len(test)}")
    print(TABLE_HEADER)
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
        sgpr = run_sgpr(x_test, y_test, args.lbfgs_steps, x=x, y=y, chunk_size=args.chunk_size)
        results = {"zonal SGPR (1 pass)": sgpr}
        kernel, features = zonal_parts(x.shape[1])
        first = torch.randperm(size, generator=torch.Generator().manual_seed(0))
        models = {
            "zonal SVGP": (
                SVGP(kernel, features, x.shape[1], likelihood=gaussian_likelihood()),
                features.num_inducing,
            ),
            "GPyTorch SVGP RBF": (
                InducingPointSVGP(x[first[: args.num_inducing]], "rbf"),
                args.num_inducing,
            ),
        }
        for name, (model, num_inducing) in models.items():
            train_in_memory = functools.partial(
                fit_svgp, model, x, y, num_steps=10**9, batch_size=BATCH_SIZE, lr=0.01, seed=0
            )
            results[name] = run_svgp(
                model, num_inducing, train_in_memory, x_test, y_test, sgpr["test_rmse"], args
            )
        for name, result in results.items():
            ratio = print_row(size, name, result, sgpr["seconds"])
            rows.append({"num_points": size, "model": name, "ratio_to_sgpr": ratio, **result})
    return rows


# ----------------------------------------------------------------------------- synthetic
def synthetic_target(x: np.ndarray) -> np.ndarray:
    """f(x) = sin(x_1) x_2 + 0.1 x_3 [n] of x [n, 8] (the noise is added by the writer)."""
    return np.sin(x[:, 0]) * x[:, 1] + 0.1 * x[:, 2]


def write_synthetic(num_train: int, chunk_size: int, folder: Path) -> Paths:
    """x [R, 8] ~ N(0, I) and y = f(x) + 0.1 eps [R], R = num_train + num_train / 4 rows, written
    to .npy files one chunk at a time (the test rows are the last num_train / 4)."""
    num_rows = num_train + num_train // ROWS_PER_TEST_ROW
    paths = folder / f"x{num_train}.npy", folder / f"y{num_train}.npy"
    np.lib.format.open_memmap(paths[0], "w+", np.float64, (num_rows, SYNTHETIC_INPUT_DIM))
    np.lib.format.open_memmap(paths[1], "w+", np.float64, (num_rows,))
    generator = np.random.default_rng(0)
    for start in tqdm(range(0, num_rows, chunk_size), desc=f"writing {num_rows} rows", leave=False):
        rows = generator.standard_normal((min(chunk_size, num_rows - start), SYNTHETIC_INPUT_DIM))
        noise = SYNTHETIC_NOISE_SD * generator.standard_normal(len(rows))
        for path, values in ((paths[0], rows), (paths[1], synthetic_target(rows) + noise)):
            target = np.load(path, mmap_mode="r+")  # a fresh map per chunk: its pages go with it
            target[start : start + len(rows)] = values
            target.flush()
            del target
    return paths


def read_rows(path: Path, start: int, stop: int) -> np.ndarray:
    """Rows start..stop of a .npy file, copied out of a fresh (then dropped) memory map."""
    return np.array(np.load(path, mmap_mode="r")[start:stop])


def read_rows_at(path: Path, index: np.ndarray) -> np.ndarray:
    """The rows ``index`` (sorted) of a .npy file, copied out of a fresh memory map."""
    return np.asarray(np.load(path, mmap_mode="r")[index])


def stream_chunks(
    paths: Paths, num_rows: int, chunk_size: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The first ``num_rows`` rows as chunks (x [n, 8], y [n]) read one at a time."""
    for start in tqdm(range(0, num_rows, chunk_size), desc="statistics pass", leave=False):
        stop = min(start + chunk_size, num_rows)
        yield (
            torch.from_numpy(read_rows(paths[0], start, stop)),
            torch.from_numpy(read_rows(paths[1], start, stop)),
        )


def synthetic_test_set(paths: Paths, num_train: int, test_rows: int) -> tuple[torch.Tensor, ...]:
    stop = num_train + min(test_rows or num_train, num_train // ROWS_PER_TEST_ROW)
    return (
        torch.from_numpy(read_rows(paths[0], num_train, stop)),
        torch.from_numpy(read_rows(paths[1], num_train, stop)),
    )


def with_memory(result: dict, num_train: int, rss_before: float) -> dict:
    return {
        **result,
        "rss_before_fit_mib": rss_before,
        "peak_rss_mib": memory_mib("VmHWM"),
        "data_mib": num_train * (SYNTHETIC_INPUT_DIM + 1) * 8 / 2**20,
    }


def synthetic_sgpr(paths: Paths, num_train: int, args: argparse.Namespace) -> dict:
    """The SGPR's fit on the streamed training rows (run in a fresh process)."""
    x_test, y_test = synthetic_test_set(paths, num_train, args.test_rows)
    rss_before = memory_mib("VmRSS")
    chunks = stream_chunks(paths, num_train, args.chunk_size)
    result = run_sgpr(x_test, y_test, args.lbfgs_steps, chunks=chunks)
    return with_memory(result, num_train, rss_before)


def synthetic_svgp(
    paths: Paths, num_train: int, name: str, target: float, args: argparse.Namespace
) -> dict:
    """One SVGP trained on minibatches read from the files (run in a fresh process)."""
    torch.manual_seed(0)
    x_test, y_test = synthetic_test_set(paths, num_train, args.test_rows)
    if name == "zonal SVGP":
        kernel, features = zonal_parts(SYNTHETIC_INPUT_DIM)
        model = SVGP(kernel, features, SYNTHETIC_INPUT_DIM, likelihood=gaussian_likelihood())
        num_inducing = features.num_inducing
    else:  # the first training rows are a random sample of them
        model = InducingPointSVGP(
            torch.from_numpy(read_rows(paths[0], 0, args.num_inducing)), "rbf"
        )
        num_inducing = args.num_inducing
    objective = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=num_train)

    def negative_elbo(index: torch.Tensor) -> torch.Tensor:
        rows = np.sort(index.numpy())  # [B]; the ELBO's minibatch sum ignores the order
        x = torch.from_numpy(read_rows_at(paths[0], rows))  # [B, 8]
        y = torch.from_numpy(read_rows_at(paths[1], rows))  # [B]
        return -objective(model(x), y)

    def train_from_files(callback: Callable[[int, float], None]) -> list[float]:
        model.train()
        return adam_on_minibatches(
            negative_elbo,
            model.parameters(),
            num_train,
            num_steps=10**9,
            batch_size=BATCH_SIZE,
            lr=0.01,
            seed=0,
            callback=callback,
        )

    rss_before = memory_mib("VmRSS")
    result = run_svgp(model, num_inducing, train_from_files, x_test, y_test, target, args)
    return with_memory(result, num_train, rss_before)


def in_fresh_process(function: Callable[..., dict], *arguments) -> dict:
    """``function(*arguments)`` in a new (spawned) process: its peak memory is its own."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(function, *arguments).result()


def dask_pass(paths: Paths, num_train: int, chunk_size: int, workers: int) -> dict:
    """The SGPR's statistics pass as a Dask map-reduce (``zonal.distributed``) on a LocalCluster
    of ``workers`` single-threaded processes (started and with zonal imported before the clock
    starts); each task reads its rows from the files itself."""
    from dask import array as da
    from dask import delayed
    from distributed import Client, LocalCluster

    from zonal.distributed import fit_statistics_distributed

    def blocks(path: Path, trailing: tuple[int, ...]):
        return da.concatenate(
            [
                da.from_delayed(
                    delayed(read_rows)(path, start, min(start + chunk_size, num_train)),
                    (min(chunk_size, num_train - start), *trailing),
                    np.float64,
                )
                for start in range(0, num_train, chunk_size)
            ]
        )

    x, y = blocks(paths[0], (SYNTHETIC_INPUT_DIM,)), blocks(paths[1], ())
    kernel, features = zonal_parts(SYNTHETIC_INPUT_DIM)
    model = SGPR(kernel, features, SYNTHETIC_INPUT_DIM)
    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        client.run(torch.set_num_threads, 1)
        client.run(importlib.import_module, "zonal.models")  # imports off the clock
        start = time.perf_counter()
        fit_statistics_distributed(model, x, y, scheduler=client)
        seconds = time.perf_counter() - start
    return {
        "N": num_train,
        "workers": workers,
        "partitions": x.numblocks[0],
        "seconds": seconds,
        "rows_per_s": num_train / seconds,
        "seconds_per_partition_per_worker": seconds * workers / x.numblocks[0],
    }


def billion_row_estimate(seconds_per_row: float, fit_seconds: float, num_features: int) -> dict:
    """Time of the statistics pass over ``ESTIMATE_ROWS`` rows on clusters of single-threaded
    workers at a measured cost per row, plus the driver's collapsed-bound fit (measured,
    independent of N); the reduction moves one [M, M] partial sum per partition (its network time
    is not measured)."""
    partitions = ESTIMATE_ROWS // ESTIMATE_PARTITION_ROWS
    partial_mib = (num_features**2 + num_features + 3) * 8 / 2**20
    return {
        "rows": ESTIMATE_ROWS,
        "seconds_per_row": seconds_per_row,
        "cpu_hours": ESTIMATE_ROWS * seconds_per_row / 3600,
        "partition_rows": ESTIMATE_PARTITION_ROWS,
        "seconds_per_partition": ESTIMATE_PARTITION_ROWS * seconds_per_row,
        "partitions": partitions,
        "partial_sum_mib": partial_mib,
        "reduction_mib": partitions * partial_mib,
        "driver_fit_s": fit_seconds,
        "wall_s": {
            workers: ESTIMATE_ROWS * seconds_per_row / workers + fit_seconds
            for workers in ESTIMATE_WORKERS
        },
    }


def print_estimate(source: str, estimate: dict) -> None:
    times = ", ".join(
        f"{workers} workers {seconds / 3600:.2f} h"
        for workers, seconds in estimate["wall_s"].items()
    )
    print(
        f"10^9 rows at {estimate['seconds_per_row'] * 1e6:.0f} us per row ({source}): "
        f"{estimate['cpu_hours']:.0f} CPU hours of map work; {times} (partitions of "
        f"{estimate['partition_rows']} rows, {estimate['seconds_per_partition']:.0f} s each; the "
        f"reduction moves {estimate['partitions']} partial sums of "
        f"{estimate['partial_sum_mib']:.1f} MiB, {estimate['reduction_mib'] / 1024:.1f} GiB in "
        f"all; the driver's fit {estimate['driver_fit_s']:.0f} s)"
    )


def run_synthetic(args: argparse.Namespace) -> dict:
    """The SGPR and both SVGPs at each synthetic N, each fit in its own process; the Dask passes
    and the 10^9-row estimate."""
    rows, distributed = [], []
    print(f"synthetic, streamed from .npy files; test rows={args.test_rows or 'all'}")
    print(TABLE_HEADER + " | peak RSS MiB | data MiB")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.synthetic:
            paths = write_synthetic(size, args.chunk_size, Path(folder))
            sgpr = in_fresh_process(synthetic_sgpr, paths, size, args)
            results = {"zonal SGPR (1 pass)": sgpr}
            for name in ("zonal SVGP", "GPyTorch SVGP RBF"):
                results[name] = in_fresh_process(
                    synthetic_svgp, paths, size, name, sgpr["test_rmse"], args
                )
            for name, result in results.items():
                ratio = print_row(size, name, result, sgpr["seconds"])
                rows.append({"num_points": size, "model": name, "ratio_to_sgpr": ratio, **result})
            print(
                f"         SGPR: pass {sgpr['data_pass_s']:.1f} s "
                f"({size / sgpr['data_pass_s']:.0f} rows/s), resident before the pass "
                f"{sgpr['rss_before_fit_mib']:.0f} MiB"
            )
            for workers in args.dask_workers if size <= args.dask_max_rows else []:
                distributed.append(dask_pass(paths, size, args.chunk_size, workers))
                entry = distributed[-1]
                print(
                    f"         Dask LocalCluster, {workers} worker process(es) of 1 thread on "
                    f"{os.cpu_count()} cores: {entry['seconds']:.1f} s wall "
                    f"({entry['rows_per_s']:.0f} rows/s, {entry['partitions']} partitions, "
                    f"{entry['seconds_per_partition_per_worker']:.2f} s per partition per worker)"
                )
            os.remove(paths[0])
            os.remove(paths[1])
    record: dict = {"rows": rows, "dask": distributed}
    sgpr = [row for row in rows if row["model"].startswith("zonal SGPR")][-1]
    fit_seconds = sgpr["seconds"] - sgpr["data_pass_s"]
    sources = {"in-process pass, CPU": sgpr["data_pass_s"] / sgpr["num_points"]}
    single = [entry for entry in distributed if entry["workers"] == 1]
    if single:
        sources["one Dask worker, wall"] = single[-1]["seconds"] / single[-1]["N"]
    record["estimate_1e9"] = {}
    for source, seconds_per_row in sources.items():
        estimate = billion_row_estimate(seconds_per_row, fit_seconds, sgpr["M"])
        record["estimate_1e9"][source] = estimate
        print_estimate(source, estimate)
    return record


TABLE_HEADER = "       N | model              |    M |  seconds | test RMSE | stopped  | SVGP/SGPR"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--flights", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="flights N")
    parser.add_argument("--synthetic", type=int, nargs="*", default=[], help="synthetic N")
    parser.add_argument("--chunk-size", type=int, default=16384)
    parser.add_argument("--lbfgs-steps", type=int, default=50)
    parser.add_argument("--num-inducing", type=int, default=500, help="GPyTorch SVGP's M")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--patience", type=int, default=5)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument(
        "--test-rows", type=int, default=None, help="test subset (0: all; synthetic 20000)"
    )
    parser.add_argument("--dask-workers", type=int, nargs="*", default=[])
    parser.add_argument(
        "--dask-max-rows", type=int, default=200_000, help="largest synthetic N on Dask"
    )
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/sgpr_large_n.json"))
    args = parser.parse_args()
    if args.quick:
        args.max_seconds = min(args.max_seconds, 60.0)
    threads = torch.get_num_threads()
    print(f"threads={threads}, cores={os.cpu_count()}")
    record: dict = {"threads": threads, "cores": os.cpu_count()}
    if args.flights:
        record["flights"] = run_flights(args)
    if args.synthetic:
        args.test_rows = 20_000 if args.test_rows is None else args.test_rows
        record["synthetic"] = run_synthetic(args)
    record["settings"] = {k: v for k, v in vars(args).items() if k != "output"}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.output, record)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
