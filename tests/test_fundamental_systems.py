"""Fundamental systems: greedy determinant maximisation, the on-disk cache and its integrity."""

import numpy as np
import pytest
import torch

from zonal.harmonics import SphericalHarmonics, build_fundamental_system, num_harmonics
from zonal.harmonics.fundamental_system import _cache_path, gram_matrix, load_fundamental_system

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
