"""`zonal demo`: the main job, a short benchmark on real data that shows what zonal is for.

It runs the ``main-benchmark`` experiment (``zonal.experiments.main_benchmark``) in its quick preset
into a new folder under ``./runs``: on yacht and concrete (three random 90/10 splits), SGPR with
spherical-harmonic features, SVGP with activated Softplus features and GPyTorch's standard SVGP with
inducing points, beside seed 000 table 1's ADGP-1 and DGP-1. It prints the table of test MSE, test
log likelihood and training seconds, and the run folder (report, CSV tables, figure). A few minutes
on one core. The previous demo, a tour of the harmonic core's accuracy, is
``zonal experiment run harmonics-tour``.
"""

from __future__ import annotations

import sys

EXPERIMENT = "main-benchmark"
EXIT_INTERRUPTED = 130


def main() -> int | str:
    """Run the benchmark, print its table and where its files are; returns the exit status."""
    from zonal.experiments.errors import ExperimentError
    from zonal.experiments.main_benchmark import TABLE_FILE
    from zonal.experiments.run import DEFAULT_RUNS_ROOT, create_run, execute_run

    try:
        run = create_run(EXPERIMENT, runs_root=DEFAULT_RUNS_ROOT)
    except ExperimentError as error:
        return f"zonal demo: {error}"
    print(
        f"zonal demo: {EXPERIMENT} (quick preset) in {run.directory.path}; "
        "a few minutes on one core, one line per fitted model:",
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
    print(f"Run folder: {result.path} (report.md, summary.csv, results.csv, main_benchmark.png)")
    print("The harmonic core's accuracy tour: zonal experiment run harmonics-tour")
    return 0
