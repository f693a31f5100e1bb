"""The reproduction ledger: the numbers of ``docs/reproductions.md`` kept beside it, so that the
report outlives its run folders.

Run folders are not committed (they are large, and a later session may be on a new machine), so a
report written where some folders are missing would lose those claims. Every report therefore
also writes ``docs/reproductions.json``: per claim, the run folder it judged, its statistics'
values and its convergence line, and the same for each ablation (keyed by the ablation's
settings). A claim or ablation with no finished run under ``--runs-dir`` is judged on its ledger
entry, by the same rules, and the report says so; a finished run always supersedes the entry.
An entry is used only for the experiment and protocol it was measured on.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from zonal._files import write_text_atomic
from zonal.experiments.reproductions import (
    NO_VALUE,
    Claim,
    ClaimResult,
    Value,
    ablation_key,
    judge,
)

LEDGER_VERSION = 1


class LedgerError(ValueError):
    """The ledger file exists but cannot be read as a reproduction ledger."""


def _values_entry(values: Mapping[str, Value]) -> dict[str, dict[str, Any]]:
    return {label: dataclasses.asdict(value) for label, value in values.items() if value.count > 0}


def _values_from(claim: Claim, entry: Mapping[str, Any], where: str) -> dict[str, Value]:
    """The claim's statistics' values stored in ``entry`` (``NO_VALUE`` for those it lacks)."""
    try:
        stored = {
            str(label): Value(
                centre=float(v["centre"]),
                low=float(v["low"]),
                high=float(v["high"]),
                count=int(v["count"]),
                summary=str(v["summary"]),
            )
            for label, v in entry.get("values", {}).items()
        }
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise LedgerError(f"{where}: a value is malformed ({error!r})") from error
    return {s.label: stored.get(s.label, NO_VALUE) for s in claim.statistics}


def read_ledger(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ledger's claims (``{}`` when the file does not exist)."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise LedgerError(f"{path} is not JSON: {error}") from error
    if not isinstance(stored, dict) or not isinstance(stored.get("claims"), dict):
        raise LedgerError(f"{path} has no 'claims' mapping: not a reproduction ledger")
    if stored.get("version") != LEDGER_VERSION:
        raise LedgerError(
            f"{path} is ledger version {stored.get('version')!r}; this zonal reads "
            f"version {LEDGER_VERSION}"
        )
    return stored["claims"]


def claim_entry(result: ClaimResult, earlier: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ledger entry of a judged claim: its finished runs' values, with what the earlier entry
    of the same experiment and protocol holds that no finished run replaced; an earlier entry of
    another protocol is kept as it is while no run of the claim's own has finished (None when
    there is nothing to keep)."""
    claim = result.claim
    protocol = {"experiment": claim.experiment, "protocol": claim.protocol}
    earlier = dict(earlier or {})
    fresh_main = result.run is not None and not result.recorded
    fresh_ablations = {}
    for ablation, path, values in result.ablations:
        key = ablation_key(ablation.settings)
        if path is not None and key not in result.recorded_ablations:
            fresh_ablations[key] = {"run": path.name, "values": _values_entry(values)}
            if key in result.ablation_converged:
                fresh_ablations[key]["converged"] = result.ablation_converged[key]
    same = {key: earlier.get(key) for key in protocol} == protocol
    if not same and not fresh_main and not fresh_ablations:
        return earlier or None
    entry: dict[str, Any] = dict(protocol)
    if fresh_main:
        assert result.run is not None
        entry.update(run=result.run.name, converged=result.converged,
                     values=_values_entry(result.values))  # fmt: skip
    elif same and "run" in earlier:
        entry.update(
            {key: earlier[key] for key in ("run", "converged", "values") if key in earlier}
        )
    ablations = {**(earlier.get("ablations", {}) if same else {}), **fresh_ablations}
    if ablations:
        entry["ablations"] = ablations
    return entry if len(entry) > len(protocol) else None


def fill_from_ledger(result: ClaimResult, entry: Mapping[str, Any] | None) -> ClaimResult:
    """``result`` with what its finished runs lack taken from its ledger ``entry``: the main
    run's values (when no run of the protocol finished; judged by the same rules) and each
    ablation's values (when it has no finished run). Entries of another experiment or protocol
    are ignored."""
    claim: Claim = result.claim
    if not entry:
        return result
    where = f"claim {claim.number} in the reproduction ledger"
    same_protocol = (entry.get("experiment"), entry.get("protocol")) == (
        claim.experiment,
        claim.protocol,
    )
    if not same_protocol:
        return result
    if result.run is None and "run" in entry:  # a finished run's numbers before a partial one's
        values = _values_from(claim, entry, where)
        verdict, failed = judge(claim, values)
        result = dataclasses.replace(
            result,
            verdict=verdict,
            run=Path(str(entry["run"])),
            values=values,
            failed=failed,
            converged=str(entry.get("converged", "")),
            partial_fits=0,
            recorded=True,
        )
    recorded_ablations = entry.get("ablations", {})
    ablations = []
    for ablation, path, values in result.ablations:
        key = ablation_key(ablation.settings)
        stored = recorded_ablations.get(key)
        if path is None and stored:
            path = Path(str(stored["run"]))
            values = _values_from(claim, stored, f"{where}, ablation {ablation.label!r}")
            result.recorded_ablations.add(key)
            if stored.get("converged"):
                result.ablation_converged[key] = str(stored["converged"])
        ablations.append((ablation, path, values))
    result.ablations = ablations
    return result


def write_ledger(
    path: str | os.PathLike[str],
    results: Sequence[ClaimResult],
    earlier: Mapping[str, Any],
) -> None:
    """Write the ledger of ``results`` atomically (claims no longer in the catalogue dropped)."""
    claims = {}
    for result in results:
        entry = claim_entry(result, earlier.get(result.claim.number))
        if entry is not None:
            claims[result.claim.number] = entry
    text = json.dumps({"version": LEDGER_VERSION, "claims": claims}, indent=1, sort_keys=True)
    write_text_atomic(path, text + "\n")


__all__ = [
    "LEDGER_VERSION",
    "LedgerError",
    "claim_entry",
    "fill_from_ledger",
    "read_ledger",
    "write_ledger",
]
