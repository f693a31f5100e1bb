"""The seeds' headline claims, each with the experiment, the protocol and the numbers that check it.

``zonal.experiments.reproductions`` judges every claim here on the run folders and writes
``docs/reproductions.md``. A claim's statistics read the run's ``results.csv`` (one row per seed or
split); its orderings are what the seed says (deeper is better, A beats B); ``comparable`` is False
where the data are a stand-in, so the seed's numbers can only be matched in direction. A ``cause``
is written only from evidence: an ablation (listed with its command), a test that failed before a
fix, or the protocol difference that explains the gap.

One module per seed holds its claims (``seed000`` ... ``seed004``); ``_parts`` the statistics,
ablations and notes that several share.
"""

from __future__ import annotations

from zonal.experiments.claims import seed000, seed001, seed002, seed003, seed004
from zonal.experiments.reproductions import Claim

#: the reproduction issue's order
ORDER = ("1", "2", "3", "4", "5", "6", "7", "8", "9", "10a", "10b", "11")

CLAIMS: tuple[Claim, ...] = tuple(
    sorted(
        (*seed000.CLAIMS, *seed001.CLAIMS, *seed002.CLAIMS, *seed003.CLAIMS, *seed004.CLAIMS),
        key=lambda claim: ORDER.index(claim.number),
    )
)
"""The claims of the reproduction issue, in its order (its claim 10 is two: 10a, seed 004 ch. 5,
and 10b, fig. 3.5)."""

REPORT_NOTES = (
    "GPU: four sessions were lent a GPU machine for 15 minutes of device time each (13 and 32: "
    "an NVIDIA H200; 14 and 21: an H100). Their 16 CPU cores trained 26 of claim 7's 48 "
    "converged configurations (float32 on the CPU as the protocol says, 12 and 15 processes; the "
    "rest are trained here, resumed from those runs' checkpoints; one of them met the divergence "
    "in claim 7's notes) and the first 3 of 10 epochs of its ten-epoch ablation's nu = 1 "
    "configurations (session 21, 4 processes), and the GPUs of sessions 13, 21 and 32 ran the "
    "statistics pass (docs/benchmarks_statistics_pass.md; session 32 beside the same machine's "
    "16 CPU cores: 94.8x their speed in float64). The "
    "seeds' `--full` protocols that need a GPU for hours (the convolutional DKM's ResNet20 stack, "
    "the shift experiment's networks) have not been run; every other number here is from one CPU "
    "core of this project's machine.",
)
"""Paragraphs the report prints under its summary."""

__all__ = ["CLAIMS", "REPORT_NOTES"]
