"""What ``zonal experiment reproduce`` still has to run: the claims' protocols and declared
ablations without a finished run folder (or a ledger entry), in the order it runs them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from zonal.experiments.reproductions import Claim, ablation_key, find_runs, matching_runs


class QueuedRun(NamedTuple):
    """One run ``zonal experiment reproduce`` still has to do."""

    experiment: str
    protocol: str
    #: an unfinished run folder to resume, or None for a new run
    folder: Path | None
    #: the settings of an ablation (empty: the claim's protocol itself)
    settings: Mapping[str, Any] = {}
    #: what the run is for, e.g. "claim 10a ablation: ..." (empty for a claim's protocol)
    label: str = ""
    #: CPU-hours of one core it takes: the experiment's ``cpu_hours`` for its protocol, an
    #: ablation's own (``Ablation.cpu_hours``); None where not measured
    cpu_hours: float | None = None


def reproduction_queue(
    runs_root: str | os.PathLike[str],
    claims: Sequence[Claim] | None = None,
    *,
    ablations: bool = False,
    recorded: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[QueuedRun]:
    """What ``zonal experiment reproduce`` still has to run: one ``QueuedRun`` per experiment
    whose claim protocol has no finished run under ``runs_root`` (claims without an experiment,
    or whose experiment does not offer the protocol yet, are left out); runs in flight first, then
    the cheapest by the experiment's ``cpu_hours`` (those without an estimate last), ties in the
    claims' order; the parts of a protocol (ablations that ``complete`` it) are queued with the
    protocols, at their own cost (``Ablation.cpu_hours``). With ``ablations``, then every
    declared ablation without a finished run (in flight first, then in the claims' order; an
    ablation two claims share is queued once).
    Protocols and ablations the reproduction ledger ``recorded`` (its claims) holds a finished
    run of are not queued."""
    from zonal.experiments.registry import get_experiment

    if claims is None:
        from zonal.experiments.claims import CLAIMS

        claims = CLAIMS
    runs = find_runs(runs_root)
    queue: list[QueuedRun] = []
    extra: list[QueuedRun] = []
    settled: set[str] = set()  # experiments queued, or recorded in the ledger
    for claim in claims:
        if claim.experiment is None:
            continue
        if claim.protocol not in get_experiment(claim.experiment).protocols:
            continue
        entry = (recorded or {}).get(claim.number, {})
        if (entry.get("experiment"), entry.get("protocol")) != (claim.experiment, claim.protocol):
            entry = {}
        if "run" in entry:
            settled.add(claim.experiment)
        if claim.experiment not in settled:
            settled.add(claim.experiment)
            matching = matching_runs(runs, claim, {})
            if not any(run.finished for run in matching):
                folder = matching[0].path if matching else None
                hours = get_experiment(claim.experiment).cpu_hours.get(claim.protocol)
                queue.append(QueuedRun(claim.experiment, claim.protocol, folder, cpu_hours=hours))
        for ablation in claim.ablations:
            if not (ablations or ablation.completes):
                continue
            settings = dict(ablation.settings)
            if any(item[:2] == (claim.experiment, claim.protocol) and item.settings == settings
                   for item in (*queue, *extra)):  # fmt: skip
                continue
            if ablation_key(settings) in entry.get("ablations", {}):
                continue
            matching = matching_runs(runs, claim, settings)
            if not any(run.finished for run in matching):
                folder = matching[0].path if matching else None
                kind = "part of the protocol" if ablation.completes else "ablation"
                label = f"claim {claim.number} {kind}: {ablation.label}"
                item = QueuedRun(claim.experiment, claim.protocol, folder, settings, label,
                                 ablation.cpu_hours)  # fmt: skip
                (queue if ablation.completes else extra).append(item)

    queue.sort(
        key=lambda item: (
            item.folder is None,
            math.inf if item.cpu_hours is None else item.cpu_hours,
        )
    )
    extra.sort(key=lambda item: item.folder is None)  # stable: the claims' order otherwise
    return queue + extra


__all__ = ["QueuedRun", "reproduction_queue"]
