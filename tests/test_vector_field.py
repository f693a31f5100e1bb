"""Gaussian vector fields on S^{d-1} (seed 004 sec. 3.1.1): samples are tangent, the projected
construction's covariance is P_x k(x, x') P_x', the parallel-transport frame is orthonormal and
tangent away from its singular point, and bad fields, frames and inducing points are refused with
named errors."""

from __future__ import annotations

import warnings

import pytest
import torch

from zonal.features import InducingPoints, SphericalHarmonicFeatures
from zonal.geometry import exp_map
from zonal.models.vector_field import (
    FrameSingularityError,
    FrameVectorField,
    NotTangentError,
    ProjectedVectorField,
    sphere_kernel,
)


def unit_vectors(count: int, ambient_dim: int = 3, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def randomise_q(field, seed: int = 1) -> None:
    """A random whitened q(u) = N(m, R R^T) for every output of the field's GP."""
    generator = torch.Generator().manual_seed(seed)
    strategy = field.variational_strategy
    outputs, size = field.num_components, strategy.features.num_inducing
    mean = torch.randn(outputs, size, generator=generator, dtype=torch.float64)
    root = 0.3 * torch.randn(outputs, size, size, generator=generator, dtype=torch.float64)
    covariance = root @ root.mT + 0.1 * torch.eye(size, dtype=torch.float64)
    strategy.set_variational(mean, covariance, whitened=True)


def projected(ambient_dim: int = 3, harmonic: bool = False) -> ProjectedVectorField:
    kernel = sphere_kernel(ambient_dim, 2.5, lengthscale=0.7)
    if harmonic:
        features = SphericalHarmonicFeatures(ambient_dim, 3)
    else:
        features = InducingPoints(unit_vectors(12, ambient_dim, seed=5), learn_points=False)
    return ProjectedVectorField(ambient_dim, features, kernel)


@pytest.mark.parametrize("harmonic", [False, True])
@pytest.mark.parametrize("ambient_dim", [3, 5])
def test_projected_samples_are_tangent_and_exp_maps_them_onto_the_sphere(ambient_dim, harmonic):
    """x . v = 0 to 1e-12 for draws of v(x) = P_x g(x), and exp_x(v) lies on the sphere to 1e-12."""
    field = projected(ambient_dim, harmonic)
    randomise_q(field)
    x = unit_vectors(40, ambient_dim)
    noise = torch.randn(4, 40, ambient_dim, dtype=torch.float64)
    with torch.no_grad():
        v = field.sample(x.expand(4, 40, ambient_dim), noise)  # [4, 40, d]
    assert v.abs().max() > 0.1  # a real field, not zero
    assert (x * v).sum(-1).abs().max() < 1e-12
    moved = exp_map(x.expand_as(v), v)
    assert (moved.norm(dim=-1) - 1).abs().max() < 1e-12


def test_projected_prior_covariance_is_the_projected_kernel():
    """With q(u) at the prior, Cov(v(x_i), v(x_j)) = k(x_i, x_j) P_{x_i} P_{x_j} (the projection
    of d independent GPs), built here entry by entry from the kernel's Gram matrix."""
    field = projected()
    field.variational_strategy.set_variational_scale(1.0, zero_mean=True)
    x = unit_vectors(7, seed=3)
    with torch.no_grad():
        joint = field.joint_distribution(x)
        gram = field.gp.covar_module(x).to_dense()  # [N, N]
    identity = torch.eye(3, dtype=torch.float64)
    expected = torch.zeros(7, 3, 7, 3, dtype=torch.float64)
    for i in range(7):
        for j in range(7):
            left = identity - torch.outer(x[i], x[i])
            right = identity - torch.outer(x[j], x[j])
            expected[i, :, j, :] = gram[i, j] * left @ right
    assert joint.mean.abs().max() < 1e-14
    assert (joint.covariance_matrix - expected.reshape(21, 21)).abs().max() < 1e-10


def test_marginal_draws_have_the_joint_distributions_moments():
    """Monte Carlo draws of v(x) (``sample``) have the mean and the diagonal blocks of the joint
    covariance (``joint_distribution``), and the mean is the posterior mean field."""
    field = projected()
    randomise_q(field)
    x = unit_vectors(4, seed=2)
    count = 40000
    generator = torch.Generator().manual_seed(7)
    noise = torch.randn(count, 4, 3, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        draws = field.sample(x.expand(count, 4, 3), noise)  # [S, 4, 3]
        joint = field.joint_distribution(x)
        mean_field = field.mean(x)
    mean = joint.mean.reshape(4, 3)
    covariance = joint.covariance_matrix.reshape(4, 3, 4, 3)
    assert (mean_field - mean).abs().max() < 1e-12
    scale = covariance.diagonal(dim1=0, dim2=2).abs().max()
    assert (draws.mean(0) - mean).abs().max() < 0.03 * scale.sqrt()
    centred = draws - mean
    for i in range(4):
        empirical = centred[:, i].mT @ centred[:, i] / count  # [3, 3]
        assert (empirical - covariance[i, :, i, :]).abs().max() < 0.05 * scale


@pytest.mark.parametrize("ambient_dim", [3, 4])
@pytest.mark.parametrize("pole_index", [None, 0])
def test_transport_frame_is_orthonormal_and_tangent_away_from_its_singular_point(
    ambient_dim, pole_index
):
    """E(x)^T E(x) = I and x^T E(x) = 0 (1e-12) at points away from -p; at the pole itself the
    frame is the pole's basis; at -p it raises ``FrameSingularityError``."""
    pole = None
    if pole_index is not None:
        pole = unit_vectors(1, ambient_dim, seed=11)[0]
    features = InducingPoints(unit_vectors(6, ambient_dim, seed=5), learn_points=False)
    field = FrameVectorField(ambient_dim, features, pole=pole)
    p = field.pole
    x = unit_vectors(200, ambient_dim, seed=4)
    x = x[(1 + x @ p) > 1e-3]  # away from the singular point
    frame = field.tangent_basis(x)  # [N, d, d - 1]
    identity = torch.eye(ambient_dim - 1, dtype=torch.float64)
    assert (frame.mT @ frame - identity).abs().max() < 1e-12
    assert (x.unsqueeze(-2) @ frame).abs().max() < 1e-12
    at_pole = field.tangent_basis(p.unsqueeze(0))[0]  # [d, d - 1]
    assert (at_pole - field.pole_basis).abs().max() < 1e-15
    assert (field.pole_basis.mT @ p).abs().max() < 1e-15
    with pytest.raises(FrameSingularityError, match="antipode"):
        field.tangent_basis(-p.unsqueeze(0))
    with warnings.catch_warnings():  # the singularity check reads no value from the graph
        warnings.simplefilter("error")
        field.tangent_basis(x.clone().requires_grad_(True)).sum().backward()


def test_frame_prior_covariance_is_the_framed_kernel():
    """Under the prior, Cov(v(x_i), v(x_j)) = k(x_i, x_j) E(x_i) E(x_j)^T; draws are tangent."""
    features = InducingPoints(unit_vectors(10, seed=5), learn_points=False)
    field = FrameVectorField(3, features)
    x = unit_vectors(5, seed=8)
    with torch.no_grad():
        joint = field.joint_distribution(x)
        gram = field.gp.covar_module(x).to_dense()
        frame = field.tangent_basis(x)  # [N, 3, 2]
        v = field.sample(x, torch.randn(5, 2, dtype=torch.float64))
    expected = torch.einsum("ij,iap,jbp->iajb", gram, frame, frame).reshape(15, 15)
    assert (joint.covariance_matrix - expected).abs().max() < 1e-10
    assert (x * v).sum(-1).abs().max() < 1e-12


def test_a_user_frame_that_is_not_tangent_is_refused():
    """A user-supplied frame whose columns leave the tangent space raises ``NotTangentError``."""
    features = InducingPoints(unit_vectors(6, seed=5), learn_points=False)

    def axes(x: torch.Tensor) -> torch.Tensor:
        eye = torch.eye(3, dtype=x.dtype)[:, :2]
        return eye.expand(*x.shape, 2)

    field = FrameVectorField(3, features, frame=axes)
    with pytest.raises(NotTangentError, match="not tangent"):
        field.sample(unit_vectors(4), torch.zeros(4, 2, dtype=torch.float64))


def test_inducing_points_of_a_field_must_be_fixed_unit_vectors_of_the_right_dimension():
    """Off-sphere, learnable, or wrong-dimension inducing points are refused when built."""
    points = unit_vectors(6)
    with pytest.raises(ValueError, match="unit vectors"):
        ProjectedVectorField(3, InducingPoints(2 * points, learn_points=False))
    with pytest.raises(ValueError, match="fixed"):
        ProjectedVectorField(3, InducingPoints(points))
    with pytest.raises(ValueError, match=r"\[M, 4\]"):
        ProjectedVectorField(4, InducingPoints(points, learn_points=False))
    with pytest.raises(ValueError, match="ambient_dim"):
        ProjectedVectorField(4, SphericalHarmonicFeatures(3, 2))
    field = projected()
    with pytest.raises(ValueError, match="unit vectors"):
        field.sample(2 * unit_vectors(3), torch.zeros(3, 3, dtype=torch.float64))
