"""Row-wise statistics that do not depend on the chunking: running column moments
(``Standardizer.fit``'s rule), the seeded per-row validation draw, a uniform subsample of rows and
the running counts that refuse a classification target.
"""

from __future__ import annotations

import numpy as np

from zonal.datasets import Standardizer
from zonal.tabular.recipes import (
    UnsupportedLikelihoodError,
)
from zonal.tabular.targets import (
    MAX_AUTO_CLASSES,
    MIN_ROWS_PER_AUTO_CLASS,
    detect_target,
    label_texts,
)

#: the relative spread below which a column counts as constant (``Standardizer.fit``'s default)
RELATIVE_TOLERANCE = 1e-12
_UINT64 = (1 << 64) - 1


class RunningMoments:
    """Per-column moments of rows seen chunk by chunk, by ``Standardizer.fit``'s rule.

    ``Standardizer.fit`` divides each column by its largest magnitude m = max_i |v_i| before
    taking moments (no overflow at 1e300, no underflow at 1e-300). Here m grows with the chunks:
    the running mean and sum of squared deviations of v / m are rescaled by m_old / m_new <= 1 when
    m grows, and a chunk's (count n_b, mean mu_b, squares S_b) join the running (n_a, mu_a, S_a) by
    Chan, Golub and LeVeque's pairwise update

        mu = mu_a + (mu_b - mu_a) n_b / n,   S = S_a + S_b + (mu_b - mu_a)^2 n_a n_b / n.

    ``standardizer`` returns mean = mu m and std = sqrt(S / n) m (population), std 1 for a column
    whose relative spread sqrt(S / n) is at most ``RELATIVE_TOLERANCE`` (constant).
    """

    def __init__(self, width: int) -> None:
        self.count = 0
        self.magnitude = np.zeros(width)  # [D], largest |v| so far
        self.mean = np.zeros(width)  # [D], of v / magnitude
        self.squares = np.zeros(width)  # [D], sum of (v / magnitude - mean)^2

    def update(self, values: np.ndarray) -> None:
        """Add the rows ``values`` [n, D] (finite)."""
        if len(values) == 0:
            return
        magnitude = np.maximum(self.magnitude, np.abs(values).max(axis=0))  # [D]
        unit = np.where(magnitude > 0, magnitude, 1.0)
        ratio = self.magnitude / unit  # [D], <= 1
        scaled = values / unit  # [n, D], entries in [-1, 1]
        chunk_mean = scaled.mean(axis=0)
        chunk_squares = ((scaled - chunk_mean) ** 2).sum(axis=0)
        total = self.count + len(values)
        delta = chunk_mean - self.mean * ratio
        self.mean = self.mean * ratio + delta * (len(values) / total)
        self.squares = (
            self.squares * ratio**2 + chunk_squares + delta**2 * (self.count * len(values) / total)
        )
        self.count, self.magnitude = total, magnitude

    def standardizer(self) -> Standardizer:
        """The ``Standardizer`` of the rows seen (``[D]`` mean and std)."""
        if self.count == 0:
            raise ValueError("no rows: the moments are empty")
        unit = np.where(self.magnitude > 0, self.magnitude, 1.0)
        spread = np.sqrt(self.squares / self.count)
        constant = spread <= RELATIVE_TOLERANCE
        return Standardizer(mean=self.mean * unit, std=np.where(constant, 1.0, spread * unit))


def _splitmix64(values: np.ndarray) -> np.ndarray:
    """Steele, Lea and Flood's splitmix64 finaliser of uint64 ``values`` (wrapping arithmetic)."""
    values = values + np.uint64(0x9E3779B97F4A7C15)
    values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


def row_uniforms(rows: np.ndarray, seed: int, stream: int = 0) -> np.ndarray:
    """u [n] in [0, 1): a hash of (``seed``, ``stream``, global row) per row, so a row's draw does
    not depend on the chunking; 53 bits of splitmix64(row xor key)."""
    key = _splitmix64(_splitmix64(np.array([seed & _UINT64], dtype=np.uint64))
                      + np.uint64(stream))  # fmt: skip
    bits = _splitmix64(np.asarray(rows, dtype=np.uint64) ^ key) >> np.uint64(11)
    return bits.astype(np.float64) * 2.0**-53


def held_out(rows: np.ndarray, seed: int, fraction: float) -> np.ndarray:
    """The validation mask [n] of global ``rows``: u(seed, row) < ``fraction``."""
    return row_uniforms(rows, seed, 0) < fraction


class Subsample:
    """The ``size`` rows with the smallest hash keys seen so far (bottom-k: a uniform sample
    without replacement, the same whatever the chunking)."""

    def __init__(self, size: int, width: int) -> None:
        self.size = size
        self.keys = np.empty(0)
        self.x = np.empty((0, width))
        self.y = np.empty(0)

    def add(self, keys: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
        keys = np.concatenate([self.keys, keys])
        x, y = np.concatenate([self.x, x]), np.concatenate([self.y, y])
        kept = np.argsort(keys, kind="stable")[: self.size]
        self.keys, self.x, self.y = keys[kept], x[kept], y[kept]


def count_values(counts: dict[float, int] | None, y: np.ndarray) -> dict[float, int] | None:
    """Running counts of the target's values while they may be class labels (at most
    ``MAX_AUTO_CLASSES`` integers), else None."""
    if counts is None or not np.all(y == np.round(y)):
        return None
    values, found = np.unique(y, return_counts=True)
    for value, count in zip(values.tolist(), found.tolist(), strict=True):
        counts[value] = counts.get(value, 0) + count
    return counts if len(counts) <= MAX_AUTO_CLASSES else None


def check_regression(counts: dict[float, int] | None, likelihood: str | None, name: str) -> None:
    """Refuse a target that ``zonal.tabular.targets.detect_target`` reads as class labels."""
    if counts is None or likelihood == "gaussian":
        return
    values = np.array(sorted(counts))
    # up to MIN_ROWS_PER_AUTO_CLASS copies of each value: the detection compares each value's
    # row count with that many, so it decides as on the whole column
    copies = np.minimum([counts[value] for value in values], MIN_ROWS_PER_AUTO_CLASS)
    labels = np.repeat(label_texts(values)[0], copies)
    if detect_target(labels, None, f"target {name!r}").is_classification:
        raise UnsupportedLikelihoodError(
            f"the target {name!r} holds {len(values)} integer values: a classification target, "
            "which the streamed fit (SGPR, Gaussian likelihood) cannot fit; pass --likelihood "
            "gaussian to fit the values as numbers, or drop --chunk-size"
        )
