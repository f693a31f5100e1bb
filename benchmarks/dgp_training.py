"""Benchmark: training time to a target test MSE, activated DGP vs inducing-point DGPs (seed 000 fig. 6).

Three 3-layer deep GPs (hidden width 5, M inducing variables per layer, constant means, float64)
are trained on the same standardised UCI split (90/10, split 0) with the same loop: Adam at lr 0.01
cut by 0.9 on plateaus, minibatches of ``--batch-size``, one sample propagated per step:

* ``ADGP-3`` (zonal): Softplus activated features (N-tilde = 10), arc-cosine kernel, trained by the
  two-stage recipe: the equivalent network by MSE for ``--network-steps`` steps, copied into the
  DGP (arc-cosine variances 0.001, q(v) scale 0.01, noise at the network's training MSE, as in the
  ``uci-dgp`` experiment), then the ELBO (the test MSE of stage 1 is that of the network, which
  *is* the ADGP's posterior mean);
* ``DGP-3`` (zonal): inducing points in the lifted space [h, b], the same arc-cosine kernel, the
  ELBO from the start;
* ``GPyTorch DeepGP``: GPyTorch's own ``gpytorch.models.deep_gps.DeepGP`` written as in its
  documentation (``DeepGPLayer`` + ``VariationalStrategy`` with per-output inducing points
  [P, M, D], ``ScaleKernel(RBFKernel(ard_num_dims=D))``), trained by ``DeepApproximateMLL``.

Both DGPs start with first-layer inducing points at random training inputs and their hidden
layers' whitened q(v) at N(0, 0.01^2 I); the test MSE of the Monte Carlo predictive mean
(``--eval-samples`` samples) is evaluated every ``--eval-every`` steps off the clock. Each model
trains until ``--budget`` seconds (of training, on the clock) or ``--max-steps`` steps. The table
gives the seconds each needed to first reach each target MSE and the ratios to GPyTorch's DeepGP
(the peer) and to zonal's DGP-3 (< 1: faster), with seconds per ELBO step. All in one process,
same data, same threads.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dgp_training.py [--quick] [--dataset concrete]

Results go to benchmarks/results/dgp_training.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from gpytorch.likelihoods import GaussianLikelihood

from gpytorch_peer import gpytorch_deep_gp
from zonal.datasets import Standardizer, load_dataset, random_splits
from zonal.experiments._dgp_common import (
    Schedule,
    Stopwatch,
    build_activated_dgp,
    build_inducing_point_dgp,
    evaluating,
    seconds_to_target,
    train_elbo,
    train_network_stage,
)

RESULTS = Path(__file__).resolve().parent / "results" / "dgp_training.json"
PEER = "GPyTorch DeepGP"


# ---------------------------------------------------------------------------------------- run
def load_split(name: str, seed: int) -> tuple[torch.Tensor, ...]:
    """Split 0 of ``random_splits`` (90/10), standardised with the training rows."""
    data = load_dataset(name)
    x = torch.as_tensor(data.X, dtype=torch.float64)
    y = torch.as_tensor(data.y, dtype=torch.float64)
    train, test = (torch.as_tensor(i) for i in next(random_splits(len(x), 1, 0.1, seed=seed)))
    sx, sy = Standardizer.fit(x[train]), Standardizer.fit(y[train])
    return (
        sx.transform(x[train]),
        sy.transform(y[train]),
        sx.transform(x[test]),
        sy.transform(y[test]),
    )


def run_model(
    name: str, data: tuple[torch.Tensor, ...], args: argparse.Namespace
) -> dict[str, Any]:
    """Train one model under the time budget; its trace [(stage, step, seconds, test_mse)]."""
    x_train, y_train, x_test, y_test = data
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    schedule = Schedule(batch_size=args.batch_size)
    clock = Stopwatch()
    trace: list[dict[str, Any]] = []
    likelihood = GaussianLikelihood().double()

    class BudgetReachedError(Exception):
        pass

    def recorder(stage: str, model_or_network, network: bool = False):
        def evaluate() -> float:
            with torch.no_grad():
                if network:
                    mean = model_or_network(x_test)
                else:
                    with evaluating(model_or_network, args.eval_samples):
                        model_or_network.eval()
                        mean, _ = model_or_network.predict(x_test)
            return float(torch.mean((mean - y_test) ** 2))

        def on_evaluate(step: int, seconds: float, value: float) -> None:
            trace.append({"stage": stage, "step": step, "seconds": seconds, "test_mse": value})
            if seconds > args.budget:
                raise BudgetReachedError

        return {"evaluate": evaluate, "every": args.eval_every, "on_evaluate": on_evaluate}

    elbo_steps = 0
    try:
        if name == "ADGP-3":
            model = build_activated_dgp(
                x_train.shape[-1],
                3,
                likelihood,
                num_inducing=args.num_inducing,
                hidden_width=5,
                truncation_level=10,
                mean="constant",
                seed=args.seed,
            )
            network = model.network_like(args.seed)
            train_network_stage(
                network,
                x_train,
                y_train,
                "mse",
                args.network_steps,
                schedule,
                generator,
                clock=clock,
                **recorder("network", network, network=True),
            )
            clock.start()
            with torch.no_grad():
                for layer in model.layers:
                    layer.covar_module.outputscale = 0.001  # as uci-dgp's adgp_kernel_variance
                model.from_torch_module(network)
                model.set_variational_scale(0.01)
                likelihood.noise = max(float(torch.mean((network(x_train) - y_train) ** 2)), 2e-4)
            clock.stop()
            elbo_steps = args.max_steps - args.network_steps
        elif name == "DGP-3":
            model = build_inducing_point_dgp(
                x_train,
                3,
                likelihood,
                num_inducing=args.num_inducing,
                hidden_width=5,
                mean="constant",
                seed=args.seed,
            )
            elbo_steps = args.max_steps
        else:
            model = gpytorch_deep_gp(
                x_train, 3, hidden_width=5, num_inducing=args.num_inducing, seed=args.seed
            )
            elbo_steps = args.max_steps
        elbo_start = clock.read()
        train_elbo(
            model,
            x_train,
            y_train,
            elbo_steps,
            schedule,
            generator,
            num_samples=1,
            clock=clock,
            **recorder("elbo", model),
        )
    except BudgetReachedError:
        clock.stop()
    elbo_points = [t for t in trace if t["stage"] == "elbo"]
    elbo_seconds = elbo_points[-1]["seconds"] - elbo_start if elbo_points else float("nan")
    done = elbo_points[-1]["step"] if elbo_points else 0
    return {
        "trace": trace,
        "elbo_steps": done,
        "seconds_per_elbo_step": elbo_seconds / done if done else float("nan"),
        "final_test_mse": trace[-1]["test_mse"],
        "best_test_mse": min(t["test_mse"] for t in trace),
        "train_seconds": trace[-1]["seconds"],
    }


def ratio_text(mine: float | None, peer: float | None, mine_total: float, peer_total: float) -> str:
    """mine / peer, or a bound when one of them never reached the target within its run."""
    if mine is not None and peer is not None:
        return f"{mine / peer:.2f}" if peer > 0 else "—"
    if mine is not None:
        return f"<{mine / peer_total:.2f}"  # the peer needs more than its whole run
    if peer is not None and peer > 0:
        return f">{mine_total / peer:.1f}"
    return "—"


def print_table(results: dict[str, Any], targets: list[float]) -> None:
    """Seconds to each target, with ratios to the peer and to zonal's DGP-3; stored in ``results``."""
    print(
        "\nseconds of training to first reach test MSE <= target; ratios: / "
        f"{PEER} and / DGP-3 (zonal); '<x' / '>x': the other never got there"
    )
    print(
        f"{'model':<16} {'s/ELBO step':>11} "
        + " ".join(f"{'t(' + format(t, 'g') + ')':>8} {'/peer':>6} {'/DGP-3':>6}" for t in targets)
        + f" {'best MSE':>9}"
    )
    for name, result in results.items():
        cells = []
        for target in targets:
            mine = seconds_to_target(result["trace"], target)
            result.setdefault("seconds_to_target", {})[str(target)] = mine
            ratios = []
            for other in (PEER, "DGP-3"):
                text = ratio_text(
                    mine,
                    seconds_to_target(results[other]["trace"], target),
                    result["train_seconds"],
                    results[other]["train_seconds"],
                )
                result.setdefault(f"ratio_to_{other}", {})[str(target)] = text
                ratios.append(text)
            shown = "—" if mine is None else f"{mine:.1f}"
            cells.append(f"{shown:>8} {ratios[0]:>6} {ratios[1]:>6}")
        print(
            f"{name:<16} {result['seconds_per_elbo_step']:>11.3f} "
            + " ".join(cells)
            + f" {result['best_test_mse']:>9.4f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="M = 64, 120 s budget per model")
    parser.add_argument("--dataset", default="concrete")
    parser.add_argument("--num-inducing", type=int, default=None, help="M (default 128; 64 quick)")
    parser.add_argument("--budget", type=float, default=None, help="training seconds per model")
    parser.add_argument("--max-steps", type=int, default=20000)
    parser.add_argument("--network-steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--eval-every", type=int, default=None)
    parser.add_argument("--eval-samples", type=int, default=8)
    parser.add_argument(
        "--targets", type=float, nargs="+", default=[0.3, 0.2, 0.15, 0.12], help="test MSEs"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args()
    args.num_inducing = args.num_inducing or (64 if args.quick else 128)
    args.budget = args.budget or (120.0 if args.quick else 600.0)
    args.eval_every = args.eval_every or (20 if args.quick else 50)
    torch.set_num_threads(args.threads)

    data = load_split(args.dataset, args.seed)
    print(
        f"{args.dataset}: N_train = {len(data[0])}, N_test = {len(data[2])}, D = {data[0].shape[1]}; "
        f"3 layers, width 5, M = {args.num_inducing}, batch {args.batch_size}, float64, "
        f"budget {args.budget:.0f} s per model, torch threads = {torch.get_num_threads()} "
        f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')})"
    )
    results: dict[str, Any] = {}
    for name in ("ADGP-3", "DGP-3", PEER):
        results[name] = run_model(name, data, args)
        print(
            f"  {name}: {results[name]['train_seconds']:.1f} s, best test MSE "
            f"{results[name]['best_test_mse']:.4f}",
            flush=True,
        )

    print_table(results, args.targets)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "dataset": args.dataset,
                "settings": {k: v for k, v in vars(args).items()},
                "torch_threads": torch.get_num_threads(),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                "versions": {
                    "torch": torch.__version__,
                    "gpytorch": metadata.version("gpytorch"),
                    "python": platform.python_version(),
                },
                "machine": platform.machine(),
                "results": results,
            },
            indent=1,
        )
    )
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
