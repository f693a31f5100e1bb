"""Registers the ``spectra`` experiment, whose computation is ``zonal.experiments.spectra.run_spectra``.

The computation is imported only when the experiment runs, so the registry (and ``zonal experiment
list``) works whether or not that module is present and importable. If ``spectra.py`` ever registers
itself, delete this module.

The seed's figures are qualitative; the reference values below are read from the figures' text. A
metric of ``run_spectra`` named like one of the quantities is shown beside it in the report.
"""

from __future__ import annotations

from typing import Any

from zonal.experiments.errors import ExperimentError
from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

PAPER: dict[str, dict[str, Any]] = {
    "seed 002 figure 1": {
        # "after only 10 frequencies the decay is more than three orders of magnitude" (d = 10)
        "ntk_d10_level10_relative_eigenvalue": "< 1e-3",
        # "by adding more depth the decay rate becomes slower"
        "ntk_deeper_decays_slower": True,
    },
    "seed 000 figure 8": {
        # "Matérn-5/2's spectrum contains non-zero coefficients for all spherical harmonic levels"
        "matern52_zero_levels": "none",
        # "Softplus and ReLU ... only have non-zero coefficients for degree 0 and 1, followed by all
        # even degrees"; the arc-cosine kernel shares the pattern
        "relu_zero_levels": "odd levels >= 3",
        "softplus_zero_levels": "odd levels >= 3",
        "arccos_zero_levels": "odd levels >= 3",
    },
}


@register_experiment(
    "spectra",
    summary="Eigenvalue spectra: continuous-depth vs deep NTK decay; Matérn-5/2, arc-cosine, "
    "ReLU and Softplus levels",
    quick={"full": False},
    full={"full": True},
    paper=PAPER,
)
def run_spectra_experiment(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Call ``run_spectra(run_dir.path, full=...)``, which writes its own tables and figures."""
    try:
        from zonal.experiments.spectra import run_spectra
    except ModuleNotFoundError as exc:
        if exc.name != "zonal.experiments.spectra":
            raise
        raise ExperimentError(
            "the spectra experiment needs zonal.experiments.spectra, which is not installed yet"
        ) from exc
    return run_spectra(run_dir.path, full=config["full"])
