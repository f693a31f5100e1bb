"""The data-to-sphere embedding z = [x, b] / ||[x, b]|| and its inverse maps (seed 000 sec. 4.1)."""

import math

import pytest
import torch

from zonal.embedding import SphereEmbedding
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
