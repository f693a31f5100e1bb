"""Seed 002's claims (sparse phases): table 1 (MAGIC stand-in) and fig. 2 (regression).

Entries of ``zonal.experiments.claims.CLAIMS`` (the package docstring says what a claim holds).
"""

from __future__ import annotations

from zonal.experiments.claims._parts import (
    RUN,
)
from zonal.experiments.reproductions import Ablation, Claim, Ordering, Statistic

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "5",
        "sparse phases against complete harmonics and a 5-layer network: AUC",
        "seed 002 table 1",
        "sparse-phases-magic",
        f"{RUN} sparse-phases-magic --protocol converged",
        data="stand-in: MAGIC gamma telescope for SUSY",
        comparable=False,
        statistics=(
            Statistic("sparse AUC", {"model": "sparse"}, "auc", seed_value=0.870),
            Statistic("complete AUC", {"model": "complete"}, "auc", seed_value=0.864),
            Statistic("network AUC", {"model": "network"}, "auc", seed_value=0.867),
            Statistic("sparse TLL", {"model": "sparse"}, "tll"),
            Statistic("complete TLL", {"model": "complete"}, "tll"),
            Statistic("network TLL", {"model": "network"}, "tll"),
            Statistic(
                "sparse steps to the complete AUC",
                {"model": "sparse"},
                "steps_to_complete_auc",
                better="lower",
            ),
            Statistic(
                "complete steps to its final AUC",
                {"model": "complete"},
                "steps_to_complete_auc",
                better="lower",
            ),
        ),
        orderings=(
            Ordering("sparse AUC", "complete AUC"),
            Ordering("sparse steps to the complete AUC", "complete steps to its final AUC"),
        ),
        ablations=(
            Ablation(
                "the GPs with one learned scale per input (ARD; the seed's GPs have none)",
                {"input_scales": True, "models": ["sparse", "complete"]},
                f"{RUN} sparse-phases-magic --protocol converged --set input_scales=true "
                '--set \'models=["sparse", "complete"]\'',
            ),
            # declared in session 18, before it ran, in place of the guess it tests
            Ablation(
                "the network early-stopped: its best AUC on 10% of the training rows held out, "
                "checked every 250 steps (the seed's network has no early stopping)",
                {"network_validation_fraction": 0.1, "models": ["network"]},
                f"{RUN} sparse-phases-magic --protocol converged "
                "--set network_validation_fraction=0.1 --set 'models=[\"network\"]'",
            ),
        ),
        notes="Steps to the complete AUC: the first traced step (every 250 Adam steps) at which "
        "a GP's test AUC reaches the complete features' final AUC of the same repeat; a repeat "
        "where the sparse features never reach it counts out of n. The seed: sparse phases "
        "reach it 'in half the iterations'. The network is not early-stopped: after the "
        "converged protocol's 6000 steps it overfits (test TLL -2.36 +- 0.52 against the GPs' "
        "-0.32; AUC 0.911 against 0.939 after the quick preset's 800 steps, the figure issue 25 "
        "quotes), so at convergence the GPs lead it. The two ablations below (declared before "
        "they ran, session 18) qualify that. Early-stopped (its state of best AUC on 10% of the "
        "training rows held out: steps 1750-2000 of 6000) the network leads both GPs, AUC 0.9385 "
        "+- 0.0012 against the sparse features' 0.9286 and the complete 0.9267 (TLL -0.300 "
        "against -0.320 and -0.324): the GPs' lead at convergence is the network's overfitting. "
        "With one learned scale per input (ARD, not the seed's) both GPs gain (sparse 0.9353, "
        "complete 0.9317) and the sparse features stay ahead in every repeat; the early-stopped "
        "network still leads, by 0.003.",
    ),
    Claim(
        "6",
        "15 frequencies x 100 phases against 5 complete frequencies: RMSE and NLL",
        "seed 002 fig. 2",
        "sparse-phases-regression",
        f"{RUN} sparse-phases-regression --protocol converged",
        data="stand-in: protein and NYC flights for song, buzz and houseelectric",
        comparable=False,
        statistics=tuple(
            Statistic(
                f"{dataset} {model} {metric.upper()}",
                {"dataset": dataset, "model": model},
                metric,
                better="lower",
            )
            for dataset in ("protein", "flights")
            for metric in ("rmse", "nll")
            for model in ("sparse", "complete")
        ),
        orderings=(
            Ordering("protein sparse RMSE", "protein complete RMSE"),
            Ordering("protein sparse NLL", "protein complete NLL"),
        ),
        # Declared in session 12 while the converged run was in flight, after its first fit
        # (complete harmonics, split 0) failed the plateau rule at 2000 steps (plateau drop
        # -0.0076 nats per point) and before any sparse fit had finished.
        ablations=(
            Ablation(
                "twice the steps (4000, about 110 epochs)",
                {"steps": 4000},
                f"{RUN} sparse-phases-regression --protocol converged --set steps=4000",
            ),
        ),
        cause="On protein the two feature sets hold nearly the same functions at the decay the "
        "ELBO learns. The learned beta is 9.6-9.9 (d = 10), so degrees 0-2, which both sets hold "
        "whole, carry 99.95% of the kernel's prior variance. At each fit's own beta "
        "(`zonal.experiments.seed002_common.prior_variance_share`, checked against the mean of the "
        "features' Q(x, x) over the sphere by Monte Carlo) the complete set holds 0.99994-0.99995 "
        "of it and the sparse set 0.99967-0.99973: the sparse set's degrees 5-14 add 3-6e-5, while "
        "its 100 phases per degree drop 110 of the 210 harmonics of degree 3 and 560 of the 660 of "
        "degree 4. The RMSEs differ by 0.3% (4.621 against 4.607; complete ahead on splits 0 and 2, "
        "sparse on split 1, by less than the splits' own spread of 0.02), so here the order is set "
        "by the splits and the optimisation, not by the features' reach. The seed's claim needs "
        "targets whose learned decay leaves variance above degree 4; its sets are not obtainable "
        "and its figure prints no numbers, so that cannot be checked here. One fit (complete, "
        "split 0) failed the plateau rule (drop -0.0076 nats per point over the last tenth). The "
        "declared 4000-step ablation (below; run folder "
        "`sparse-phases-regression-20261126T222856Z-2ca1a4`, sessions 18-19, 34-96 CPU-minutes "
        "per fit under load) reverses the order: with twice the steps the sparse features lead "
        "on every split in both metrics (RMSE 4.626 / 4.553 / 4.542 against 4.667 / 4.630 / "
        "4.624; NLL 2.949 / 2.935 / 2.931 against 2.959 / 2.952 / 2.951; means 4.574 +- 0.027 "
        "against 4.640 +- 0.013 and 2.938 against 2.954), the complete fits having gained "
        "nothing (4.640 against 4.607 at 2000 steps) while the sparse fits gained 0.05. The "
        "sparse fits learn a slower decay with the longer training (beta 8.9-9.3 against "
        "9.6-9.9 at 2000 steps; the complete fits' 9.5-9.7), which leaves more prior variance "
        "in the degrees above 4 that only the sparse set holds. All three complete fits pass "
        "the plateau rule at 4000 steps, two of the three sparse fits do not (drops -0.016 and "
        "-0.007 nats per point over the last tenth): the sparse features were still improving "
        "where the 2000-step protocol judged them, and its plateau rule (passed there by 5 of "
        "6 fits) stops them too early. The verdict stays the converged protocol's, fixed "
        "before these runs; the ablation says the seed's order holds on protein once the "
        "sparse fits are trained longer.",
        notes="The seed's claim (sec. 6.2, fig. 2, no numbers printed): 'the sparse spherical "
        "harmonic features outperform the full harmonics most of the time' in test NLL and RMSE "
        "on song, buzz and houseelectric (not obtainable here). The orderings ask it on protein "
        "in both metrics; flights (the full protocol only) is reported where run.",
    ),
)
