"""`zonal demo`: the main job, seed 000's point on real data in a few minutes.

It runs the ``main-benchmark`` experiment (``zonal.experiments.main_benchmark``) in its quick
preset into a new folder under ``./runs``: on yacht and concrete (three random 90/10 splits, the
same for every model), zonal's activated deep GP with 3 layers (ADGP-3, trained as a network, then
by the ELBO) and zonal's DGP-3 against GPyTorch's SVGP with an RBF-ARD kernel and GPyTorch's
DeepGP of the same depth. It prints one line per fitted model as it finishes, then the table of
test MSE, test log likelihood, training seconds and seconds to a common target test MSE (mean ±
std over the splits, seed 000 table 1's ADGP-3 and DGP-3 beside), which model wins what on each
dataset, and the run folder (report, CSV tables, traces and the figure of test MSE against
training seconds). About 5-10 minutes on one core; an interrupted demo resumes with the command
it prints. The harmonic core's accuracy tour is ``zonal experiment run harmonics-tour``.
"""

from __future__ import annotations

import sys

EXPERIMENT = "main-benchmark"
EXIT_INTERRUPTED = 130


def main() -> int | str:
    """Run the benchmark, print its table and where its files are; returns the exit status."""
    from zonal.experiments.errors import ExperimentError
    from zonal.experiments.main_benchmark import FIGURE_FILE, TABLE_FILE
    from zonal.experiments.run import DEFAULT_RUNS_ROOT, create_run, execute_run

    try:
        run = create_run(EXPERIMENT, runs_root=DEFAULT_RUNS_ROOT)
    except ExperimentError as error:
        return f"zonal demo: {error}"
    print(
        f"zonal demo: {EXPERIMENT} (quick preset) in {run.directory.path}: zonal's activated "
        "DGP-3 and DGP-3 against GPyTorch's SVGP (RBF-ARD) and DeepGP-3 on yacht and concrete, "
        "3 splits; 5-10 minutes on one core, one line per fitted model:",
        file=sys.stderr,
        flush=True,
    )
    try:
        result = execute_run(run)
    except KeyboardInterrupt:
        print(
            f"zonal demo: interrupted; resume with: zonal experiment run {EXPERIMENT} "
            f"--resume {run.directory.path}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except ExperimentError as error:
        return f"zonal demo: {error}"
    print(f"\nzonal demo: {EXPERIMENT}, {result.seconds:.0f} s\n")
    print((result.path / TABLE_FILE).read_text(encoding="utf-8"))
    print(
        f"Run folder: {result.path} (report.md, summary.csv, results.csv, traces.csv, "
        f"{FIGURE_FILE}: test MSE against training seconds)"
    )
    print("The harmonic core's accuracy tour: zonal experiment run harmonics-tour")
    return 0
