"""Seed 001's claims (spherical-harmonic features, image heads under shift): ch. 3 (VISH),
sec. 4.2 (shift and UCI).

Entries of ``zonal.experiments.claims.CLAIMS`` (the package docstring says what a claim holds).
"""

from __future__ import annotations

from zonal.experiments.claims._parts import (
    RUN,
    shift_statistics,
)
from zonal.experiments.dataset_shift import level_means
from zonal.experiments.reproductions import Ablation, Claim, Ordering, Statistic
from zonal.experiments.vish_flights import compare as compare_with_sgpr

CLAIMS: tuple[Claim, ...] = (
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
        "11",
        "ADGP against its own network, MC dropout and the inducing-point DGP on UCI sets",
        "seed 001 sec. 4.2",
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
