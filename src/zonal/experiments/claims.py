"""The seeds' headline claims, each with the experiment, the protocol and the numbers that check it.

``zonal.experiments.reproductions`` judges every claim here on the run folders and writes
``docs/reproductions.md``. A claim's statistics read the run's ``results.csv`` (one row per seed or
split); its orderings are what the seed says (deeper is better, A beats B); ``comparable`` is False
where the data are a stand-in, so the seed's numbers can only be matched in direction. A ``cause``
is written only from evidence: an ablation (listed with its command), a test that failed before a
fix, or the protocol difference that explains the gap.
"""

from __future__ import annotations

from zonal.experiments._claim_parts import (
    CDKM_NOTES,
    RESIDUAL_ABLATIONS,
    RESIDUAL_NOTES,
    RESIDUAL_UCI_ABLATIONS,
    RESIDUAL_UCI_CAUSE,
    RUN,
    UCI_ABLATIONS,
    cdkm_statistics,
    final_regret,
    residual_depth,
    residual_vs_baseline,
    shift_statistics,
    uci_statistics,
)
from zonal.experiments.dataset_shift import level_means
from zonal.experiments.reproductions import Ablation, Claim, Ordering, Statistic
from zonal.experiments.vish_flights import compare as compare_with_sgpr

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
        "0.105; the seed's splits are not published.",
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
    Claim(
        "3",
        "one-pass harmonic SGPR against SVGPs trained to their plateau: time to equal test RMSE",
        "seed 001 ch. 3",
        "vish-flights",
        f"{RUN} vish-flights --protocol converged",
        data="stand-in: NYC flights 2013 (273,853 rows) for the 6-million-row airline data",
        comparable=False,
        derive=compare_with_sgpr,
        statistics=(
            Statistic(
                "RBF SVGP time / SGPR time",
                {"model": "rbf-svgp"},
                "speedup",
                seed_value=100.0,
            ),
            Statistic("zonal SVGP time / SGPR time", {"model": "zonal-svgp"}, "speedup"),
            Statistic(
                "SGPR RMSE / RBF SVGP best RMSE",
                {"model": "rbf-svgp"},
                "accuracy_ratio",
                seed_value=1.0,
                better="lower",
                tolerance=0.01,
            ),
            Statistic("SGPR RMSE", {"model": "sgpr"}, "rmse", better="lower"),
            Statistic("RBF SVGP best RMSE", {"model": "rbf-svgp"}, "best_rmse", better="lower"),
            Statistic("zonal SVGP best RMSE", {"model": "zonal-svgp"}, "best_rmse", better="lower"),
            Statistic("SGPR CPU seconds", {"model": "sgpr"}, "seconds", better="lower"),
        ),
        ablations=(
            Ablation(
                "the SGPR with 6 complete frequencies (M = 1,782; the main run: 5, M = 660)",
                {"frequencies": 6, "models": ["sgpr"]},
                f"{RUN} vish-flights --protocol converged --set frequencies=6 "
                "--set 'models=[\"sgpr\"]'",
            ),
            # Declared in session 12, before they ran: does ARD (one scale per input, as the RBF
            # SVGP has) close the SGPR's accuracy gap at M = 660, and does it add to M = 1,782?
            Ablation(
                "the SGPR with input scales (ARD; 5 frequencies, M = 660)",
                {"input_scales": True, "models": ["sgpr"]},
                f"{RUN} vish-flights --protocol converged --set input_scales=true "
                "--set 'models=[\"sgpr\"]'",
            ),
            # Declared after the first of these ran (the 1,024-row scales made the SGPR 2-4%
            # worse): are the scales fitted on too few rows for 219,082?
            Ablation(
                "the SGPR with input scales learned on 16,384 rows (5 frequencies)",
                {"input_scales": True, "input_scale_rows": 16384, "models": ["sgpr"]},
                f"{RUN} vish-flights --protocol converged --set input_scales=true "
                "--set input_scale_rows=16384 --set 'models=[\"sgpr\"]'",
            ),
            Ablation(
                "the SGPR with input scales and 6 complete frequencies (M = 1,782)",
                {"input_scales": True, "frequencies": 6, "models": ["sgpr"]},
                f"{RUN} vish-flights --protocol converged --set input_scales=true "
                "--set frequencies=6 --set 'models=[\"sgpr\"]'",
            ),
        ),
        cause="Speed: the stand-in has 219,082 training rows against the seed's 6 million; the "
        "SGPR's cost grows linearly in N while an SVGP's time to a given RMSE grows more slowly, "
        "and the ratio grew with N on flights in `benchmarks/sgpr_large_n.py` (8x at 10^4 rows "
        "to 33x at 2.2 x 10^5 with the SVGPs stopped at the SGPR's RMSE, the figure issue 25 "
        "quotes), so 51x at this N does not contradict 100x at 27 times the rows; not shown "
        "here. Accuracy: the SGPR's feature budget. GPyTorch's RBF-ARD SVGP (M = 500 learned "
        "points) ends 1.8% below the 5-frequency SGPR's RMSE on every split (1.0-2.5%); with 6 "
        "complete frequencies (M = 1,782; ablation below) the SGPR's RMSE is the RBF SVGP's best "
        "(0.839 / 0.809 / 0.849 against 0.839 / 0.804 / 0.857 per split, ratio 0.999 on "
        "average) in 59-61 CPU seconds (its statistics pass 21 s), and the RBF SVGP of the main "
        "run first reaches that RMSE after 495 and 551 CPU seconds on splits 0 and 1 (8.4x and "
        "9.4x) and not before its plateau on split 2 (at least 7.0x; the main run's curves.csv): "
        "at equal accuracy the SGPR is about 8 times faster at this N, not 100 times. The "
        "zonal SVGP on the 5-frequency features never reaches it. Input scales (ARD, the RBF "
        "SVGP's advantage; ablations below, declared before they ran) do not close the gap: "
        "learned on the bound of 1,024 random training rows, as `zonal fit --ard` learns them, "
        "they make the SGPR worse (RMSE 0.876 / 0.858 / 0.882 per split against 0.853 / 0.825 / "
        "0.865 without; with 6 frequencies 0.864 / 0.871 / 0.873 against 0.839 / 0.809 / 0.849): "
        "scales that suit 1,024 rows do not suit 219,082. Learned on 16,384 rows they help a "
        "little (0.852 / 0.823 / 0.862, 0.1-0.3%) at 121-130 CPU seconds for the scales against "
        "3.3 for the pass.",
        notes="The seed's number is its abstract's: 'two orders of magnitude faster compared to "
        "standard sparse GPs, while retaining state of the art accuracy' (a speed-up of 100 at "
        "an accuracy ratio of at most 1; the 1% tolerance on the ratio is ours). A speed-up is "
        "the SVGP's CPU seconds to first reach the SGPR's test RMSE over the SGPR's whole fit "
        "(statistics pass and L-BFGS); where an SVGP never reached it before its plateau, its "
        "whole training time stands in (a lower bound; `speedup_is_lower_bound` in the run's "
        "results.csv). The benchmark `benchmarks/sgpr_large_n.py` measures the same at growing "
        "N and on synthetic data up to 10^7 rows.",
    ),
    Claim(
        "4",
        "ADGP head against its network, MC dropout, a deep ensemble and the inducing-point DGP "
        "under rotation (MNIST) and corruption (Fashion-MNIST): TLL, ECE and accuracy averaged "
        "over the shift levels",
        "seed 001 sec. 4.2",
        "dataset-shift",
        f"{RUN} dataset-shift --protocol converged",
        data="seed's for MNIST rotations; stand-in: Fashion-MNIST corruptions for CIFAR-10-C",
        comparable=False,
        derive=level_means,
        statistics=shift_statistics(),
        orderings=(
            Ordering("ADGP TLL, MNIST rotations", "network TLL, MNIST rotations"),
            Ordering("ADGP TLL, MNIST rotations", "dropout TLL, MNIST rotations"),
            Ordering("ADGP TLL, Fashion corruptions", "network TLL, Fashion corruptions"),
            Ordering("ADGP TLL, Fashion corruptions", "dropout TLL, Fashion corruptions"),
        ),
        cause="Half reproduced. Against its own network the ADGP's TLL is higher on both shifts "
        "(MNIST rotations -3.48 +- 0.11 against -4.91 +- 0.09; Fashion corruptions -1.41 +- 0.05 "
        "against -1.62 +- 0.14) at the network's accuracy, with a lower ECE (0.314 against 0.423; "
        "0.145 against 0.192): the seed's mechanism, the ELBO stage on a copied network, works. "
        "Against MC dropout it does not win. The run's per-level rows (results.csv) show where: "
        "on MNIST the ADGP's TLL is at or above dropout's at 0-45 and 135 degrees, within 0.03 "
        "nats at 120 and 150, and 0.08-0.26 nats below at 60-105 and 165-180 degrees, where "
        "every model is below 40% accuracy; the "
        "average is within one standard error (-3.48 +- 0.11 against -3.41 +- 0.10) and the "
        "ADGP's ECE is the lower (0.314 against 0.363). On Fashion-MNIST dropout is ahead in "
        "every corruption family (most in contrast, -2.41 against -2.13, and impulse noise, "
        "-1.40 against -1.15), and it is also the more accurate network there (0.615 against "
        "the ADGP's 0.591 and its network's 0.600; impulse noise level 2: 0.773 against "
        "0.722): trained with dropout, it is a more corruption-robust network than the plain "
        "network the ADGP starts from and keeps the accuracy of. The ADGP improves the "
        "uncertainty of the network it copies, not its accuracy under shift, so it beats "
        "dropout in TLL only where the two networks are equally accurate. Not tested: an ADGP "
        "initialised from the dropout network.",
        notes="The seed's table prints '??'; its claims are in words (sec. 4.2): the models "
        "'perform very similar in terms of prediction accuracy, but ADGP better account for "
        "uncertainty as evidenced by the Test Log Likelihood', and the aim is to 'improve on "
        "Dropout-based neural networks in terms of calibrated uncertainty'. The orderings test "
        "the TLL claims against the network and MC dropout; accuracy, ECE, the deep ensemble "
        "(Ovadia et al.'s strongest baseline) and the inducing-point DGP are reported beside "
        "them. Each number is a mean over the shift's levels (the clean test set included) per "
        "repeat, then over repeats (the run's level_means.csv).",
    ),
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
        "declared 4000-step ablation is in flight (session 18, run folder "
        "`sparse-phases-regression-20261126T222856Z-2ca1a4`, 2 of its 6 fits, 70 and 43 CPU-"
        "minutes under load): on split 0 the complete fit now passes the plateau rule and ends at "
        "RMSE 4.667 / NLL 2.959, behind the sparse fit's 4.626 / 2.949 (itself still falling by "
        "0.016 nats per point over its last tenth), where at 2000 steps the complete fit led on "
        "this split. One split does not settle the order; the other four fits are still to run.",
        notes="The seed's claim (sec. 6.2, fig. 2, no numbers printed): 'the sparse spherical "
        "harmonic features outperform the full harmonics most of the time' in test NLL and RMSE "
        "on song, buzz and houseelectric (not obtainable here). The orderings ask it on protein "
        "in both metrics; flights (the full protocol only) is reported where run.",
    ),
    Claim(
        "7",
        "convolutional DKM on MNIST: learned nu beats the NNGP limit; the ablations' order",
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
    Claim(
        "8",
        "residual DGP: LPD rises with depth at 800 points, falls with depth at 100",
        "seed 004 fig. 3.4",
        "residual-dgp-sphere",
        f"{RUN} residual-dgp-sphere --protocol converged",
        data="stand-in target (the seed does not give its function)",
        comparable=False,
        statistics=residual_depth(),
        orderings=(
            Ordering("N=800 hidden=3 LPD", "N=800 hidden=0 LPD"),
            Ordering("N=800 hidden=1 LPD", "N=800 hidden=0 LPD"),
            Ordering("N=100 hidden=0 LPD", "N=100 hidden=2 LPD"),
        ),
        ablations=RESIDUAL_ABLATIONS,
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
    Claim(
        "11",
        "ADGP against its own network, MC dropout and the inducing-point DGP on UCI sets",
        "seed 001 sec. 4.1",
        "uci-report",
        f"{RUN} uci-report --protocol converged",
        statistics=tuple(
            Statistic(
                f"{dataset} {label} {metric.upper()}",
                {"dataset": dataset, "model": model},
                metric,
                better="lower",
            )
            for dataset in ("yacht", "boston", "concrete")
            for metric in ("rmse", "nlpd")
            for model, label in (
                ("ADGP", "ADGP"),
                ("Vanilla", "network"),
                ("Dropout", "dropout"),
                ("DGP", "DGP"),
            )
        ),
        orderings=tuple(
            ordering
            for dataset in ("yacht", "boston", "concrete")
            for ordering in (
                Ordering(f"{dataset} ADGP RMSE", f"{dataset} network RMSE"),
                Ordering(f"{dataset} ADGP NLPD", f"{dataset} DGP NLPD"),
            )
        ),
        # Declared in session 13 while the converged run was on its first dataset (the quick
        # preset and two yacht splits had the ADGP's RMSE above its network's, 0.059 against
        # 0.029): is the gap there from the start (the DGP initialised from the network does not
        # predict as the network does) or does the ELBO stage open it? The setting must be > 0,
        # and one ELBO step turned out not to be the initialisation: Adam's first step moves every
        # parameter by about the rate. scripts/adgp_elbo_trace.py evaluates 0 steps (session 14).
        ablations=(
            Ablation(
                "the ADGP after 1 ELBO step, one Adam step from its network initialisation (yacht)",
                {"elbo_steps": 1, "models": ["ADGP", "Vanilla"], "datasets": ["yacht"]},
                f"{RUN} uci-report --protocol converged --set elbo_steps=1 "
                '--set \'models=["ADGP", "Vanilla"]\' --set \'datasets=["yacht"]\'',
            ),
            # declared in session 15, after concrete's trace and before any run of it: does the
            # KL of the copied network under the small kernel variance drive the ELBO's drift?
            Ablation(
                "the ADGP at ten times the kernel variance (0.01; the KL of the copied network "
                "falls tenfold) on concrete",
                {
                    "adgp_kernel_variance": 0.01,
                    "models": ["ADGP", "Vanilla"],
                    "datasets": ["concrete"],
                },
                f"{RUN} uci-report --protocol converged --set adgp_kernel_variance=0.01 "
                '--set \'models=["ADGP", "Vanilla"]\' --set \'datasets=["concrete"]\'',
            ),
        ),
        cause="Yacht's RMSE ordering fails in the ELBO stage, not at the initialisation: with 0 "
        "ELBO steps the ADGP predicts as its network does (split 0: test RMSE 0.0301 against "
        "0.0293; NLPD -1.81 against the network's 18.4). Adam's first step moves every parameter "
        "by about the rate and knocks it off (0.35 after one step; the declared ablation, one step "
        "on the 3 splits: 0.445 +- 0.090); it recovers to 0.036 by 300-1,000 steps, then the ELBO "
        "raises the Gaussian noise from the network's training MSE (2.0e-4) to 3.5e-3 and the "
        "test RMSE rises to 0.066 at the seed's 5,000 steps (NLPD -2.33 at 1,000 steps, -1.53 at "
        "5,000). At a tenth of the rate the first step costs less (0.062) but the drift is the "
        "same (0.051 by 300 steps): on yacht's 277 nearly noise-free training rows the ELBO's "
        "optimum is smoother than the network (`python scripts/adgp_elbo_trace.py yacht 0`, and "
        "with `--elbo-learning-rate 0.001`). Where the network overfits badly (boston splits 1 "
        "and 2: its NLPD 208 and 399, RMSE 0.568 and 0.851) the ADGP's RMSE is well below it "
        "(0.410, 0.469); on boston split 0 (network NLPD 1.0) it is above (0.306 against 0.266). "
        "Boston's NLPD ordering: the ADGP is behind the "
        "DGP on splits 0 and 1 and ahead on split 2 (0.386 / 0.527 / 0.533 against 0.267 / 0.407 "
        "/ 0.588), a paired difference of 0.061 +- 0.058: one standard error, which 3 splits do "
        "not resolve. Concrete, both orderings fail: the ADGP's RMSE "
        "0.348 +- 0.015 against its network's 0.315 +- 0.032 (split by split 0.341 / 0.327 / 0.376 "
        "against 0.371 / 0.316 / 0.258) and its NLPD 0.396 +- 0.048 against the DGP's 0.289 +- "
        "0.024 (behind on every split). The trace of split 2, the widest RMSE gap (`python "
        "scripts/adgp_elbo_trace.py concrete 2`; its 5,000-step figures equal the run's exactly), "
        "shows yacht's drift, larger: at 0 ELBO steps the ADGP predicts as its network (test RMSE "
        "0.260 against 0.259), Adam's first step knocks it off (1.36), by 300 steps it is ahead "
        "of the network and of the DGP's run figures (RMSE 0.253, NLPD -0.016), and from there the "
        "ELBO raises the noise variance from the network's training MSE (0.015) to 0.028 / 0.052 / "
        "0.078 / 0.106 / 0.191 at 300 / 1,000 / 2,000 / 3,000 / 5,000 steps while the training "
        "RMSE rises with it (0.213 / 0.220 / 0.249 / 0.284 / 0.372): the ADGP underfits, it does "
        "not overfit, and the test RMSE climbs to 0.376 (NLPD 0.488). The drift is monotone from "
        "300 steps on, so more steps (the DGP has 20,000) would widen the gap, not close it: the "
        "ELBO's optimum under this prior explains the data by noise rather than by the network's "
        "fit. The ELBO's two terms per training row, printed by the same trace (session 16), "
        "say which term drives it: the KL of the copied network is 238 nats per row at the "
        "start (layers 70 + 125 + 42) against an expected log likelihood of -9.2, and 195 / 119 "
        "at 300 / 1,000 steps while the expected log likelihood is -0.46 / -0.10: the ELBO's "
        "gains after 300 steps come from shrinking the KL (moving the whitened means, which "
        "copy the network at a kernel variance of 0.001, toward the prior), paid for by the "
        "fit (yacht split 0: KL 209 against -9.2 at the start). A tenfold larger kernel "
        "variance cuts the mean's share of that KL tenfold, to tens of nats per row, still "
        "far above the data term, and the declared ablation at 0.01 indeed does not close the "
        "gap: ADGP RMSE 0.388 / 0.324 / 0.341 on splits 0 / 1 / 2 against 0.341 / 0.327 / 0.376 "
        "at 0.001 and the network's 0.371 / 0.316 / 0.259 (NLPD mean 0.392 against 0.396); at "
        "a variance of 1 the copy no longer predicts as the network (uci_dgp's notes: test MSE "
        "5.7 against 0.099 on concrete). With 927 training rows the seed's model cannot keep "
        "both the network's fit and a KL of the data term's size; the seed does not say how its "
        "ADGP keeps its network's accuracy (kernel variance, KL weight) (`python "
        "scripts/adgp_elbo_trace.py concrete 2` and `yacht 0`).",
        notes="The seed's claims (sec. 4.2, its table prints '??'): 'in general our ADGP model is "
        "more accurate than its neural network initialisation (Vanilla model) in terms of RMSE' "
        "and in NLPD it 'consistently outperforms classic DGPs' (and its network on 5 of 7 "
        "datasets). The orderings ask both on every dataset run here; standardised targets.",
    ),
)
"""The claims of the reproduction issue, in its order (its claim 10 is two: 10a, seed 004 ch. 5,
and 10b, fig. 3.5)."""

REPORT_NOTES = (
    "GPU: two sessions were lent a GPU machine for 15 minutes of device time each (13: an NVIDIA "
    "H200; 14: an H100). Their 16 CPU cores trained 26 of claim 7's 48 converged configurations "
    "(float32 on the CPU as the protocol says, 12 and 15 processes; the rest are trained here, "
    "resumed from those runs' checkpoints; one of them met the divergence in claim 7's notes), "
    "and session 13's GPU ran the statistics pass "
    "(docs/benchmarks_statistics_pass.md). The "
    "seeds' `--full` protocols that need a GPU for hours (the convolutional DKM's ResNet20 stack, "
    "the shift experiment's networks) have not been run; every other number here is from one CPU "
    "core of this project's machine.",
)
"""Paragraphs the report prints under its summary."""

__all__ = ["CLAIMS", "REPORT_NOTES"]
