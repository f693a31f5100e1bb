"""Sphere geometry: the data-to-sphere embedding z = [x, b] / ||[x, b]|| (seed 000 sec. 4.1), the
OnSphere input map, and the exponential / logarithm maps, geodesic distance and tangent projection
(seed 004 sec. 2.1, 3.1)."""

import math

import pytest
import torch

from zonal.geometry import (
    OnSphere,
    SphereEmbedding,
    exp_map,
    geodesic_distance,
    log_map,
    project_to_tangent,
)
from zonal.kernels import ArcCosineKernel, ChordalMaternKernel


def data(num=7, dim=4, seed=0, scale=3.0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(num, dim, generator=generator, dtype=torch.float64) * scale


@pytest.mark.parametrize("bias", [0.1, 1.0, 5.0])
def test_projection_radius_and_inverse(bias):
    x = data()
    embedding = SphereEmbedding(bias)
    z, r = embedding(x)
    assert z.shape == (7, 5) and r.shape == (7,)
    torch.testing.assert_close(z.norm(dim=-1), torch.ones(7, dtype=torch.float64))
    torch.testing.assert_close(r, torch.sqrt((x**2).sum(-1) + bias**2))
    torch.testing.assert_close(z * r.unsqueeze(-1), torch.cat([x, torch.full((7, 1), bias)], -1))
    assert bool((z[:, -1] > 0).all())  # the data maps to the hemisphere on b's side
    torch.testing.assert_close(embedding.inverse(z), x)
    torch.testing.assert_close(embedding.radius(x), r)


def test_batch_dimensions():
    x = data(num=12).reshape(3, 4, 4)
    z, r = SphereEmbedding(2.0)(x)
    assert z.shape == (3, 4, 5) and r.shape == (3, 4)


def test_predictions_back_to_data_scale():
    mean = torch.tensor([1.0, -2.0], dtype=torch.float64)
    variance = torch.tensor([0.5, 0.25], dtype=torch.float64)
    radius = torch.tensor([2.0, 3.0], dtype=torch.float64)
    scaled_mean, scaled_variance = SphereEmbedding.to_data_scale(mean, variance, radius)
    torch.testing.assert_close(scaled_mean, torch.tensor([2.0, -6.0], dtype=torch.float64))
    torch.testing.assert_close(scaled_variance, torch.tensor([2.0, 2.25], dtype=torch.float64))
    covariance = torch.tensor([[1.0, 0.5], [0.5, 2.0]], dtype=torch.float64)
    expected = torch.tensor([[4.0, 3.0], [3.0, 18.0]], dtype=torch.float64)
    torch.testing.assert_close(
        SphereEmbedding.covariance_to_data_scale(covariance, radius), expected
    )


@pytest.mark.parametrize("kernel_class", [ArcCosineKernel, ChordalMaternKernel])
def test_homogeneous_extension_is_the_mapped_back_sphere_gp(kernel_class):
    """Cov(r g(z), r' g(z')) = r r' k(z, z') is the homogeneous kernel on the lifted data [x, b]."""
    embedding = SphereEmbedding(1.5)
    x1, x2 = data(num=5, seed=1), data(num=4, seed=2)
    (z1, r1), (z2, r2) = embedding(x1), embedding(x2)
    on_sphere = kernel_class(5)
    homogeneous = kernel_class(5, homogeneous=True)
    with torch.no_grad():
        mapped = SphereEmbedding.covariance_to_data_scale(on_sphere(z1).to_dense(), r1)
        torch.testing.assert_close(homogeneous(embedding.lift(x1)).to_dense(), mapped)
        cross = on_sphere(z1, z2).to_dense() * r1.unsqueeze(-1) * r2.unsqueeze(-2)
        torch.testing.assert_close(
            homogeneous(embedding.lift(x1), embedding.lift(x2)).to_dense(), cross
        )
        _, variance = SphereEmbedding.to_data_scale(r1, on_sphere(z1, diag=True), r1)
        torch.testing.assert_close(homogeneous(embedding.lift(x1), diag=True), variance)


def test_learned_bias_gets_gradients_and_stays_positive():
    embedding = SphereEmbedding(0.5, learn_bias=True)
    assert [name for name, _ in embedding.named_parameters()] == ["raw_bias"]
    assert float(embedding.bias) == pytest.approx(0.5)
    optimizer = torch.optim.SGD(embedding.parameters(), lr=10.0)
    for _ in range(5):  # push b down hard: softplus keeps it > 0
        optimizer.zero_grad()
        z, _ = embedding(data())
        z[:, -1].sum().backward()
        assert torch.isfinite(embedding.raw_bias.grad)
        optimizer.step()
    assert float(embedding.bias) > 0
    fixed = SphereEmbedding(0.5)
    assert list(fixed.parameters()) == [] and float(fixed.bias) == 0.5


def test_bad_inputs():
    for bias in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="bias"):
            SphereEmbedding(bias)
    embedding = SphereEmbedding()
    with pytest.raises(ValueError, match="NaN"):
        embedding(torch.tensor([[1.0, math.nan]], dtype=torch.float64))
    with pytest.raises(ValueError, match="tensor"):
        embedding(torch.tensor(1.0))
    with pytest.raises(ValueError, match="hemisphere"):
        embedding.inverse(torch.tensor([[1.0, 0.0]], dtype=torch.float64))


def test_gradcheck_bias_and_inputs():
    embedding = SphereEmbedding(0.8, learn_bias=True)
    x = data(num=4, dim=3).requires_grad_()
    raw = embedding.raw_bias.detach().clone().requires_grad_()

    def project(raw_bias, inputs):
        z, r = torch.func.functional_call(embedding, {"raw_bias": raw_bias}, (inputs,))
        return z, r

    assert torch.autograd.gradcheck(project, (raw, x))


# ---------------------------------------------------------------------------- sphere maps


def random_points(count, ambient_dim, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def tangent_vectors(x, scale, seed):
    generator = torch.Generator().manual_seed(seed + 1)
    v = torch.randn(x.shape, generator=generator, dtype=torch.float64)
    return project_to_tangent(x, v) * scale


@pytest.mark.parametrize("ambient_dim", [2, 3, 6])
@pytest.mark.parametrize("scale", [1e-9, 1e-5, 0.3, 2.5])
def test_exp_lands_on_the_sphere_and_log_inverts_it(ambient_dim, scale):
    x = random_points(50, ambient_dim, seed=ambient_dim)
    v = tangent_vectors(x, scale, seed=ambient_dim)
    v = v * (v.norm(dim=-1, keepdim=True) < 3.0)  # stay within the injectivity radius pi
    y = exp_map(x, v)
    assert float((y.norm(dim=-1) - 1).abs().max()) < 1e-12
    torch.testing.assert_close(log_map(x, y), v, atol=1e-12, rtol=0)
    torch.testing.assert_close(geodesic_distance(x, y), v.norm(dim=-1), atol=1e-12, rtol=0)


@pytest.mark.parametrize("ambient_dim", [3, 5])
def test_log_then_exp_returns_the_point(ambient_dim):
    x = random_points(40, ambient_dim, seed=1)
    y = random_points(40, ambient_dim, seed=2)
    torch.testing.assert_close(exp_map(x, log_map(x, y)), y, atol=1e-12, rtol=0)
    torch.testing.assert_close(exp_map(x, log_map(x, x)), x, atol=1e-15, rtol=0)


def test_exp_map_is_a_great_circle_on_s2():
    """exp_x(t e) = cos(t) x + sin(t) e, checked against the closed form for x = e_z, e = e_x."""
    x = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)
    for t in (1e-7, 0.5, 3.0):
        v = torch.tensor([[t, 0.0, 0.0]], dtype=torch.float64)
        expected = torch.tensor([[math.sin(t), 0.0, math.cos(t)]], dtype=torch.float64)
        torch.testing.assert_close(exp_map(x, v), expected, atol=1e-15, rtol=0)


def test_maps_are_differentiable_at_zero():
    x = random_points(3, 4, seed=3)
    v = torch.zeros(3, 4, dtype=torch.float64, requires_grad=True)
    exp_map(x, v).sum().backward()
    assert torch.isfinite(v.grad).all()
    y = x.clone().requires_grad_(True)
    log_map(x, y).sum().backward()
    assert torch.isfinite(y.grad).all()
    # d/dv exp_x(v) at v = 0 is the identity on the tangent space
    jacobian = torch.autograd.functional.jacobian(lambda w: exp_map(x[:1], w), v[:1].detach())
    tangent = project_to_tangent(x[:1], torch.eye(4, dtype=torch.float64))
    torch.testing.assert_close(jacobian.reshape(4, 4) @ tangent.T, tangent.T, atol=1e-12, rtol=0)


def test_geodesic_distance_matches_arccos_away_from_the_ends():
    x, y = random_points(30, 5, seed=4), random_points(30, 5, seed=5)
    expected = torch.arccos((x * y).sum(-1))
    torch.testing.assert_close(geodesic_distance(x, y), expected, atol=1e-12, rtol=0)


def test_log_map_refuses_antipodal_points():
    x = random_points(2, 3, seed=6)
    with pytest.raises(ValueError, match="antipodal"):
        log_map(x, -x)


def test_tangent_projection_is_orthogonal_and_idempotent():
    x = random_points(20, 4, seed=7)
    v = torch.randn(20, 4, dtype=torch.float64)
    projected = project_to_tangent(x, v)
    assert float((projected * x).sum(-1).abs().max()) < 1e-14
    torch.testing.assert_close(project_to_tangent(x, projected), projected, atol=1e-15, rtol=0)


def test_on_sphere_passes_unit_vectors_and_names_the_rest():
    x = random_points(5, 3, seed=8)
    assert torch.equal(OnSphere().lift(x), x)
    assert OnSphere().ambient_dim(3) == 3 and SphereEmbedding().ambient_dim(3) == 4
    with pytest.raises(ValueError, match="unit vectors"):
        OnSphere().lift(2 * x)
