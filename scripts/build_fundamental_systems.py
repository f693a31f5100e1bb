"""Build the fundamental systems shipped with zonal (src/zonal/harmonics/data/).

Covers d = 2 to degree 512 (the circle: pathwise samples of a kernel with a slowly decaying
spectrum take up to 1024 features, so degree 511), d = 3 to degree 60, and every d in 4..20 up to
the highest degree whose cumulative number of harmonics stays within --budget (default 2100).
Points are stored as float32 (the loader renormalises them in float64; any point set with a
non-singular Gram matrix is a fundamental system, so rounding the points costs nothing). Prints the
condition number of each level's Gram matrix.

    .venv/bin/python scripts/build_fundamental_systems.py [--budget 2100] [--refine-steps 0]
        [--only-missing]

``--only-missing`` keeps the systems already in the archive and builds only the ones it lacks.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from zonal._files import atomic_writer
from zonal.harmonics.counts import num_harmonics
from zonal.harmonics.fundamental_system import (
    SHIPPED_ARCHIVE,
    build_fundamental_system,
    gram_matrix,
    shipped_key,
)

#: highest degree shipped on the circle (``zonal.sampling.truncation.DEFAULT_MAX_FEATURES`` / 2)
CIRCLE_DEGREES = 512


def shipped_degrees(ambient_dim: int, budget: int) -> int:
    """Highest degree shipped for ``ambient_dim``."""
    if ambient_dim == 2:
        return CIRCLE_DEGREES
    if ambient_dim == 3:
        return 60
    total, degree = 0, -1
    while total + num_harmonics(ambient_dim, degree + 1) <= budget:
        degree += 1
        total += num_harmonics(ambient_dim, degree)
    return degree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=2100)
    parser.add_argument("--refine-steps", type=int, default=0)
    parser.add_argument("--max-ambient-dim", type=int, default=20)
    parser.add_argument("--only-missing", action="store_true")
    parser.add_argument("--output", type=Path, default=SHIPPED_ARCHIVE)
    args = parser.parse_args()
    existing: dict[str, np.ndarray] = {}
    if args.only_missing and args.output.exists():
        with np.load(args.output) as archive:
            existing = {key: archive[key] for key in archive.files}
    arrays: dict[str, np.ndarray] = {}
    for ambient_dim in range(2, args.max_ambient_dim + 1):
        top = shipped_degrees(ambient_dim, args.budget)
        start = time.perf_counter()
        worst = 1.0
        for degree in range(top + 1):
            key = shipped_key(ambient_dim, degree)
            points = existing.get(key)
            if points is None:
                points = build_fundamental_system(
                    ambient_dim, degree, refine_steps=args.refine_steps
                ).astype(np.float32)
            unit = points.astype(np.float64)
            unit /= np.linalg.norm(unit, axis=1, keepdims=True)
            eigenvalues = np.linalg.eigvalsh(gram_matrix(unit, degree))
            worst = max(worst, eigenvalues[-1] / eigenvalues[0])
            arrays[key] = points
        print(
            f"d={ambient_dim:2d} degrees 0..{top:3d} "
            f"harmonics={sum(num_harmonics(ambient_dim, n) for n in range(top + 1)):5d} "
            f"worst Gram condition={worst:9.3g} ({time.perf_counter() - start:.1f} s)",
            flush=True,
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(args.output, "wb") as stream:
        np.savez_compressed(stream, **arrays)
    print(
        f"wrote {len(arrays)} systems to {args.output} ({args.output.stat().st_size / 1e6:.2f} MB)"
    )


if __name__ == "__main__":
    main()
