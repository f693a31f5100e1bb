"""Deep arc-cosine and ReLU NTK kernels against BoTorch, loop references and finite networks.

BoTorch mapping: ``InfiniteWidthBNNKernel(depth=L)`` with ``bias_var = 0`` and ``weight_var = w``
starts from K^0(x, x') = w x.x' / D (D = input dimension) and applies L arc-cosine layers
K <- (w / 2 pi) sqrt(K(x,x) K(x',x')) J_1(theta). The variances scale by w / 2 per layer and the
correlations compose s_1, so on R^D

    BoTorch(x, x') = (w / D) (w / 2)^L ||x|| ||x'|| s_1^(L)(cos theta)
                   = (w / D) (w / 2)^L DeepArcCosineKernel(D, depth=L, homogeneous=True)(x, x').
"""

import math

import pytest
import torch
from botorch.models.kernels import InfiniteWidthBNNKernel

from zonal.kernels import DeepArcCosineKernel, ReLUNTKernel, arccos_shape


def random_sphere(num, ambient_dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def cho_saul_composition(cosine, depth):
    """Slow reference: iterate theta <- arccos(J_1(theta) / pi) (Cho and Saul 2009, eq. 7)."""
    theta = math.acos(max(-1.0, min(1.0, cosine)))
    for _ in range(depth):
        value = (math.sin(theta) + (math.pi - theta) * math.cos(theta)) / math.pi
        theta = math.acos(max(-1.0, min(1.0, value)))
    return math.cos(theta)


@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("weight_var", [1.0, 2.0, 3.5])
def test_deep_arccos_matches_botorch_infinite_width_bnn(depth, weight_var):
    ambient_dim = 5
    generator = torch.Generator().manual_seed(depth)
    x1 = torch.randn(6, ambient_dim, generator=generator, dtype=torch.float64) * 2
    x2 = torch.randn(4, ambient_dim, generator=generator, dtype=torch.float64)
    botorch_kernel = InfiniteWidthBNNKernel(depth=depth, acos_eps=1e-13).to(torch.float64)
    botorch_kernel.weight_var = torch.tensor(weight_var, dtype=torch.float64)
    botorch_kernel.bias_var = torch.tensor(1e-300, dtype=torch.float64)  # Positive: ~0
    ours = DeepArcCosineKernel(ambient_dim, depth=depth, homogeneous=True)
    constant = weight_var / ambient_dim * (weight_var / 2) ** depth
    with torch.no_grad():
        expected = botorch_kernel(x1, x2).to_dense()
        actual = constant * ours(x1, x2).to_dense()
    torch.testing.assert_close(actual, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("depth", [1, 3])
def test_deep_arccos_matches_loop_reference(depth):
    x1, x2 = random_sphere(5, 4, seed=1), random_sphere(4, 4, seed=2)
    kernel = DeepArcCosineKernel(4, depth=depth)
    with torch.no_grad():
        actual = kernel(x1, x2).to_dense()
    expected = torch.tensor(
        [[cho_saul_composition(float(a @ b), depth) for b in x2] for a in x1], dtype=torch.float64
    )
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)


def ntk_reference(cosine, depth):
    """Slow reference for the NTK (Jacot et al. 2018, thm 1) with ReLU, unit inputs, c_sigma = 2."""
    sigma, theta_sum = cosine, cosine
    for _ in range(depth):
        angle = math.acos(max(-1.0, min(1.0, sigma)))
        derivative = (math.pi - angle) / math.pi  # 2 E[relu'(u) relu'(v)]
        sigma = (math.sin(angle) + (math.pi - angle) * math.cos(angle)) / math.pi
        theta_sum = theta_sum * derivative + sigma
    return theta_sum / (depth + 1)


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_ntk_matches_loop_reference(depth):
    x1, x2 = random_sphere(5, 3, seed=3), random_sphere(4, 3, seed=4)
    kernel = ReLUNTKernel(3, depth=depth)
    with torch.no_grad():
        actual = kernel(x1, x2).to_dense()
        diagonal = kernel(x1, diag=True)
    expected = torch.tensor(
        [[ntk_reference(float(a @ b), depth) for b in x2] for a in x1], dtype=torch.float64
    )
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(diagonal, torch.ones(5, dtype=torch.float64))


def empirical_ntk(points, depth, width, seed):
    """<df/dparams(x), df/dparams(x')> of a finite ReLU network in the NTK parameterisation.

    f(x) = v . g_L,  g_h = sqrt(2 / m) relu(W_h g_{h-1}),  g_0 = x,  all weights N(0, 1).
    """
    generator = torch.Generator().manual_seed(seed)
    sizes = [points.shape[-1]] + [width] * depth
    weights = [
        torch.randn(sizes[h + 1], sizes[h], generator=generator, dtype=torch.float64)
        for h in range(depth)
    ]
    readout = torch.randn(width, generator=generator, dtype=torch.float64)
    params = [*weights, readout]
    for p in params:
        p.requires_grad_()
    jacobian_rows = []
    for x in points:
        hidden = x
        for weight in weights:
            hidden = math.sqrt(2 / width) * torch.relu(weight @ hidden)
        output = readout @ hidden
        grads = torch.autograd.grad(output, params)
        jacobian_rows.append(torch.cat([g.reshape(-1) for g in grads]))
    jacobian = torch.stack(jacobian_rows)  # [N, P]
    return jacobian @ jacobian.T


@pytest.mark.parametrize(("depth", "width"), [(1, 8192), (2, 2048)])
def test_ntk_matches_wide_network(depth, width):
    """The empirical NTK concentrates at rate 1/sqrt(width): within 0.05 on k in [0, 1] (the
    seeded networks' largest error: 0.015 at depth 1, 0.030 at depth 2), where the kernel of the
    next depth is further than that (so the tolerance tells the depths apart)."""
    points = random_sphere(4, 3, seed=5)
    empirical = sum(empirical_ntk(points, depth, width, seed) for seed in range(3)) / 3
    with torch.no_grad():
        kernel = ReLUNTKernel(3, depth=depth)(points).to_dense()
        deeper = ReLUNTKernel(3, depth=depth + 1)(points).to_dense()
    torch.testing.assert_close(empirical / (depth + 1), kernel, rtol=0, atol=0.05)
    assert float((empirical / (depth + 1) - deeper).abs().max()) > 0.05


def test_two_layer_ntk_is_bietti_mairal_formula():
    t = torch.linspace(-1, 1, 101, dtype=torch.float64).view(1, -1)
    expected = (t * arccos_shape(t, 0) + arccos_shape(t, 1)) / 2  # Bietti and Mairal (2019)
    torch.testing.assert_close(ReLUNTKernel(3, depth=1).shape(t), expected, rtol=1e-14, atol=1e-14)


# Mercer sum (Funk-Hecke eigenvalues, truncation L) against the closed form on a grid of t:
# deep arc-cosine keeps the L^-3 decay of order 1, the NTK has a cone at t = 1 (1/L).
@pytest.mark.parametrize(
    ("kernel_factory", "truncation", "bound"),
    [
        (lambda d: DeepArcCosineKernel(d, depth=3), 200, 1e-6),
        (lambda d: ReLUNTKernel(d, depth=1), 400, 1e-3),
        (lambda d: ReLUNTKernel(d, depth=3), 400, 3e-3),
    ],
)
@pytest.mark.parametrize("ambient_dim", [3, 8])
def test_mercer_sum_converges_to_closed_form(kernel_factory, truncation, bound, ambient_dim):
    kernel = kernel_factory(ambient_dim)
    t = torch.linspace(-1, 1, 1001, dtype=torch.float64).view(1, -1)
    with torch.no_grad():
        exact = kernel.shape(t)
        error = float((kernel.mercer(t, truncation) - exact).abs().max())
        coarse = float((kernel.mercer(t, truncation // 2) - exact).abs().max())
    assert error < bound
    assert coarse > 1.9 * error


def test_depth_gradients_finite_at_boundaries():
    t = torch.tensor([-1.0, 1.0, 0.3], dtype=torch.float64, requires_grad=True)
    for kernel in (DeepArcCosineKernel(3, depth=3), ReLUNTKernel(3, depth=3)):
        (grad,) = torch.autograd.grad(kernel.shape(t.view(1, -1)).sum(), t)
        assert torch.isfinite(grad).all()


def test_bad_depths():
    for depth in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="depth"):
            DeepArcCosineKernel(3, depth=depth)
        with pytest.raises(ValueError, match="depth"):
            ReLUNTKernel(3, depth=depth)
    with pytest.raises(ValueError, match="order"):
        DeepArcCosineKernel(3, depth=2, order=3)
