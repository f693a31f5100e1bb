"""SVGP with inter-domain features: the fast path against a naive dense SVGP (float64, 1e-8)."""

import gpytorch
import pytest
import torch
from torch.distributions import MultivariateNormal as TorchMVN
from torch.distributions import kl_divergence

from zonal.features import (
    ActivatedFeatures,
    InducingPoints,
    SparseSphericalHarmonicFeatures,
    SphericalHarmonicFeatures,
)
from zonal.harmonics import SphericalHarmonics
from zonal.kernels import ArcCosineKernel, PolynomialDecayKernel
from zonal.models import SVGP

INPUT_DIM = 3
AMBIENT_DIM = INPUT_DIM + 1


def data(num_points=40, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, INPUT_DIM, dtype=torch.float64, generator=generator)
    y = torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(
        num_points, dtype=torch.float64, generator=generator
    )
    return x, y


def randomise_q(model, seed=1):
    """Random q(u): mean and a random lower-triangular Cholesky factor."""
    generator = torch.Generator().manual_seed(seed)
    distribution = model.variational_strategy._variational_distribution
    with torch.no_grad():
        distribution.variational_mean.copy_(
            0.5 * torch.randn(distribution.variational_mean.shape, generator=generator)
        )
        assert distribution.variational_mean.dtype == torch.float64
        size = distribution.variational_mean.shape[-1]
        noise = torch.randn(size, size, generator=generator, dtype=torch.float64)
        factor = torch.tril(0.3 * noise, -1) + torch.diag(0.5 + 0.2 * noise.diagonal().abs())
        distribution.chol_variational_covar.copy_(factor)
    model.variational_strategy.variational_params_initialized.fill_(1)
    return distribution.variational_mean.detach(), factor @ factor.T


def naive_harmonic_covariances(features, kernel, lifted, max_degree):
    """Kuu = diag(1 / lambda), Kuf = r phi(z)^T straight from SphericalHarmonics and the spectrum."""
    radius = lifted.norm(dim=-1)
    harmonics = SphericalHarmonics(AMBIENT_DIM, max_degree)
    eigenvalues = kernel.eigenvalues(max_degree)[harmonics.levels]
    keep = eigenvalues > 1e-9 * eigenvalues.max()
    phi = harmonics(lifted / radius[:, None])[:, keep]  # [N, M]
    return torch.diag(1 / eigenvalues[keep]), (phi * radius[:, None]).T


def naive_activated_covariances(features, kernel, lifted):
    """g~_m = sum_{n,j} sigma_n phi_nj(w_m) phi_nj in the harmonic basis:
    Kuf = C Phi(z)^T r, Kuu = C Lambda^{-1} C^T, with C[m, (n, j)] = sigma_n phi_nj(w_m)."""
    level = features.truncation_level
    harmonics = SphericalHarmonics(AMBIENT_DIM, level)
    eigenvalues = kernel.eigenvalues(level)[harmonics.levels]
    keep = eigenvalues > 1e-9 * eigenvalues.max()
    sigma = features.coefficients[harmonics.levels][keep]
    coefficients = sigma * harmonics(features.weights)[:, keep]  # [M, K]
    radius = lifted.norm(dim=-1)
    phi = harmonics(lifted / radius[:, None])[:, keep]  # [N, K]
    kuf = coefficients @ (phi * radius[:, None]).T
    kuu = coefficients @ torch.diag(1 / eigenvalues[keep]) @ coefficients.T
    return kuu, kuf


def naive_conditional(kuu, kuf, kff, mean, covariance, whiten):
    factor = torch.linalg.cholesky(kuu)
    if whiten:
        projection = torch.linalg.solve_triangular(factor, kuf, upper=False)
        predictive = kff - projection.T @ projection + projection.T @ covariance @ projection
    else:
        projection = torch.linalg.solve(kuu, kuf)
        predictive = kff - kuf.T @ projection + projection.T @ covariance @ projection
    return projection.T @ mean, predictive


def naive_elbo(kuu, mean_f, covariance_f, q_mean, q_covariance, y, noise, whiten):
    variance = covariance_f.diagonal()
    expected = -0.5 * (
        torch.log(torch.tensor(2 * torch.pi * noise, dtype=torch.float64))
        + ((y - mean_f) ** 2 + variance) / noise
    )
    prior_covariance = torch.eye(len(q_mean), dtype=torch.float64) if whiten else kuu
    kl = kl_divergence(
        TorchMVN(q_mean, q_covariance), TorchMVN(torch.zeros_like(q_mean), prior_covariance)
    )
    return expected.sum() - kl


def build(feature_name, kernel):
    if feature_name == "harmonics":
        return SphericalHarmonicFeatures(AMBIENT_DIM, 4, kernel=kernel)
    if feature_name == "sparse":
        return SparseSphericalHarmonicFeatures(AMBIENT_DIM, 6, 5)
    if feature_name == "activated":
        return ActivatedFeatures(AMBIENT_DIM, 12, activation="softplus", truncation_level=6)
    generator = torch.Generator().manual_seed(3)
    return InducingPoints(torch.randn(15, AMBIENT_DIM, dtype=torch.float64, generator=generator))


def naive_covariances(feature_name, features, kernel, lifted):
    if feature_name == "harmonics":
        return naive_harmonic_covariances(features, kernel, lifted, 4)
    if feature_name == "activated":
        return naive_activated_covariances(features, kernel, lifted)
    if feature_name == "sparse":  # the dense, explicitly inverted orthogonalisation
        from zonal.harmonics import zonal_harmonic

        directions = features.directions
        radius = lifted.norm(dim=-1)
        unit = lifted / radius[:, None]
        blocks, eigenvalues = [], kernel.eigenvalues(6)
        for n, block in enumerate(directions.split(features.level_sizes)):
            gram = zonal_harmonic(block @ block.T, n, AMBIENT_DIM)[..., n]
            inverse_factor = torch.linalg.inv(torch.linalg.cholesky(gram))
            blocks.append(inverse_factor @ zonal_harmonic(block @ unit.T, n, AMBIENT_DIM)[..., n])
        kuf = torch.cat(blocks) * radius
        return torch.diag(1 / eigenvalues[features.levels]), kuf
    return kernel(features.points).to_dense(), kernel(features.points, lifted).to_dense()


@pytest.mark.parametrize("feature_name", ["harmonics", "sparse", "activated", "points"])
@pytest.mark.parametrize("whiten", [True, False])
def test_fast_path_equals_naive_dense_svgp(feature_name, whiten):
    x, y = data()
    kernel = PolynomialDecayKernel(AMBIENT_DIM, max_degree=8, beta=2.5, homogeneous=True)
    features = build(feature_name, kernel)
    model = SVGP(kernel, features, INPUT_DIM, whiten=whiten)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = torch.tensor(0.05, dtype=torch.float64)
    noise = float(likelihood.noise)
    q_mean, q_covariance = randomise_q(model)
    lifted = model.lift(x)
    with torch.no_grad():
        kuu, kuf = naive_covariances(feature_name, features, kernel, lifted)
        kff = kernel(lifted).to_dense()
        expected_mean, expected_covariance = naive_conditional(
            kuu, kuf, kff, q_mean, q_covariance, whiten
        )
        expected_elbo = naive_elbo(
            kuu, expected_mean, expected_covariance, q_mean, q_covariance, y, noise, whiten
        )
        model.eval()
        posterior = model(x)
        assert (posterior.mean - expected_mean).abs().max() < 1e-8
        assert (posterior.covariance_matrix - expected_covariance).abs().max() < 1e-8
        model.train()
        elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(y))
        assert abs(elbo(model(x), y) * len(y) - expected_elbo) < 1e-8


def test_sparse_with_complete_levels_spans_the_full_harmonic_space():
    """With m-hat >= N_n every level is complete: Qff = Kfu Kuu^{-1} Kuf equals VISH's."""
    x, _ = data(10)
    kernel = PolynomialDecayKernel(AMBIENT_DIM, max_degree=8, beta=2.0, homogeneous=True)
    lifted = torch.cat([x, torch.ones(len(x), 1, dtype=torch.float64)], -1)
    full = SphericalHarmonicFeatures(AMBIENT_DIM, 3)
    sparse = SparseSphericalHarmonicFeatures(AMBIENT_DIM, 3, 100, seed=5)
    with torch.no_grad():
        sparse.raw_directions.add_(
            0.1 * torch.randn_like(sparse.raw_directions)
        )  # not the shipped points

    def nystrom(features):
        kuf = features.kuf(kernel, lifted)
        return kuf.T @ (features.kuu(kernel).diagonal().reciprocal()[:, None] * kuf)

    assert (nystrom(full) - nystrom(sparse)).abs().max() < 1e-10


def test_harmonic_features_give_a_diagonal_kuu_and_skip_zero_levels():
    kernel = ArcCosineKernel(AMBIENT_DIM, homogeneous=True)
    features = SphericalHarmonicFeatures(AMBIENT_DIM, 7, kernel=kernel)
    assert sorted(set(features.levels.tolist())) == [0, 1, 2, 4, 6]
    from linear_operator.operators import DiagLinearOperator

    assert isinstance(features.kuu(kernel), DiagLinearOperator)
    budget = SphericalHarmonicFeatures(AMBIENT_DIM, num_inducing=40, kernel=kernel)
    assert budget.num_inducing == 1 + 4 + 9 + 25  # level 3 is zero; level 6 (49) would exceed 40
    with pytest.raises(ValueError, match="smaller than one level"):
        SphericalHarmonicFeatures(AMBIENT_DIM, num_inducing=0)


def test_multi_output_is_a_batch_of_independent_svgps():
    x, _ = data(12)
    kernel = PolynomialDecayKernel(AMBIENT_DIM, max_degree=8, beta=2.0, homogeneous=True)
    features = SphericalHarmonicFeatures(AMBIENT_DIM, 3)
    model = SVGP(kernel, features, INPUT_DIM, num_outputs=2)
    generator = torch.Generator().manual_seed(4)
    size = features.num_inducing
    means = 0.5 * torch.randn(2, size, generator=generator, dtype=torch.float64)  # [2, M]
    roots = 0.3 * torch.randn(2, size, size, generator=generator, dtype=torch.float64)
    covariances = roots @ roots.mT + 0.1 * torch.eye(size, dtype=torch.float64)  # [2, M, M]
    model.inducing_strategy.set_variational(means, covariances, whitened=True)
    model.eval()
    with torch.no_grad():
        posterior = model(x)
    assert posterior.mean.shape == (12, 2)
    for output in range(2):  # each column is the single-output SVGP with that output's q(u)
        single = SVGP(kernel, features, INPUT_DIM)
        single.inducing_strategy.set_variational(means[output], covariances[output], whitened=True)
        single.eval()
        with torch.no_grad():
            alone = single(x)
        torch.testing.assert_close(posterior.mean[:, output], alone.mean)
        torch.testing.assert_close(posterior.variance[:, output], alone.variance)


def test_training_improves_the_elbo_and_fits():
    x, y = data(80)
    kernel = gpytorch.kernels.ScaleKernel(ArcCosineKernel(AMBIENT_DIM, homogeneous=True)).double()
    features = SphericalHarmonicFeatures(AMBIENT_DIM, num_inducing=60, kernel=kernel)
    model = SVGP(kernel, features, INPUT_DIM)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    objective = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(y))
    optimiser = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=0.1)
    losses = []
    for _ in range(100):
        optimiser.zero_grad()
        loss = -objective(model(x), y)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.3
    model.eval()
    with torch.no_grad():
        assert ((model(x).mean - y) ** 2).mean() < 0.5 * y.var()


def test_bad_inputs_are_named():
    kernel = PolynomialDecayKernel(AMBIENT_DIM, max_degree=8, beta=2.0, homogeneous=True)
    model = SVGP(kernel, SphericalHarmonicFeatures(AMBIENT_DIM, 2), INPUT_DIM)
    with pytest.raises(ValueError, match=r"input dimension is 3, got \(4, 5\)"):
        model(torch.zeros(4, 5, dtype=torch.float64))
    bad = torch.zeros(4, 3, dtype=torch.float64)
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match="row 2"):
        model(bad)
    with pytest.raises(ValueError, match="ambient_dim=5"):
        SVGP(kernel, SphericalHarmonicFeatures(5, 2), INPUT_DIM)
    # the embedding keeps each row's radius: a non-homogeneous kernel is refused when built (it
    # failed at the first prediction, asking for the embedding the model had)
    flat = PolynomialDecayKernel(AMBIENT_DIM, max_degree=8, beta=2.0)
    with pytest.raises(
        ValueError, match=r"non-homogeneous PolynomialDecayKernel.*homogeneous=True"
    ):
        SVGP(flat, SphericalHarmonicFeatures(AMBIENT_DIM, 2), INPUT_DIM)
    from zonal.geometry import OnSphere
    from zonal.models import ExactZonalGP

    with pytest.raises(ValueError, match="non-homogeneous ArcCosineKernel"):
        ExactZonalGP(ArcCosineKernel(AMBIENT_DIM), bad[:1].nan_to_num(), torch.zeros(1))
    on_sphere = SVGP(flat, SphericalHarmonicFeatures(AMBIENT_DIM, 2), AMBIENT_DIM,
                     input_map=OnSphere())  # fmt: skip
    assert on_sphere.input_map.homogeneous is False  # unit vectors: any zonal kernel reads them


def test_budget_counts_only_kept_levels_and_stops_at_the_last_one():
    truncated = PolynomialDecayKernel(2, max_degree=10, homogeneous=True)
    assert truncated.eigenvalues(14)[11:].abs().max() == 0  # no mass above the truncation
    features = SphericalHarmonicFeatures(2, num_inducing=512, kernel=truncated)
    assert features.max_degree == 10 and features.num_inducing == 21
    arccos = ArcCosineKernel(AMBIENT_DIM, homogeneous=True)
    for budget in [14, 39, 100, 300]:
        features = SphericalHarmonicFeatures(AMBIENT_DIM, num_inducing=budget, kernel=arccos)
        assert features.num_inducing <= budget
        # one more kept level would not fit
        next_level = next(
            n for n in range(features.max_degree + 1, 100) if n in (0, 1) or n % 2 == 0
        )
        assert features.num_inducing + (next_level + 1) ** 2 > budget
