"""Gram-matrix algebra of deep kernel machines (seed 003 eqs. 2-5): kernels of a Gram matrix against
wide random networks (Monte Carlo within its standard error) and feature-space kernels, the KL
against torch.distributions, the dense objective against a naive formula, and nu -> inf giving the
NNGP with the first-order deviation 2 / nu K grad K."""

import math

import pytest
import torch

from zonal.dkm import (
    ArcCosineGram,
    SquaredExponentialGram,
    dkm_objective,
    gaussian_kl,
    gaussian_log_marginal,
    gram_kernel,
    input_gram,
    nngp_grams,
)
from zonal.kernels import ArcCosineKernel
from zonal.linalg import NotPositiveDefiniteError


def random_gram(size, seed=0, features=7):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(size, features, generator=generator, dtype=torch.float64)
    return input_gram(x), x


@pytest.mark.parametrize("order", [0, 1, 2])
def test_arccos_gram_kernel_is_the_wide_relu_network_covariance(order):
    """K_m(G)_ij = 2 E[relu(f_i)^m relu(f_j)^m], f ~ N(0, G): 10^5 random features agree within
    4 standard errors entry by entry."""
    gram, _ = random_gram(5, seed=order)
    width = 100_000
    generator = torch.Generator().manual_seed(10 + order)
    features = torch.linalg.cholesky(gram) @ torch.randn(
        5, width, generator=generator, dtype=torch.float64
    )  # [5, N], columns ~ N(0, G)
    activated = (features > 0).double() if order == 0 else features.relu() ** order
    products = 2 * activated.unsqueeze(1) * activated.unsqueeze(0)  # [5, 5, N]
    estimate = products.mean(-1)
    standard_error = products.std(-1) / math.sqrt(width)
    exact = ArcCosineGram(order)(gram)
    assert ((exact - estimate).abs() <= 4 * standard_error).all()


def test_relu_gram_kernel_equals_zonal_homogeneous_arccos_kernel():
    """For G = X X^T the ReLU Gram kernel is Cho and Saul's ||x|| ||x'|| s_1(cos theta), which zonal's
    ArcCosineKernel(homogeneous=True) computes from the features; the ReLU kernel keeps the
    diagonal (He scaling)."""
    _, x = random_gram(6, seed=3, features=4)
    expected = ArcCosineKernel(4, order=1, homogeneous=True).double()(x, x).to_dense()
    actual = ArcCosineGram(1)(x @ x.mT)
    torch.testing.assert_close(actual, expected.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(actual.diagonal(), (x * x).sum(-1), rtol=1e-14, atol=0)


def test_squared_exponential_from_the_gram_matrix_is_the_rbf_of_the_features():
    """R_ij = G_ii - 2 G_ij + G_jj is the squared distance of the features / sqrt(N_0) (eq. 2)."""
    gram, x = random_gram(6, seed=4, features=3)
    distance = torch.cdist(x, x) / math.sqrt(3)  # [6, 6]
    expected = torch.exp(-(distance**2) / (2 * 0.7**2))
    actual = SquaredExponentialGram(lengthscale=0.7)(gram)
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["arccos-0", "relu", "arccos-2", "squared-exponential"])
def test_diagonal_formula_matches_the_full_matrix(name):
    """``diagonal(diag G)`` (what a minibatch propagates) equals the diagonal of K(G)."""
    gram, _ = random_gram(5, seed=5)
    kernel = gram_kernel(name)
    torch.testing.assert_close(
        kernel.diagonal(gram.diagonal()), kernel(gram).diagonal(), rtol=1e-13, atol=1e-15
    )


def test_unknown_kernel_name_and_bad_parameters_are_named_errors():
    with pytest.raises(ValueError, match="unknown Gram kernel 'tanh'"):
        gram_kernel("tanh")
    with pytest.raises(ValueError, match="lengthscale must be > 0"):
        SquaredExponentialGram(lengthscale=0.0)
    with pytest.raises(ValueError, match="arc-cosine order"):
        ArcCosineGram(3)


def test_gaussian_kl_matches_torch_distributions():
    """KL(N(m_c, A) || N(0, B)) summed over channels c, against MultivariateNormal's KL."""
    generator = torch.Generator().manual_seed(6)
    a_root = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    b_root = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    cov_a = a_root @ a_root.mT + 0.1 * torch.eye(4, dtype=torch.float64)
    cov_b = b_root @ b_root.mT + 0.1 * torch.eye(4, dtype=torch.float64)
    means = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    zero = torch.zeros(4, dtype=torch.float64)
    prior = torch.distributions.MultivariateNormal(zero, cov_b)
    expected_zero_mean = torch.distributions.kl_divergence(
        torch.distributions.MultivariateNormal(zero, cov_a), prior
    )
    expected_channels = sum(
        torch.distributions.kl_divergence(
            torch.distributions.MultivariateNormal(means[:, c], cov_a), prior
        )
        for c in range(3)
    )
    torch.testing.assert_close(gaussian_kl(cov_a, cov_b), expected_zero_mean, rtol=1e-12, atol=0)
    torch.testing.assert_close(
        gaussian_kl(cov_a, cov_b, means), expected_channels, rtol=1e-12, atol=0
    )
    assert float(gaussian_kl(cov_b, cov_b)) == pytest.approx(0, abs=1e-12)


def test_gaussian_kl_refuses_a_covariance_that_is_not_positive_definite():
    indefinite = torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64)
    with pytest.raises(NotPositiveDefiniteError, match="first covariance of the KL"):
        gaussian_kl(indefinite, torch.eye(2, dtype=torch.float64))


def test_dense_objective_matches_a_naive_formula():
    """eq. 5 with a Gaussian likelihood, written with torch.distributions (log_prob and KL)."""
    gram0, _ = random_gram(5, seed=7)
    kernel = ArcCosineGram(1)
    generator = torch.Generator().manual_seed(8)
    targets = torch.randn(5, 2, generator=generator, dtype=torch.float64)
    grams = []
    previous = gram0
    for _ in range(2):  # a perturbed chain, not the NNGP
        root = torch.randn(5, 5, generator=generator, dtype=torch.float64)
        grams.append(kernel(previous) + 0.05 * root @ root.mT)
        previous = grams[-1]
    nu, noise = (0.5, 3.0), 0.2

    def normal(covariance):
        return torch.distributions.MultivariateNormal(
            torch.zeros(5, dtype=torch.float64), covariance
        )

    naive = sum(
        normal(kernel(grams[1]) + noise * torch.eye(5, dtype=torch.float64)).log_prob(targets[:, c])
        for c in range(2)
    )
    for strength, gram, before in zip(nu, grams, [gram0, grams[0]], strict=True):
        naive = naive - strength * torch.distributions.kl_divergence(
            normal(gram), normal(kernel(before))
        )
    actual = dkm_objective(
        gram0, grams, kernel, nu, lambda gram: gaussian_log_marginal(kernel(gram), targets, noise)
    )
    torch.testing.assert_close(actual, naive, rtol=1e-12, atol=1e-12)


def test_nngp_layers_have_no_kl_and_give_the_nngp_marginal_likelihood():
    """Layers fixed at K(G^{l-1}) (nu = inf) leave only log P(Y | G^L) of the NNGP chain."""
    gram0, _ = random_gram(5, seed=9)
    kernel = ArcCosineGram(1)
    targets = torch.randn(5, 1, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    chain = nngp_grams(gram0, kernel, 3)
    expected = gaussian_log_marginal(kernel(chain[-1]), targets, 0.1)
    actual = dkm_objective(
        gram0,
        [None] * 3,
        kernel,
        math.inf,
        lambda gram: gaussian_log_marginal(kernel(gram), targets, 0.1),
    )
    torch.testing.assert_close(actual, expected, rtol=1e-14, atol=0)
    with pytest.raises(ValueError, match="nu = inf fixes G"):
        dkm_objective(gram0, chain, kernel, math.inf, lambda gram: gram.sum())
    with pytest.raises(ValueError, match="nu of layer 2 must be >= 0"):
        dkm_objective(gram0, chain, kernel, [1.0, -1.0, 1.0], lambda gram: gram.sum())


@pytest.mark.parametrize("nu", [1e3, 1e4])
def test_large_nu_maximiser_approaches_the_nngp_at_rate_one_over_nu(nu):
    """One layer: the maximiser G* of eq. 5 is B + (2 / nu) B grad B + O(nu^-2), B = K(G^0) and
    grad = d log P / dG at B (second-order KL: 1/4 tr(B^-1 D B^-1 D)); so nu (G* - B) -> 2 B grad B
    and G* -> K(G^0), the NNGP. (At nu = 1e5 the objective's dependence on the offset, O(1/nu),
    is too close to float64's rounding of the objective for L-BFGS to find the maximiser to 2e-4
    on every machine: it passed on this project's CPU and failed on an H200 machine's.)"""
    gram0, _ = random_gram(4, seed=11)
    kernel = ArcCosineGram(1)
    targets = torch.randn(4, 1, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    prior = kernel(gram0)

    def log_likelihood(gram):
        return gaussian_log_marginal(kernel(gram), targets, 0.1)

    at_prior = prior.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(log_likelihood(at_prior), at_prior)
    gradient = (gradient + gradient.mT) / 2
    predicted = 2 * prior @ gradient @ prior  # [4, 4]

    offset = torch.zeros(4, 4, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.LBFGS(
        [offset],
        lr=1,
        max_iter=500,
        tolerance_grad=1e-14,
        tolerance_change=1e-16,
        line_search_fn="strong_wolfe",
    )

    def closure():
        optimiser.zero_grad()
        gram = prior + (offset + offset.mT) / (2 * nu)
        loss = -dkm_objective(gram0, [gram], kernel, nu, log_likelihood)
        loss.backward()
        return loss

    optimiser.step(closure)
    scaled = ((offset + offset.mT) / 2).detach()  # nu (G* - B)
    torch.testing.assert_close(scaled, predicted, rtol=0, atol=20 / nu * predicted.abs().max())
