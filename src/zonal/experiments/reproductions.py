"""The reproduction report: the seeds' claims beside zonal's converged runs, with a verdict each.

``zonal experiment report reproductions`` reads the run folders under ``runs/`` and writes
``docs/reproductions.md``: one row per claim of ``zonal.experiments.claims`` with the seed's number,
zonal's number and spread, the protocol and how it departs from the seed's, the command, and a
verdict. Only finished runs of the claim's protocol (``converged`` or ``full``) count; quick runs
never stand beside a paper's number.

A number is a ``Statistic``: a column of a run's table (``results.csv``, one row per seed or split)
summarised over the rows matching a filter, as a mean with its standard error
(s / sqrt(n)) or a median with its quartiles. The verdict follows fixed rules:

* **not run**: no finished run of the claim's protocol;
* **not reproduced**: an ordering the seed claims (``Ordering``: one statistic beats another)
  does not hold between zonal's central values, or, for a claim without orderings, a number is
  worse than the seed's by more than its tolerance;
* **reproduced**: every ordering holds and, where the data are the seed's own (``comparable``),
  every number with a seed value is better than it or within its tolerance (the seed's spread);
* **reproduced in direction only**: every ordering holds, but the numbers are not comparable
  (stand-in data) or fall outside the tolerance.

Every claim that is not reproduced carries its cause (``Claim.cause``), written from evidence: an
ablation run (an ``Ablation``: the same protocol with named settings changed, reported in a table
of its own), a test that failed before a fix, or the protocol difference that explains it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

VERDICTS = ("reproduced", "reproduced in direction only", "not reproduced", "not run")
LAST = "last"
"""A filter value meaning "the largest value of this column among the matching rows"."""


@dataclass(frozen=True)
class Statistic:
    """One number of a run: ``summary`` of ``column`` over the rows of ``table`` that match ``where``.

    Attributes:
        label: the name the claim's orderings and the report use.
        where: column -> value filter (compared as text; ``LAST`` picks the largest value).
        column: the column summarised.
        summary: ``"mean"`` (shown with its standard error) or ``"median"`` (with its quartiles).
        seed_value: the seed's number for the same quantity, or None.
        better: ``"higher"`` or ``"lower"``: the direction in which the quantity improves.
        tolerance: how much worse than ``seed_value`` still counts as reproduced (the seed's spread).
        table: the CSV file of the run folder.
    """

    label: str
    where: Mapping[str, Any]
    column: str
    summary: str = "mean"
    seed_value: float | None = None
    better: str = "higher"
    tolerance: float = 0.0
    table: str = "results.csv"

    def __post_init__(self) -> None:
        if self.summary not in ("mean", "median"):
            raise ValueError(f"summary must be 'mean' or 'median', got {self.summary!r}")
        if self.better not in ("higher", "lower"):
            raise ValueError(f"better must be 'higher' or 'lower', got {self.better!r}")


@dataclass(frozen=True)
class Ordering:
    """The seed's claim that statistic ``better`` beats statistic ``worse`` (in ``better``'s
    direction of improvement), compared on zonal's central values."""

    better: str
    worse: str


@dataclass(frozen=True)
class Ablation:
    """Runs of the claim's experiment and protocol with ``settings`` changed (and nothing else),
    reported beside the main run with the claim's statistics.

    ``completes``: the run is a part of the claim's own protocol rather than an ablation: the same
    settings on datasets the main run leaves out (e.g. the larger sets, run in a session of their
    own). Its statistics fill those the main run does not measure, and count in the verdict.
    ``cpu_hours``: what the run takes on one core, where measured (``zonal experiment reproduce``
    shows it)."""

    label: str
    settings: Mapping[str, Any]
    command: str
    completes: bool = False
    cpu_hours: float | None = None


@dataclass(frozen=True)
class Claim:
    """One of the seeds' headline results and how zonal checks it."""

    number: str
    title: str
    source: str
    experiment: str | None
    command: str
    data: str = "seed's"
    comparable: bool = True
    protocol: str = "converged"
    statistics: tuple[Statistic, ...] = ()
    orderings: tuple[Ordering, ...] = ()
    ablations: tuple[Ablation, ...] = ()
    cause: str = ""
    notes: str = ""
    #: the experiment's own derivation of its table's columns from the fit rows (e.g. a ratio
    #: between two fits of a split), applied to an unfinished run's checkpoint rows
    derive: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None

    def __post_init__(self) -> None:
        labels = [statistic.label for statistic in self.statistics]
        if len(set(labels)) != len(labels):
            raise ValueError(f"claim {self.number}: statistic labels repeat: {labels}")
        if not self.number or not self.number.replace("-", "").isalnum():
            raise ValueError(
                f"claim numbers are short ids such as '8' or '10a', got {self.number!r}"
            )
        for ordering in self.orderings:
            for label in (ordering.better, ordering.worse):
                if label not in labels:
                    raise ValueError(f"claim {self.number}: ordering names unknown {label!r}")


@dataclass(frozen=True)
class Value:
    """A statistic computed on a run: central value, spread (standard error or quartiles), count."""

    centre: float
    low: float
    high: float
    count: int
    summary: str

    def text(self) -> str:
        if self.count == 0 or math.isnan(self.centre):
            return "-"
        if self.count == 1:  # no spread to show
            return format_number(self.centre)
        if self.summary == "median":
            return f"{format_number(self.centre)} [{format_number(self.low)}, {format_number(self.high)}]"
        return f"{format_number(self.centre)} ± {format_number(self.high - self.centre)}"


NO_VALUE = Value(math.nan, math.nan, math.nan, 0, "mean")


@dataclass
class ClaimResult:
    """A claim judged on the runs found for it."""

    claim: Claim
    verdict: str
    run: Path | None = None
    values: dict[str, Value] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    converged: str = ""
    ablations: list[tuple[Ablation, Path | None, dict[str, Value]]] = field(default_factory=list)
    in_flight: list[Path] = field(default_factory=list)
    partial_fits: int = 0  # > 0: ``values`` come from an unfinished run's checkpoint ...
    partial_noun: str = "fits"  # ... holding that many of these
    #: the main run's numbers come from the reproduction ledger (its folder is not here) ...
    recorded: bool = False
    #: ... and so do those of these ablations (``reproduction_ledger.ablation_key``)
    recorded_ablations: set[str] = field(default_factory=set)
    #: "k of n fits converged" per ablation with a ``converged`` column (by ``ablation_key``)
    ablation_converged: dict[str, str] = field(default_factory=dict)
    #: the unfinished run folder of each ablation without a finished one (by ``ablation_key``)
    ablation_in_flight: dict[str, Path] = field(default_factory=dict)


# -------------------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class RunFolder:
    """A run folder's stored config, and whether it has finished."""

    path: Path
    experiment: str
    preset: str
    overridden: tuple[str, ...]
    config: Mapping[str, Any]
    created: str
    finished: bool


def find_runs(runs_root: str | os.PathLike[str]) -> list[RunFolder]:
    """Every run folder directly under ``runs_root`` (folders without a readable config skipped)."""
    root = Path(runs_root)
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.iterdir()):
        try:
            stored = json.loads((path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(stored, dict) or not isinstance(stored.get("config"), dict):
            continue
        found.append(
            RunFolder(
                path=path,
                experiment=str(stored.get("experiment", "")),
                preset=str(stored.get("preset", "quick")),
                overridden=tuple(stored.get("overridden", ())),
                config=stored["config"],
                created=str(stored.get("created_utc", "")),
                finished=(path / "metrics.json").is_file(),
            )
        )
    return found


#: config keys that say where a run computes, not what (a run on a GPU counts for its protocol)
PLACEMENT_KEYS = frozenset({"device"})


def matching_runs(
    runs: Sequence[RunFolder], claim: Claim, settings: Mapping[str, Any]
) -> list[RunFolder]:
    """Runs of the claim's experiment and protocol whose overridden keys, less those that only
    say where a run computes (``PLACEMENT_KEYS``), are exactly ``settings``, at those values;
    newest first."""
    chosen = [
        run
        for run in runs
        if run.experiment == claim.experiment
        and run.preset == claim.protocol
        and set(run.overridden) - PLACEMENT_KEYS == set(settings)
        and all(run.config.get(key) == value for key, value in settings.items())
    ]
    return sorted(chosen, key=lambda run: (run.created, run.path.name), reverse=True)


# -------------------------------------------------------------------------------------- numbers
def read_table(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file (empty when it is missing)."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _matches(row: Mapping[str, str], where: Mapping[str, Any], last: Mapping[str, str]) -> bool:
    for column, wanted in where.items():
        cell = row.get(column)
        if wanted == LAST:
            if cell != last.get(column):
                return False
        elif not _same(cell, wanted):
            return False
    return True


def _same(cell: str | None, wanted: Any) -> bool:
    """A CSV cell against a filter value: numbers by value (180 matches "180.0"), the rest as
    the CSV writes them (True, text)."""
    if cell is None:
        return False
    if isinstance(wanted, int | float) and not isinstance(wanted, bool):
        try:
            return float(cell) == float(wanted)
        except ValueError:
            return False
    return cell == str(wanted)


def compute(statistic: Statistic, rows: Sequence[Mapping[str, str]]) -> Value:
    """``statistic`` over ``rows``: mean and standard error, or median and quartiles."""
    plain = {k: v for k, v in statistic.where.items() if v != LAST}
    candidates = [row for row in rows if _matches(row, plain, {})]
    last = {}
    for column, wanted in statistic.where.items():
        if wanted == LAST:
            present = [
                float(row[column]) for row in candidates if row.get(column) not in (None, "")
            ]
            if present:
                last[column] = _as_written(max(present), candidates, column)
    values = [
        float(row[statistic.column])
        for row in candidates
        if _matches(row, statistic.where, last) and row.get(statistic.column) not in (None, "")
    ]
    values = [value for value in values if not math.isnan(value)]
    if not values:
        return Value(math.nan, math.nan, math.nan, 0, statistic.summary)
    if statistic.summary == "median":
        if len(values) == 1:
            return Value(values[0], values[0], values[0], 1, "median")
        low, centre, high = statistics.quantiles(values, n=4, method="inclusive")
        return Value(centre, low, high, len(values), "median")
    centre = statistics.fmean(values)
    error = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return Value(centre, centre - error, centre + error, len(values), "mean")


def _as_written(value: float, rows: Sequence[Mapping[str, str]], column: str) -> str:
    """The text of ``column`` in the row whose number is ``value``."""
    for row in rows:
        try:
            if float(row[column]) == value:
                return row[column]
        except (KeyError, ValueError):
            continue
    return str(value)


def _beats(a: float, b: float, better: str) -> bool:
    return a > b if better == "higher" else a < b


def _within(value: float, statistic: Statistic) -> bool:
    """Better than the seed's number, or worse by at most the tolerance."""
    assert statistic.seed_value is not None
    gap = value - statistic.seed_value
    return (
        gap >= -statistic.tolerance if statistic.better == "higher" else gap <= statistic.tolerance
    )


def judge(claim: Claim, values: Mapping[str, Value]) -> tuple[str, list[str]]:
    """The verdict on ``values`` (see the module docstring) and the orderings or numbers that failed."""
    by_label = {statistic.label: statistic for statistic in claim.statistics}
    failed = []
    for ordering in claim.orderings:
        better, worse = values[ordering.better], values[ordering.worse]
        direction = by_label[ordering.better].better
        if better.count == 0 or worse.count == 0:
            failed.append(f"{ordering.better} > {ordering.worse}: missing")
        elif not _beats(better.centre, worse.centre, direction):
            failed.append(
                f"{ordering.better} ({format_number(better.centre)}) does not beat "
                f"{ordering.worse} ({format_number(worse.centre)})"
            )
    # Numbers the protocol does not measure (a dataset only the full protocol runs) are left out
    # of the verdict and named in the report (``unmeasured``); the verdict is on the others.
    compared = [
        s for s in claim.statistics if s.seed_value is not None and values[s.label].count > 0
    ]
    if not compared and not claim.orderings:
        return "not reproduced", ["no number of the seed's was measured"]
    missed = [
        f"{s.label}: {format_number(values[s.label].centre)} against the seed's {format_number(s.seed_value)}"
        for s in compared
        if not _within(values[s.label].centre, s)
    ]
    close = not missed
    if failed:
        return "not reproduced", failed
    if not claim.orderings and not close:
        return "not reproduced", missed
    if claim.comparable and close:
        return "reproduced", []
    return "reproduced in direction only", []


def _run_values(
    claim: Claim, path: Path, rows: list[dict[str, str]] | None = None
) -> dict[str, Value]:
    """The claim's statistics on a finished run's tables (or on ``rows`` given for every table)."""
    tables: dict[str, list[dict[str, str]]] = {}
    values = {}
    for statistic in claim.statistics:
        if statistic.table not in tables:
            tables[statistic.table] = (
                rows if rows is not None else read_table(path / statistic.table)
            )
        values[statistic.label] = compute(statistic, tables[statistic.table])
    return values


def checkpoint_rows(
    path: Path,
    derive: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
) -> tuple[list[dict[str, str]], int, str]:
    """The result rows an unfinished run has saved so far, passed through ``derive`` when given,
    as the finished run's table would hold them, with how much of the run they are: (rows, the
    number of its checkpoint's ``"rows"``, "fits"), or for a run that checkpoints whole units
    (each with its ``"rows"``) (rows, the number of units, "units"); ([], 0, "fits") when it has
    none."""
    from zonal.experiments.errors import CheckpointError
    from zonal.experiments.run_directory import RunDirectory

    try:
        state = RunDirectory(path, description=path.name).load_checkpoint()
    except CheckpointError:
        return [], 0, "fits"
    if not isinstance(state, dict):
        return [], 0, "fits"
    rows, units, noun = state.get("rows"), state.get("units"), "fits"
    count = len(rows) if isinstance(rows, list) else 0
    if rows is None and isinstance(units, dict):
        finished = [unit for unit in units.values() if isinstance(unit, dict)]
        rows = [row for unit in finished for row in unit.get("rows", [])]
        count, noun = len(finished), "units"
    if not isinstance(rows, list):
        return [], 0, "fits"
    if derive is not None:
        rows = derive([row for row in rows if isinstance(row, dict)])
    table = [
        {str(key): str(value) for key, value in row.items() if key != "curve"}
        for row in rows
        if isinstance(row, dict)
    ]
    return table, count if table else 0, noun


def _convergence(path: Path) -> str:
    """ "k of n fits converged" from a results table's ``converged`` column, if it has one."""
    rows = read_table(path / "results.csv")
    flags = [row["converged"] for row in rows if row.get("converged") not in (None, "")]
    if not flags:
        return ""
    return f"{sum(flag == 'True' for flag in flags)} of {len(flags)} fits converged"


def unmeasured(claim: Claim, values: Mapping[str, Value]) -> list[str]:
    """The claim's statistics the run has no rows for (outside its protocol, e.g. a dataset
    only the full protocol runs)."""
    return [s.label for s in claim.statistics if s.label in values and values[s.label].count == 0]


def evaluate_claim(claim: Claim, runs: Sequence[RunFolder]) -> ClaimResult:
    """Judge ``claim`` on the newest finished run of its protocol (and its ablations)."""
    if claim.experiment is None:
        return ClaimResult(claim, "not run")
    matching = matching_runs(runs, claim, {})
    finished = [run for run in matching if run.finished]
    in_flight = [run.path for run in matching if not run.finished]
    ablations, ablation_converged, ablation_in_flight = [], {}, {}
    for ablation in claim.ablations:
        found = matching_runs(runs, claim, ablation.settings)
        done = [run for run in found if run.finished]
        path = done[0].path if done else None
        ablations.append((ablation, path, _run_values(claim, path) if path else {}))
        key = ablation_key(ablation.settings)
        if path is None and found:
            ablation_in_flight[key] = found[0].path
        elif path is not None and (converged := _convergence(path)):
            ablation_converged[key] = converged
    if not finished:
        result = ClaimResult(claim, "not run", ablations=ablations, in_flight=in_flight,
                             ablation_converged=ablation_converged,
                             ablation_in_flight=ablation_in_flight)  # fmt: skip
        rows, count, noun = checkpoint_rows(in_flight[0], claim.derive) if in_flight \
            else ([], 0, "fits")  # fmt: skip
        if rows and claim.statistics:  # numbers so far, with no verdict
            result.values = _run_values(claim, in_flight[0], rows)
            result.failed = judge(claim, result.values)[1]
            result.partial_fits, result.partial_noun = count, noun
        return result
    run = finished[0].path
    values = _run_values(claim, run)
    verdict, failed = judge(claim, values)
    return ClaimResult(claim, verdict, run, values, failed, _convergence(run), ablations, in_flight,
                       ablation_converged=ablation_converged,
                       ablation_in_flight=ablation_in_flight)  # fmt: skip


def complete_with_parts(result: ClaimResult) -> ClaimResult:
    """``result`` with the statistics the finished parts of its protocol (ablations with
    ``completes``) measure taken from them, judged again on them all: a part's numbers stand for
    the datasets it runs (the main run leaves them out; a main run recorded in the ledger holds
    them from an earlier report). A claim whose main run has not finished is returned as it is
    (a part alone gives no verdict)."""
    if result.run is None or result.partial_fits:
        return result
    values = dict(result.values)
    for ablation, path, part_values in result.ablations:
        if ablation.completes and path is not None:
            values.update({label: v for label, v in part_values.items() if v.count > 0})
    if values == result.values:
        return result
    verdict, failed = judge(result.claim, values)
    return replace(result, verdict=verdict, values=values, failed=failed)


def format_number(value: float | None) -> str:
    """Four significant digits ("-" for a missing number)."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.4g}"


def ablation_key(settings: Mapping[str, Any]) -> str:
    """An ablation's identity (in the reproduction ledger): its settings as canonical JSON."""
    return json.dumps(dict(settings), sort_keys=True)


__all__ = [
    "LAST",
    "NO_VALUE",
    "VERDICTS",
    "Ablation",
    "Claim",
    "ClaimResult",
    "Ordering",
    "RunFolder",
    "Statistic",
    "Value",
    "ablation_key",
    "complete_with_parts",
    "compute",
    "evaluate_claim",
    "find_runs",
    "format_number",
    "judge",
    "matching_runs",
    "unmeasured",
]
