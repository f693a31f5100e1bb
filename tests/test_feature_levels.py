"""Which levels inducing features keep: fixed when they are built, continuous in the kernel's
hyperparameters, never a zero-eigenvalue level, a named error for a non-finite Kuu, and the public
names that say what they keep (kept levels, basis, spectrum)."""

import gpytorch
import pytest
import torch

from zonal.features import (
    ActivatedFeatures,
    NonFiniteCovarianceError,
    SparseSphericalHarmonicFeatures,
    SphericalHarmonicFeatures,
    nonzero_levels,
)
from zonal.features.spherical_harmonic import max_degree_for_budget
from zonal.harmonics import SphericalHarmonics, num_harmonics, zonal_harmonic
from zonal.kernels import ArcCosineKernel, ChordalRBFKernel, SpectralZonalKernel
from zonal.models import SVGP

# seed 000 app. C's rule (1e-9 x the largest eigenvalue) keeps levels 0..10 of this RBF on S^2 at
# lengthscale 0.865 and 0..9 at 0.870: a per-call decision would flip in between
RBF_LENGTHSCALES = (0.865, 0.870)


def unit_rows(num_rows, ambient_dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_rows, ambient_dim, dtype=torch.float64, generator=generator)
    return x / x.norm(dim=-1, keepdim=True)


def rbf(lengthscale, homogeneous=False):
    kernel = ChordalRBFKernel(3, homogeneous=homogeneous)
    kernel.lengthscale = torch.tensor(lengthscale, dtype=torch.float64)
    return kernel


# ------------------------------------------------------------------ defect 1: continuity


def test_the_rbf_lengthscales_straddle_the_relative_cutoff():
    # the premise of the continuity tests below
    first, second = (len(nonzero_levels(rbf(scale), 20)) for scale in RBF_LENGTHSCALES)
    assert first != second


def test_activated_kuu_and_kuf_are_continuous_in_the_lengthscale():
    features = ActivatedFeatures(
        3, 12, activation="softplus", truncation_level=20, kernel=rbf(RBF_LENGTHSCALES[0])
    )
    x = unit_rows(30, 3, seed=1)
    kernels = [rbf(scale) for scale in RBF_LENGTHSCALES]
    with torch.no_grad():
        kuf = [features.kuf(kernel, x) for kernel in kernels]
        kuu = [features.kuu(kernel) for kernel in kernels]
    # Kuf = sum_{n in K} sigma_n Z_n(w . x) does not depend on the kernel once K is fixed
    assert torch.equal(kuf[0], kuf[1])
    # Kuu = sum_{n in K} sigma_n^2 / lambda_n Z_n: a 0.6 % lengthscale step moves every lambda_n
    # by far less than 25 % (dropping level 10 changes Kuu by ~90 %)
    change = (kuu[1] - kuu[0]).norm() / kuu[0].norm()
    assert change < 0.25
    assert torch.equal(features.kept_levels(kernels[0]), features.kept_levels(kernels[1]))


def test_activated_svgp_elbo_is_continuous_in_the_lengthscale():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(50, 2, dtype=torch.float64, generator=generator)
    y = torch.sin(2 * x[:, 0])
    kernel = rbf(RBF_LENGTHSCALES[0], homogeneous=True)
    features = ActivatedFeatures(3, 16, activation="softplus", truncation_level=20, kernel=kernel)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = torch.tensor(0.05, dtype=torch.float64)
    model = SVGP(kernel, features, 2, likelihood=likelihood)
    distribution = model.variational_strategy._variational_distribution
    with torch.no_grad():
        distribution.variational_mean.copy_(
            0.5 * torch.randn(16, dtype=torch.float64, generator=generator)
        )
    model.variational_strategy.variational_params_initialized.fill_(1)
    objective = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(y))
    elbos = []
    for scale in torch.linspace(*RBF_LENGTHSCALES, 5, dtype=torch.float64):
        kernel.lengthscale = scale
        with torch.no_grad():
            elbos.append(float(objective(model(x), y)) * len(y))
    steps = torch.tensor(elbos).diff().abs()
    # a smooth curve: equal lengthscale steps give steps of the same size (a jump would be one
    # step tens of nats wide among steps of a fraction of a nat)
    assert steps.max() < 3 * steps.min() + 1e-6


# ------------------------------------------------------------------ defect 2: zero levels


def test_sparse_features_leave_out_zero_levels_given_the_kernel():
    kernel = ArcCosineKernel(4)
    features = SparseSphericalHarmonicFeatures(4, 7, 5, kernel=kernel)
    assert features.kept_levels == (0, 1, 2, 4, 6)  # odd levels >= 3 vanish; 7 is trailing
    assert features.max_degree == 6
    assert set(features.levels.tolist()) == {0, 1, 2, 4, 6}
    assert (features.spectrum(kernel) > 0).all()
    assert torch.isfinite(features.kuu(kernel).diagonal()).all()
    x = unit_rows(10, 4)
    assert features.kuf(kernel, x).shape == (features.num_inducing, 10)


@pytest.mark.parametrize(
    "build",
    [
        lambda: SphericalHarmonicFeatures(4, 3),
        lambda: SparseSphericalHarmonicFeatures(4, 3, 5),
    ],
    ids=["harmonics", "sparse"],
)
def test_a_zero_eigenvalue_level_is_a_named_error(build):
    with pytest.raises(NonFiniteCovarianceError, match=r"degree\(s\) \[3\]"):
        build().kuu(ArcCosineKernel(4))


@pytest.mark.parametrize("whiten", [True, False])
def test_svgp_with_a_zero_level_fails_by_name_whitened_or_not(whiten):
    # whitened, the zero level used to be silently wasted; unwhitened, the ELBO was NaN
    kernel = ArcCosineKernel(4, homogeneous=True)
    model = SVGP(kernel, SphericalHarmonicFeatures(4, 3), 3, whiten=whiten)
    x = unit_rows(8, 3)
    with pytest.raises(NonFiniteCovarianceError):
        model(x)


def test_activated_kuu_with_an_underflowing_eigenvalue_is_a_named_error():
    spectrum = torch.tensor([1.0, 0.5, 1e-320, 0.1], dtype=torch.float64)  # 1e-320: subnormal
    kernel = SpectralZonalKernel(3, spectrum, learn_eigenvalues=False)
    features = ActivatedFeatures(3, 4, activation="softplus", truncation_level=3)
    with pytest.raises(NonFiniteCovarianceError, match=r"level\(s\) \[2\]"):
        features.kuu(kernel)
    # built with the kernel, the level is left out for good and Kuu is finite
    fixed = ActivatedFeatures(3, 4, activation="softplus", truncation_level=3, kernel=kernel)
    assert fixed.kept_levels(kernel).tolist() == [True, True, False, True]
    assert torch.isfinite(fixed.kuu(kernel)).all()


def test_exact_zeros_are_left_out_even_without_a_kernel_at_construction():
    spectrum = torch.tensor([1.0, 0.5, 0.0, 0.1], dtype=torch.float64)
    kernel = SpectralZonalKernel(3, spectrum, learn_eigenvalues=False)
    features = ActivatedFeatures(3, 4, activation="softplus", truncation_level=3)
    assert features.kept_levels(kernel).tolist() == [True, True, False, True]
    assert torch.isfinite(features.kuu(kernel)).all()


# ------------------------------------------------------------------ defect 6: the budget


@pytest.mark.parametrize(("ambient_dim", "budget"), [(25, 400), (25, 2000), (50, 2000)])
def test_budget_ends_on_the_last_kept_level(ambient_dim, budget):
    # level 3 of the arc-cosine kernel is zero and costs nothing, level 4 does not fit: the
    # budget must stop at 2, not at the dropped 3 (whose fundamental system is huge)
    kernel = ArcCosineKernel(ambient_dim)
    degree = max_degree_for_budget(ambient_dim, budget, kernel)
    assert degree == 2
    assert degree in nonzero_levels(kernel, degree)


def test_budget_result_is_always_a_kept_level():
    kernel = ArcCosineKernel(4)
    for budget in range(1, 200, 7):
        degree = max_degree_for_budget(4, budget, kernel)
        assert degree in nonzero_levels(kernel, degree)
        kept = nonzero_levels(kernel, degree)
        assert sum(num_harmonics(4, n) for n in kept) <= budget


# ------------------------------------------------------------------ public names


def test_activated_kept_coefficients_give_kuf():
    kernel = ArcCosineKernel(4)
    features = ActivatedFeatures(4, 5, activation="softplus", truncation_level=9)
    kept = features.kept_levels(kernel)
    assert kept.dtype == torch.bool and kept.shape == (10,)
    assert kept.tolist() == (kernel.eigenvalues(9) != 0).tolist()
    coefficients = features.kept_coefficients(kernel)
    assert not coefficients.requires_grad
    assert (coefficients[~kept] == 0).all()
    assert torch.equal(coefficients[kept], features.coefficients[kept])
    x = unit_rows(7, 4)
    expected = zonal_harmonic(features.weights @ x.T, 9, 4) @ coefficients  # [M, N]
    assert (features.kuf(kernel, x) - expected).abs().max() < 1e-10


@pytest.mark.parametrize("sparse", [False, True])
def test_harmonic_features_expose_levels_spectrum_and_basis(sparse):
    kernel = ArcCosineKernel(4, homogeneous=True)
    if sparse:
        features = SparseSphericalHarmonicFeatures(4, 6, 100, kernel=kernel)  # complete levels
    else:
        features = SphericalHarmonicFeatures(4, 6, kernel=kernel)
    assert features.kept_levels == (0, 1, 2, 4, 6)
    assert features.levels.shape == (features.num_inducing,)
    eigenvalues = kernel.eigenvalues(6)
    spectrum = features.spectrum(kernel)  # [M]
    assert torch.equal(spectrum, eigenvalues[features.levels])
    assert torch.allclose(features.kuu(kernel).diagonal(), spectrum.reciprocal())
    x = unit_rows(40, 4)
    phi = features.basis(x)  # [N, M]
    assert phi.shape == (40, features.num_inducing)
    lifted = 2.5 * x  # a homogeneous kernel: Kuf = ||x|| phi(x / ||x||)
    assert torch.allclose(features.kuf(kernel, lifted), 2.5 * phi.T)
    # the basis spans the same space as the dense harmonics of the kept levels (same Qff)
    harmonics = SphericalHarmonics(4, 6)
    dense = harmonics(x)[:, torch.isin(harmonics.levels, torch.tensor([0, 1, 2, 4, 6]))]
    weights = spectrum  # Qff = Phi diag(lambda) Phi^T is basis independent within a level
    assert torch.allclose((phi * weights) @ phi.T, (dense * weights) @ dense.T, atol=1e-10)


def test_harmonic_features_with_a_kernel_stop_at_the_last_kept_level():
    features = SphericalHarmonicFeatures(4, 7, kernel=ArcCosineKernel(4))
    assert features.max_degree == 6 and features.kept_levels == (0, 1, 2, 4, 6)


# ------------------------------------------------------------------ precision and devices


def test_float32_features_follow_the_model_dtype():
    x64 = unit_rows(20, 4)
    kernel64 = ArcCosineKernel(4)
    kernel32 = ArcCosineKernel(4, dtype=torch.float32)
    for features in [
        ActivatedFeatures(4, 6, activation="softplus", truncation_level=10, kernel=kernel64),
        SphericalHarmonicFeatures(4, 4, kernel=kernel64),
        SparseSphericalHarmonicFeatures(4, 4, 5, kernel=kernel64),
    ]:
        with torch.no_grad():
            kuu64, kuf64 = features.kuu(kernel64).to_dense(), features.kuf(kernel64, x64)
            features32 = features.float()
            kuu32 = features32.kuu(kernel32).to_dense()
            kuf32 = features32.kuf(kernel32, x64.float())
        assert kuu32.dtype == torch.float32 and kuf32.dtype == torch.float32
        assert torch.allclose(
            kuu32.double(), kuu64, rtol=1e-3, atol=1e-3 * float(kuu64.abs().max())
        )
        assert torch.allclose(kuf32.double(), kuf64, rtol=1e-3, atol=1e-4)


def test_level_mask_is_a_buffer_that_moves_with_the_module():
    features = ActivatedFeatures(4, 3, kernel=ArcCosineKernel(4))
    assert "level_mask" in dict(features.named_buffers())
    assert features.level_mask.dtype == torch.bool
    state = features.state_dict()
    rebuilt = ActivatedFeatures(4, 3)
    rebuilt.load_state_dict(state)
    assert torch.equal(rebuilt.level_mask, features.level_mask)
