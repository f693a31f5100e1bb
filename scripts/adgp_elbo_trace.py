"""The ADGP of ``uci-report`` on one split: its test RMSE and NLPD, its training RMSE, its noise
variance and the ELBO's two terms per training row (the expected log likelihood and the KL, with
each layer's share) at its network initialisation (0 ELBO steps) and along the ELBO stage, beside
its network's.

Seed 001 sec. 4.1 initialises the activated DGP from a trained network (its posterior mean is
then the network) and trains every parameter by the ELBO. This traces what the ELBO stage does
to that start, on the split, seed and protocol of a ``uci-report`` run (the same network, the
same initialisation); ``--elbo-learning-rate`` changes the ELBO stage's rate only.

    .venv/bin/python scripts/adgp_elbo_trace.py yacht 0 [--protocol converged]
        [--elbo-learning-rate 0.001] [--at 0 1 10 100 1000 5000]
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import gpytorch
import torch

from zonal.experiments import get_experiment
from zonal.experiments._dgp_common import Schedule, predictive_mse, regression_metrics
from zonal.experiments.config import resolve_config
from zonal.experiments.uci_dgp import load_regression, split_data
from zonal.experiments.uci_report import initialise_from_network, network_and_adgp, unit_seed
from zonal.models import DGP, fit_dgp


@torch.no_grad()
def elbo_terms(
    model: DGP, x: torch.Tensor, y: torch.Tensor, num_samples: int
) -> tuple[float, list[float]]:
    """(the expected log likelihood per training row, each layer's KL per row) of the ELBO
    (1/N) sum_n E_q[log p(y_n | f_n)] - KL(q || p) / N on all training rows, by the training
    objective (``num_samples`` propagated samples); the model is left in eval mode."""
    model.train()
    objective = gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(x))
    )
    with gpytorch.settings.num_likelihood_samples(num_samples):
        elbo = float(objective(model(x), y))
    layer_kls = [
        float(layer.variational_strategy.kl_divergence().sum()) / len(x) for layer in model.layers
    ]
    model.eval()
    return elbo + sum(layer_kls), layer_kls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("split", type=int)
    parser.add_argument("--protocol", default="converged")
    parser.add_argument("--elbo-learning-rate", type=float, default=None)
    parser.add_argument("--at", type=int, nargs="+", default=[0, 1, 10, 100, 300, 1000, 2000, 5000],
                        help="ELBO steps after which to evaluate")  # fmt: skip
    args = parser.parse_args()

    config = resolve_config(get_experiment("uci-report"), protocol=args.protocol)
    x_train, y_train, x_test, y_test = split_data(*load_regression(args.dataset), args.split,
                                                  config)  # fmt: skip
    schedule = Schedule.from_config(config)
    seed = unit_seed(config, args.dataset, args.split, "ADGP")  # as the run seeds its ADGP
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model, network = network_and_adgp(config, x_train, y_train, seed, generator)
    with torch.no_grad():
        network_rmse = math.sqrt(float(torch.mean((network(x_test) - y_test) ** 2)))
        network_train_rmse = math.sqrt(float(torch.mean((network(x_train) - y_train) ** 2)))
    print(f"{args.dataset} split {args.split}: network test RMSE {network_rmse:.4f}, train RMSE "
          f"{network_train_rmse:.4f}", flush=True)  # fmt: skip
    initialise_from_network(model, network, config, x_train, y_train)
    wanted = set(args.at)

    def report(steps: int) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 1)  # the run's evaluation draws
            metrics = regression_metrics(model, x_test, y_test, config["eval_samples"])
            train_mse = predictive_mse(model, x_train, y_train, config["eval_samples"])
            expected, layer_kls = elbo_terms(model, x_train, y_train, config["train_samples"])
        noise = float(model.likelihood.noise.detach().reshape(-1)[0])
        kls = " + ".join(f"{kl:.3f}" for kl in layer_kls)
        print(f"ADGP after {steps:5d} ELBO steps: test RMSE {math.sqrt(metrics['mse']):.4f}, "
              f"NLPD {-metrics['tll']:.3f}; train RMSE {math.sqrt(train_mse):.4f}, "
              f"noise variance {noise:.3g}; per training row: E log lik {expected:.3f}, "
              f"KL {sum(layer_kls):.3f} (layers {kls})", flush=True)  # fmt: skip

    def callback(step: int, loss: float) -> None:
        if step + 1 in wanted:
            model.eval()
            report(step + 1)
            model.train()

    if 0 in wanted:
        model.eval()
        report(0)
    if args.elbo_learning_rate is not None:
        schedule = replace(schedule, learning_rate=args.elbo_learning_rate)
    fit_dgp(model, x_train, y_train, num_steps=max(args.at), num_samples=config["train_samples"],
            callback=callback, **schedule.options(generator))  # fmt: skip


if __name__ == "__main__":
    main()
