"""The arguments of ``zonal fit`` and ``zonal predict``, with their help: built from
``zonal.tabular.options``, so that ``zonal --help`` imports no torch."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from zonal.cli.fit import run_fit, run_predict
from zonal.tabular.options import AUTO_BUDGET

FIT_DESCRIPTION = """\
Fit a GP model to the rows of a table (CSV, TSV, NPZ or Parquet) and save it in one checkpoint for
`zonal predict`. CSV (TSV: tabs): a header row, then numbers. NPZ: one 1-D array per column, or
X [N, D] with optional columns (names), y and target (its name). Parquet needs pyarrow.

The task: a target of text labels, or of at most 10 integer values (each on at least 5 rows),
is classification (two classes: Bernoulli likelihood with a probit link; more: softmax over
one latent GP per class); any other numeric target is regression (Gaussian likelihood).
--likelihood overrides the detection.

Validation: --validation-fraction of the rows (stratified by class, seeded by --seed) is held out;
inputs and a regression target are standardised with the training rows. Every training keeps the
state with the best validation log likelihood (early stopping: a training stage ends when that
has not improved for 15 evaluations, or for a fifth of the stage's share of the budget); the
validation metrics (log likelihood, and MSE or accuracy) are printed and saved.

--model auto (the default) trains, within --budget seconds of wall clock in all:
  regression:      sgpr (one data pass; harmonic features, phase-truncated above about 11 inputs
                   so that the features reach degree 6), then exact (four kernel families on
                   every training row, stacked by their leave-one-out densities) up to 5000 rows
                   where its fit is predicted to take at most its share, then adgp for up to
                   20000 training rows; above, svgp (learned phase-truncated harmonics) for more
                   than about 11 inputs, svgp-activated for fewer; where no exact GP trained and
                   sgpr's validation log likelihood is within 0.1 nats per row of adgp's, svgp
                   (harmonic, ARD) within a fifth of the budget; then stacks them: the model
                   is the mixture sum_k w_k p_k(y | x) whose weights are the mean, over 200
                   Bayesian-bootstrap replicates of the scoring rows, of the weights that
                   maximise their log density, rounded to twentieths (one candidate alone
                   when the weights say so); on at most 128 training rows the exact GP is
                   fitted by MAP (--hyperpriors), its input scales kept by BIC (--ard-by-bic);
  classification:  svgp (harmonic, ARD), svgp-points (256 learned inducing points, chordal
                   squared-exponential kernel, ARD), then adgp for up to 20000 training rows;
                   then stacks them: class probabilities sum_k w_k p_k(c | x), the weights the
                   posterior mean of the mixture weights given the scoring rows' true classes
                   under a uniform Dirichlet prior.
Under auto half of the validation rows watch the candidates' early stopping and the other half
score, choose and stack them.
--budget auto (the default) is, for a regression of N rows, 30 s x sqrt(min(N, 1024) / 1024) (11.5 s
at 150 rows, 30 s from 1024: steps cost less on fewer rows); for classification 45 s per latent
function, one for two classes and C for C classes (each step costs about C times one function's).
Each candidate may use the time left divided by the candidates left. The SVGP candidates, the
exact GP (by BIC on at most 128 training rows) and adgp learn one scale per input column in the
sphere embedding (ARD; adgp in its first layer), and so does sgpr when an SVGP alone follows it
(by the bound of 1024 rows, then one pass); before adgp, sgpr skips the scales to leave the time
to the deep model; --no-ard turns ARD off.

A progress bar (objective, validation log likelihood, budget left) is shown on a terminal unless
--quiet. Ctrl-C keeps the best model so far as a complete checkpoint (exit code 130).

Tables too large for memory: --chunk-size ROWS reads DATA (one CSV file, several CSV / Parquet
partitions, or a folder of them) ROWS rows at a time and fits the one-pass SGPR (regression only;
--model auto means sgpr here, with ARD unless --no-ard): pass 1 checks every cell (a bad one names
its partition, line and global row) and standardises, pass 2 sums the SGPR's statistics, then
L-BFGS, then pass 3 scores the validation rows (each row held out with probability
--validation-fraction by a seeded hash of its row number). Pass 2 saves its progress beside the
checkpoint (CHECKPOINT.state): an interrupted fit resumes when the same command is run again, or
starts again with --restart. --budget does not apply.
"""


def budget(text: str) -> float | str | None:
    """``--budget``: positive seconds, ``auto`` (``default_budget``: by the task and the rows)
    or ``none`` for no wall-clock limit."""
    if text.strip().lower() == "none":
        return None
    if text.strip().lower() == AUTO_BUDGET:
        return AUTO_BUDGET
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(
            f"expected a positive number of seconds, 'auto' or 'none', got {text!r}"
        )
    return seconds


def add_fit_parser(commands: Any) -> None:
    from zonal.tabular.options import (
        BATCH_SIZE,
        DEFAULT_BUDGET,
        DEFAULT_VALIDATION_FRACTION,
        KERNELS,
        LIKELIHOODS,
        RECIPE_DEFAULTS,
        RECIPE_SUMMARIES,
        REGRESSION_BUDGET,
    )

    fit = commands.add_parser(
        "fit",
        help="fit a GP regression or classification model to a table (CSV, TSV, NPZ, Parquet) "
        "and save it",
        description=FIT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fit.add_argument(
        "data",
        type=Path,
        nargs="+",
        metavar="DATA",
        help="the training table (.csv, .tsv, .npz or .parquet); with --chunk-size, CSV / Parquet "
        "partitions or a folder of them",
    )
    fit.add_argument("--target", required=True, metavar="COLUMN", help="the column to predict")
    fit.add_argument(
        "--features",
        default=None,
        metavar="A,B,...",
        help="comma-separated input columns (default: every column but the target)",
    )
    fit.add_argument(
        "--model",
        choices=("auto", *RECIPE_SUMMARIES),
        default="auto",
        help="auto: chosen or stacked by validation (see above); "
        + "; ".join(f"{name}: {summary}" for name, summary in RECIPE_SUMMARIES.items())
        + " (sgpr: regression only)",
    )
    fit.add_argument(
        "--likelihood",
        choices=LIKELIHOODS,
        default=None,
        help="gaussian (regression), bernoulli (two classes) or softmax (classes); default: "
        "detected from the target column",
    )
    fit.add_argument(
        "--budget",
        type=budget,
        default=AUTO_BUDGET,
        metavar="SECONDS",
        help=f"wall-clock seconds for all training; 'auto' (the default): for regression "
        f"{REGRESSION_BUDGET:g} s x sqrt(min(rows, {BATCH_SIZE}) / {BATCH_SIZE}), for "
        f"classification {DEFAULT_BUDGET:g} s per latent function (one for two classes, C for C "
        "classes); or 'none': no "
        "wall clock, so that --seed reproduces the fit exactly (the steps and early stopping by "
        "evaluations end it)",
    )
    fit.add_argument(
        "--validation-fraction",
        type=float,
        default=DEFAULT_VALIDATION_FRACTION,
        metavar="F",
        help=f"share of the rows held out for early stopping and the model choice (default "
        f"{DEFAULT_VALIDATION_FRACTION:g}; 0: none)",
    )
    fit.add_argument(
        "--ard",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="learn one scale per input column in the sphere embedding (sgpr, exact, svgp, "
        "svgp-activated, svgp-points, adgp; default: on under --model auto where the rule above says, off "
        "for a named model)",
    )
    fit.add_argument(
        "--ard-by-bic",
        action="store_true",
        default=None,
        help="fit the exact GP without and with input scales and keep the fit the Bayesian "
        "information criterion prefers (the scales cost (D/2) log N for D varying columns); "
        "with --model exact, or under auto its exact GP (none for classification or above "
        "5,000 rows; on by default on at most 128 training rows); not with --ard or --no-ard; "
        "refused by the streamed fit",
    )
    fit.add_argument(
        "--hyperpriors",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="fit the exact GP by type-II MAP under log-normal priors on its input scales, noise "
        "and signal variance instead of maximum likelihood (default: on for auto's exact GP on at "
        "most 128 training rows, with --ard-by-bic; off otherwise; the evidence: "
        "docs/fit_evidence.md); an error with another --model; under auto only its exact GP "
        "reads it (none for classification or above 5,000 rows); not read by the streamed fit",
    )
    fit.add_argument(
        "--layers",
        type=int,
        default=None,
        metavar="L",
        help="number of GP layers of adgp / dgp (hidden width 5; default 2)",
    )
    fit.add_argument(
        "--kernel",
        choices=KERNELS,
        default="auto",
        help="auto: sgpr keeps the kernel with the larger bound, exact stacks four by their "
        "leave-one-out densities; the harmonic SVGPs use arc-cosine, svgp-points chordal-se; "
        "chordal-se / chordal-matern: exact and svgp-points (which also takes arccos)",
    )
    fit.add_argument(
        "--num-inducing",
        type=int,
        default=None,
        metavar="M",
        help="feature budget (default 512 harmonic features, 128 activated features)",
    )
    fit.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="L-BFGS iterations (sgpr, default 200) or Adam steps (default 1000; adgp and dgp "
        "run them twice: network, then ELBO; auto: 10 times the defaults, ended by the budget "
        "or early stopping)",
    )
    fit.add_argument(
        "--learning-rate",
        type=float,
        default=None,
        metavar="LR",
        help="the optimiser's learning rate (default: the recipe's, "
        + ", ".join(
            f"{name} {defaults['learning_rate']:g}" for name, defaults in RECIPE_DEFAULTS.items()
        )
        + ")",
    )
    fit.add_argument(
        "--batch-size", type=int, default=1024, metavar="B", help="minibatch size (default 1024)"
    )
    fit.add_argument(
        "--output",
        "-o",
        type=Path,
        default=None,
        metavar="CHECKPOINT",
        help="where to save the model (default: DATA with the suffix .zonal.pt)",
    )
    fit.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    fit.add_argument("--force", action="store_true", help="replace an existing checkpoint")
    fit.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar and no numerical warnings of GPyTorch / linear_operator",
    )
    fit.add_argument(
        "--chunk-size",
        type=int,
        default=None,
        metavar="ROWS",
        help="read DATA ROWS rows at a time and fit the SGPR (tables too large for memory; "
        "--model auto means sgpr; see above)",
    )
    fit.add_argument(
        "--restart",
        action="store_true",
        help="with --chunk-size: discard the saved progress of an interrupted fit",
    )
    fit.set_defaults(handler=run_fit)


def add_predict_parser(commands: Any) -> None:
    predict = commands.add_parser(
        "predict",
        help="predict a table's rows with a model saved by `zonal fit`",
        description="Write one row per input row: for regression the predictive mean and "
        "variance and the 95% interval (lower, upper), in the target's original units; for "
        "classification one probability column per class (prob_<label>) and the most probable "
        "class. The table needs the model's input columns (other columns are ignored; a target "
        "column of a classifier may hold only classes the model saw). Deep models (adgp, dgp) "
        "average --samples Monte Carlo draws of their inner layers, drawn from --seed: the same "
        "command gives the same numbers.",
    )
    predict.add_argument(
        "--samples",
        type=int,
        default=None,
        metavar="S",
        help="inner-layer draws of a deep model (default: the model's, 32)",
    )
    predict.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of a deep model's draws (default 0)"
    )
    predict.add_argument("checkpoint", type=Path, metavar="CHECKPOINT", help="from `zonal fit`")
    predict.add_argument(
        "data",
        type=Path,
        metavar="DATA",
        help="the table to predict (.csv, .tsv, .npz or .parquet)",
    )
    predict.add_argument(
        "--output",
        "-o",
        type=Path,
        default=None,
        metavar="PRED",
        help="the predictions (.csv or .npz; default: DATA with the suffix .predictions.csv)",
    )
    predict.add_argument(
        "--latent",
        action="store_true",
        help="variance and interval of the latent function, without the observation noise",
    )
    predict.add_argument("--force", action="store_true", help="replace an existing output file")
    predict.set_defaults(handler=run_predict)
