"""``zonal fit`` and ``zonal predict``: the arguments handed to ``zonal.tabular``, its results
printed; the fitting code is imported when a command runs."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from zonal.cli.common import (
    EXIT_INTERRUPTED,
    CommandError,
    error_text,
)


@contextlib.contextmanager
def quiet_numerics(quiet: bool) -> Iterator[None]:
    """With ``quiet``, silence the numerical warnings of GPyTorch, linear_operator and BoTorch
    (added jitter, non-PSD retries) for the block; zonal's own errors and results still print."""
    with warnings.catch_warnings():
        if quiet:
            warnings.filterwarnings("ignore", module=r"(gpytorch|linear_operator|botorch)(\.|$)")
        yield


def run_fit(args: argparse.Namespace) -> int:
    if args.quiet and "tqdm" not in sys.modules:
        # tqdm reads TQDM_* defaults when it is imported: this silences every bar the fit opens
        # (fundamental systems built on first use included) without threading a flag through
        os.environ.setdefault("TQDM_DISABLE", "1")
    with quiet_numerics(args.quiet), data_notes():
        return _fit_quietly_or_not(args)


@contextlib.contextmanager
def data_notes() -> Iterator[None]:
    """Print the fitting layer's notes on the data (``zonal.tabular.tables.DataWarning``: more
    input columns than rows, columns of one value) as ``zonal: note: ...`` lines on stderr; other
    warnings are shown as before."""
    with warnings.catch_warnings():  # restores showwarning and the filters on exit
        shown = warnings.showwarning

        def show(
            message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any
        ) -> None:
            if category.__name__ == "DataWarning":  # without importing the fitting layer
                print(f"zonal: note: {message}", file=sys.stderr)
            else:
                shown(message, category, *args, **kwargs)

        warnings.showwarning = show
        yield


def _fit_quietly_or_not(args: argparse.Namespace) -> int:
    from zonal._files import check_new_output
    from zonal.tabular.fitting import fit_table, table_target
    from zonal.tabular.options import AUTO_BUDGET, describe_default_budget
    from zonal.tabular.saved import save_model
    from zonal.tabular.tables import read_table

    args.target = args.target.strip()  # as the header's names and --features are read
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
        if args.budget == AUTO_BUDGET:
            rule = describe_default_budget(target.likelihood, len(target.classes), table.num_rows)
            print(f"zonal: {rule}", file=sys.stderr)
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
                hyperpriors=args.hyperpriors,
                ard_by_bic=args.ard_by_bic,
                seed=args.seed,
            )
        except KeyboardInterrupt:
            print("zonal: interrupted before any model was trained; nothing saved", file=sys.stderr)
            return EXIT_INTERRUPTED
        save_model(fitted, output, force=args.force)
    trained = fitted.trained
    print(
        f"zonal: fitted {fitted.describe()} for {fitted.target.describe()} to "
        f"{_rows(fitted.num_rows, fitted.num_validation_rows)} x {len(fitted.feature_columns)} "
        f"input columns of {args.data} in {trained.seconds:.1f} s"
        f"{_objective(fitted.spec, trained.objective)} -> {output}"
    )
    note = _scoring_note(fitted)
    if note is not None and fitted.scores:
        print(note)
    for name, score in fitted.scores.items():
        metrics = ", ".join(f"{key} {value:.4g}" for key, value in score.items()
                            if key not in ("seconds", "objective"))  # fmt: skip
        chosen = " (chosen)" if name == fitted.spec["model"] and len(fitted.scores) > 1 else ""
        where = f"validation ({fitted.scoring_rows} rows{_units(fitted)}): {metrics}" \
            if metrics else "no validation split"  # fmt: skip
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
    from zonal.tabular.streamed import state_path_for, streamed_fit

    if args.ard_by_bic:
        raise CommandError("--ard-by-bic is the exact GP's, which the streamed fit "
                           "(--chunk-size) does not train: drop it")  # fmt: skip
    first = args.data[0]
    output = args.output or first.with_name(f"{first.stem}.zonal.pt")
    _refuse_overwriting_inputs(output, *args.data)
    features = None
    if args.features is not None:
        features = [name.strip() for name in args.features.split(",") if name.strip()]
    if args.likelihood in (None, "gaussian"):  # the first line names the task, as in memory
        print(f"zonal: target {args.target!r}: regression, Gaussian likelihood (the streamed "
              "fit, --chunk-size, fits regressions only)", file=sys.stderr)  # fmt: skip
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
    where = f"validation ({fitted.num_validation_rows} rows{_units(fitted)}): {metrics}" \
        if metrics else "no validation split"  # fmt: skip
    print(
        f"zonal: fitted {fitted.describe()} for regression to "
        f"{_rows(fitted.num_rows, fitted.num_validation_rows)} x {len(fitted.feature_columns)} "
        f"input columns of {fitted.source}, read {args.chunk_size} rows at a time, in "
        f"{fitted.trained.seconds:.1f} s{_objective(fitted.spec, fitted.trained.objective)}; "
        f"{where} -> {output}"
    )
    return 0


def run_predict(args: argparse.Namespace) -> int:
    with data_notes():  # e.g. a column of one value on the training rows that varies here
        return _predict(args)


def _predict(args: argparse.Namespace) -> int:
    from zonal._files import check_new_output
    from zonal.tabular.predict import predict_table
    from zonal.tabular.saved import load_model
    from zonal.tabular.tables import read_table, write_table

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


def _scoring_note(fitted: Any) -> str | None:
    """Under ``auto`` half of the validation rows watch the early stopping and the others score
    the candidates (``zonal.tabular.split.validation_roles``): the line that says so, or None."""
    count, scoring = fitted.num_validation_rows, fitted.scoring_rows
    if scoring == count:
        return None
    return (
        f"zonal: the candidates are scored on {scoring} of the {count} validation rows; the "
        f"other {count - scoring} watched their early stopping"
    )


#: the training objective of each model kind, as the fit line names it
OBJECTIVES = {"exact": "log marginal likelihood", "sgpr": "collapsed bound (Titsias 2009)"}


def _objective(spec: dict[str, Any], objective: float) -> str:
    """The fit line's training objective per row: the exact GP's log marginal likelihood, the
    SGPR's collapsed bound, the ELBO of the others; nothing for a stack, whose components'
    objectives are of different kinds and do not add up to one."""
    from zonal.tabular.model import STACKED

    if spec["model"] == STACKED or not math.isfinite(objective):  # NaN: interrupted before
        return ""  # its first evaluation
    return f" ({OBJECTIVES.get(spec['model'], 'ELBO')} per training row {objective:.4g})"


def _rows(num_rows: int, num_validation_rows: int) -> str:
    """The fit line's rows: the training rows and, where there are some, the validation rows
    (which the shallow models then condition on: the exact GP describes itself with all)."""
    if num_validation_rows == 0:
        return f"{num_rows} rows"
    return f"{num_rows - num_validation_rows} training + {num_validation_rows} validation rows"


def _units(fitted: Any) -> str:
    """The units of a regression's validation metrics, as the fit line names them: the target's
    own (``zonal.tabular.metrics.in_target_units``; the test metrics of the benchmarks and
    experiments are standardised); nothing for classification."""
    if fitted.target.is_classification:
        return ""
    return f", in the units of {fitted.target_column!r}"


def _refuse_overwriting_inputs(output: Path, *inputs: Path) -> None:
    """An output that is one of the command's own input files would destroy it, --force or not."""
    for source in inputs:
        if output.resolve() == source.resolve():
            raise CommandError(f"the output {output} is the input file {source}; choose another -o")


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """Turn the errors a user can fix (bad table, bad checkpoint, file exists) into one line."""
    from zonal.tabular.saved import ModelFileError
    from zonal.tabular.tables import TableError

    try:
        yield
    except (TableError, ModelFileError, OSError) as error:
        raise CommandError(error_text(error)) from error
    except ValueError as error:  # bad options, or a model that cannot be fitted to these data
        raise CommandError(error_text(error)) from error
