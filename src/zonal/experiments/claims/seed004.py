"""Seed 004's claims (residual deep GPs on hyperspheres, Bayesian optimisation): figs. 3.4,
3.5, 4.2 and ch. 5.

Entries of ``zonal.experiments.claims.CLAIMS`` (the package docstring says what a claim holds).
"""

from __future__ import annotations

from zonal.experiments.claims._parts import (
    RESIDUAL_ABLATIONS,
    RESIDUAL_DEPTH_CAUSE,
    RESIDUAL_NOTES,
    RESIDUAL_UCI_ABLATIONS,
    RESIDUAL_UCI_CAUSE,
    RUN,
    final_regret,
    residual_depth,
    residual_vs_baseline,
)
from zonal.experiments.reproductions import Ablation, Claim, Ordering, Statistic

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "8",
        "residual DGP: LPD rises with depth at 800 points, falls with depth at 100",
        "seed 004 fig. 3.4",
        "residual-dgp-sphere",
        f"{RUN} residual-dgp-sphere --protocol converged",
        data="stand-in target (the seed does not give its function)",
        comparable=False,
        statistics=residual_depth(),
        # "rises / falls with depth": every depth against none, at both sizes (session 42: the
        # earlier rule asked 0 > 2 alone at 100, which a review found to pass while hidden=1
        # stood above hidden=0, as the notes below said; made whole, not chosen by the result)
        orderings=(
            *(Ordering(f"N=800 hidden={h} LPD", "N=800 hidden=0 LPD") for h in (1, 2, 3)),
            *(Ordering("N=100 hidden=0 LPD", f"N=100 hidden={h} LPD") for h in (1, 2, 3)),
        ),
        ablations=RESIDUAL_ABLATIONS,
        cause=RESIDUAL_DEPTH_CAUSE,
        notes=RESIDUAL_NOTES,
    ),
    Claim(
        "9",
        "BO on spheres: switching to the residual DGP lowers the final regret on the singular "
        "function, not on Ackley",
        "seed 004 fig. 4.2",
        "bo-sphere",
        f"{RUN} bo-sphere --protocol converged",
        data="zonal's definitions of the seed's two functions (its appendix does not define them)",
        statistics=tuple(
            final_regret(name, function, strategy)
            for name, function in (("singular", "singular-s2"), ("ackley", "ackley-s3"))
            for strategy in ("shallow", "switch", "adaptive")
        ),
        orderings=(Ordering("singular switch", "singular shallow"),),
        # declared in session 16, before any run with another radius: is the well of zonal's
        # singular function too narrow for what 180 shallow-GP points and 60 inducing points
        # resolve (the cause below)? Four times the radius, the singular function only.
        ablations=(
            Ablation(
                "a well four times as wide (r = 0.2; `zonal.bo.singular_objective`), the "
                "singular function only",
                {"well_radius": 0.2, "functions": ["singular-s2"]},
                f"{RUN} bo-sphere --protocol converged --set well_radius=0.2 "
                "--set 'functions=[\"singular-s2\"]'",
            ),
        ),
        cause="No strategy improves after step 180 in any of the 5 seeds on either function: the "
        "final regrets equal those at the switch, run by run (singular 0.28-0.46, Ackley "
        "0.005-0.048). On the singular function every run stalls long before the switch (last "
        "improvement at step 39-127 for the shallow GP) with its best point 0.005-0.019 rad from "
        "the well's tip, where the cusp still leaves a regret of about 0.3; a regret of 0.1 needs "
        "about 5e-4 rad. The residual DGP does what the seed describes: its 20 proposals leave the "
        "shallow GP's exploration (median distance to the tip over the last 20 steps 0.86-1.53 rad "
        "in 3 of 5 seeds) for the well (0.017-0.034 rad in every seed), but none lands closer "
        "than the best point already found (nearest 0.008-0.023 rad), so the regret does not "
        "move. The well of zonal's singular function (the seed does not define its own; "
        "`zonal.bo.objectives`: radius r = 0.05 under a square root) is narrower than the "
        "residual DGP with 60 inducing points resolves after 180 points; the seed's function may "
        "be wider. Figures from the run's states (`X` per step) and results.csv. The declared "
        "ablation below rules the well's width out: at four times the radius (r = 0.2) the "
        "runs still stall (best points 0.004-0.012 rad from the tip, final regret 0.13-0.22), "
        "the switch improves on the shallow GP in 1 of 5 seeds (0.128 to 0.105; median 0.142 "
        "for both) and the adaptive strategy is ahead in 3 and behind in 2 (measured: 1,553 s "
        "with --jobs 2). More inducing points are untested. On "
        "Ackley the strategies tie, as the seed says.",
        notes="The seed's claims (sec. 4.2, fig. 4.2, medians and interquartile ranges drawn, no "
        "numbers printed): on the function with a singularity near its optimum (S^2), switching "
        "from the exact Matern GP to the residual DGP for the last 20 of 200 steps lowers the "
        "regret 'in almost all cases' (14 of 15 runs); on Ackley (S^3) the two are 'practically' "
        "the same. The ordering asks the first; the second is read from the table. 'adaptive' is "
        "the scheme the seed proposes and does not run (sec. 4.2: switch when the regret stalls); "
        "zonal's switches once the residual DGP predicts the latest held-out points better "
        "(`zonal.experiments.bo_sphere`), reported beside, not judged.",
    ),
    Claim(
        "10a",
        "residual DGPs of depth 1-3 on UCI sets against the Euclidean DGP of the same M: TLL",
        "seed 004 ch. 5 (fig. 5.1)",
        "residual-dgp-uci",
        f"{RUN} residual-dgp-uci --protocol converged",
        statistics=tuple(
            Statistic(
                f"{dataset} {model} depth {depth} TLL",
                {"dataset": dataset, "model": model, "depth": depth},
                "tll",
                summary="median",
            )
            for dataset in ("concrete", "yacht")
            for model in ("residual", "euclidean")
            for depth in (1, 2, 3)
        ),
        orderings=(
            Ordering("concrete residual depth 3 TLL", "concrete residual depth 1 TLL"),
            Ordering("yacht residual depth 1 TLL", "yacht residual depth 3 TLL"),
            *(
                Ordering(
                    f"{dataset} euclidean depth {depth} TLL",
                    f"{dataset} residual depth {depth} TLL",
                )
                for dataset in ("concrete", "yacht")
                for depth in (1, 2, 3)
            ),
        ),
        ablations=RESIDUAL_UCI_ABLATIONS,
        cause=RESIDUAL_UCI_CAUSE,
        notes="The seed's claims (sec. 5.2, fig. 5.1; box plots, no numbers): the residual DGP's "
        "TLL improves with depth on concrete (and kin8nm and power, not run here) and "
        "deteriorates with depth on yacht, the smallest set; 'the Euclidean models boast superior "
        "performance, until a rapid collapse at 4 and 5 layers' (depths 4-5 are not run here). "
        "Medians over splits, as the seed's boxes show.",
    ),
    Claim(
        "10b",
        "residual DGP against the eq. 3.5 baseline at 800 points: higher median TLL at every depth",
        "seed 004 fig. 3.5",
        "residual-dgp-sphere",
        f"{RUN} residual-dgp-sphere --protocol converged",
        data="stand-in target (the seed does not give its function)",
        comparable=False,
        statistics=residual_vs_baseline(),
        orderings=tuple(
            Ordering(f"residual hidden={h} TLL", f"baseline hidden={h} TLL") for h in (1, 2, 3)
        ),
        cause="The eq. 3.5 baseline is ahead at every depth (median TLL 2.765 / 2.769 / 2.786 "
        "against the residual DGP's 2.418 / 2.500 / 2.493 for 1-3 hidden layers, every repeat). "
        "The seed's own suspect (sec. 3.2), the baseline's learned inducing locations, is half to "
        "three quarters of the gap: with its locations fixed at their k-means start (ablation "
        "below) the baseline's median TLL falls to 2.558 / 2.563 / 2.640, still 0.06-0.15 nats "
        "above the residual DGP's. Training length does not explain the rest: every baseline "
        "fit's loss was still falling at 4000 steps (none passes the plateau rule) while 7 of 9 "
        "residual fits at N = 800 had flattened, so longer training would widen the gap. Not "
        "tested: what remains (the baseline's inducing points at the data's k-means centres "
        "against the residual DGP's uniform grid, its Euclidean ARD layers, and our stand-in "
        "target, whose cusps a Euclidean warping of R^3 may suit).",
        # Declared after the converged run's first repeat showed the baseline ahead (TLL 2.79
        # against 2.42 at one hidden layer), before this ablation ran: the seed's own suspect
        # (sec. 3.2), the baseline's learned inducing locations against the residual DGP's grid.
        ablations=(
            Ablation(
                "the baseline's inducing locations fixed at their k-means start (of the "
                "residual DGP only the cheapest cell, N = 100 shallow)",
                {"baseline_learn_inducing": False, "num_train": [100], "hidden_layers": [0]},
                f"{RUN} residual-dgp-sphere --protocol converged "
                "--set baseline_learn_inducing=false --set 'num_train=[100]' "
                "--set 'hidden_layers=[0]'",
            ),
        ),
    ),
)
