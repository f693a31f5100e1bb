r"""Fundamental systems of points for the spherical harmonics of one degree (seed 001 sec. 3.2.1).

A set :math:`\eta_1, \dots, \eta_N` (:math:`N = N_n^d`) on :math:`\mathbb{S}^{d-1}` is a fundamental
system of degree :math:`n` when the Gram matrix :math:`G_{ij} = Z_n(\eta_i \cdot \eta_j)` is
non-singular (seed 001 eq. 3.14); then the zonal functions :math:`Z_n(\eta_i \cdot x)` span the
harmonics of degree :math:`n` (seed 001 theorem 3).

Construction (zonal's own): seed 001 algorithm 1 adds, one at a time, the point that maximises
:math:`\det G`. Over a finite candidate set that greedy rule is exactly a pivoted Cholesky
factorisation of the candidates' Gram matrix (the pivot with the largest Schur-complement diagonal
maximises the new determinant), which is what ``build_fundamental_system`` runs, over
``oversample * N`` uniformly random candidates plus the north pole. ``refine_steps`` optionally
follows it with gradient ascent on :math:`\log \det G` over the points themselves.

Systems are computed once per (ambient_dim, degree): ``load_fundamental_system`` looks in the set
shipped with the package (built by ``scripts/build_fundamental_systems.py``), then in the user cache
(checksum and shape verified; a corrupt file is recomputed), and only then computes and caches.

Cost. With :math:`N = N_n^d` points and :math:`C = \max(8 N, 2000) + 1` candidates the greedy loop
holds the :math:`C \times N` Cholesky factor (:math:`8 C N` bytes) and reads about :math:`C N^2 / 2`
of its entries. :math:`N_n^d` grows like :math:`d^n / n!`, so one more degree in a high dimension
can be out of reach: :math:`d = 25`, :math:`n = 3` is 2900 points (0.5 GiB, about a minute);
:math:`d = 50`, :math:`n = 3` is 22050 points (29 GiB, many hours). ``estimate_build``
gives these figures before any work, and a build that cannot finish (more memory than the machine
has available, or longer than ``MAX_BUILD_SECONDS``) raises ``FundamentalSystemTooLargeError``.
"""

from __future__ import annotations

import hashlib
import math
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from zonal._files import atomic_writer
from zonal._validation import check_ambient_dim, check_degree
from zonal.harmonics.counts import gegenbauer_alpha, num_harmonics
from zonal.harmonics.gegenbauer import zonal_harmonic
from zonal.harmonics.recurrence import zonal_of_degree
from zonal.paths import cache_root

SHIPPED_ARCHIVE = Path(__file__).with_name("data") / "fundamental_systems.npz"
OVERSAMPLE = 8  # candidates per point of the system
MIN_CANDIDATES = 2000
#: the greedy loop's sustained speed, in float64 bytes read per second (measured ~8e9 on one core)
BYTES_PER_SECOND = 8e9
#: a build estimated to take longer than this is refused unless asked for (``max_seconds=None``)
MAX_BUILD_SECONDS = 3600.0
_GIB = 2.0**30


@dataclass(frozen=True)
class BuildEstimate:
    """What building one fundamental system costs, before it is built (``estimate_build``).

    Attributes:
        ambient_dim: d.
        degree: n.
        num_points: N_n^d, the size of the system.
        num_candidates: C, the random candidates the greedy loop chooses from.
        memory_bytes: peak memory of the loop (the C x N factor and the C x d candidates).
        seconds: the loop's time at ``BYTES_PER_SECOND`` (C N^2 / 2 factor entries read).
    """

    ambient_dim: int
    degree: int
    num_points: int
    num_candidates: int
    memory_bytes: int
    seconds: float


class FundamentalSystemTooLargeError(ValueError):
    """A fundamental system that is neither shipped nor cached cannot be built on this machine."""

    def __init__(self, estimate: BuildEstimate, reason: str) -> None:
        self.estimate = estimate
        d, n = estimate.ambient_dim, estimate.degree
        super().__init__(
            f"cannot build the fundamental system of degree {n} on S^{d - 1} (ambient_dim={d}): "
            f"N_n^d = {estimate.num_points} points need about "
            f"{estimate.memory_bytes / _GIB:.1f} GiB of memory and "
            f"{_duration(estimate.seconds)} of computation; {reason}. Use fewer features (a smaller "
            "num_inducing or max_degree), or SparseSphericalHarmonicFeatures (phase-truncated "
            "levels need no fundamental system). A build that is only slow can be run once with "
            "load_fundamental_system(..., max_seconds=None), which caches it."
        )


def estimate_build(
    ambient_dim: int,
    degree: int,
    *,
    oversample: int = OVERSAMPLE,
    min_candidates: int = MIN_CANDIDATES,
) -> BuildEstimate:
    """Memory and time of ``build_fundamental_system(ambient_dim, degree)``, computed from N_n^d."""
    d = check_ambient_dim(ambient_dim)
    n = check_degree(degree, "degree")
    size = num_harmonics(d, n)
    candidates = max(oversample * size, min_candidates) + 1  # + the north pole
    memory = 8 * candidates * (size + d + 4)  # factor [C, N], candidates [C, d], four [C] vectors
    entries = candidates * (size * size / 2 + size * (n + d))  # factor reads + zonal columns
    return BuildEstimate(d, n, size, candidates, memory, 8 * entries / BYTES_PER_SECOND)


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux ``MemAvailable``, else the physical
    memory), or None where the system does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def refuse_if_too_large(
    estimate: BuildEstimate, max_seconds: float | None = MAX_BUILD_SECONDS
) -> None:
    """Raise ``FundamentalSystemTooLargeError`` if the build cannot finish: it needs more memory
    than is available, or (unless ``max_seconds`` is None) longer than ``max_seconds``."""
    memory = available_memory()
    if memory is not None and estimate.memory_bytes > memory:
        raise FundamentalSystemTooLargeError(
            estimate, f"this machine has {memory / _GIB:.1f} GiB available"
        )
    if max_seconds is not None and estimate.seconds > max_seconds:
        raise FundamentalSystemTooLargeError(
            estimate, f"the limit is {_duration(max_seconds)} (max_seconds)"
        )


def check_fundamental_systems(
    ambient_dim: int,
    degrees: Iterable[int],
    *,
    cache_dir: str | Path | None = None,
    max_seconds: float | None = MAX_BUILD_SECONDS,
) -> None:
    """Before building anything: raise ``FundamentalSystemTooLargeError`` if one of the systems of
    these degrees that is neither shipped nor cached cannot be built (``refuse_if_too_large``),
    or if together they would take longer than ``max_seconds``."""
    d = check_ambient_dim(ambient_dim)
    folder = Path(cache_dir) if cache_dir else cache_root()
    missing = [
        estimate_build(d, n)
        for n in degrees
        if shipped_key(d, n) not in _shipped() and not _cache_path(folder, d, n).exists()
    ]
    for estimate in missing:
        refuse_if_too_large(estimate, max_seconds)
    total = sum(estimate.seconds for estimate in missing)
    if missing and max_seconds is not None and total > max_seconds:
        slowest = max(missing, key=lambda estimate: estimate.seconds)
        raise FundamentalSystemTooLargeError(
            slowest,
            f"the {len(missing)} missing systems together need {_duration(total)}, beyond the "
            f"limit of {_duration(max_seconds)} (max_seconds)",
        )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"about {seconds:.0f} s"
    if seconds < 7200:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.0f} h"


def _zonal_of_degree(t: np.ndarray, degree: int, ambient_dim: int) -> np.ndarray:
    """Z_n(t) for the single degree n (float64 numpy), without storing the lower degrees."""
    with torch.no_grad():
        values = zonal_of_degree(
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
    oversample: int = OVERSAMPLE,
    min_candidates: int = MIN_CANDIDATES,
    refine_steps: int = 0,
    seed: int = 0,
    progress: bool = False,
    max_seconds: float | None = MAX_BUILD_SECONDS,
) -> np.ndarray:
    """Greedy determinant maximisation (pivoted Cholesky) over random candidates: [N_n^d, d].

    Refused up front (``FundamentalSystemTooLargeError``) where ``estimate_build`` says it cannot
    finish: more memory than is available, or longer than ``max_seconds`` (None: no time limit).
    """
    d = check_ambient_dim(ambient_dim)
    n = check_degree(degree, "degree")
    refuse_if_too_large(
        estimate_build(d, n, oversample=oversample, min_candidates=min_candidates), max_seconds
    )
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


default_cache_dir = cache_root  # the name ``zonal.harmonics`` exports; one root: ``zonal.paths``


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
    """Write the points and their checksum atomically (``zonal._files.atomic_writer``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path, "wb") as stream:
        np.savez(stream, points=points, sha256=np.array(_checksum(points)))


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
    max_seconds: float | None = MAX_BUILD_SECONDS,
) -> np.ndarray:
    r"""The fundamental system of degree :math:`n` on :math:`\mathbb{S}^{d-1}` as float64 unit
    vectors [N_n^d, d].

    Shipped set first, then the user cache (``cache_dir``, default ``zonal.paths.cache_root()``),
    then computed (with a progress bar) and cached; a build that cannot finish raises
    ``FundamentalSystemTooLargeError`` before any work (see ``build_fundamental_system``).
    """
    d = check_ambient_dim(ambient_dim)
    n = check_degree(degree, "degree")
    shipped = _shipped().get(shipped_key(d, n))
    if shipped is not None and _valid_points(shipped, d, n):
        return _unit_rows(shipped.astype(np.float64))
    path = _cache_path(Path(cache_dir) if cache_dir else cache_root(), d, n)
    points = _read_cached(path, d, n)
    if points is None:
        points = build_fundamental_system(d, n, progress=progress, max_seconds=max_seconds)
        try:
            _write_cached(path, points)
        except OSError as error:
            warnings.warn(f"could not cache fundamental system at {path}: {error}", stacklevel=2)
    return points
