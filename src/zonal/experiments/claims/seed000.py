"""Seed 000's claims (activated deep GPs): table 1 and fig. 6.

Entries of ``zonal.experiments.claims.CLAIMS`` (the package docstring says what a claim holds).
"""

from __future__ import annotations

from zonal.experiments.claims._parts import (
    RUN,
    UCI_ABLATIONS,
    uci_statistics,
)
from zonal.experiments.reproductions import Claim, Ordering, Statistic

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "1",
        "ADGP-3 and DGP-3 test MSE and TLL on five UCI sets",
        "seed 000 table 1",
        "uci-dgp",
        f"{RUN} uci-dgp --protocol converged",
        statistics=uci_statistics(),
        ablations=UCI_ABLATIONS,
        cause="Boston's MSE is set by its split, not by the model: the two models agree split by "
        "split (ADGP-3 / DGP-3: 0.093 / 0.069, 0.134 / 0.133, 0.236 / 0.259), so their spread "
        "over our 3 random 90/10 splits (standard deviation 0.074 and 0.097, 51 test rows each) "
        "is 5-8 times the seed's over its 5 (0.014, 0.012), and one hard test split (split 2) "
        "lifts both means above the seed's. On yacht and concrete every MSE and TLL is within "
        "the seed's spread or better. The ADGP-3's network stage overfits boston (its test MSE "
        "after the seed's 20,000 steps: 0.34, 0.23, 1.19; the ELBO stage brings it to 0.09-0.24), "
        "but neither a tenth of the network steps nor four times the ELBO steps lowers the "
        "final MSE (ablations below: 0.166 and 0.181 against 0.154; split by split the same "
        "order), so neither stage's length is the cause. With the seed's 5 splits (ablation "
        "below; splits 0-2 give the converged run's figures exactly) the means are 0.147 and "
        "0.151 (standard deviation 0.057 and 0.072, still 4-6 times the seed's): splits 3 and 4 "
        "(ADGP-3 / DGP-3: 0.168 / 0.178, 0.104 / 0.117) lie between the first three, the ADGP-3 "
        "ahead on 4 of 5 splits, so more splits do not bring the means to the seed's 0.080 / "
        "0.105; the seed's splits are not published. Protein's ADGP-3 MSE (0.482 +- 0.004, "
        "0.0003 outside the seed's 0.470 +- 0.012) is the ELBO stage's: the network stage "
        "reaches test MSE 0.450 / 0.456 / 0.454 (mean 0.454, below the seed's), and the seed's "
        "5,000 ELBO steps lift it on every split, to 0.475 / 0.483 / 0.489, their objective "
        "still falling by 1.3-1.6 nats per point over the last tenth (the plateau rule fails on "
        "all three; the DGP-3's 20,000 steps pass it), the same rise as on yacht (claim 11's "
        "cause). The inducing-point DGP-3 at the same M = 64 is at 0.459 +- 0.004 against the "
        "seed's 0.533. Not tested: a longer ELBO stage on protein (about 3,300 s per split on "
        "one core at 20,000 steps); on boston four times the steps did not lower the MSE.",
        notes="Units: seed 000 sec. 5.2 computes MSE and TLL 'on the normalised data', as zonal "
        "does, so the two are in the same units. The seed's TLLs cannot come from a calibrated "
        "Gaussian predictive: the best TLL a Gaussian with mean-squared error e can have is "
        "-0.5 log(2 pi e e) (variance equal to e), -0.42 for concrete ADGP-3's e = 0.135, "
        "against the seed's -4.42, which needs a predictive variance about 11 times smaller than "
        "the squared error (sigma^2 = 0.012: -0.5 log(2 pi 0.012) - 0.135 / 0.024 = -4.1). The "
        "seed's deep models were overconfident on that table; a zonal TLL above the seed's is "
        "expected and counts as better.",
    ),
    Claim(
        "2",
        "ADGP-3 reaches the test MSE both models reach sooner than the inducing-point DGP-3",
        "seed 000 fig. 6",
        "uci-dgp",
        f"{RUN} uci-dgp --protocol converged",
        statistics=tuple(
            Statistic(
                f"{dataset} {model} s to target",
                {"dataset": dataset, "model": model},
                "seconds_to_target",
                better="lower",
                table="time_to_target.csv",
            )
            for dataset in ("yacht", "boston", "concrete")
            for model in ("ADGP-3", "DGP-3")
        ),
        orderings=tuple(
            Ordering(f"{dataset} ADGP-3 s to target", f"{dataset} DGP-3 s to target")
            for dataset in ("yacht", "boston", "concrete")
        ),
        notes="Fig. 6 draws test-MSE traces without numbers; its claim (sec. 5.2) is that "
        "training the ADGP as a network first 'speeds up training'. Per split the target is "
        "the test MSE both traced models reach by the end of training (the larger of their last "
        "traced MSEs); each is credited with the training CPU seconds of its first evaluation "
        "at or below it (the ADGP's include its network stage). The traces are in the run's "
        "traces.csv and traces.png.",
    ),
)
