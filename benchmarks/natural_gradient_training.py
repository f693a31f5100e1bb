"""Benchmark: training a probit SVGP classifier with natural-gradient steps on q(u) and Adam on its
hyperparameters, zonal's ``fit_svgp(natural_gradient=...)`` (q(u) stored in the Cholesky family)
against GPyTorch's recipe for the same (its ``NGD`` optimiser on ``NaturalVariationalDistribution``
with Adam on the hyperparameters) and against Adam on everything, on the same rows, model and
minibatches.

The table is banana from zonal's dataset registry (split 0 of ``benchmarks/fit_suite.py``: 4,770
training and 530 test rows, inputs standardised). The model is ``zonal fit``'s ``svgp-points``
classifier (256 inducing points drawn from the training rows, the chordal squared-exponential
kernel on the sphere embedding with learned input scales, a constant prior mean); the three start
from the same state and take ``--steps`` steps on the same minibatches of ``--batch-size`` rows;
the Adam learning rate is ``--lr`` for all three, the natural-gradient step ``--step`` for the two
that take one. Reported: seconds, the ELBO per row on the training rows (GPyTorch's
``VariationalELBO``, Gauss-Hermite quadrature), the test accuracy and log likelihood per row; the
ratio column is each method's seconds / zonal's.

Run (the thread count is printed and stored):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/natural_gradient_training.py [--steps 400]

Results go to benchmarks/results/natural_gradient_training.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from pathlib import Path

import gpytorch
import torch

from fit_suite import load_split
from zonal.models import SVGP, fit_svgp
from zonal.models.training import minibatch_indices
from zonal.tabular.recipes.points import build_points_svgp
from zonal.tabular.recipes.registry import resolve_spec

OUTPUT = Path(__file__).parent / "results" / "natural_gradient_training.json"


def banana(split: int) -> tuple[torch.Tensor, ...]:
    """(x_train, y_train, x_test, y_test) of banana's split, inputs standardised by the
    training rows' moments, labels 0 / 1."""
    data = load_split("banana", split)
    x_train = torch.as_tensor(data.x_train, dtype=torch.float64)
    mean, std = x_train.mean(0), x_train.std(0)
    x_test = (torch.as_tensor(data.x_test, dtype=torch.float64) - mean) / std
    y_train = torch.as_tensor(data.y_train.astype(float), dtype=torch.float64)
    y_test = torch.as_tensor(data.y_test.astype(float), dtype=torch.float64)
    return (x_train - mean) / std, y_train, x_test, y_test


def in_family(model: SVGP, family: str) -> SVGP:
    """A copy of ``model`` (the same kernel, features, embedding, likelihood and prior mean)
    whose q(u) lives in another variational family, at the prior."""
    return SVGP(copy.deepcopy(model.covar_module), copy.deepcopy(model.features), model.input_dim,
                likelihood=copy.deepcopy(model.likelihood), input_map=copy.deepcopy(model.input_map),
                mean_module=copy.deepcopy(model.mean_module), variational_family=family)  # fmt: skip


def gpytorch_natural_training(
    model: SVGP, x: torch.Tensor, y: torch.Tensor, args: argparse.Namespace
) -> None:
    """GPyTorch's recipe: one backward per minibatch, then an ``NGD`` step on q(u) and an Adam
    step on the hyperparameters."""
    objective = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(x))
    ngd = gpytorch.optim.NGD(model.variational_parameters(), num_data=len(x), lr=args.step)
    adam = torch.optim.Adam(model.hyperparameters(), lr=args.lr)
    model.train()
    for index in minibatch_indices(len(x), args.batch_size, args.steps, args.seed):
        ngd.zero_grad()
        adam.zero_grad()
        (-objective(model(x[index]), y[index])).backward()
        ngd.step()
        adam.step()


def scores(
    model: SVGP, x: torch.Tensor, y: torch.Tensor, x_test: torch.Tensor, y_test: torch.Tensor
) -> dict[str, float]:
    """The training rows' ELBO per row and the test rows' accuracy and log likelihood per row."""
    model.train()
    with torch.no_grad():
        objective = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(x))
        elbo = float(objective(model(x), y))
        model.eval()
        probability = model.likelihood(model(x_test)).probs.clamp(1e-12, 1 - 1e-12)  # p(y=1)
    correct = ((probability > 0.5).double() == y_test).double().mean()
    log_likelihood = torch.where(y_test > 0, probability.log(), (1 - probability).log()).mean()
    return {"elbo": elbo, "accuracy": float(correct), "tll": float(log_likelihood)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=0.02, help="Adam's learning rate")
    parser.add_argument("--step", type=float, default=0.3, help="the natural-gradient step")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    threads = torch.get_num_threads()
    print(f"torch threads {threads} (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')})")
    x, y, x_test, y_test = banana(args.split)
    spec = resolve_spec(x.shape[1], model="svgp-points", likelihood="bernoulli", ard=True,
                        seed=args.seed)  # fmt: skip
    start = build_points_svgp(spec, x)
    schedule = {"num_steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
                "seed": args.seed}  # fmt: skip
    methods = {
        "zonal natural + Adam": lambda model: fit_svgp(
            model, x, y, natural_gradient=args.step, **schedule
        ),
        "GPyTorch NGD + Adam": lambda model: gpytorch_natural_training(model, x, y, args),
        "Adam on all": lambda model: fit_svgp(model, x, y, **schedule),
    }
    families = {"GPyTorch NGD + Adam": "natural"}
    rows = []
    for name, train in methods.items():
        model = in_family(start, families.get(name, "cholesky"))
        started = time.perf_counter()
        train(model)
        seconds = time.perf_counter() - started
        rows.append({"method": name, "seconds": seconds, **scores(model, x, y, x_test, y_test)})
    base = rows[0]["seconds"]
    for row in rows:
        print(f"{row['method']:22s} {row['seconds']:7.2f} s ({row['seconds'] / base:.2f}x)  "
              f"ELBO/row {row['elbo']:+.4f}  test accuracy {row['accuracy']:.4f}  "
              f"TLL {row['tll']:+.4f}")  # fmt: skip
    OUTPUT.parent.mkdir(exist_ok=True)
    OUTPUT.write_text(json.dumps({"threads": threads, "settings": vars(args), "rows": rows},
                                 indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
