"""Harmonics tour: the harmonic core's measured accuracy (the first ``zonal demo``, kept as an experiment).

Three tables: Gegenbauer polynomials against scipy; the Funk-Hecke eigenvalues of seed 000 tables
C.1 (arc-cosine kernel) and C.2 (ReLU) by quadrature and by closed form beside the printed values;
and the orthonormality (exact quadrature) and addition-theorem errors of ``SphericalHarmonics`` in
several dimensions. About half a minute on one core.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

# Seed 000 tables C.1 and C.2, analytical columns for n = 0, 1, 2, 4 (d = 3, 5, 7).
SEED_TABLE_C1 = {3: [0.375, 0.167, 0.0234, 0.000651], 5: [0.352, 0.1, 0.00977, 0.000153],
                 7: [0.342, 0.0714, 0.00534, 5.34e-05]}  # fmt: skip
SEED_TABLE_C2 = {3: [0.25, 0.167, 0.0625, -0.0104], 5: [0.188, 0.1, 0.0312, -0.00391],
                 7: [0.156, 0.0714, 0.0195, -0.00195]}  # fmt: skip
TABLE_DEGREES = [0, 1, 2, 4]
GEGENBAUER_ALPHAS = [0.5, 1.0, 1.5, 4.0, 9.0]
HARMONIC_CASES = [(3, 30), (4, 12), (5, 8), (8, 4), (10, 3)]


def _arccos_shape(t: Any) -> Any:
    import torch

    t = t.clamp(-1, 1)
    return (torch.sqrt(1 - t * t) + t * (math.pi - torch.arccos(t))) / math.pi


def gegenbauer_accuracy() -> list[dict[str, float]]:
    """Sup-norm relative error of C_n^alpha, n <= 100, against scipy, per alpha."""
    import torch
    from scipy.special import eval_gegenbauer

    from zonal.harmonics import gegenbauer

    grid = torch.linspace(-1, 1, 2001, dtype=torch.float64)
    rows = []
    for alpha in GEGENBAUER_ALPHAS:
        ours = gegenbauer(grid, 100, alpha).numpy()
        reference = eval_gegenbauer(np.arange(101)[None], alpha, grid.numpy()[:, None])
        error = (np.abs(ours - reference).max(0) / np.abs(reference).max(0)).max()
        rows.append({"alpha": alpha, "relative_error": float(error)})
    return rows


def funk_hecke_table() -> list[dict[str, float]]:
    """Arc-cosine and ReLU eigenvalues by quadrature and closed form beside seed tables C.1 / C.2."""
    from zonal.harmonics import arccos_eigenvalues, funk_hecke, relu_coefficients

    def relu(t: Any) -> Any:
        return t.clamp(min=0)

    rows = []
    for d in SEED_TABLE_C1:
        arc_quadrature = funk_hecke(_arccos_shape, d, 4, num_nodes=400)
        arc_closed = arccos_eigenvalues(d, 4)
        relu_quadrature = funk_hecke(relu, d, 4, kinks=(0.0,))
        relu_closed = relu_coefficients(d, 4)
        for i, n in enumerate(TABLE_DEGREES):
            rows.append({
                "d": d, "n": n,
                "arccos_quadrature": float(arc_quadrature[n]),
                "arccos_closed_form": float(arc_closed[n]),
                "seed_c1": SEED_TABLE_C1[d][i],
                "relu_quadrature": float(relu_quadrature[n]),
                "relu_closed_form": float(relu_closed[n]),
                "seed_c2": SEED_TABLE_C2[d][i],
            })  # fmt: skip
    return rows


def harmonics_accuracy(ambient_dim: int, max_degree: int) -> dict[str, float]:
    """M, orthonormality error, addition-theorem error and seconds to evaluate 10k points."""
    import torch

    from zonal.harmonics import SphericalHarmonics, zonal_harmonic
    from zonal.harmonics.sphere_quadrature import sphere_quadrature

    harmonics = SphericalHarmonics(ambient_dim, max_degree)
    points, weights = sphere_quadrature(ambient_dim, 2 * max_degree)
    values = harmonics(torch.from_numpy(points))  # [Q, M]
    gram = values.T @ (torch.from_numpy(weights)[:, None] * values)  # [M, M]
    orthonormality = float((gram - torch.eye(len(gram), dtype=gram.dtype)).abs().max())
    x = torch.randn(10_000, ambient_dim, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    start = time.perf_counter()
    phi = harmonics(x)  # [10k, M]
    seconds = time.perf_counter() - start
    expected = zonal_harmonic(x[:20] @ x[20:40].T, max_degree, ambient_dim)  # [20, 20, L + 1]
    addition = max(
        float((phi[:20, harmonics.levels == n] @ phi[20:40, harmonics.levels == n].T
               - expected[..., n]).abs().max())
        for n in range(max_degree + 1)
    )  # fmt: skip
    return {
        "d": ambient_dim,
        "degree": max_degree,
        "num_harmonics": harmonics.num_features,
        "orthonormality_error": orthonormality,
        "addition_error": addition,
        "seconds_10k": seconds,
    }


def format_tour(
    gegenbauer_rows: list[dict[str, float]],
    funk_hecke_rows: list[dict[str, float]],
    harmonic_rows: list[dict[str, float]],
) -> str:
    """The three tables as the text the first ``zonal demo`` printed."""
    lines = ["zonal harmonics tour: harmonic analysis on S^{d-1}", ""]
    lines.append("1. Gegenbauer C_n^alpha, n <= 100, 2001 points of [-1, 1], vs scipy.special")
    lines.append("   alpha | sup-norm relative error")
    lines += [f"   {row['alpha']:5.1f} | {row['relative_error']:.1e}" for row in gegenbauer_rows]
    lines += [
        "",
        "2. Funk-Hecke eigenvalues beside seed 000 tables C.1 (arc-cosine) and C.2 (ReLU)",
    ]
    lines.append(
        "   d | n | arc-cos quad | arc-cos closed | seed C.1 | ReLU quad  | ReLU closed | seed C.2"
    )
    for row in funk_hecke_rows:
        lines.append(
            f"   {row['d']} | {row['n']} | {row['arccos_quadrature']:12.4g} | "
            f"{row['arccos_closed_form']:14.4g} | {row['seed_c1']:8.3g} | "
            f"{row['relu_quadrature']:10.4g} | {row['relu_closed_form']:11.4g} | "
            f"{row['seed_c2']:8.3g}"
        )
    lines += ["", "3. SphericalHarmonics: orthonormality by exact quadrature, addition theorem"]
    lines.append("   d | degree |    M | max|Gram - I| | addition error | eval 10k points")
    for row in harmonic_rows:
        lines.append(
            f"  {row['d']:2d} | {row['degree']:6d} | {row['num_harmonics']:4d} | "
            f"{row['orthonormality_error']:13.1e} | {row['addition_error']:14.1e} | "
            f"{row['seconds_10k']:8.3f} s"
        )
    lines += ["", "All errors are at rounding level; the test suite asserts them (make test)."]
    return "\n".join(lines) + "\n"


def _paper_reference() -> dict[str, dict[str, float]]:
    c1 = {f"arccos_eigenvalue.d{d}.n{n}": values[i]
          for d, values in SEED_TABLE_C1.items() for i, n in enumerate(TABLE_DEGREES)}  # fmt: skip
    c2 = {f"relu_coefficient.d{d}.n{n}": values[i]
          for d, values in SEED_TABLE_C2.items() for i, n in enumerate(TABLE_DEGREES)}  # fmt: skip
    return {"seed 000 table C.1": c1, "seed 000 table C.2": c2}


@register_experiment(
    "harmonics-tour",
    summary="Accuracy of the harmonic core: Gegenbauer vs scipy, Funk-Hecke eigenvalues, "
    "orthonormality and addition theorem of SphericalHarmonics",
    quick={"seed": 0},
    paper=_paper_reference(),
    headline=("gegenbauer_max_relative_error", "harmonics_max_orthonormality_error"),
)
def run_harmonics_tour(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Compute the three tables, write them (CSV and ``tour.txt``) and return the worst errors."""
    gegenbauer_rows = gegenbauer_accuracy()
    funk_hecke_rows = funk_hecke_table()
    harmonic_rows = [harmonics_accuracy(d, degree) for d, degree in HARMONIC_CASES]
    run_dir.save_table("gegenbauer.csv", gegenbauer_rows)
    run_dir.save_table("funk_hecke.csv", funk_hecke_rows)
    run_dir.save_table("harmonics.csv", harmonic_rows)
    run_dir.save_text("tour.txt", format_tour(gegenbauer_rows, funk_hecke_rows, harmonic_rows))
    closed_vs_quadrature = max(
        max(abs(row["arccos_quadrature"] - row["arccos_closed_form"]),
            abs(row["relu_quadrature"] - row["relu_closed_form"]))
        for row in funk_hecke_rows
    )  # fmt: skip
    return {
        "gegenbauer_max_relative_error": max(row["relative_error"] for row in gegenbauer_rows),
        "funk_hecke_max_quadrature_vs_closed_form": closed_vs_quadrature,
        "harmonics_max_orthonormality_error": max(
            row["orthonormality_error"] for row in harmonic_rows
        ),
        "harmonics_max_addition_error": max(row["addition_error"] for row in harmonic_rows),
        "arccos_eigenvalue": _by_dimension(funk_hecke_rows, "arccos_closed_form"),
        "relu_coefficient": _by_dimension(funk_hecke_rows, "relu_closed_form"),
    }


def _by_dimension(rows: list[dict[str, float]], key: str) -> dict[str, dict[str, float]]:
    """``{"d3": {"n0": value, ...}, ...}``: metric names that match the paper reference's keys."""
    nested: dict[str, dict[str, float]] = {}
    for row in rows:
        nested.setdefault(f"d{row['d']}", {})[f"n{row['n']}"] = row[key]
    return nested
