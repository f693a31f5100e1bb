"""Seconds to build a 64-fantasy model: zonal's SGPR (statistics update) against refitting, and
against BoTorch's ``SingleTaskGP.fantasize`` at the same N.

One candidate point x (q = 1, as the knowledge gradient fantasises), F = 64 fantasy observations
drawn from the posterior at x. Timed, each the median of ``--repeats`` runs:

* zonal SGPR ``fantasize``: the new row's statistics (Phi_r^T Phi_r shared by the fantasies,
  Phi_r^T y per fantasy) added to the stored ones at the current hyperparameters, then the
  posterior at the test points (the batched Cholesky of B happens there);
* refit: the same 64 models built as a user without conditioning would, one statistics pass over
  all N + 1 rows per fantasy (``fit_statistics``, same hyperparameters, no optimisation), then the
  posterior; the fantasy model's means are checked against the refits' (they are the same
  models: printed as the largest difference);
* BoTorch ``SingleTaskGP.fantasize`` (its default Matérn-5/2 kernel, hyperparameters as
  initialised, its prediction caches warmed by a first posterior call), then the posterior.

Features: spherical harmonics of S^3 (inputs in R^3 embedded with a bias), degrees 0..10: M = 506,
the complete set of levels nearest to 512. Threads: OMP_NUM_THREADS (state it; 1 on the shared
machines). Printed: wall and CPU seconds (of this process: steadier on a shared machine) and the
CPU-time ratio to zonal's fantasy.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fantasize.py [--rows 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
import warnings
from pathlib import Path

import torch
from botorch.exceptions import InputDataWarning
from botorch.models import SingleTaskGP
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.kernels import ScaleKernel

from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import ChordalMaternKernel
from zonal.models import SGPR

INPUT_DIM = 3
MAX_DEGREE = 10  # M = 506 harmonics on S^3
FANTASIES = 64
TEST_POINTS = 256


def data(rows: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(rows, INPUT_DIM, generator=generator, dtype=torch.float64) * 2 - 1
    y = torch.sin(3 * x[:, 0]) * torch.cos(2 * x[:, 1]) + 0.5 * x[:, 2]
    return x, y + 0.05 * torch.randn(rows, generator=generator, dtype=torch.float64)


def median_seconds(run, repeats: int):
    """((median wall seconds, median CPU seconds of this process), the last result) of ``run()``
    over ``repeats`` runs. On a shared machine the CPU seconds are the steadier figure."""
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return (statistics.median(walls), statistics.median(cpus)), result


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/fantasize.json"))
    args = parser.parse_args()
    x, y = data(args.rows)
    test_x, _ = data(TEST_POINTS, seed=1)
    candidate = torch.zeros(1, INPUT_DIM, dtype=torch.float64) + 0.1  # [q = 1, D]

    kernel = ScaleKernel(ChordalMaternKernel(INPUT_DIM + 1, nu=2.5, homogeneous=True)).double()
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, MAX_DEGREE, kernel=kernel)
    model = SGPR(kernel, features, INPUT_DIM, noise=0.01)
    model.fit_statistics(x, y)
    with torch.enable_grad():
        model.fit(max_iter=20)
    sampler = SobolQMCNormalSampler(torch.Size([FANTASIES]), seed=0)

    def zonal_fantasy():
        fantasy = model.fantasize(candidate, sampler)
        return fantasy.posterior(test_x).mean  # [F, T, 1]

    zonal_s, zonal_means = median_seconds(zonal_fantasy, args.repeats)
    draws = sampler(model.posterior(candidate, observation_noise=True))  # [F, 1, 1], the same

    def refits():
        means = []
        for fantasy in range(FANTASIES):
            refit = copy.deepcopy(model)
            refit.fit_statistics(torch.cat([x, candidate]), torch.cat([y, draws[fantasy, :, 0]]))
            means.append(refit.posterior(test_x).mean)
        return torch.stack(means)  # [F, T, 1]

    refit_s, refit_means = median_seconds(refits, max(1, args.repeats // 3))
    difference = float((refit_means - zonal_means).abs().max())

    warnings.filterwarnings("ignore", category=InputDataWarning)  # inputs in [-1, 1]^3
    botorch_model = SingleTaskGP(x, y.unsqueeze(-1))
    botorch_model.eval()
    _ = botorch_model.posterior(test_x).mean  # warm the prediction caches, as BoTorch's KG does

    def botorch_fantasy():
        fantasy = botorch_model.fantasize(candidate, sampler)
        return fantasy.posterior(test_x).mean

    botorch_s, _ = median_seconds(botorch_fantasy, args.repeats)
    threads = torch.get_num_threads()
    rows = [
        ("zonal SGPR fantasize (statistics update)", zonal_s),
        ("zonal SGPR refit per fantasy (64 statistics passes)", refit_s),
        ("BoTorch SingleTaskGP.fantasize", botorch_s),
    ]
    print(
        f"N = {args.rows}, M = {features.num_inducing}, F = {FANTASIES} fantasies, q = 1, "
        f"{TEST_POINTS} test points, {threads} thread(s)"
    )
    print(f"{'method':55s} {'wall s':>9s} {'CPU s':>9s} {'CPU / zonal':>12s}")
    for name, (wall, cpu) in rows:
        print(f"{name:55s} {wall:9.4f} {cpu:9.4f} {cpu / zonal_s[1]:12.1f}")
    print(f"largest |mean difference| fantasy vs refit: {difference:.2e}")
    result = {
        "rows": args.rows,
        "num_inducing": features.num_inducing,
        "fantasies": FANTASIES,
        "threads": threads,
        "seconds_wall_cpu": dict(rows),
        "fantasy_vs_refit_max_abs_mean_difference": difference,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
