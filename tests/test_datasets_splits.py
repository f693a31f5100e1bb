"""Splits, the Standardizer, the Dataset record and the synthetic targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zonal.datasets import (
    Dataset,
    Standardizer,
    kfold_splits,
    random_splits,
    random_zonal_function,
    sphere_function_dataset,
    train_test_split,
    two_moons,
)


def test_train_test_split_reproducible_disjoint_covering() -> None:
    train, test = train_test_split(308, test_fraction=0.1, seed=3)
    again_train, again_test = train_test_split(308, test_fraction=0.1, seed=3)
    np.testing.assert_array_equal(train, again_train)
    np.testing.assert_array_equal(test, again_test)
    assert len(test) == 31 and len(train) == 277
    assert np.intersect1d(train, test).size == 0
    np.testing.assert_array_equal(np.union1d(train, test), np.arange(308))
    assert not np.array_equal(test, train_test_split(308, 0.1, seed=4)[1])


@pytest.mark.parametrize("fraction", [0.0, 1.0, 0.001])
def test_train_test_split_rejects_empty_sides(fraction: float) -> None:
    with pytest.raises(ValueError):
        train_test_split(100, test_fraction=fraction)


def test_random_splits_independent_of_count() -> None:
    ten = list(random_splits(50, num_splits=10, test_fraction=0.1, seed=1))
    five = list(random_splits(50, num_splits=5, test_fraction=0.1, seed=1))
    assert len(ten) == 10
    for (train_a, test_a), (train_b, test_b) in zip(ten[:5], five, strict=True):
        np.testing.assert_array_equal(test_a, test_b)
        np.testing.assert_array_equal(train_a, train_b)
    for train, test in ten:
        assert len(test) == 5 and np.intersect1d(train, test).size == 0
        assert len(train) + len(test) == 50
    assert len({tuple(test) for _, test in ten}) > 1


def test_kfold_partitions_the_rows() -> None:
    folds = list(kfold_splits(23, num_folds=5, seed=0))
    tests = np.concatenate([test for _, test in folds])
    np.testing.assert_array_equal(np.sort(tests), np.arange(23))
    assert sorted(len(test) for _, test in folds) == [4, 4, 5, 5, 5]
    for train, test in folds:
        np.testing.assert_array_equal(np.union1d(train, test), np.arange(23))
        assert np.intersect1d(train, test).size == 0
    again = list(kfold_splits(23, num_folds=5, seed=0))
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again, strict=True))
    unshuffled = list(kfold_splits(6, num_folds=3, shuffle=False))
    assert [test.tolist() for _, test in unshuffled] == [[0, 1], [2, 3], [4, 5]]


def test_standardizer_round_trip_and_zero_std() -> None:
    rng = np.random.default_rng(0)
    train = np.column_stack([rng.normal(5, 3, 40), np.full(40, 7.0), rng.normal(-1, 0.1, 40)])
    scaler = Standardizer.fit(train)
    z = scaler.transform(train)
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(z.std(axis=0), [1, 0, 1], atol=1e-12)  # constant column -> 0
    assert np.isfinite(z).all() and scaler.std[1] == 1.0
    test = rng.normal(size=(5, 3))
    np.testing.assert_allclose(scaler.inverse_transform(scaler.transform(test)), test, atol=1e-12)


def test_standardizer_uses_training_rows_only_and_maps_variances() -> None:
    y_train = np.array([1.0, 3.0, 5.0, 7.0])
    scaler = Standardizer.fit(y_train)
    assert scaler.mean == 4.0 and scaler.std == pytest.approx(np.sqrt(5.0))
    y_test = np.array([100.0])
    assert scaler.transform(y_test)[0] == pytest.approx(96.0 / np.sqrt(5.0))
    # a predictive N(m, v) in standard units is N(m * s + mu, v * s^2) in original units
    samples = np.random.default_rng(1).normal(0.3, 0.5, 200_000)
    original = scaler.inverse_transform(samples)
    assert original.var() == pytest.approx(scaler.inverse_transform_variance(0.25), rel=1e-2)
    assert scaler.inverse_transform_std(np.array(0.5)) == pytest.approx(0.5 * np.sqrt(5.0))


def test_standardizer_on_torch_tensors() -> None:
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0]], dtype=torch.float64)
    scaler = Standardizer.fit(x)
    z = scaler.transform(x)
    assert isinstance(z, torch.Tensor) and z.dtype == torch.float64
    torch.testing.assert_close(scaler.inverse_transform(z), x)
    variance = scaler.inverse_transform_variance(torch.ones(2, dtype=torch.float32))
    assert variance.dtype == torch.float32
    torch.testing.assert_close(variance, torch.tensor([1.0, 4.0]))


def test_standardizer_rejects_bad_data() -> None:
    with pytest.raises(ValueError, match="NaN"):
        Standardizer.fit(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="non-empty"):
        Standardizer.fit(np.zeros((0, 2)))


def test_dataset_validates_shapes() -> None:
    with pytest.raises(ValueError, match="float64"):
        Dataset("x", np.zeros((2, 2), dtype=np.float32), np.zeros(2), "regression")
    with pytest.raises(ValueError, match="N=2"):
        Dataset("x", np.zeros((2, 2)), np.zeros(3), "regression")
    with pytest.raises(ValueError, match="outside"):
        Dataset("x", np.zeros((2, 2)), np.zeros(2), "regression", splits={"test": np.array([2])})
    data = Dataset("x", np.zeros((2, 2)), np.array([0, 2]), "classification")
    assert data.num_classes == 3 and data.num_points == 2
    with pytest.raises(KeyError, match="no split 'train'"):
        data.split("train")


def test_two_moons() -> None:
    data = two_moons(num_points=201, noise=0.0, seed=0)
    assert data.X.shape == (201, 2) and data.task == "classification"
    assert sorted(np.bincount(data.y).tolist()) == [100, 101]
    upper = data.X[data.y == 0]
    lower = data.X[data.y == 1]
    np.testing.assert_allclose(np.linalg.norm(upper, axis=1), 1.0)  # noise-free: on the circles
    np.testing.assert_allclose(np.linalg.norm(lower - [1.0, 0.5], axis=1), 1.0)
    assert (upper[:, 1] >= 0).all() and (lower[:, 1] <= 0.5).all()
    np.testing.assert_array_equal(two_moons(50, 0.1, seed=2).X, two_moons(50, 0.1, seed=2).X)


def test_sphere_function_dataset_on_sphere_and_reproducible() -> None:
    data = sphere_function_dataset(ambient_dim=4, num_points=300, degree=5, noise=0.0, seed=7)
    assert data.X.shape == (300, 4) and data.task == "regression"
    np.testing.assert_allclose(np.linalg.norm(data.X, axis=1), 1.0)
    function = random_zonal_function(ambient_dim=4, num_bumps=8, degree=5, seed=7)
    np.testing.assert_allclose(data.y, function(data.X))
    noisy = sphere_function_dataset(4, 300, degree=5, noise=0.1, seed=7)
    np.testing.assert_array_equal(noisy.X, data.X)
    residual = noisy.y - data.y
    assert 0.07 < residual.std() < 0.13
    assert data.y.std() > 0.05  # a non-trivial function


def test_zonal_bump_function_is_a_polynomial_of_its_degree() -> None:
    """Along a great circle x(t) = cos t e1 + sin t e2 a degree-p function on the sphere is a
    trigonometric polynomial of degree <= p: its Fourier coefficients above p vanish."""
    function = random_zonal_function(ambient_dim=3, num_bumps=5, degree=4, seed=0)
    angles = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    circle = np.column_stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)])
    spectrum = np.abs(np.fft.rfft(function(circle)))
    assert spectrum[:5].max() > 1e-3
    np.testing.assert_allclose(spectrum[5:], 0.0, atol=1e-10)


def test_standardisation_is_independent_of_the_units():
    """The same data in units 1e-13, 1 and 1e290 standardise to the same values, and one huge cell
    neither overflows nor drops its column; only a truly constant column maps to 0."""
    from zonal.datasets import Standardizer

    generator = np.random.default_rng(0)
    base = generator.normal(size=(50, 2))
    reference = Standardizer.fit(base).transform(base)
    for unit in (1e-13, 1.0, 1e290):
        scaled = base * unit
        np.testing.assert_allclose(Standardizer.fit(scaled).transform(scaled), reference, atol=1e-9)
    spiky = base.copy()
    spiky[3, 1] = 1e300
    transformed = Standardizer.fit(spiky).transform(spiky)
    assert np.isfinite(transformed).all() and transformed[:, 1].std() > 0.5
    constant = np.column_stack([np.full(50, 7e-13), base[:, 0]])
    assert (Standardizer.fit(constant).transform(constant)[:, 0] == 0).all()
