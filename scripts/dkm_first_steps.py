"""Train one configuration of a DKM experiment for its first steps and print its objective.

Does a configuration learn, or collapse to the constant output (mean objective -log 10 on the
digits: every image gets the same class probabilities)? The configuration trains as it does in a
run of ``EXPERIMENT --protocol PROTOCOL`` (the same initialisation, batches, crops and Monte Carlo
draws of its seed), for ``--steps`` steps; the mean objective of every ``--block`` steps is
printed. ``--learning-rate`` and ``--dtype`` change the run's, to tell a rate from a precision.

    .venv/bin/python scripts/dkm_first_steps.py cdkm-mnist --protocol converged \\
        --normalisation local/local --repeat 2 --steps 300 [--learning-rate 0.01] [--dtype float64]

Seed 003 sec. 5, tables 1 and 5 (the normalisations) are where this was needed: the converged
run's Local/Local seed 2 collapsed at the protocol's rate 0.05 and learns at the seed's 0.01.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import time

from zonal.dkm import fit_dkm
from zonal.experiments import get_experiment
from zonal.experiments._dkm_mnist_data import targets_for
from zonal.experiments._dkm_mnist_models import build_model
from zonal.experiments._dkm_mnist_sweeps import (
    BASE_NU,
    DTYPES,
    NORMALISATIONS,
    RESCALINGS,
    Configuration,
)
from zonal.experiments._dkm_mnist_training import fit_options, run_images
from zonal.experiments.config import resolve_config


class _StepsDoneError(Exception):
    """Raised by the counting objective once the steps asked for are done."""


def _pair(text: str, allowed: tuple[tuple[str, str], ...]) -> tuple[str, str]:
    pair = tuple(text.split("/"))
    if pair not in allowed:
        choices = ", ".join("/".join(choice) for choice in allowed)
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {choices}")
    return pair  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="a DKM experiment, e.g. cdkm-mnist")
    parser.add_argument("--protocol", default="converged")
    parser.add_argument("--nu", default=BASE_NU)
    parser.add_argument("--normalisation", default="batch/batch",
                        type=lambda text: _pair(text, NORMALISATIONS))  # fmt: skip
    parser.add_argument("--rescaling", default="batch/batch",
                        type=lambda text: _pair(text, RESCALINGS))  # fmt: skip
    parser.add_argument("--top", choices=("linear", "gap"), default=None)
    parser.add_argument("--likelihood", choices=("categorical", "gaussian"), default=None)
    parser.add_argument("--repeat", type=int, default=0, help="trains with the seed seed + repeat")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--dtype", choices=tuple(DTYPES), default=None)
    args = parser.parse_args()

    config = resolve_config(get_experiment(args.experiment), protocol=args.protocol)
    configuration = Configuration(
        args.nu,
        args.normalisation,
        args.rescaling,
        args.top or config["top"],
        args.likelihood or config["likelihood"],
        tuple(config["conv_inducing"]),
        repeat=args.repeat,
    )
    seeded = {**config, "seed": config["seed"] + args.repeat}
    dtype = DTYPES[args.dtype or config["dtype"]]
    rate = args.learning_rate or config["learning_rate"]
    x_train, y_train, _, _, image_shape = run_images(json.dumps(config, sort_keys=True))
    x_train = x_train.to(dtype)
    model = build_model(x_train, configuration, seeded, image_shape).to(dtype=dtype)

    objectives: list[float] = []
    objective = type(model).objective

    def counted(self, *arguments, **keywords):  # type: ignore[no-untyped-def]
        if len(objectives) >= args.steps:
            raise _StepsDoneError
        value = objective(self, *arguments, **keywords)
        objectives.append(float(value.detach()))
        return value

    type(model).objective = counted  # type: ignore[method-assign]
    started = time.monotonic()
    with contextlib.suppress(_StepsDoneError):
        options = {**fit_options(seeded, image_shape), "lr": rate}
        fit_dkm(model, x_train, targets_for(y_train, configuration.likelihood), **options)
    print(f"{configuration.key}, {dtype}, rate {rate}: {len(objectives)} steps in "
          f"{time.monotonic() - started:.0f} s; the constant output of 10 classes: "
          f"{-math.log(10):.3f}")  # fmt: skip
    for first in range(0, len(objectives), args.block):
        block = objectives[first : first + args.block]
        print(f"steps {first + 1:5d}-{first + len(block):5d}: mean objective "
              f"{sum(block) / len(block):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
