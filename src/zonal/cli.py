"""The ``zonal`` command: the demo, fitting a user's table, the papers' experiments and the datasets.

    zonal demo
    zonal fit DATA.csv|DATA.npz --target COLUMN [--model auto|sgpr|svgp|svgp-activated|adgp|dgp]
              [--likelihood gaussian|bernoulli|softmax] [--budget SECONDS|none]
              [--validation-fraction F] [--steps N] [--output CHECKPOINT.pt] [--seed N]
              [--features A,B,...] [--kernel K] [--num-inducing M] [--force] [--quiet]
    zonal fit DATA... --chunk-size ROWS --target COLUMN [--restart] [options as above]
    zonal predict CHECKPOINT.pt DATA.csv|DATA.npz [--output PRED.csv] [--latent] [--force]
    zonal experiment list
    zonal experiment run NAME [--protocol quick|converged|full] [--full] [--output-dir DIR]
                         [--seed N] [--set KEY=VALUE ...]
    zonal experiment run NAME --resume RUN_DIR
    zonal experiment reproduce [--runs-dir DIR] [--list]
    zonal experiment report reproductions [--runs-dir DIR] [--output FILE]
    zonal data list
    zonal data fetch NAME
    zonal --version

Expected errors (an unknown name, a bad ``--set``, an unreadable checkpoint) are printed as one line
on stderr with exit code 1; usage errors exit with 2. The subcommands import what they need when they
run, so that one part missing does not break the others.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zonal

if TYPE_CHECKING:
    from zonal.experiments.run import ExperimentRun

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """A failure to report to the user as one line, without a traceback."""


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
    demo.set_defaults(handler=_demo)

    _add_fit_parser(commands)
    _add_predict_parser(commands)

    experiment = commands.add_parser("experiment", help="list and run the papers' experiments")
    experiment_commands = experiment.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = experiment_commands.add_parser("list", help="list the registered experiments")
    listing.set_defaults(handler=_experiment_list)
    run = experiment_commands.add_parser(
        "run",
        help="run an experiment into a new folder (or resume one)",
        description="Run an experiment into a new folder under --output-dir, or continue an "
        "interrupted run from its last checkpoint with --resume.",
    )
    run.add_argument("name", metavar="NAME", help="experiment name (see `zonal experiment list`)")
    run.add_argument(
        "--protocol",
        choices=("quick", "converged", "full"),
        default=None,
        help="quick (default: minutes, shows the code runs), converged (to convergence on one CPU "
        "core, at least 3 seeds), full (the seed's own protocol)",
    )
    run.add_argument("--full", action="store_true", help="same as --protocol full")
    run.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder that receives the run folder (default: ./runs)",
    )
    run.add_argument("--seed", type=int, default=None, metavar="N", help="same as --set seed=N")
    run.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config value (repeatable); VALUE is read as JSON where the key is not text",
    )
    run.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="RUN_DIR",
        help="continue this interrupted run from its last checkpoint, with its stored config",
    )
    run.add_argument("--jobs", type=_positive_int, default=1, metavar="N",
                     help=JOBS_HELP)  # fmt: skip
    run.set_defaults(handler=_experiment_run)
    reproduce = experiment_commands.add_parser(
        "reproduce",
        help="run every claim's converged protocol not yet finished, resuming those in flight",
        description="Run, one after another, the experiments of the reproduction report whose "
        "protocol has no finished run under --runs-dir: an unfinished run folder is resumed, a "
        "missing one started. Ctrl-C stops; run the same command to go on. --list only prints "
        "the queue.",
    )
    _add_runs_dir(reproduce)
    reproduce.add_argument("--list", action="store_true", help="print the queue and stop")
    reproduce.add_argument("--jobs", type=_positive_int, default=1, metavar="N",
                           help=JOBS_HELP)  # fmt: skip
    reproduce.set_defaults(handler=_experiment_reproduce)
    report = experiment_commands.add_parser(
        "report",
        help="write the reproduction report from the run folders",
        description="Judge the seeds' claims on the finished converged and full runs under "
        "--runs-dir and write the reproduction report (docs/reproductions.md).",
    )
    report.add_argument("which", choices=("reproductions",), help="the report to write")
    _add_runs_dir(report)
    report.add_argument(
        "--output", type=Path, default=Path("docs/reproductions.md"), metavar="FILE",
        help="the markdown file to write (default: docs/reproductions.md)",
    )  # fmt: skip
    report.set_defaults(handler=_experiment_report)

    data = commands.add_parser("data", help="list and fetch the datasets")
    data_commands = data.add_subparsers(dest="action", required=True, metavar="ACTION")
    data_list = data_commands.add_parser("list", help="list the known datasets")
    data_list.set_defaults(handler=_data_list)
    fetch = data_commands.add_parser("fetch", help="download a dataset into the cache")
    fetch.add_argument("name", metavar="NAME", help="dataset name (see `zonal data list`)")
    fetch.set_defaults(handler=_data_fetch)
    return parser


FIT_DESCRIPTION = """\
Fit a GP model to the rows of a table (CSV or NPZ) and save it in one checkpoint for `zonal
predict`. CSV: a header row, then numbers. NPZ: one 1-D array per column, or X [N, D] with optional
columns (names), y and target (its name).

The task: a target of text labels, or of at most 10 integer values (with at least 5 rows per
value), is classification (two classes: Bernoulli likelihood with a probit link; more: softmax over
one latent GP per class); any other numeric target is regression (Gaussian likelihood).
--likelihood overrides the detection.

Validation: --validation-fraction of the rows (stratified by class, seeded by --seed) is held out;
inputs and a regression target are standardised with the training rows. Every training keeps the
state with the best validation log likelihood (early stopping: a training stage ends when that
has not improved for 15 evaluations, or for a fifth of the stage's share of the budget); the
validation metrics (log likelihood, and MSE or accuracy) are printed and saved.

--model auto (the default) trains, within --budget seconds of wall clock in all:
  regression:      sgpr (one data pass; harmonic features, phase-truncated above about 11 inputs
                   so that the features reach degree 6), then adgp for up to 20000 training rows;
                   above, svgp (learned phase-truncated harmonics) for more than about 11 inputs,
                   svgp-activated for fewer; where sgpr's validation log likelihood is within 0.1
                   nats per row of adgp's, svgp (harmonic, ARD) within a fifth of the budget;
                   then stacks them: the model is the mixture sum_k w_k p_k(y | x) whose weights
                   maximise the validation log density, rounded to twentieths (one candidate
                   alone when the weights say so);
  classification:  svgp-activated, then adgp for up to 20000 training rows, keeping the one with
                   the best validation log likelihood.
Each candidate may use the time left divided by the candidates left. The SVGP candidates and adgp
learn one scale per input column in the sphere embedding (ARD; adgp in its first layer), and so
does sgpr when an SVGP alone follows it (by the bound of 1024 rows, then one pass); before adgp,
sgpr skips the scales to leave the time to the deep model; --no-ard turns ARD off.

A progress bar (objective, validation log likelihood, budget left) is shown on a terminal unless
--quiet. Ctrl-C keeps the best model so far as a complete checkpoint (exit code 130).

Tables too large for memory: --chunk-size ROWS reads DATA (one CSV file, several CSV / Parquet
partitions, or a folder of them) ROWS rows at a time and fits the one-pass SGPR (regression only;
--model auto means sgpr here, with ARD unless --no-ard): pass 1 checks every cell (a bad one names
its partition, line and global row) and standardises, pass 2 sums the SGPR's statistics, then
L-BFGS, then pass 3 scores the validation rows (each row held out with probability
--validation-fraction by a seeded hash of its row number). Pass 2 saves its progress beside the
checkpoint (CHECKPOINT.state): an interrupted fit resumes when the same command is run again, or
starts again with --restart. --budget does not apply.
"""


def _budget(text: str) -> float | None:
    """``--budget``: positive seconds, or ``none`` for no wall-clock limit."""
    if text.strip().lower() == "none":
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(
            f"expected a positive number of seconds or 'none', got {text!r}"
        )
    return seconds


def _add_fit_parser(commands: Any) -> None:
    from zonal.fit_options import (
        DEFAULT_BUDGET,
        DEFAULT_VALIDATION_FRACTION,
        KERNELS,
        LIKELIHOODS,
        RECIPE_DEFAULTS,
        RECIPE_SUMMARIES,
    )

    fit = commands.add_parser(
        "fit",
        help="fit a GP regression or classification model to a table (CSV or NPZ) and save it",
        description=FIT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fit.add_argument(
        "data",
        type=Path,
        nargs="+",
        metavar="DATA",
        help="the training table (.csv or .npz); with --chunk-size, CSV / Parquet partitions or "
        "a folder of them",
    )
    fit.add_argument("--target", required=True, metavar="COLUMN", help="the column to predict")
    fit.add_argument(
        "--features",
        default=None,
        metavar="A,B,...",
        help="comma-separated input columns (default: every column but the target)",
    )
    fit.add_argument(
        "--model",
        choices=("auto", *RECIPE_SUMMARIES),
        default="auto",
        help="auto: chosen or stacked by validation (see above); "
        + "; ".join(f"{name}: {summary}" for name, summary in RECIPE_SUMMARIES.items())
        + " (sgpr: regression only)",
    )
    fit.add_argument(
        "--likelihood",
        choices=LIKELIHOODS,
        default=None,
        help="gaussian (regression), bernoulli (two classes) or softmax (classes); default: "
        "detected from the target column",
    )
    fit.add_argument(
        "--budget",
        type=_budget,
        default=DEFAULT_BUDGET,
        metavar="SECONDS",
        help=f"wall-clock seconds for all training (default {DEFAULT_BUDGET:g}), or 'none': no "
        "wall clock, so that --seed reproduces the fit exactly (the steps and early stopping by "
        "evaluations end it)",
    )
    fit.add_argument(
        "--validation-fraction",
        type=float,
        default=DEFAULT_VALIDATION_FRACTION,
        metavar="F",
        help=f"share of the rows held out for early stopping and the model choice (default "
        f"{DEFAULT_VALIDATION_FRACTION:g}; 0: none)",
    )
    fit.add_argument(
        "--ard",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="learn one scale per input column in the sphere embedding (sgpr, svgp, "
        "svgp-activated, adgp; default: on under --model auto where the rule above says, off "
        "for a named model)",
    )
    fit.add_argument(
        "--layers",
        type=int,
        default=None,
        metavar="L",
        help="number of GP layers of adgp / dgp (hidden width 5; default 2)",
    )
    fit.add_argument(
        "--kernel",
        choices=KERNELS,
        default="auto",
        help="auto: sgpr keeps the kernel with the larger bound; the SVGPs use arc-cosine",
    )
    fit.add_argument(
        "--num-inducing",
        type=int,
        default=None,
        metavar="M",
        help="feature budget (default 512 harmonic features, 128 activated features)",
    )
    fit.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="L-BFGS iterations (sgpr, default 200) or Adam steps (default 1000; adgp and dgp "
        "run them twice: network, then ELBO; auto: 10 times the defaults, ended by the budget "
        "or early stopping)",
    )
    fit.add_argument(
        "--learning-rate",
        type=float,
        default=None,
        metavar="LR",
        help="the optimiser's learning rate (default: the recipe's, "
        + ", ".join(
            f"{name} {defaults['learning_rate']:g}" for name, defaults in RECIPE_DEFAULTS.items()
        )
        + ")",
    )
    fit.add_argument(
        "--batch-size", type=int, default=1024, metavar="B", help="minibatch size (default 1024)"
    )
    fit.add_argument(
        "--output",
        "-o",
        type=Path,
        default=None,
        metavar="CHECKPOINT",
        help="where to save the model (default: DATA with the suffix .zonal.pt)",
    )
    fit.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    fit.add_argument("--force", action="store_true", help="replace an existing checkpoint")
    fit.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar and no numerical warnings of GPyTorch / linear_operator",
    )
    fit.add_argument(
        "--chunk-size",
        type=int,
        default=None,
        metavar="ROWS",
        help="read DATA ROWS rows at a time and fit the SGPR (tables too large for memory; "
        "--model auto means sgpr; see above)",
    )
    fit.add_argument(
        "--restart",
        action="store_true",
        help="with --chunk-size: discard the saved progress of an interrupted fit",
    )
    fit.set_defaults(handler=_fit)


def _add_predict_parser(commands: Any) -> None:
    predict = commands.add_parser(
        "predict",
        help="predict a table's rows with a model saved by `zonal fit`",
        description="Write one row per input row: for regression the predictive mean and "
        "variance and the 95% interval (lower, upper), in the target's original units; for "
        "classification one probability column per class (prob_<label>) and the most probable "
        "class. The table needs the model's input columns (other columns are ignored; a target "
        "column of a classifier may hold only classes the model saw). Deep models (adgp, dgp) "
        "average --samples Monte Carlo draws of their inner layers, drawn from --seed: the same "
        "command gives the same numbers.",
    )
    predict.add_argument(
        "--samples",
        type=int,
        default=None,
        metavar="S",
        help="inner-layer draws of a deep model (default: the model's, 32)",
    )
    predict.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of a deep model's draws (default 0)"
    )
    predict.add_argument("checkpoint", type=Path, metavar="CHECKPOINT", help="from `zonal fit`")
    predict.add_argument("data", type=Path, metavar="DATA", help="the table to predict (.csv/.npz)")
    predict.add_argument(
        "--output",
        "-o",
        type=Path,
        default=None,
        metavar="PRED",
        help="the predictions (.csv or .npz; default: DATA with the suffix .predictions.csv)",
    )
    predict.add_argument(
        "--latent",
        action="store_true",
        help="variance and interval of the latent function, without the observation noise",
    )
    predict.add_argument("--force", action="store_true", help="replace an existing output file")
    predict.set_defaults(handler=_predict)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``zonal`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:  # --help, --version and usage errors
        return _exit_code(exit_request.code)
    try:
        return args.handler(args)
    except CommandError as error:
        print(f"zonal: error: {error}", file=sys.stderr)
        return EXIT_ERROR


def _demo(args: argparse.Namespace) -> int:
    try:
        demo = importlib.import_module("zonal.demo")
    except ImportError as error:
        raise CommandError(f"the demo is not available: {error}") from error
    return _exit_code(demo.main())


@contextlib.contextmanager
def _quiet_numerics(quiet: bool) -> Iterator[None]:
    """With ``quiet``, silence the numerical warnings of GPyTorch, linear_operator and BoTorch
    (added jitter, non-PSD retries) for the block; zonal's own errors and results still print."""
    with warnings.catch_warnings():
        if quiet:
            warnings.filterwarnings("ignore", module=r"(gpytorch|linear_operator|botorch)(\.|$)")
        yield


def _fit(args: argparse.Namespace) -> int:
    if args.quiet and "tqdm" not in sys.modules:
        # tqdm reads TQDM_* defaults when it is imported: this silences every bar the fit opens
        # (fundamental systems built on first use included) without threading a flag through
        os.environ.setdefault("TQDM_DISABLE", "1")
    with _quiet_numerics(args.quiet):
        return _fit_quietly_or_not(args)


def _fit_quietly_or_not(args: argparse.Namespace) -> int:
    from zonal._files import check_new_output
    from zonal.fitting import fit_table, table_target
    from zonal.saved_model import save_model
    from zonal.tabular import read_table

    if args.chunk_size is not None:
        return _fit_streamed(args)
    if len(args.data) > 1 or args.restart:
        raise CommandError("several DATA partitions and --restart need --chunk-size ROWS")
    args.data = args.data[0]
    output = args.output or args.data.with_name(f"{args.data.stem}.zonal.pt")
    _refuse_overwriting_inputs(output, args.data)
    features = None
    if args.features is not None:
        features = [name.strip() for name in args.features.split(",") if name.strip()]
    with _user_errors():
        check_new_output(output, force=args.force)  # refuse before the training, not after it
        table = read_table(args.data)
        target = table_target(table, args.target, args.likelihood)
        print(f"zonal: {target.announce(args.target, lambda name: f'--likelihood {name}')}",
              file=sys.stderr)  # fmt: skip
        try:
            fitted = fit_table(
                table,
                args.target,
                features=features,
                likelihood=args.likelihood,
                model=args.model,
                budget=args.budget,
                validation_fraction=args.validation_fraction,
                progress=not args.quiet and sys.stderr.isatty(),
                kernel=args.kernel,
                num_inducing=args.num_inducing,
                steps=args.steps,
                learning_rate=args.learning_rate,
                batch_size=args.batch_size,
                num_layers=args.layers,
                ard=args.ard,
                seed=args.seed,
            )
        except KeyboardInterrupt:
            print("zonal: interrupted before any model was trained; nothing saved", file=sys.stderr)
            return EXIT_INTERRUPTED
        save_model(fitted, output, force=args.force)
    trained = fitted.trained
    print(
        f"zonal: fitted {fitted.describe()} for {fitted.target.describe()} to "
        f"{fitted.num_rows - fitted.num_validation_rows} rows x {len(fitted.feature_columns)} "
        f"input columns of {args.data} in {trained.seconds:.1f} s "
        f"(objective per row {trained.objective:.4g}) -> {output}"
    )
    for name, score in fitted.scores.items():
        metrics = ", ".join(f"{key} {value:.4g}" for key, value in score.items()
                            if key not in ("seconds", "objective"))  # fmt: skip
        chosen = " (chosen)" if name == fitted.spec["model"] and len(fitted.scores) > 1 else ""
        where = (
            f"validation ({fitted.num_validation_rows} rows): {metrics}"
            if metrics
            else ("no validation split")
        )
        print(f"zonal:   {name}{chosen}: {where}; {score['seconds']:.1f} s")
    if fitted.interrupted:
        print(
            f"zonal: interrupted: kept the best {fitted.spec['model']} so far as a complete "
            f"checkpoint in {output}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    return 0


def _fit_streamed(args: argparse.Namespace) -> int:
    from zonal.streamed_fit import state_path_for, streamed_fit

    first = args.data[0]
    output = args.output or first.with_name(f"{first.stem}.zonal.pt")
    _refuse_overwriting_inputs(output, *args.data)
    features = None
    if args.features is not None:
        features = [name.strip() for name in args.features.split(",") if name.strip()]
    with _user_errors():
        try:
            fitted = streamed_fit(args.data, args.target, output=output,
                                  chunk_size=args.chunk_size, features=features,
                                  model=args.model, likelihood=args.likelihood,
                                  validation_fraction=args.validation_fraction,
                                  kernel=args.kernel, num_inducing=args.num_inducing,
                                  steps=args.steps, learning_rate=args.learning_rate, ard=args.ard,
                                  seed=args.seed, progress=not args.quiet and sys.stderr.isatty(),
                                  restart=args.restart, force=args.force)  # fmt: skip
        except KeyboardInterrupt:
            state = state_path_for(output)
            if state.exists():
                advice = f"progress saved in {state}; run the same command to resume"
            else:  # the first pass saves nothing: the state is made at its end
                advice = "nothing saved yet (the first pass had not finished); run the same " \
                    "command to start again"  # fmt: skip
            print(f"zonal: interrupted; {advice}", file=sys.stderr)
            return EXIT_INTERRUPTED
    metrics = ", ".join(f"{key} {value:.4g}" for key, value in fitted.validation.items())
    where = f"validation ({fitted.num_validation_rows} rows): {metrics}" if metrics else \
        "no validation split"  # fmt: skip
    print(
        f"zonal: fitted {fitted.describe()} for regression to "
        f"{fitted.num_rows - fitted.num_validation_rows} rows x {len(fitted.feature_columns)} "
        f"input columns of {fitted.source}, read {args.chunk_size} rows at a time, in "
        f"{fitted.trained.seconds:.1f} s (objective per row {fitted.trained.objective:.4g}); "
        f"{where} -> {output}"
    )
    return 0


def _predict(args: argparse.Namespace) -> int:
    from zonal._files import check_new_output
    from zonal.fitting import predict_table
    from zonal.saved_model import load_model
    from zonal.tabular import read_table, write_table

    output = args.output or args.data.with_name(f"{args.data.stem}.predictions.csv")
    _refuse_overwriting_inputs(output, args.data, args.checkpoint)
    with _user_errors():
        check_new_output(output, force=args.force)
        fitted = load_model(args.checkpoint)
        if args.latent and fitted.target.is_classification:
            raise CommandError("--latent is for regression models; this one classifies")
        table = read_table(args.data)
        columns = predict_table(
            fitted, table, include_noise=not args.latent, samples=args.samples, seed=args.seed
        )
        write_table(output, columns, force=args.force)
    what = "class probabilities" if fitted.target.is_classification else "predictions"
    print(f"zonal: wrote {table.num_rows} {what} of {fitted.target_column!r} to {output}")
    return 0


def _refuse_overwriting_inputs(output: Path, *inputs: Path) -> None:
    """An output that is one of the command's own input files would destroy it, --force or not."""
    for source in inputs:
        if output.resolve() == source.resolve():
            raise CommandError(f"the output {output} is the input file {source}; choose another -o")


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """Turn the errors a user can fix (bad table, bad checkpoint, file exists) into one line."""
    from zonal.saved_model import ModelFileError
    from zonal.tabular import TableError

    try:
        yield
    except (TableError, ModelFileError, OSError) as error:
        raise CommandError(_error_text(error)) from error
    except ValueError as error:  # bad options, or a model that cannot be fitted to these data
        raise CommandError(_error_text(error)) from error


def _experiment_list(args: argparse.Namespace) -> int:
    from zonal.experiments.registry import discovery_failures, list_experiments

    experiments = list_experiments()
    rows = [
        (
            experiment.name,
            ", ".join(experiment.protocol_label(p) for p in experiment.protocols),
            _shorten("; ".join(experiment.reproduces) or "-", _LIST_COLUMN),
        )
        for experiment in experiments
    ]
    _print_table(("NAME", "PROTOCOLS", "REPRODUCES"), rows)
    for module, reason in discovery_failures().items():
        print(f"zonal: warning: could not import {module}: {reason}", file=sys.stderr)
    return 0


def _experiment_run(args: argparse.Namespace) -> int:
    from zonal.experiments.errors import ExperimentError
    from zonal.experiments.run import execute_run

    run = _prepare_run(args)
    verb = "resuming" if args.resume is not None else "running"
    print(
        f"zonal: {verb} {run.experiment.name} ({run.preset}) in {run.directory.path}",
        file=sys.stderr,
    )
    resume_hint = (
        f"resume with: zonal experiment run {run.experiment.name} --resume {run.directory.path}"
    )
    try:
        result = execute_run(run)
    except KeyboardInterrupt:
        print(f"zonal: interrupted; {resume_hint}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ExperimentError as error:
        raise CommandError(str(error)) from error
    except Exception as error:  # a bug or a numerical failure: show where, then how to go on
        traceback.print_exc()
        reason = (str(error).strip().splitlines() or [""])[0]
        raise CommandError(
            f"{run.experiment.name} failed ({type(error).__name__}: {reason}); {resume_hint}"
        ) from error
    print(result.summary_line())
    return 0


def _add_runs_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), metavar="DIR",
        help="folder holding the run folders (default: ./runs)",
    )  # fmt: skip


JOBS_HELP = (
    "worker processes for an experiment's independent fits (default 1; experiments that cannot "
    "split their work run in one); the results do not depend on it"
)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _experiment_reproduce(args: argparse.Namespace) -> int:
    from zonal.experiments.errors import ExperimentError
    from zonal.experiments.reproductions import reproduction_queue
    from zonal.experiments.run import create_run, execute_run, open_run

    queue = reproduction_queue(args.runs_dir)
    for name, protocol, folder in queue:
        action = f"resume {folder}" if folder else "new run"
        print(f"zonal: queued {name} --protocol {protocol} ({action})", file=sys.stderr)
    if args.list or not queue:
        if not queue:
            print("zonal: every claim's protocol has a finished run", file=sys.stderr)
        return 0
    for name, protocol, folder in queue:
        try:
            if folder is None:
                run = create_run(name, protocol=protocol, runs_root=args.runs_dir, jobs=args.jobs)
            else:
                run = open_run(folder, experiment=name, jobs=args.jobs)
        except ExperimentError as error:
            raise CommandError(str(error)) from error
        print(f"zonal: running {name} ({protocol}) in {run.directory.path}", file=sys.stderr)
        try:
            result = execute_run(run)
        except KeyboardInterrupt:
            print("zonal: interrupted; run `zonal experiment reproduce` again to go on",
                  file=sys.stderr)  # fmt: skip
            return EXIT_INTERRUPTED
        print(result.summary_line())
    return 0


def _experiment_report(args: argparse.Namespace) -> int:
    from zonal.experiments.reproductions import write_reproductions

    try:
        results = write_reproductions(args.runs_dir, args.output)
    except OSError as error:
        raise CommandError(f"cannot write {args.output}: {error.strerror or error}") from error
    verdicts = [result.verdict for result in results]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
    print(f"zonal: {len(results)} claims ({counts}) -> {args.output}")
    return 0


def _prepare_run(args: argparse.Namespace) -> ExperimentRun:
    """A new run folder for ``experiment run``, or the folder to ``--resume``."""
    from zonal.experiments.config import parse_assignment
    from zonal.experiments.errors import ExperimentError
    from zonal.experiments.run import DEFAULT_RUNS_ROOT, create_run, open_run

    try:
        if args.resume is None:
            overrides = dict(parse_assignment(text) for text in args.assignments)
            if args.seed is not None:
                given = overrides.get("seed")
                if given is not None and given.strip() != str(args.seed):
                    raise CommandError(f"--seed {args.seed} and --set seed={given} disagree")
                overrides["seed"] = str(args.seed)
            return create_run(
                args.name,
                full=args.full,
                protocol=args.protocol,
                overrides=overrides,
                runs_root=args.output_dir or DEFAULT_RUNS_ROOT,
                jobs=args.jobs,
            )
        options = {
            "--full": args.full,
            "--protocol": args.protocol is not None,
            "--seed": args.seed is not None,
            "--set": bool(args.assignments),
            "--output-dir": args.output_dir is not None,
        }
        changed = [option for option, given in options.items() if given]
        if changed:
            raise CommandError(
                f"--resume continues a run with its stored config; drop {', '.join(changed)}"
            )
        return open_run(args.resume, experiment=args.name, jobs=args.jobs)
    except ExperimentError as error:
        raise CommandError(str(error)) from error
    except OSError as error:  # --output-dir is a file, or cannot be created or written
        place = args.resume or args.output_dir or "runs"
        raise CommandError(
            f"cannot make a run folder under {place}: {error.strerror or error}"
            f"{f' ({error.filename})' if error.filename else ''}"
        ) from error


def _data_list(args: argparse.Namespace) -> int:
    list_datasets = _datasets_function("list_datasets")
    try:
        entries = list_datasets()
    except (LookupError, ValueError, OSError) as error:
        raise CommandError(_error_text(error)) from error
    rows = [(entry.name, entry.task, _format_shape(entry.shape), entry.source) for entry in entries]
    _print_table(("NAME", "TASK", "SHAPE", "SOURCE"), rows)
    return 0


def _data_fetch(args: argparse.Namespace) -> int:
    fetch = _datasets_function("fetch")
    datasets = importlib.import_module("zonal.datasets")
    data_errors = tuple(
        getattr(datasets, name)
        for name in ("DatasetUnavailableError", "CorruptArtifactError")
        if hasattr(datasets, name)
    )
    try:
        path = fetch(args.name)
    except (LookupError, ValueError, OSError, *data_errors) as error:
        raise CommandError(f"cannot fetch {args.name!r}: {_error_text(error)}") from error
    print(path)
    return 0


def _datasets_function(name: str) -> Callable[..., Any]:
    """``zonal.datasets.<name>``, imported now; a ``CommandError`` if it is not there."""
    try:
        datasets = importlib.import_module("zonal.datasets")
    except ImportError as error:
        raise CommandError(f"the datasets are not available: {error}") from error
    function = getattr(datasets, name, None)
    if function is None:
        raise CommandError(f"zonal.datasets has no {name}(); the datasets are not available")
    return function


def _error_text(error: BaseException) -> str:
    """The message of ``error``; a ``KeyError``'s without the quotes ``str`` adds."""
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error)


def _format_shape(shape: object) -> str:
    if isinstance(shape, tuple | list):
        return " x ".join(str(size) for size in shape)
    return str(shape)


_LIST_COLUMN = 48
"""Characters of a padded column of ``experiment list`` before it is shortened with "..."."""


def _shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the cut marked by "..."."""
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def _print_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print ``rows`` in left-aligned columns under ``header`` (the last column is not padded)."""
    table = [tuple(header), *(tuple(str(cell) for cell in row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())


def _exit_code(code: object) -> int:
    """An exit code from what ``sys.exit`` or a ``main()`` returned: ``None`` is 0, text is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
