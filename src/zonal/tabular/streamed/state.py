"""The resume state of a streamed fit: written atomically beside the output with a checksum,
refused when the partitions (fingerprints) or the settings changed.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from zonal._files import atomic_writer, interrupts_deferred
from zonal.models import SGPR
from zonal.tabular.tables import TableError

#: bytes hashed at each end of a partition for the resume fingerprint
FINGERPRINT_BYTES = 1 << 20
#: the ``format`` entry of a streamed fit's resume state (a file without it is refused)
STATE_FORMAT = "zonal.streamed-fit-state"
#: 2: the running totals are in the features' zonal basis (``zonal.models.sgpr_statistics``);
#: 3: the file starts with the sha256 of the serialised state (``save_state``)
STATE_VERSION = 3


class ResumeError(TableError):
    """A saved streamed-fit state does not belong to this input or these settings."""


def state_path_for(output: str | os.PathLike[str]) -> Path:
    """The resume state of a streamed fit writing ``output``: ``<output>.state`` beside it."""
    output = Path(output)
    return output.with_name(f"{output.name}.state")


def fingerprint(partitions: Sequence[Path]) -> list[dict[str, Any]]:
    """Per partition: its resolved path, size, modification time (ns) and the sha256 of its
    first and last ``FINGERPRINT_BYTES`` (a resume refuses partitions that changed)."""
    prints = []
    for path in partitions:
        stat = path.stat()
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            digest.update(handle.read(FINGERPRINT_BYTES))
            handle.seek(max(stat.st_size - FINGERPRINT_BYTES, 0))
            digest.update(handle.read(FINGERPRINT_BYTES))
        prints.append({"path": str(path.resolve()), "size": int(stat.st_size),
                       "mtime_ns": int(stat.st_mtime_ns), "sha256": digest.hexdigest()})  # fmt: skip
    return prints


def save_state(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically, Ctrl-C held until it is written: the sha256 of the serialised
    state on the first line, then the state (``load_state`` checks the one against the other)."""
    with interrupts_deferred():
        buffer = io.BytesIO()
        torch.save(state, buffer)
        payload = buffer.getvalue()
        with atomic_writer(path, "wb") as handle:
            handle.write(hashlib.sha256(payload).hexdigest().encode("ascii") + b"\n")
            handle.write(payload)


def read_state(path: Path) -> Any:
    """The state saved by ``save_state``; a ``ValueError`` when its checksum does not match (a
    damaged or truncated file) or it is not such a file."""
    data = path.read_bytes()
    digest, newline, payload = data[:64], data[64:65], data[65:]
    if newline != b"\n" or hashlib.sha256(payload).hexdigest().encode("ascii") != digest:
        raise ValueError("its checksum does not match its contents (damaged or truncated)")
    return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)


def load_state(
    path: Path, inputs: list[dict[str, Any]], settings: dict[str, Any], restart: bool
) -> dict[str, Any] | None:
    """The saved state of an interrupted fit of these inputs and settings (None: none, or
    ``restart``); a ``ResumeError`` naming what changed otherwise."""
    if not path.exists():
        return None
    if restart:
        path.unlink()
        return None
    advice = f"delete {path} or pass --restart to start again"
    try:
        state = read_state(path)
    except Exception as error:  # torch raises many types for damaged files
        raise ResumeError(
            f"{path}: not a readable streamed-fit state ({error}); {advice}"
        ) from error
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT \
            or state.get("version") != STATE_VERSION:  # fmt: skip
        raise ResumeError(f"{path} is not a streamed-fit state of this zonal; {advice}")
    saved = state["inputs"]
    if [entry["path"] for entry in saved] != [entry["path"] for entry in inputs]:
        raise ResumeError(
            f"{path} belongs to the partitions {', '.join(entry['path'] for entry in saved)}, not "
            f"to {', '.join(entry['path'] for entry in inputs)}; {advice}"
        )
    check_unchanged(saved, inputs, f"since the interrupted fit, so {path} cannot be resumed; "
                     + advice)  # fmt: skip
    differ = sorted(key for key in settings if state["settings"].get(key) != settings[key])
    if differ:
        shown = ", ".join(f"{key} {state['settings'].get(key)!r} -> {settings[key]!r}"
                          for key in differ)  # fmt: skip
        raise ResumeError(f"{path} was saved with other settings ({shown}); {advice}")
    return state


def check_unchanged(saved: list[dict[str, Any]], current: list[dict[str, Any]], when: str) -> None:
    """A ``ResumeError`` naming the first partition whose fingerprint changed ``when``."""
    for old, new in zip(saved, current, strict=True):
        changed = [key for key in ("size", "mtime_ns", "sha256") if old[key] != new[key]]
        if changed:
            raise ResumeError(
                f"the partition {new['path']} changed ({', '.join(changed)} differ: size "
                f"{old['size']} -> {new['size']} bytes) {when}"
            )


def initial_state(
    inputs: list[dict[str, Any]],
    settings: dict[str, Any],
    first: dict[str, Any],
    models: dict[str, SGPR],
) -> dict[str, Any]:
    """The state saved after pass 1: its results, the models before pass 2 (their ARD scales
    and hyperparameters), no totals yet."""
    as_tensor = torch.as_tensor
    return {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "inputs": inputs,
        "settings": settings,
        "first_pass": {
            "x_mean": as_tensor(first["x_scaler"].mean),
            "x_std": as_tensor(first["x_scaler"].std),
            "y_mean": as_tensor(first["y_scaler"].mean),
            "y_std": as_tensor(first["y_scaler"].std),
            "num_rows": first["num_rows"],
            "num_validation_rows": first["num_validation_rows"],
            "partition_rows": first["partition_rows"],
        },
        "models": {name: sgpr.state_dict() for name, sgpr in models.items()},
        "totals": {},
        "position": {"partition": 0, "chunks": 0, "rows": 0},
        "finished": False,
    }
