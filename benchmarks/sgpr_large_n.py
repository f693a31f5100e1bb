"""Large N: the one-pass harmonic SGPR against minibatch SVGPs (zonal's, with the same harmonic
features and kernel, and GPyTorch's with learned inducing points and an RBF-ARD kernel), on the
flights regression (the airline-delay stand-in, 273,853 x 8) at growing N, and end to end on
synthetic data streamed from memory-mapped files at N = 10^5 .. 10^7.

The claim under test (seed 001 ch. 3, VISH): on a 6-million-point airline regression the harmonic
SGPR was two orders of magnitude faster than SVGP at the same accuracy. For each N:

- SGPR: one statistics pass (``fit_statistics``, chunks of ``--chunk-size``), then
  ``--lbfgs-steps`` L-BFGS iterations on the collapsed bound. Its test RMSE is the target.
- each SVGP: Adam (lr 0.01, minibatches of 1024) from its default initialisation, the test RMSE
  evaluated every ``--eval-every`` steps (off the clock). ``--svgp-stop plateau`` (the default,
  the seed's protocol): trained over as many epochs as it takes until the test RMSE has not
  improved (by a relative 1e-3) for ``--patience`` evaluations, or ``--max-seconds`` have passed
  (time cap); ``--svgp-stop match``: stopped as soon as it is at most the SGPR's (matched).
  Printed: each one's best RMSE, the SVGP's time to reach the SGPR's RMSE, and the SGPR's time to
  reach the SVGP's best RMSE (its whole fit, if its RMSE is at most that; else never). The ratio
  SVGP time / SGPR time is a lower bound (printed ``>=``) when the SVGP never reached the SGPR.

``--frequencies F`` sets the complete harmonics (degrees 0..F-1) of the SGPR and of zonal's SVGP
(5, M = 660, by default; 6 gives M = 1,782 in d = 9); ``--input-scales`` lets the SGPR learn one
scale per input on the bound of a random subsample of the training rows before its pass, as
``zonal fit``'s ARD does (``SGPR.fit_input_scales``; its seconds are on the clock).

The SGPR's statistics pass runs in each dtype of ``--sgpr-dtypes`` (float64, the default;
float32: per-chunk work in float32, float64 totals), the first the reference of the ratios; with
``--before SRC`` (the ``src`` folder of an older zonal, e.g. ``git archive``) the same SGPR fit runs
with that version in a fresh process, so the pass before and after is measured in one run. The
bound per row after the fit is printed beside each SGPR (equal bound: the same fit).

Flights (``--flights``, the default): a random subset of N training rows, a fixed 20% of the rows
(or ``--test-rows`` of them) as the test set, inputs and target standardised with the training
statistics; all in memory.

Synthetic (``--synthetic 100000 1000000 10000000``): x ~ N(0, I_8) and, with ``--target sin``,

    y = sin(x_1) x_2 + 0.1 x_3 + 0.1 eps,     eps ~ N(0, 1)    (noise variance 0.01, Var y ~ 0.45),

or, with ``--target pairs`` (harder: 28 interacting terms, every pair of inputs),

    y = 2 / sqrt(28) sum_{j < k} a_jk sin(x_j) sin(x_k) + 0.1 eps,   a_jk ~ N(0, 1) fixed (seed 0),

written chunk by chunk (never all in memory) into .npy files in a temporary folder: N training rows
followed by N / 4 test rows (20% of the file, a fixed slice), of which the first ``--test-rows``
(default 20,000) are the test set. The SGPR streams the training rows chunk by chunk; the SVGPs
draw their minibatches (epochs of a permutation) from the same files. Each fit runs in a fresh
process, so that its peak resident memory (``VmHWM``) is its own; every read or write maps the
file anew and copies only the rows it needs, so mapped pages never pile up in the resident set.
``--dask-workers 1 2`` repeats the SGPR's statistics pass as a Dask map-reduce
(``zonal.scale.dask_statistics``) on a LocalCluster of that many single-threaded worker processes for the
synthetic sizes up to ``--dask-max-rows``, and from its measured cost per row prints an estimate
for 10^9 rows on a cluster.

Times are CPU seconds of the fitting process (``time.process_time``, one thread: on a shared
machine the wall clock measures the neighbours), except the Dask passes (wall clock: the work is in
the workers). JSON goes to ``benchmarks/results/sgpr_large_n.json``.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sgpr_large_n.py [--quick] [--no-flights]
        [--synthetic 100000 1000000] [--target pairs] [--sgpr-dtypes float64 float32]
        [--before /tmp/zonal_before/src] [--dask-workers 1 2] [--max-seconds 300]
        [--frequencies 6] [--input-scales]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import multiprocessing
import os
import pickle
import subprocess
import sys
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
from zonal.geometry import SphereEmbedding
from zonal.models import SGPR, SVGP
from zonal.models.training import adam_on_minibatches, fit_svgp

FREQUENCIES = 5  # complete harmonics of degrees 0..4: 660 features in d = 9
ARD_SEED = 3  # the subsample of --input-scales
KERNEL_DEGREE = 8
INITIAL_BETA = None  # d, the ReLU NTK's decay (seed002_common.continuous_depth_kernel)
BATCH_SIZE = 1024
SYNTHETIC_INPUT_DIM = 8
SYNTHETIC_NOISE_SD = 0.1
ROWS_PER_TEST_ROW = 4  # N training rows, then N / 4 test rows: 20% of the file
#: an SVGP's test RMSE has plateaued when it has not fallen by this fraction of its best
PLATEAU_TOLERANCE = 1e-3
SVGP_NAMES = ("zonal SVGP", "GPyTorch SVGP RBF")
#: the 10^9-row estimate: rows, rows per partition, cluster sizes (single-threaded workers)
ESTIMATE_ROWS = 10**9
ESTIMATE_PARTITION_ROWS = 10**6
ESTIMATE_WORKERS = (1, 100, 1000)

Paths = tuple[Path, Path]  # the .npy files of x [rows, 8] and y [rows]


def rmse(model, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        mean, _ = model.predict(x)
    return float(((mean - y) ** 2).mean().sqrt())


def zonal_parts(input_dim: int, frequencies: int = FREQUENCIES):
    """The polynomial-decay kernel and the complete harmonics of degrees 0..frequencies - 1."""
    kernel = continuous_depth_kernel(input_dim + 1, KERNEL_DEGREE, INITIAL_BETA)
    features = harmonic_features("complete", input_dim + 1, frequencies, 0, seed=0)
    return kernel, features


def memory_mib(field: str) -> float:
    """A memory figure of this process from /proc/self/status: ``VmRSS`` (resident now) or
    ``VmHWM`` (peak resident since the process's exec; unlike ``ru_maxrss``, which also keeps the
    peak of the parent that forked it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} line in /proc/self/status")


def hyperparameters(model: SGPR) -> dict[str, list]:
    """The model's state without its statistics (kernel hyperparameters, noise), as lists."""
    state = model.state_dict()
    return {key: value.tolist() for key, value in state.items() if not key.startswith("stat_")}


def bound_at(model: SGPR, reference: dict[str, list]) -> float:
    """The bound per row of the model's statistics at the ``reference`` hyperparameters (the
    model's own are put back)."""
    own = hyperparameters(model)
    model.load_state_dict({k: torch.tensor(v) for k, v in reference.items()}, strict=False)
    with torch.no_grad():
        bound = float(model.elbo() / model.stat_count)
    model.load_state_dict({k: torch.tensor(v) for k, v in own.items()}, strict=False)
    return bound


def run_sgpr(
    x_test: torch.Tensor,
    y_test: torch.Tensor,
    steps: int,
    dtype: str | None = None,
    reference: dict[str, list] | None = None,
    frequencies: int = FREQUENCIES,
    ard_data: tuple[torch.Tensor | np.ndarray, torch.Tensor | np.ndarray] | None = None,
    **data,
) -> dict:
    """One statistics pass (``data``: the arguments of ``SGPR.fit_statistics``; ``dtype`` its
    per-chunk dtype, None: the version's default, for an older zonal), then ``steps`` L-BFGS
    iterations on the collapsed bound. With ``ard_data`` (the training x [N, D] and y [N], tensors
    or memmaps) the input scales are learnt first on the bound of ``ARD_SUBSAMPLE`` random rows of
    them, as ``zonal fit --ard`` does (``SGPR.fit_input_scales``, ``ARD_ITERATIONS`` L-BFGS
    iterations, on the clock: ``scales_s``), and the pass runs at them.
    With ``reference`` (another fit's ``hyperparameters``) the bound of these statistics at those
    hyperparameters too (off the clock)."""
    input_dim = x_test.shape[1]
    kernel, features = zonal_parts(input_dim, frequencies)
    embedding = None
    if ard_data is not None:
        embedding = SphereEmbedding(1.0, input_scales=1.0, input_dim=input_dim)
    model = SGPR(kernel, features, input_dim, input_map=embedding)
    options = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    start = time.process_time()
    scales = 0.0
    if ard_data is not None:
        from zonal.tabular.recipes.sgpr import ARD_ITERATIONS, ARD_SUBSAMPLE  # see in_older_zonal

        model.fit_input_scales(
            *ard_data, subsample_size=ARD_SUBSAMPLE, max_iter=ARD_ITERATIONS, seed=ARD_SEED
        )
        scales = time.process_time() - start
    model.fit_statistics(**data, **options)
    data_pass = time.process_time() - start - scales
    at_reference = None if reference is None else bound_at(model, reference)
    start += time.process_time() - start - scales - data_pass  # the clock stops for bound_at
    model.fit(max_iter=steps)
    seconds = time.process_time() - start
    with torch.no_grad():
        bound = float(model.elbo() / model.stat_count)
    value = rmse(model, x_test, y_test)
    return {
        "M": features.num_inducing,
        "scales_s": scales,
        "data_pass_s": data_pass,
        "seconds": seconds,
        "test_rmse": value,
        "best_rmse": value,
        "bound_per_row": bound,
        "bound_per_row_at_reference": at_reference,
        "hyperparameters": hyperparameters(model),
        "statistics_dtype": dtype or "float64 (before)",
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
    RMSE plateaus or the time budget is spent (or, with ``--svgp-stop match``, reaches
    ``target``), by the vish-flights experiment's rule (``plateau_callback``): the time at which
    it first reached ``target`` (else the time it stopped), its best RMSE and the time it first
    reached that, and the history (seconds, RMSE, step)."""
    from zonal.experiments.vish_flights import plateau_callback  # see in_older_zonal

    history: list[tuple[float, float, int]] = []  # (seconds, rmse, step)
    stopped: list[str] = []
    rule = {
        "eval_every": args.eval_every,
        "patience": args.patience,
        "plateau_tolerance": PLATEAU_TOLERANCE,
        "max_seconds": args.max_seconds,
    }
    match = target if args.svgp_stop == "match" else None
    train(callback=plateau_callback(model, x_test, y_test, rule, history, stopped, match))
    reached = next((h for h in history if h[1] <= target), None)
    seconds, value, step = reached or (history[-1][0], min(h[1] for h in history), history[-1][2])
    best = min(history, key=lambda h: h[1])
    return {
        "M": num_inducing,
        "data_pass_s": 0.0,
        "seconds": seconds,
        "test_rmse": value,
        "best_rmse": best[1],
        "best_seconds": best[0],
        "trained_seconds": history[-1][0],
        "steps": step,
        "matched": reached is not None,
        "stopped": stopped[0] if stopped else "not stopped",
        "history": history,
    }


def sgpr_time_to(sgpr: dict, svgp_best: float) -> float | None:
    """The SGPR's time to reach an RMSE of ``svgp_best``: its whole fit if its RMSE is at most
    that, else None (it has no later point to reach it at)."""
    return sgpr["seconds"] if sgpr["test_rmse"] <= svgp_best else None


def print_row(size: int, name: str, result: dict, sgpr: dict) -> float:
    """One line of the table; returns the ratio of ``result``'s time to reach the SGPR's RMSE (its
    whole training time when it never did) to the SGPR's time."""
    ratio = result["seconds"] / sgpr["seconds"]
    bound = "  " if result["matched"] else ">="
    extra = ""
    if "best_seconds" in result:
        reach = sgpr_time_to(sgpr, result["best_rmse"])
        extra = (
            f" | best {result['best_rmse']:.4f} at {result['best_seconds']:.1f} s; SGPR reaches "
            f"it {'never' if reach is None else f'in {reach:.1f} s'}"
        )
    elif "bound_per_row" in result:
        extra = (
            f" | pass {result['data_pass_s']:.1f} s ({result['data_pass_s'] / size * 1e6:.1f} us "
            f"per row), fit {result['seconds'] - result['data_pass_s'] - result.get('scales_s', 0):.1f} s"
            + (f" (input scales {result['scales_s']:.1f} s)" if result.get("scales_s") else "")
            + f", bound/N "
            f"{result['bound_per_row']:.6f} ({result['statistics_dtype']})"
        )
        if result["bound_per_row_at_reference"] is not None:
            extra += f", at the first SGPR's fit {result['bound_per_row_at_reference']:.6f}"
    if "peak_rss_mib" in result:
        extra += f" | peak RSS {result['peak_rss_mib']:.0f} MiB (data {result['data_mib']:.0f})"
    print(
        f"{size:8d} | {name:22s} | {result['M']:4d} | {result['seconds']:8.2f} | "
        f"{result['test_rmse']:9.4f} | {result['stopped']:8s} | {bound}{ratio:7.2f}x{extra}"
    )
    return ratio


# ------------------------------------------------------------------------------- flights
def run_flights(args: argparse.Namespace) -> list[dict]:
    """The SGPR and both SVGPs at each N on flights, all in memory."""
    from zonal.tabular.recipes import gaussian_likelihood  # see in_older_zonal

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
        results = sgpr_fits(args, x_test, y_test, x=x, y=y, chunk_size=args.chunk_size)
        sgpr = next(iter(results.values()))
        kernel, features = zonal_parts(x.shape[1], args.frequencies)
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
            if name not in args.svgps:
                continue
            train_in_memory = functools.partial(
                fit_svgp, model, x, y, num_steps=10**9, batch_size=BATCH_SIZE, lr=0.01, seed=0
            )
            results[name] = run_svgp(
                model, num_inducing, train_in_memory, x_test, y_test, sgpr["test_rmse"], args
            )
        for name, result in results.items():
            ratio = print_row(size, name, result, sgpr)
            rows.append({"num_points": size, "model": name, "ratio_to_sgpr": ratio, **result})
    return rows


def sgpr_fits(args: argparse.Namespace, x_test: torch.Tensor, y_test: torch.Tensor, **data) -> dict:
    """The SGPR in each of ``--sgpr-dtypes`` (in memory; ``data`` holds its x and y), and with
    ``--before`` the older version's in a fresh process; keyed by the table's model name."""
    results: dict[str, dict] = {}
    reference = None
    options = {
        "frequencies": args.frequencies,
        "ard_data": (data["x"], data["y"]) if args.input_scales else None,
    }
    for dtype in args.sgpr_dtypes:
        torch.manual_seed(0)
        results[f"zonal SGPR {dtype}"] = run_sgpr(
            x_test, y_test, args.lbfgs_steps, dtype, reference, **options, **data
        )
        reference = reference or results[f"zonal SGPR {dtype}"]["hyperparameters"]
    if args.before is not None:
        results["zonal SGPR before"] = in_older_zonal(
            args.before, run_sgpr, x_test, y_test, args.lbfgs_steps, None, reference,
            **options, **data,
        )  # fmt: skip
    return results


# ----------------------------------------------------------------------------- synthetic
def synthetic_target(x: np.ndarray, target: str = "sin") -> np.ndarray:
    """f(x) [n] of x [n, 8] (the noise is added by the writer): ``"sin"``, sin(x_1) x_2 + 0.1 x_3;
    ``"pairs"``, 2 / sqrt(28) sum_{j < k} a_jk sin(x_j) sin(x_k) with a_jk ~ N(0, 1) (seed 0)."""
    if target == "sin":
        return np.sin(x[:, 0]) * x[:, 1] + 0.1 * x[:, 2]
    if target != "pairs":
        raise ValueError(f"unknown synthetic target {target!r}")
    first, second = np.triu_indices(SYNTHETIC_INPUT_DIM, k=1)  # the 28 pairs
    weights = np.random.default_rng(0).standard_normal(len(first)) * 2 / np.sqrt(len(first))
    sines = np.sin(x)  # [n, 8]
    return (sines[:, first] * sines[:, second]) @ weights


def write_synthetic(num_train: int, chunk_size: int, folder: Path, target: str = "sin") -> Paths:
    """x [R, 8] ~ N(0, I) and y = f(x) + 0.1 eps [R], R = num_train + num_train / 4 rows, written
    to .npy files one chunk at a time (the test rows are the last num_train / 4)."""
    num_rows = num_train + num_train // ROWS_PER_TEST_ROW
    paths = folder / f"x{num_train}{target}.npy", folder / f"y{num_train}{target}.npy"
    np.lib.format.open_memmap(paths[0], "w+", np.float64, (num_rows, SYNTHETIC_INPUT_DIM))
    np.lib.format.open_memmap(paths[1], "w+", np.float64, (num_rows,))
    generator = np.random.default_rng(0)
    for start in tqdm(range(0, num_rows, chunk_size), desc=f"writing {num_rows} rows", leave=False):
        rows = generator.standard_normal((min(chunk_size, num_rows - start), SYNTHETIC_INPUT_DIM))
        noise = SYNTHETIC_NOISE_SD * generator.standard_normal(len(rows))
        values_y = synthetic_target(rows, target) + noise
        for path, values in ((paths[0], rows), (paths[1], values_y)):
            mapped = np.load(path, mmap_mode="r+")  # a fresh map per chunk: its pages go with it
            mapped[start : start + len(rows)] = values
            mapped.flush()
            del mapped
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


def synthetic_sgpr(
    paths: Paths,
    num_train: int,
    args: argparse.Namespace,
    dtype: str | None,
    reference: dict[str, list] | None = None,
) -> dict:
    """The SGPR's fit on the streamed training rows (run in a fresh process; ``dtype`` None: an
    older zonal's default pass; ``reference`` as for ``run_sgpr``)."""
    x_test, y_test = synthetic_test_set(paths, num_train, args.test_rows)
    rss_before = memory_mib("VmRSS")
    chunks = stream_chunks(paths, num_train, args.chunk_size)
    ard_data = None
    if args.input_scales:  # the training rows, mapped (fit_input_scales reads its subsample)
        ard_data = tuple(np.load(path, mmap_mode="r")[:num_train] for path in paths)
    torch.manual_seed(0)
    result = run_sgpr(
        x_test, y_test, args.lbfgs_steps, dtype, reference, args.frequencies, ard_data,
        chunks=chunks,
    )  # fmt: skip
    return with_memory(result, num_train, rss_before)


def synthetic_svgp(
    paths: Paths, num_train: int, name: str, target: float, args: argparse.Namespace
) -> dict:
    """One SVGP trained on minibatches read from the files (run in a fresh process)."""
    from zonal.tabular.recipes import gaussian_likelihood  # see in_older_zonal

    torch.manual_seed(0)
    x_test, y_test = synthetic_test_set(paths, num_train, args.test_rows)
    if name == "zonal SVGP":
        kernel, features = zonal_parts(SYNTHETIC_INPUT_DIM, args.frequencies)
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


def in_fresh_process(function: Callable[..., dict], *arguments, **keywords) -> dict:
    """``function(*arguments, **keywords)`` in a new (spawned) process: its peak memory is its own."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(function, *arguments, **keywords).result()


def in_older_zonal(source: Path, function: Callable[..., dict], *arguments, **keywords) -> dict:
    """``function(*arguments, **keywords)`` (a function of this script) in a new Python process
    that imports zonal from the ``src`` folder ``source`` (first on ``sys.path``; a spawned
    multiprocessing child would inherit this process's ``sys.path`` and import this zonal). That
    process imports this script, so its top-level imports are only modules an older zonal has
    (the SGPR's pass); what the SVGPs and input scales need is imported where it is used."""
    driver = (
        "import pickle, sys\n"
        f"sys.path[:0] = [{str(source)!r}, {str(Path(__file__).resolve().parent)!r}]\n"
        "import zonal, sgpr_large_n\n"
        f"assert zonal.__file__.startswith({str(source)!r}), zonal.__file__\n"
        "name, arguments, keywords = pickle.load(sys.stdin.buffer)\n"
        "output, sys.stdout = sys.stdout.buffer, sys.stderr\n"
        "result = getattr(sgpr_large_n, name)(*arguments, **keywords)\n"
        "output.write(pickle.dumps(result))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", driver],
        input=pickle.dumps((function.__name__, arguments, keywords)),
        capture_output=True,
        check=False,
    )
    if completed.returncode:
        raise RuntimeError(f"the older zonal's run failed:\n{completed.stderr.decode()[-4000:]}")
    return pickle.loads(completed.stdout)


def dask_pass(paths: Paths, num_train: int, chunk_size: int, workers: int) -> dict:
    """The SGPR's statistics pass as a Dask map-reduce (``zonal.scale.dask_statistics``) on a LocalCluster
    of ``workers`` single-threaded processes (started and with zonal imported before the clock
    starts); each task reads its rows from the files itself."""
    from dask import array as da
    from dask import delayed
    from distributed import Client, LocalCluster

    from zonal.scale.dask_statistics import fit_statistics_distributed

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
            paths = write_synthetic(size, args.chunk_size, Path(folder), args.target)
            results: dict[str, dict] = {}
            reference = None
            for dtype in args.sgpr_dtypes:
                results[f"zonal SGPR {dtype}"] = in_fresh_process(
                    synthetic_sgpr, paths, size, args, dtype, reference
                )
                reference = reference or results[f"zonal SGPR {dtype}"]["hyperparameters"]
            if args.before is not None:
                results["zonal SGPR before"] = in_older_zonal(
                    args.before, synthetic_sgpr, paths, size, args, None, reference
                )
            sgpr = next(iter(results.values()))
            for name in args.svgps:
                results[name] = in_fresh_process(
                    synthetic_svgp, paths, size, name, sgpr["test_rmse"], args
                )
            for name, result in results.items():
                ratio = print_row(size, name, result, sgpr)
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
    sgpr = [row for row in rows if row["model"] == f"zonal SGPR {args.sgpr_dtypes[0]}"][-1]
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


TABLE_HEADER = (
    "       N | model                  |    M |  seconds | test RMSE | stopped  | time/SGPR's"
)


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
    parser.add_argument("--target", choices=("sin", "pairs"), default="sin", help="synthetic f")
    parser.add_argument("--svgp-stop", choices=("plateau", "match"), default="plateau")
    parser.add_argument(
        "--frequencies",
        type=int,
        default=FREQUENCIES,
        help="complete harmonics of degrees 0..F-1 for the SGPR and zonal's SVGP (5: M = 660)",
    )
    parser.add_argument(
        "--input-scales",
        action="store_true",
        help="the SGPR learns per-input scales on a subsample's bound before its pass (ARD)",
    )
    parser.add_argument(
        "--sgpr-dtypes", nargs="+", choices=("float64", "float32"), default=["float64"]
    )
    parser.add_argument(
        "--svgps",
        nargs="*",
        choices=SVGP_NAMES,
        default=list(SVGP_NAMES),
        help="the SVGPs to train (none: the SGPRs alone)",
    )
    parser.add_argument("--before", type=Path, default=None, help="src folder of an older zonal")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/sgpr_large_n.json"))
    args = parser.parse_args()
    if args.input_scales and args.before is not None:
        parser.error("--input-scales cannot be combined with --before (an older zonal's SGPR)")
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
