"""Diagnosis: a target that depends on 2 of 32 inputs, where the held-out table puma32h put
``auto`` at 1.53 of the RBF-ARD SVGP's test MSE (docs/fit_evidence.md, session 29).

Synthetic rows, no table of any suite: x ~ N(0, I_32), y = sin(2 x_0) + x_1^2 / 2 - 1/2 + 0.1 e
with e ~ N(0, 1) (noise variance 0.01 of a target variance about 1), 4,000 training and 1,000 test
rows from ``default_rng(seed)``. On the standardised rows, in one process and one thread:

* ``rbf-svgp``: GPyTorch's SVGP with RBF-ARD (``gp_baselines.svgp_regression``: 256 inducing
  points, 1000 Adam steps), the suite's peer;
* ``sgpr``, ``svgp-points``, ``adgp``: zonal's recipes by name with input scales (``ard=True``),
  their default steps, no budget (``zonal.tabular.fitting.fit_data``);
* ``svgp-points-small``: ``svgp-points`` with the embedding's input scales starting at
  1 / sqrt(D) instead of 1, so that E ||s * x||^2 = 1 = b^2 for standardised inputs: the lifted
  point [s * x, b] starts at the same distance from the pole whatever D is, instead of at
  ||x|| ~ sqrt(D) where the homogeneous kernel r r' k_S(z . z') reads mostly the norm and the
  direction of x (the model is built by ``build_points_svgp``, its scales set, then trained by
  ``train_built_svgp`` exactly as the recipe trains).

Prints the standardised test MSE (the noise floor is about 0.01) and seconds of each.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/few_relevant_inputs.py [--seed 0] [--methods ...]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
import torch

from gp_baselines import svgp_regression
from zonal.models.training import TrainingControl
from zonal.tabular.fitting import fit_data
from zonal.tabular.predict import predict_data
from zonal.tabular.recipes import build_points_svgp, resolve_spec
from zonal.tabular.recipes.svgp import train_built_svgp

INPUTS, TRAIN, TEST = 32, 4000, 1000
NOISE_SD = 0.1


def synthetic_rows(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """(x_train [TRAIN, D], y_train, x_test [TEST, D], y_test, the noise variance in the same
    units), y standardised by the training rows' mean and standard deviation."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((TRAIN + TEST, INPUTS))
    y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] ** 2 - 0.5 + NOISE_SD * rng.standard_normal(len(x))
    mean, sd = y[:TRAIN].mean(), y[:TRAIN].std()
    y = (y - mean) / sd
    return x[:TRAIN], y[:TRAIN], x[TRAIN:], y[TRAIN:], NOISE_SD**2 / sd**2


def recipe(name: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray, int], np.ndarray]:
    """zonal's recipe ``name`` with input scales, trained on every training row: test means."""

    def predict(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, seed: int) -> np.ndarray:
        columns = [f"x{index}" for index in range(x.shape[1])]
        fitted = fit_data(x, y, feature_columns=columns, likelihood="gaussian", model=name,
                          ard=True, seed=seed, validation_fraction=0.0)  # fmt: skip
        return np.asarray(predict_data(fitted, x_test, seed=seed)["mean"])

    return predict


def small_scales_points(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, seed: int) -> np.ndarray:
    """``svgp-points`` (input scales) with every scale starting at 1 / sqrt(D): test means."""
    rows, targets = torch.from_numpy(x), torch.from_numpy(y)
    spec = resolve_spec(x.shape[1], model="svgp-points", ard=True, seed=seed)
    spec["num_inducing"] = min(spec["num_inducing"], len(x))
    torch.manual_seed(seed)
    model = build_points_svgp(spec, rows)
    embedding, scale = model.input_map, 1 / math.sqrt(x.shape[1])
    start = torch.full_like(embedding.input_scales, scale)
    with torch.no_grad():  # the scales, and the recipe's points [x, 1] lifted at them: [s x, 1]
        embedding.raw_input_scales.copy_(embedding.input_scales_constraint.inverse_transform(start))
        model.features.points[:, :-1] *= scale
    fit = train_built_svgp(model, spec, rows, targets, TrainingControl())
    with torch.no_grad():
        mean, _ = fit.model.predict(torch.from_numpy(x_test))
    return mean.numpy()


def rbf_svgp(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, seed: int) -> np.ndarray:
    """The suite's peer: test means."""
    found = svgp_regression(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(x_test),
                            num_inducing=256, steps=1000, batch_size=1024, learning_rate=0.05,
                            seed=seed)  # fmt: skip
    return np.asarray(found["mean"])


METHODS = {
    "rbf-svgp": rbf_svgp,
    "sgpr": recipe("sgpr"),
    "svgp-points": recipe("svgp-points"),
    "svgp-points-small": small_scales_points,
    "adgp": recipe("adgp"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    x, y, x_test, y_test, floor = synthetic_rows(args.seed)
    print(f"{INPUTS} inputs, 2 relevant; {TRAIN} training and {TEST} test rows; seed {args.seed}; "
          f"noise floor of the standardised test MSE {floor:.4f}")  # fmt: skip
    for name in args.methods:
        started = time.perf_counter()
        mean = METHODS[name](x, y, x_test, args.seed)
        seconds = time.perf_counter() - started
        print(f"{name:<20} test MSE {np.mean((mean - y_test) ** 2):.4f}   {seconds:5.0f} s",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
