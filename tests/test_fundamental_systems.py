"""Fundamental systems: greedy determinant maximisation, the on-disk cache and its integrity, and
the cost estimate that refuses a build which cannot finish."""

import os
import time

import numpy as np
import pytest
import torch

from zonal.features import SphericalHarmonicFeatures
from zonal.harmonics import (
    SphericalHarmonics,
    build_fundamental_system,
    fundamental_system,
    num_harmonics,
)
from zonal.harmonics.fundamental_system import (
    FundamentalSystemTooLargeError,
    _cache_path,
    check_fundamental_systems,
    estimate_build,
    gram_matrix,
    load_fundamental_system,
)

UNSHIPPED = (21, 2)  # d = 21 is beyond the shipped set


def test_greedy_system_is_fundamental_and_well_conditioned():
    points = build_fundamental_system(6, 4)
    assert points.shape == (num_harmonics(6, 4), 6)
    eigenvalues = np.linalg.eigvalsh(gram_matrix(points, 4))
    assert eigenvalues.min() > 0
    assert eigenvalues.max() / eigenvalues.min() < 1e5


def test_greedy_beats_random_points():
    degree, ambient_dim = 6, 4
    greedy = build_fundamental_system(ambient_dim, degree)
    random = np.random.default_rng(0).standard_normal(greedy.shape)
    random /= np.linalg.norm(random, axis=1, keepdims=True)
    greedy_logdet = np.linalg.slogdet(gram_matrix(greedy, degree))[1]
    random_logdet = np.linalg.slogdet(gram_matrix(random, degree))[1]
    assert greedy_logdet > random_logdet


def test_refinement_does_not_decrease_the_determinant():
    points = build_fundamental_system(3, 8)
    refined = build_fundamental_system(3, 8, refine_steps=20)
    assert (
        np.linalg.slogdet(gram_matrix(refined, 8))[1]
        >= np.linalg.slogdet(gram_matrix(points, 8))[1] - 1e-9
    )


def test_missing_system_is_computed_and_cached(tmp_path):
    points = load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False)
    path = _cache_path(tmp_path, *UNSHIPPED)
    assert path.exists()
    again = load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(points, again)
    harmonics = SphericalHarmonics(UNSHIPPED[0], UNSHIPPED[1], cache_dir=tmp_path, progress=False)
    x = torch.randn(3, UNSHIPPED[0], dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    assert harmonics(x).shape == (3, harmonics.num_features)


def test_corrupt_cache_is_detected_and_recomputed(tmp_path):
    points = load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False)
    path = _cache_path(tmp_path, *UNSHIPPED)
    # flip one coordinate but keep the stored checksum: the checksum catches it
    tampered = points.copy()
    tampered[0, 0] += 1e-3
    np.savez(path, points=tampered, sha256=np.array("0" * 64))
    with pytest.warns(UserWarning, match="checksum or shape"):
        recomputed = load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(recomputed, points)
    # a truncated, unreadable file
    path.write_bytes(path.read_bytes()[:50])
    with pytest.warns(UserWarning, match="corrupt"):
        load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False)
    # the rewritten cache file is intact again
    np.testing.assert_array_equal(
        load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False), points
    )


def test_wrong_shape_in_cache_is_rejected(tmp_path):
    from zonal.harmonics.fundamental_system import _checksum

    load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False)
    path = _cache_path(tmp_path, *UNSHIPPED)
    wrong = np.eye(3)
    np.savez(path, points=wrong, sha256=np.array(_checksum(wrong)))
    with pytest.warns(UserWarning, match="checksum or shape"):
        load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False)


# ------------------------------------------------------------------ cost estimate and refusal


def test_a_system_that_cannot_finish_is_refused_before_any_work(tmp_path):
    # N_3^50 = 22050 points: a ~29 GiB factor and hours of work; refused in well under a second
    start = time.perf_counter()
    with pytest.raises(FundamentalSystemTooLargeError) as refused:
        build_fundamental_system(50, 3)
    with pytest.raises(FundamentalSystemTooLargeError):
        load_fundamental_system(50, 3, cache_dir=tmp_path, progress=False)
    assert time.perf_counter() - start < 1.0
    message = str(refused.value)
    assert "ambient_dim=50" in message and "degree 3" in message
    assert str(num_harmonics(50, 3)) in message and "GiB" in message
    assert "SparseSphericalHarmonicFeatures" in message and "fewer features" in message
    assert refused.value.estimate.num_points == num_harmonics(50, 3)
    assert list(tmp_path.iterdir()) == []


def test_features_refuse_before_building_any_level():
    start = time.perf_counter()
    with pytest.raises(FundamentalSystemTooLargeError, match="degree 3"):
        SphericalHarmonicFeatures(50, 3)
    assert time.perf_counter() - start < 1.0


def test_estimate_grows_with_the_system():
    small, large = estimate_build(6, 4), estimate_build(6, 8)
    assert small.num_points == num_harmonics(6, 4)
    # the factor alone is 8 C N bytes, and the loop reads C N^2 / 2 of its entries
    assert small.memory_bytes >= 8 * small.num_candidates * small.num_points
    assert large.memory_bytes > small.memory_bytes and large.seconds > small.seconds


def test_a_build_beyond_the_available_memory_is_refused(monkeypatch):
    monkeypatch.setattr(fundamental_system, "available_memory", lambda: 1 << 20)  # 1 MiB
    with pytest.raises(FundamentalSystemTooLargeError, match="available"):
        build_fundamental_system(6, 4)


def test_only_missing_systems_are_checked(tmp_path):
    with pytest.raises(FundamentalSystemTooLargeError, match="max_seconds"):
        check_fundamental_systems(*UNSHIPPED[:1], [UNSHIPPED[1]], cache_dir=tmp_path, max_seconds=0)
    load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False, max_seconds=None)
    check_fundamental_systems(*UNSHIPPED[:1], [UNSHIPPED[1]], cache_dir=tmp_path, max_seconds=0)


# ------------------------------------------------------------------ atomic cache writes


def test_a_failed_cache_write_leaves_no_partial_file(tmp_path, monkeypatch):
    def failing_replace(source, target):
        raise OSError("no space left")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.warns(UserWarning, match="could not cache"):
        points = load_fundamental_system(*UNSHIPPED, cache_dir=tmp_path, progress=False)
    assert points.shape == (num_harmonics(*UNSHIPPED), UNSHIPPED[0])
    folder = _cache_path(tmp_path, *UNSHIPPED).parent
    assert list(folder.iterdir()) == []


def test_spherical_harmonics_refuse_an_impossible_degree_before_building_any(tmp_path, monkeypatch):
    """SphericalHarmonics(50, 3): degree 3 on S^49 needs 22,050 points (tens of GiB); the refusal
    comes before degrees 0-2 are built (it used to come after 8 s of building them)."""
    import zonal.harmonics.fundamental_system as fundamental
    from zonal.harmonics import SphericalHarmonics

    built = []
    real_build = fundamental.build_fundamental_system
    monkeypatch.setattr(
        fundamental,
        "build_fundamental_system",
        lambda *args, **kwargs: built.append(args) or real_build(*args, **kwargs),
    )
    with pytest.raises(fundamental.FundamentalSystemTooLargeError, match="degree 3 on S\\^49"):
        SphericalHarmonics(50, 3, cache_dir=tmp_path)
    assert built == []
