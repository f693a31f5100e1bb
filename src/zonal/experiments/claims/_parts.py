"""The statistics, ablations and notes that several claims of ``zonal.experiments.claims`` share
or that are long enough to read on their own.
"""

from __future__ import annotations

from zonal.experiments.reproductions import LAST, Ablation, Statistic

RUN = "zonal experiment run"


def uci_statistics() -> tuple[Statistic, ...]:
    """Seed 000 table 1 (MSE and TLL on the standardised scale, mean and std over 5 splits)."""
    from zonal.experiments.uci_dgp import TABLE_1

    found = []
    for dataset in ("yacht", "boston", "concrete", "power", "protein"):
        for model in ("ADGP-3", "DGP-3"):
            for metric, better in (("mse", "lower"), ("tll", "higher")):
                mean, std = TABLE_1[dataset][metric][model]
                found.append(
                    Statistic(
                        f"{dataset} {model} {metric.upper()}",
                        {"dataset": dataset, "model": model},
                        metric,
                        seed_value=mean,
                        better=better,
                        tolerance=std,
                    )
                )
    return tuple(found)


def cdkm_statistics() -> tuple[Statistic, ...]:
    """Test accuracy (%) of the convolutional DKM per ablation, seed 003 table 1's MNIST column
    (mean over seeds; the seed reports one number per setting)."""
    rows = (
        ("nu=1 accuracy", "nu", "1", 99.20),
        ("nu=0.01 accuracy", "nu", "0.01", 99.16),
        ("nu=inf (NNGP) accuracy", "nu", "inf", 72.19),
        ("Batch/Batch accuracy", "normalisation", "batch/batch", 99.20),
        ("Batch/Location accuracy", "normalisation", "batch/location", 99.05),
        ("Local/Local accuracy", "normalisation", "local/local", 99.13),
        ("None/None accuracy", "normalisation", "none/none", 99.16),
        ("GAP top accuracy", "top", "gap", 99.20),
        ("linear top accuracy", "top", "linear", 99.13),
        ("categorical accuracy", "likelihood", "categorical", 99.20),
        ("Gaussian accuracy", "likelihood", "gaussian", 99.05),
    )
    return tuple(
        Statistic(label, {"sweep": sweep, "setting": setting}, "accuracy_percent", seed_value=seed)
        for label, sweep, setting, seed in rows
    )


CDKM_NOTES = (
    "Why GAP, Local/Local and None/None stayed at chance in the quick preset (1,000 images): all "
    "three collapse to a constant output (objective -log 10, test log likelihood -2.3025) as the "
    "test/train scale Psi of the last normalisation layer (eq. 73), which no KL term holds, "
    "shrinks to 0 (GAP: 1 -> 0.69 -> 0.47 -> 0.22 over 3 epochs of 500 images; the logits' "
    "spread across images 0.0019 against the base's 0.72). The main cause is the preset's size: "
    "eq. 76 divides the KL terms by P, so at P = 1,000 they weigh 60 times the seed's; at the "
    "converged protocol's 60,000 images all three learn (400 steps: GAP 72.4%, None/None 87.5%, "
    "Local/Local 93.5%, base 89.5%, NNGP 79.4% on 1,000 test images). Two bugs and one "
    "initialisation were found and fixed on the way, each with a test that fails before the fix: "
    "ZCA whitening left about 1e-13 at pixels constant over the training set, which the local "
    "normaliser (eq. 71e) blew up to unit-norm features (NaN in float32); an initial inducing "
    "patch could be blank border (first-layer K_ii condition number 5e28, patch gradients 1e11); "
    "and the output mean started at 0 (the seed draws it at random), so no label gradient "
    "reached the layers below at the start (Local/Local with mu = 0 collapses, 12.6%). "
    "In the converged run one of Local/Local's three seeds (seed 2: 11.35%) collapsed the same way "
    "within its first 100 steps (objective -log 10), in float32 and in float64 alike; with the "
    "seed's rate 0.01 instead of the protocol's 0.05 the same seed and batches learn (mean "
    "objective over steps 276-300: -0.41 against -2.303; `python scripts/dkm_first_steps.py "
    "cdkm-mnist --normalisation local/local --repeat 2`, then with `--learning-rate 0.01` or "
    "`--dtype float64`), so the cause is the protocol's rate, five times the seed's, not the "
    "precision; its mean includes that seed (and it still collapses after the fix below). One "
    "configuration (Batch/Location, seed 2) diverged in float32 (a non-finite first-layer K_ii at "
    "epoch 2, step 471), was trained again in float64 and diverged at the same step. A third bug, "
    "found from that step and fixed with a test that fails before: a statistic that vanishes (the "
    "first layer's border locations are zero in every image) was clamped to the smallest float, "
    "so the normaliser's squared factor was 1 / tiny (4.5e307 in float64), which an upstream "
    "gradient of a few units overflowed to inf, and inf times the block's zero derivative made "
    "NaN parameters; a vanishing statistic now gives a zero factor. Resumed from its epoch-1 "
    "float64 state, step 471 then trains (objective -0.343); the configuration was trained "
    "again from its initialisation in float32, as every other. The converged protocol is not "
    "trained to a plateau: 2 epochs (the second at a tenth of the rate) are what 48 "
    "configurations allow on CPU cores, and every configuration's mean objective still rises "
    "from the first epoch to the second (nu = 1: -0.49 to -0.21; NNGP: -1.10 to -0.83, means "
    "over 3 seeds); with a stack 16 times narrower than the seed's this is why the accuracies "
    "sit 3 points below the seed's (96.2% against 99.2% at nu = 1), and the orderings, not the "
    "levels, are what it judges. All 48 configurations finished (session 15), every one in "
    "float32: the five orderings hold (learned nu 96.2 / 96.3 against the NNGP's 85.5; GAP "
    "96.41 +- 0.08 above the linear top's 96.22 +- 0.33, within one standard error as the seed's "
    "99.20 against 99.13; categorical 96.22 above Gaussian 94.63; Batch/Batch above "
    "Batch/Location 93.69). The seed's whole normalisation ranking (Batch/Batch, None/None, "
    "Local/Image, Local/Local, Batch/Location, all within 0.15 points) is not ours: Local/Image "
    "leads (97.00), then Batch/Batch, None/None (94.27), Batch/Location and Local/Local (the "
    "collapsed seed); at 2 epochs the schemes differ by more than the seed's spread. The "
    "rescalings lie within 0.8 points of each other (95.7-96.5; seed: 99.03-99.20), and more "
    "inducing points help (4/8/16: 95.44, 8/16/32: 96.29), as in the seed's table 2. "
    "The ten-epoch ablation below (declared in session 19, before it ran; finished in session "
    "21, float32, 172-264 s per epoch on one core) answers how far the 2-epoch levels were from "
    "the narrow stack's own: nu = 1 reaches 97.70 +- 0.41% (seeds 98.16, 98.05, 96.88; test "
    "log likelihood -0.077 +- 0.014) against 96.22 +- 0.33 at 2 epochs and the seed's 99.20, "
    "and the NNGP limit 86.95 +- 1.60% (90.02, 84.64, 86.18; -0.483) against 85.47 +- 0.57: "
    "the gap between learned nu and the NNGP is 10.8 points in mean at 10 epochs as at 2, and "
    "it holds in every seed (the seed's: 27). The nu = 1 curves flatten: the epoch objectives of "
    "seeds 0-2 end -0.128, -0.125, -0.116, -0.115; -0.136, -0.133, -0.124, -0.122; -0.191, "
    "-0.186, -0.174, -0.172 (0.001-0.002 between the last two, at a hundredth of the rate). The "
    "NNGP's do not: seed 0 ends -0.65, -0.65, seed 1 -0.94, -0.86 and seed 2 -1.14, -0.82, "
    "-0.75, -0.75 after a fall at epoch 7, within a rate; its accuracy is as noisy "
    "as its curves (a copy of seed 2 continued from the same epoch-7 state on another "
    "machine's CPU, float32 rounding the only difference, ended at 82.80% and -0.642 against "
    "this run's 86.18% and -0.503). So ten epochs lift the learned-nu model to within 1.5 "
    "points of the seed's 99.2% with a stack 16 times narrower, while the NNGP limit stays "
    "where 2 epochs left it. Epochs 1-3 of the three nu = 1 configurations and that copy ran "
    "on the 16 CPU cores of a lent GPU machine (4 processes of 3 threads, session 21; the "
    "per-epoch states in the run folder's in_progress/ carried them over), the rest here."
)


def shift_statistics() -> tuple[Statistic, ...]:
    """Seed 001 sec. 4.2: per model, TLL, ECE and accuracy averaged over MNIST's rotations and
    over Fashion-MNIST's corruptions (``level_means.csv``: one row per repeat); and the ADGP's and
    MC dropout's TLL per corruption family."""
    names = {"adgp": "ADGP", "network": "network", "dropout": "dropout",
             "ensemble": "ensemble", "dgp": "inducing-point DGP"}  # fmt: skip
    shifts = (("MNIST rotations", "mnist", "rotation"),
              ("Fashion corruptions", "fashion-mnist", "corruptions"))  # fmt: skip
    found = []
    for shift_label, dataset, shift in shifts:
        for metric, label, better in (("tll", "TLL", "higher"), ("ece", "ECE", "lower"),
                                      ("accuracy", "accuracy", "higher")):  # fmt: skip
            for model, name in names.items():
                found.append(
                    Statistic(
                        f"{name} {label}, {shift_label}",
                        {"dataset": dataset, "shift": shift, "model": model},
                        metric,
                        better=better,
                        table="level_means.csv",
                    )
                )
    for family in ("contrast", "gaussian-blur", "gaussian-noise", "impulse-noise"):
        for model in ("adgp", "dropout"):  # where the corruptions' average comes from
            found.append(
                Statistic(
                    f"{names[model]} TLL, Fashion {family}",
                    {"dataset": "fashion-mnist", "shift": family, "model": model},
                    "tll",
                    table="level_means.csv",
                )
            )
    return tuple(found)


def final_regret(name: str, function: str, strategy: str) -> Statistic:
    """Median regret after the last BO step of ``strategy`` on ``function`` (fig. 4.2)."""
    where = {"function": function, "strategy": strategy, "step": LAST}
    return Statistic(f"{name} {strategy}", where, "regret", "median", better="lower")


def residual_depth() -> tuple[Statistic, ...]:
    """Median joint LPD per test point of the residual DGP per (N, hidden layers), fig. 3.4."""
    seed = {(400, 0): 1.50, (400, 1): 1.80, (800, 0): 1.50, (800, 3): 2.03}
    return tuple(
        Statistic(
            f"N={n} hidden={h} LPD",
            {"model": "residual", "num_train": n, "hidden_layers": h},
            "lpd",
            summary="median",
            seed_value=seed.get((n, h)),
        )
        for n in (100, 200, 400, 800)
        for h in (0, 1, 2, 3)
    )


def residual_vs_baseline() -> tuple[Statistic, ...]:
    """Median TLL per test point at N = 800, residual DGP against the eq. 3.5 baseline (fig. 3.5)."""
    return tuple(
        Statistic(
            f"{model} hidden={h} TLL",
            {"model": model, "num_train": 800, "hidden_layers": h},
            "tll",
            summary="median",
        )
        for h in (1, 2, 3)
        for model in ("residual", "baseline")
    )


_ONLY_800 = "--set 'num_train=[800]' --set 'baseline_hidden_layers=[1]' --set baseline_repeats=1"
RESIDUAL_ABLATIONS = (
    Ablation(
        "the seed's 1000 steps (short of the plateau)",
        {"steps": 1000, "num_train": [800], "baseline_hidden_layers": [1], "baseline_repeats": 1},
        f"{RUN} residual-dgp-sphere --protocol converged --set steps=1000 {_ONLY_800}",
    ),
    Ablation(
        "hidden-layer prior variance 10x (0.1)",
        {"hidden_variance": 0.1, "num_train": [800], "baseline_hidden_layers": [1],
         "baseline_repeats": 1},
        f"{RUN} residual-dgp-sphere --protocol converged --set hidden_variance=0.1 {_ONLY_800}",
    ),
    # Declared in session 10 after the converged run's first repeat showed depth neither helping
    # nor hurting at N = 100 (LPD 2.208 / 2.212 / 2.210 / 2.207), where the seed's falls: does a
    # looser hidden-layer prior let the deep models leave the identity and overfit?
    Ablation(
        "N = 100 with the hidden-layer prior variance 10x (0.1)",
        {"hidden_variance": 0.1, "num_train": [100], "baseline_hidden_layers": [1],
         "baseline_repeats": 1},
        f"{RUN} residual-dgp-sphere --protocol converged --set hidden_variance=0.1 "
        "--set 'num_train=[100]' --set 'baseline_hidden_layers=[1]' --set baseline_repeats=1",
    ),
)  # fmt: skip
RESIDUAL_DEPTH_CAUSE = (
    "At N = 100 depth neither helps nor hurts: the deep models stay at the identity their prior "
    "starts them at and recover the shallow one (median LPD 2.208 / 2.212 / 2.205 / 2.204 for "
    "0-3 hidden layers, within the repeats' spread of up to 0.007), and a 10 times looser "
    "hidden-layer prior (ablation below, declared before it ran) leaves it flat (2.208 / 2.208 / "
    "2.212 / 2.209); the seed's fall at small N, which it calls an optimisation failure, does "
    "not happen here. At N = 800 the rise with depth is reproduced (2.372 / 2.498 / 2.565 / "
    "2.576; the seed 1.50 to 2.03), at the 4000 steps the plateau rule needs (at the seed's "
    "1000 the curve is flat, the ablation below)."
)
RESIDUAL_NOTES = (
    "Training length. Earlier rounds trained 1000 steps (the seed's count) and found no gain from "
    "depth at N = 800 (LPD 2.054 / 2.037 / 2.037 for 0 / 1 / 2 hidden layers, one repeat). A first "
    "attempt at this protocol with 2000 steps was stopped after 4 fits because 3 of them failed "
    "the plateau rule (their noise variance was still falling); their test LPDs had been printed "
    "(shallow 2.354-2.357, one hidden layer 2.421), and the protocol was set to 4000 steps, the "
    "same for every cell, before any other cell ran. The ablation with the seed's 1000 steps "
    "below checks that the short training is what hid the gain, and it is: at 1000 steps (3 "
    "repeats, session 18) every one of the 12 residual fits fails the plateau rule (its loss "
    "still falling by 0.05-0.09 nats per point over the last tenth) and the median LPD at N = "
    "800 is 2.054 / 2.041 / 2.047 / 2.037 for 0-3 hidden layers, flat and 0.3-0.5 below the "
    "4000-step figures; the earlier rounds' 2.054 / 2.037 / 2.037 again. "
    "At 4000 steps (this run, 3 repeats): at N = 800 the median LPD rises with depth, 2.372 / "
    "2.498 / 2.565 / 2.576 for 0-3 hidden layers (the seed: 1.50 to 2.03), every repeat in the "
    "same order up to 2 hidden layers; at N = 400 one hidden layer is best (2.386 / 2.424 / 2.396 "
    "/ 2.402; the seed's is too, 1.80 against 1.50); at N = 200 and 100 depth changes the LPD by "
    "at most 0.008 (100: 2.208 / 2.212 / 2.205 / 2.204): the deep models stay at the identity "
    "their prior starts them at and recover the shallow one, where the seed reports a fall it "
    "calls an optimisation failure. Until session 42 the rule at N = 100 asked only that no "
    "hidden layer beat two (it held on the medians by 0.003 nats); a review found that one "
    "hidden layer stands above none there (2.212 against 2.208, within the repeats' spread of "
    "up to 0.007), and the rule now asks every depth against none at both sizes. With a 10 "
    "times looser hidden-layer prior (ablation below, declared before it ran) the N = 100 "
    "LPD is still flat (2.208 / 2.208 / 2.212 / 2.209): the deep models recover the shallow "
    "one here, so the seed's fall at small N is not reproduced by "
    "either prior. At N = 800 the looser prior (ablation below, declared before it ran; session "
    "20, 3 repeats) keeps the gain of one hidden layer and loses that of the next two: median "
    "LPD 2.375 / 2.500 / 2.497 / 2.509 for 0-3 hidden layers against the main run's 2.372 / "
    "2.498 / 2.565 / 2.576; one hidden layer beats the shallow model in every repeat (by "
    "0.12-0.18 nats), two and three layers stay within 0.02 of one (2.489-2.510); 9 of its 13 "
    "fits pass the plateau rule (3 deep fits and the baseline do not). So depth's gain at N = "
    "800 does not depend on the prior's scale, and the further gain of layers 2-3 comes with "
    "the tight prior that starts the hidden layers at the identity. 46 of 57 fits pass the "
    "plateau rule; the 11 that "
    "do not are 2 residual fits at N = 800 (2 and 3 hidden layers) and all 9 baselines (their "
    "loss still falling at 4000 steps)."
)

_UCI_RESIDUAL = "residual-dgp-uci --protocol converged --set 'models=[\"residual\"]'"
# Declared in session 12, before any of them ran, after the converged run (no curves then) showed
# the residual DGP's TLL falling with depth on concrete with its training loss per point rising
# (0.541 / 0.549 / 0.560): do the hidden layers move points at all, is their prior too tight, or
# are 1000 full-batch steps too few for them?
RESIDUAL_UCI_ABLATIONS = (
    Ablation(
        "residual only, the main settings again (training curves and layer diagnostics)",
        {"models": ["residual"]},
        f"{RUN} {_UCI_RESIDUAL}",
    ),
    Ablation(
        "residual, hidden-layer prior variance 10x (0.1)",
        {"models": ["residual"], "hidden_variance": 0.1},
        f"{RUN} {_UCI_RESIDUAL} --set hidden_variance=0.1",
    ),
    Ablation(
        "residual, hidden-layer prior variance 100x (1.0, the output layer's)",
        {"models": ["residual"], "hidden_variance": 1.0},
        f"{RUN} {_UCI_RESIDUAL} --set hidden_variance=1.0",
    ),
    Ablation(
        "residual on concrete, 3x the seed's epochs (3000)",
        {"models": ["residual"], "datasets": ["concrete"], "epochs": 3000},
        f"{RUN} {_UCI_RESIDUAL} --set 'datasets=[\"concrete\"]' --set epochs=3000",
    ),
    # Declared after the first ablation showed 15 of its 18 fits (every yacht fit) failing the
    # plateau rule at 1000 steps, before any 3000-step fit had run.
    Ablation(
        "residual on yacht, 3x the seed's epochs (3000)",
        {"models": ["residual"], "datasets": ["yacht"], "epochs": 3000},
        f"{RUN} {_UCI_RESIDUAL} --set 'datasets=[\"yacht\"]' --set epochs=3000",
    ),
    # Declared in session 22, before it ran: the cause's untested case, the looser prior (0.1,
    # which made depth help on concrete at 1000 epochs) at the 3000 epochs where every concrete
    # fit converged under the tight one; reported whatever it shows, the verdict unchanged.
    Ablation(
        "residual on concrete, 3000 epochs, hidden-layer prior variance 0.1",
        {"models": ["residual"], "datasets": ["concrete"], "epochs": 3000, "hidden_variance": 0.1},
        f"{RUN} {_UCI_RESIDUAL} --set 'datasets=[\"concrete\"]' --set epochs=3000 "
        "--set hidden_variance=0.1",
    ),
)

RESIDUAL_UCI_CAUSE = (
    "The ablations (residual DGP only; the first reruns the main settings and gives the same "
    "TLLs to 3 decimals, with curves and layer diagnostics) point to two causes. (1) Training "
    "length: at the seed's 1000 epochs (full batches: 1000 steps) 15 of the 18 residual fits fail "
    "the plateau rule, every yacht fit by 0.02-0.05 nats per point over the last tenth and every "
    "deep concrete fit by 0.006-0.012, while the shallow concrete fits have converged; the deep "
    "models are still descending (their ELBO per point 0.549-0.564 against the shallow one's "
    "0.541-0.546). At 3000 epochs on concrete all 9 fits converge and the depth trend is flat, "
    "not falling: median TLL -0.352 / -0.363 / -0.354 for depths 1-3 (the 3-layer model's two "
    "fields returned to the identity, hidden KL 0; the 2-layer one moves points by 0.35 rad for a "
    "slightly better ELBO, 0.528 against 0.532, and a slightly worse TLL). (2) The hidden-layer "
    "prior: zonal starts the fields near the identity with a total prior variance of 0.01. With "
    "0.1 or 1.0 (the output layer's) the fields move points 2-4 times further and depth helps on "
    "concrete at 1000 epochs, -0.364 / -0.331 / -0.342 and -0.364 / -0.336 / -0.337: the seed's "
    "direction from 1 to 2 layers (flat from 2 to 3), by 0.03 nats, about the spread between "
    "splits. On yacht the TLL rises with depth under every prior (0.181 / 0.557 / 0.504 at 0.01, "
    "0.181 / 0.552 / 0.578 at 0.1, 0.181 / 0.553 / 0.613 at 1.0) and so does the Euclidean DGP's "
    "(0.494 / 1.524 / 1.229). At 3000 epochs on yacht the shallow fits converge and depth "
    "helps more, 0.273 / 0.910 / 0.841 (4 of the 6 deep fits still descending by 0.006-0.015 "
    "nats per point), so the seed's fall on yacht is not reproduced by any setting tried. "
    "Last, the looser prior at 3000 epochs on concrete (the last ablation, declared before it "
    "ran): the gain that 0.1 gave at 1000 epochs does not survive training to convergence (7 of 9"
    " fits pass the plateau rule): median TLL -0.354 / -0.370 / -0.382 for depths 1-3, depth 2 "
    "below depth 1 on every split (by 0.005-0.029 nats) and depth 3 on two of three (split 2: "
    "-0.309 against -0.327). The deep models contain the shallow one (fields at the identity), "
    "yet 4 of the 6 deep fits end at a higher training loss per point than their split's 1-layer "
    "fit (by 0.002-0.041) while their fields move points by 0.26-0.68 rad, and the 2 that end "
    "lower (by 0.009-0.010) have the worse test TLLs (-0.374 against -0.354, -0.418 against "
    "-0.365): on concrete, trained to convergence, neither prior makes depth help, and the looser"
    " prior's gain at 1000 epochs was a stage of training."
)

BOSTON_ADGP = "--set 'datasets=[\"boston\"]' --set 'models=[\"ADGP-3\"]'"
#: Table 1's two larger sets, the converged protocol's second run (session 23): the same steps,
#: splits and M as the main run, which holds the three small sets. Its cost, measured on its
#: 12 fits (batches of 1024 rows, one core each): ADGP-3 750-920 s, DGP-3 1,800-2,010 s.
UCI_LARGE_PART = Ablation(
    "power and protein (table 1's larger sets, same settings)",
    {"datasets": ["power", "protein"]},
    f'{RUN} uci-dgp --protocol converged --set \'datasets=["power","protein"]\'',
    completes=True,
    cpu_hours=4.6,
)
# Fixed before these ran, after the converged run showed boston's ADGP-3 behind the seed with its
# network stage's test MSE at 0.23-0.34 and its ELBO stage failing the plateau rule.
UCI_ABLATIONS = (
    UCI_LARGE_PART,
    Ablation(
        "boston ADGP-3, ELBO stage 4x the seed's (20000 steps)",
        {"datasets": ["boston"], "models": ["ADGP-3"], "elbo_steps": 20000},
        f"{RUN} uci-dgp --protocol converged {BOSTON_ADGP} --set elbo_steps=20000",
    ),
    Ablation(
        "boston ADGP-3, network stage a tenth of the seed's (2000 steps)",
        {"datasets": ["boston"], "models": ["ADGP-3"], "network_steps": 2000},
        f"{RUN} uci-dgp --protocol converged {BOSTON_ADGP} --set network_steps=2000",
    ),
    # Declared before it ran (session 10), to test the split-variance cause directly: the
    # seed's 5 splits of boston, both models (splits 0-2 are the main run's: every fit seeds
    # itself from its dataset, split and model).
    Ablation(
        "boston, the seed's 5 splits",
        {"datasets": ["boston"], "num_splits": 5},
        f"{RUN} uci-dgp --protocol converged --set 'datasets=[\"boston\"]' --set num_splits=5",
    ),
)
