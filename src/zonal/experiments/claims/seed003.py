"""Seed 003's claims (convolutional deep kernel machines): tables 1-2.

Entries of ``zonal.experiments.claims.CLAIMS`` (the package docstring says what a claim holds).
"""

from __future__ import annotations

from zonal.experiments.claims._parts import (
    CDKM_NOTES,
    RUN,
    cdkm_statistics,
)
from zonal.experiments.reproductions import Ablation, Claim, Ordering

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "7",
        "convolutional DKM on MNIST: learned nu beats the NNGP limit; GAP, categorical and "
        "Batch/Batch ahead of their alternatives",
        "seed 003 tables 1-2",
        "cdkm-mnist",
        f"{RUN} cdkm-mnist --protocol converged",
        statistics=cdkm_statistics(),
        orderings=(
            Ordering("nu=1 accuracy", "nu=inf (NNGP) accuracy"),
            Ordering("nu=0.01 accuracy", "nu=inf (NNGP) accuracy"),
            Ordering("GAP top accuracy", "linear top accuracy"),
            Ordering("categorical accuracy", "Gaussian accuracy"),
            Ordering("Batch/Batch accuracy", "Batch/Location accuracy"),
        ),
        # declared in session 19, before it ran: the converged protocol's 2 epochs stop while the
        # objective still rises; five times the epochs, the rate divided by 10 at 40% and 80% of
        # them as the seed's schedule (its 100 epochs, 40 and 80), for the base (nu = 1) and the
        # NNGP limit only: does the gap between them hold, and how near the seed's 99.2% does
        # the narrow stack come, once training.csv's epoch objectives flatten?
        ablations=(
            Ablation(
                "ten epochs, the rate divided by 10 after epochs 4 and 8 (the seed's schedule "
                "in proportion), nu = 1 and the NNGP limit only",
                {"epochs": 10, "milestones": [4, 8], "sweep": "nu", "nus": ["inf", "1"]},
                f"{RUN} cdkm-mnist --protocol converged --set epochs=10 "
                "--set 'milestones=[4, 8]' --set sweep=nu --set 'nus=[\"inf\", \"1\"]'",
            ),
        ),
        notes=CDKM_NOTES,
    ),
)
