"""``zonal experiment list | run | reproduce | report``: the papers' experiments
(``zonal.experiments``)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zonal.cli.common import (
    EXIT_INTERRUPTED,
    LIST_COLUMN,
    CommandError,
    positive_int,
    print_table,
    shorten,
)

if TYPE_CHECKING:
    from zonal.experiments.run import ExperimentRun


def add_experiment_parser(commands: Any) -> None:
    """The ``experiment`` command and its actions."""
    experiment = commands.add_parser("experiment", help="list and run the papers' experiments")
    experiment_commands = experiment.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = experiment_commands.add_parser("list", help="list the registered experiments")
    listing.set_defaults(handler=experiment_list)
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
    run.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                     help=JOBS_HELP)  # fmt: skip
    run.set_defaults(handler=experiment_run)
    reproduce = experiment_commands.add_parser(
        "reproduce",
        help="run every claim's converged protocol not yet finished, resuming those in flight",
        description="Run, one after another, the experiments of the reproduction report whose "
        "protocol has no finished run under --runs-dir: an unfinished run folder is resumed, a "
        "missing one started. Ctrl-C stops; run the same command to go on. --list only prints "
        "the queue; --ablations then runs the claims' declared ablations the same way.",
    )
    add_runs_dir(reproduce)
    reproduce.add_argument("--list", action="store_true", help="print the queue and stop")
    reproduce.add_argument(
        "--ablations", action="store_true",
        help="then the claims' declared ablations that have no finished run",
    )  # fmt: skip
    reproduce.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                           help=JOBS_HELP)  # fmt: skip
    reproduce.add_argument(
        "--ledger", type=Path, default=Path("docs/reproductions.json"), metavar="FILE",
        help="the reproduction report's ledger: claims and ablations it records a finished run "
        "of are not run again (default: docs/reproductions.json; a missing file records none)",
    )  # fmt: skip
    reproduce.set_defaults(handler=experiment_reproduce)
    report = experiment_commands.add_parser(
        "report",
        help="write the reproduction report from the run folders",
        description="Judge the seeds' claims on the finished converged and full runs under "
        "--runs-dir and write the reproduction report (docs/reproductions.md) and its ledger "
        "(docs/reproductions.json: the numbers, so that claims whose run folders are not on "
        "this machine keep theirs).",
    )
    report.add_argument("which", choices=("reproductions",), help="the report to write")
    add_runs_dir(report)
    report.add_argument(
        "--output", type=Path, default=Path("docs/reproductions.md"), metavar="FILE",
        help="the markdown file to write (default: docs/reproductions.md); its ledger is the "
        "same name with .json",
    )  # fmt: skip
    report.set_defaults(handler=experiment_report)


def experiment_list(args: argparse.Namespace) -> int:
    from zonal.experiments.registry import discovery_failures, list_experiments

    experiments = list_experiments()
    rows = [
        (
            experiment.name,
            ", ".join(experiment.protocol_label(p) for p in experiment.protocols),
            shorten("; ".join(experiment.reproduces) or "-", LIST_COLUMN),
        )
        for experiment in experiments
    ]
    print_table(("NAME", "PROTOCOLS", "REPRODUCES"), rows)
    for module, reason in discovery_failures().items():
        print(f"zonal: warning: could not import {module}: {reason}", file=sys.stderr)
    return 0


def experiment_run(args: argparse.Namespace) -> int:
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


def add_runs_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), metavar="DIR",
        help="folder holding the run folders (default: ./runs)",
    )  # fmt: skip


JOBS_HELP = (
    "worker processes for an experiment's independent fits (default 1; experiments that cannot "
    "split their work run in one); the results do not depend on it"
)


def experiment_reproduce(args: argparse.Namespace) -> int:
    from zonal.experiments.errors import ExperimentError
    from zonal.experiments.reproduction_ledger import LedgerError, read_ledger
    from zonal.experiments.reproduction_queue import reproduction_queue
    from zonal.experiments.run import create_run, execute_run, open_run

    try:
        recorded = read_ledger(args.ledger)
    except LedgerError as error:
        raise CommandError(f"cannot read the reproduction ledger: {error}") from error
    queue = reproduction_queue(args.runs_dir, ablations=args.ablations, recorded=recorded)
    total, unknown = 0.0, 0
    for item in queue:
        action = f"resume {item.folder}" if item.folder else "new run"
        hours = item.cpu_hours
        if hours is None:
            unknown += 1
        else:
            total += hours
        cost = "cost not estimated" if hours is None else f"about {hours:g} CPU-hours"
        flags = "".join(
            f" --set {shlex.quote(f'{key}={json.dumps(value)}')}"
            for key, value in item.settings.items()
        )
        purpose = f"; {item.label}" if item.label else ""
        print(f"zonal: queued {item.experiment} --protocol {item.protocol}{flags} ({action}; "
              f"{cost}{purpose})", file=sys.stderr)  # fmt: skip
    if queue:
        rest = f", {unknown} not estimated" if unknown else ""
        print(f"zonal: about {total:g} CPU-hours in all{rest} (a run in flight counts whole; "
              "--jobs N shares them out over N cores)", file=sys.stderr)  # fmt: skip
    if args.list or not queue:
        if not queue:
            print("zonal: every claim's protocol has a finished run", file=sys.stderr)
        return 0
    for name, protocol, folder, settings, *_ in queue:
        try:
            if folder is None:
                run = create_run(name, protocol=protocol, overrides=dict(settings),
                                 runs_root=args.runs_dir, jobs=args.jobs)  # fmt: skip
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


def experiment_report(args: argparse.Namespace) -> int:
    from zonal.experiments.reproduction_ledger import LedgerError
    from zonal.experiments.reproduction_report import write_reproductions

    ledger = Path(args.output).with_suffix(".json")
    if not ledger.exists():  # the claims whose runs are on another machine come from it
        print(
            f"zonal: note: no ledger {ledger} beside the report: only the run folders under "
            f"{args.runs_dir} count (copy docs/reproductions.json there to keep the recorded runs)",
            file=sys.stderr,
        )
    try:
        results = write_reproductions(args.runs_dir, args.output)
    except LedgerError as error:
        raise CommandError(f"cannot read the reproduction ledger: {error}") from error
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
