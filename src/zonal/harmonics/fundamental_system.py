"""Fundamental systems of points for the spherical harmonics of one degree (seed 001 sec. 3.2.1).

A set eta_1..eta_N (N = N_n^d) on S^{d-1} is a fundamental system of degree n when the Gram matrix
G_ij = Z_n(eta_i . eta_j) is non-singular (seed 001 eq. 3.14); then the zonal functions
Z_n(eta_i . x) span the harmonics of degree n (seed 001 theorem 3).

Construction (zonal's own): seed 001 algorithm 1 adds, one at a time, the point that maximises
det G. Over a finite candidate set that greedy rule is exactly a pivoted Cholesky factorisation of
the candidates' Gram matrix (the pivot with the largest Schur-complement diagonal maximises the new
determinant), which is what ``build_fundamental_system`` runs, over ``oversample * N`` uniformly
random candidates plus the north pole. ``refine_steps`` optionally follows it with gradient ascent on
log det G over the points themselves.

Systems are computed once per (ambient_dim, degree): ``load_fundamental_system`` looks in the set
shipped with the package (built by ``scripts/build_fundamental_systems.py``), then in the user cache
(checksum and shape verified; a corrupt file is recomputed), and only then computes and caches.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from zonal._validation import check_ambient_dim, check_degree
from zonal.harmonics.counts import gegenbauer_alpha, num_harmonics
from zonal.harmonics.gegenbauer import zonal_harmonic
from zonal.paths import cache_root

SHIPPED_ARCHIVE = Path(__file__).with_name("data") / "fundamental_systems.npz"


def _zonal_of_degree(t: np.ndarray, degree: int, ambient_dim: int) -> np.ndarray:
    """Z_n(t) for the single degree n (float64 numpy), without storing the lower degrees."""
    from zonal.harmonics.spherical_harmonics import _zonal_of_degree_inplace

    with torch.no_grad():
        values = _zonal_of_degree_inplace(
            torch.from_numpy(np.array(t, dtype=np.float64)), degree, gegenbauer_alpha(ambient_dim)
        )
    return values.numpy()


def gram_matrix(points: np.ndarray, degree: int) -> np.ndarray:
    """G_ij = Z_n(eta_i . eta_j) = <Z_n(eta_i . ), Z_n(eta_j . )>_{L2}: [N, N]."""
    cosines = np.clip(points @ points.T, -1.0, 1.0)
    return _zonal_of_degree(cosines, degree, points.shape[1])


def _unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def build_fundamental_system(
    ambient_dim: int,
    degree: int,
    *,
    oversample: int = 8,
    min_candidates: int = 2000,
    refine_steps: int = 0,
    seed: int = 0,
    progress: bool = False,
) -> np.ndarray:
    """Greedy determinant maximisation (pivoted Cholesky) over random candidates: [N_n^d, d]."""
    d = check_ambient_dim(ambient_dim)
    n = check_degree(degree, "degree")
    size = num_harmonics(d, n)
    rng = np.random.default_rng([seed, d, n])
    num_candidates = max(oversample * size, min_candidates)
    north = np.zeros((1, d))
    north[0, -1] = 1.0
    candidates = np.concatenate([north, _unit_rows(rng.standard_normal((num_candidates, d)))])
    residual = np.full(len(candidates), float(size))  # Z_n(1) = N_n^d: the Gram diagonal
    factor = np.zeros((len(candidates), size))  # [C, N]
    pivots = []
    steps = range(size)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc=f"fundamental system d={d} n={n}", leave=False)
    for k in steps:
        pivot = int(np.argmax(residual))
        if residual[pivot] <= 1e-10 * size:
            raise RuntimeError(
                f"pivoted Cholesky stalled at {k}/{size} points for d={d}, n={n}; "
                "increase oversample"
            )
        pivots.append(pivot)
        column = _zonal_of_degree(np.clip(candidates @ candidates[pivot], -1, 1), n, d)  # [C]
        column -= factor[:, :k] @ factor[pivot, :k]
        factor[:, k] = column / math.sqrt(residual[pivot])
        residual -= factor[:, k] ** 2
        residual[pivots] = -np.inf
    points = candidates[pivots]
    if refine_steps:
        points = refine_fundamental_system(points, n, steps=refine_steps)
    return points


def refine_fundamental_system(points: np.ndarray, degree: int, steps: int = 100) -> np.ndarray:
    """Gradient ascent on log det G(eta) over the points (kept on the sphere by normalisation)."""
    d = points.shape[1]
    eta = torch.tensor(points, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.Adam([eta], lr=1e-3)
    for _ in range(steps):
        unit = eta / eta.norm(dim=1, keepdim=True)
        cosines = (unit @ unit.T).clamp(-1, 1)
        gram = zonal_harmonic(cosines, degree, d)[..., degree]
        loss = -torch.linalg.slogdet(gram)[1]
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return _unit_rows(eta.detach().numpy())


def default_cache_dir() -> Path:
    """The user cache root (``zonal.paths.cache_root``)."""
    return cache_root()


def _checksum(points: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(points, dtype=np.float64).tobytes()).hexdigest()


def _cache_path(cache_dir: Path, ambient_dim: int, degree: int) -> Path:
    return cache_dir / "fundamental_systems" / f"d{ambient_dim}_n{degree}.npz"


def _valid_points(points: object, ambient_dim: int, degree: int) -> bool:
    expected = (num_harmonics(ambient_dim, degree), ambient_dim)
    return (
        isinstance(points, np.ndarray)
        and points.shape == expected
        and bool(np.isfinite(points).all())
        and bool(np.allclose(np.linalg.norm(points, axis=1), 1.0, atol=1e-5))
    )


def _read_cached(path: Path, ambient_dim: int, degree: int) -> np.ndarray | None:
    """The cached points if the file is intact (checksum and shape), else None with a warning."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as archive:
            points = archive["points"]
            stored = str(archive["sha256"])
    except Exception as error:  # unreadable zip, missing key, truncated file
        warnings.warn(
            f"corrupt fundamental-system cache {path} ({error}); recomputing", stacklevel=3
        )
        return None
    if not _valid_points(points, ambient_dim, degree) or stored != _checksum(points):
        warnings.warn(
            f"corrupt fundamental-system cache {path} (checksum or shape mismatch); recomputing",
            stacklevel=3,
        )
        return None
    return points


def _write_cached(path: Path, points: np.ndarray) -> None:
    """Write atomically: a temporary file in the same folder, then an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
    try:
        with os.fdopen(handle, "wb") as stream:
            np.savez(stream, points=points, sha256=np.array(_checksum(points)))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@lru_cache(maxsize=1)
def _shipped() -> dict[str, np.ndarray]:
    if not SHIPPED_ARCHIVE.exists():
        return {}
    with np.load(SHIPPED_ARCHIVE, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


def shipped_key(ambient_dim: int, degree: int) -> str:
    """Name of a system inside the shipped archive."""
    return f"d{ambient_dim}_n{degree}"


def load_fundamental_system(
    ambient_dim: int,
    degree: int,
    *,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> np.ndarray:
    """The fundamental system of degree n on S^{d-1} as float64 unit vectors [N_n^d, d].

    Shipped set first, then the user cache, then computed (with a progress bar) and cached.
    """
    d = check_ambient_dim(ambient_dim)
    n = check_degree(degree, "degree")
    shipped = _shipped().get(shipped_key(d, n))
    if shipped is not None and _valid_points(shipped, d, n):
        return _unit_rows(shipped.astype(np.float64))
    path = _cache_path(Path(cache_dir) if cache_dir else default_cache_dir(), d, n)
    points = _read_cached(path, d, n)
    if points is None:
        points = build_fundamental_system(d, n, progress=progress)
        try:
            _write_cached(path, points)
        except OSError as error:
            warnings.warn(f"could not cache fundamental system at {path}: {error}", stacklevel=2)
    return points
