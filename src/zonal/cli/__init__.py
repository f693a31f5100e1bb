"""The ``zonal`` command: the demo, fitting a user's table, the papers' experiments and the datasets.

Usage::

    zonal demo
    zonal fit DATA.csv|DATA.npz --target COLUMN
              [--model auto|sgpr|exact|svgp|svgp-activated|svgp-points|adgp|dgp]
              [--likelihood gaussian|bernoulli|softmax] [--budget SECONDS|auto|none]
              [--validation-fraction F] [--steps N] [--output CHECKPOINT.pt] [--seed N]
              [--features A,B,...] [--kernel K] [--num-inducing M] [--force] [--quiet]
    zonal fit DATA... --chunk-size ROWS --target COLUMN [--restart] [options as above]
    zonal predict CHECKPOINT.pt DATA.csv|DATA.npz [--output PRED.csv] [--latent] [--force]
    zonal experiment list
    zonal experiment run NAME [--protocol quick|converged|full] [--full] [--output-dir DIR]
                         [--seed N] [--set KEY=VALUE ...] [--jobs N]
    zonal experiment run NAME --resume RUN_DIR [--jobs N]
    zonal experiment reproduce [--runs-dir DIR] [--list] [--jobs N]
    zonal experiment report reproductions [--runs-dir DIR] [--output FILE]
    zonal data list
    zonal data fetch NAME
    zonal --version

Expected errors (an unknown name, a bad ``--set``, an unreadable checkpoint) are printed as one line
on stderr with exit code 1; usage errors exit with 2. The subcommands import what they need when they
run, so that one part missing does not break the others. One module per command:
``fit_args`` / ``fit`` (fit and predict: ``zonal.tabular``), ``experiment``, ``data``; ``common``
holds what they share.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import zonal
from zonal.cli.common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    CommandError,
    exit_code,
    terminate_as_interrupt,
)
from zonal.cli.data import add_data_parser
from zonal.cli.experiment import add_experiment_parser
from zonal.cli.fit_args import add_fit_parser, add_predict_parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``zonal`` command."""
    parser = argparse.ArgumentParser(
        prog="zonal",
        description="Gaussian processes on hyperspheres: demo, fit, predict, experiments, "
        "datasets.",
    )
    parser.add_argument("--version", action="version", version=f"zonal {zonal.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run the demonstration",
        description="The main job: the main-benchmark experiment's quick preset (zonal's activated "
        "DGP-3 and DGP-3 against GPyTorch's SVGP (RBF-ARD) and DeepGP-3 on yacht and concrete: test "
        "MSE, test log likelihood and seconds to a target test MSE, beside seed 000 table 1), into a "
        "new folder under ./runs; prints one line per fitted model, then the table.",
    )
    demo.set_defaults(handler=run_demo)

    add_fit_parser(commands)
    add_predict_parser(commands)
    add_experiment_parser(commands)
    add_data_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``zonal`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:  # --help, --version and usage errors
        return exit_code(exit_request.code)
    try:
        with terminate_as_interrupt():
            return int(args.handler(args))
    except CommandError as error:
        print(f"zonal: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:  # one a command did not handle (e.g. while it imports): one line
        print("zonal: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run_demo(args: argparse.Namespace) -> int:
    """``zonal demo``: ``zonal.demo.main``."""
    try:
        demo = importlib.import_module("zonal.demo")
    except ImportError as error:
        raise CommandError(f"the demo is not available: {error}") from error
    return exit_code(demo.main())


__all__ = ["CommandError", "build_parser", "main"]
