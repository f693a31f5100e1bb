"""zonal in BoTorch's pathwise machinery (zonal.sampling.botorch_registration): BoTorch's own
``draw_matheron_paths`` on an exact ``SingleTaskGP`` with a zonal kernel uses the exact harmonic
prior and samples the GP's posterior (against ``SingleTaskGP.posterior``, BoTorch's exact GP
algebra); on zonal's SVGP and SGPR it gives zonal's inter-domain paths; zonal's SGPR paths and
BoTorch's exact-GP paths have the same distribution where SGPR is exact; and
``PathwiseThompsonSampling`` takes zonal models unchanged."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import pytest
import torch
from botorch.acquisition.objective import LinearMCObjective
from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf
from botorch.sampling.pathwise import draw_matheron_paths
from botorch.sampling.pathwise.features import gen_kernel_features
from gpytorch.kernels import ScaleKernel
from gpytorch.means import ZeroMean

from zonal.features import SphericalHarmonicFeatures
from zonal.geometry import OnSphere
from zonal.kernels import ArcCosineKernel, ChordalMaternKernel, PolynomialDecayKernel
from zonal.models import SGPR, SVGP, ExactZonalGP
from zonal.sampling import HarmonicFeatureMap, draw_posterior_paths

DRAWS = 3000
NOISE = 0.05


def sphere_data(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 3, generator=generator, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    return x, x[:, 0] * x[:, 1] + torch.sin(2 * x[:, 2])


def exact_gp(kernel) -> SingleTaskGP:
    x, y = sphere_data(30, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch's advice to standardise the data
        model = SingleTaskGP(
            x, y.unsqueeze(-1), covar_module=kernel, mean_module=ZeroMean(), outcome_transform=None
        )
    model.likelihood.noise = NOISE
    return model.eval()


def moments(draws: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return draws.mean(0), torch.cov(draws.T)


def assert_moments_match(draws, mean, covariance, *, count_reference: float = math.inf):
    """Mean and covariance of draws [S, N] against (mean, covariance), within 5 standard errors;
    ``count_reference`` is the sample count behind a reference that is itself Monte Carlo."""
    count = len(draws)
    spread = 1 / count + 1 / count_reference
    variance = covariance.diagonal()
    empirical_mean, empirical_covariance = moments(draws)
    assert ((empirical_mean - mean).abs() <= 5 * (variance * spread).sqrt() + 1e-12).all()
    standard_error = ((torch.outer(variance, variance) + covariance**2) * spread).sqrt()
    assert ((empirical_covariance - covariance).abs() <= 5 * standard_error + 1e-12).all()


def test_gen_kernel_features_gives_the_exact_harmonic_map_also_inside_a_scale_kernel():
    kernel = ScaleKernel(ChordalMaternKernel(3)).double()
    kernel.outputscale = 2.0
    feature_map = gen_kernel_features(kernel, num_inputs=3, num_outputs=512)
    x = sphere_data(20, seed=1)[0]
    assert feature_map.num_outputs <= 512
    with torch.no_grad():
        features = feature_map(x)  # BoTorch chains its outputscale transform after ours
        gram = kernel(x).to_dense()
    base_map = gen_kernel_features(kernel.base_kernel, num_inputs=3, num_outputs=512)
    assert isinstance(base_map, HarmonicFeatureMap)
    missing = 2.0 * float(base_map.truncation.missing_variance)
    assert ((features @ features.T - gram).abs() <= missing + 1e-12).all()
    with pytest.raises(ValueError, match="ambient_dim=3"):
        gen_kernel_features(kernel.base_kernel, num_inputs=4, num_outputs=64)


def test_botorch_matheron_paths_of_an_exact_gp_with_a_zonal_kernel_sample_its_posterior():
    torch.manual_seed(0)
    kernel = ScaleKernel(ChordalMaternKernel(3, nu=1.5)).double()
    model = exact_gp(kernel)
    paths = draw_matheron_paths(model, torch.Size([DRAWS]))
    assert isinstance(paths["prior_paths"].feature_map, HarmonicFeatureMap)
    x = sphere_data(4, seed=2)[0]
    with torch.no_grad():
        draws = paths(x)  # [S, N]
        posterior = model.posterior(x)
    assert_moments_match(
        draws, posterior.mean.squeeze(-1), posterior.distribution.covariance_matrix
    )


def test_zonal_sgpr_paths_and_botorch_exact_paths_have_the_same_distribution():
    """SGPR with every harmonic of a Mercer-sum kernel is the exact GP (Kff = Phi Lambda Phi^T),
    so both samplers target one distribution: their Monte Carlo moments agree."""
    torch.manual_seed(0)
    kernel = PolynomialDecayKernel(3, max_degree=5)
    model = exact_gp(kernel)
    x_train, y_train = sphere_data(30, seed=0)
    sgpr = SGPR(
        kernel,
        SphericalHarmonicFeatures(3, 5, kernel=kernel),
        3,
        input_map=OnSphere(),
        noise=NOISE,
    )
    sgpr.fit_statistics(x_train, y_train)
    x = sphere_data(4, seed=3)[0]
    with torch.no_grad():
        exact, collapsed = model.posterior(x), sgpr.posterior(x)
    torch.testing.assert_close(collapsed.mean, exact.mean, atol=1e-8, rtol=0)
    torch.testing.assert_close(
        collapsed.distribution.covariance_matrix,
        exact.distribution.covariance_matrix,
        atol=1e-8,
        rtol=0,
    )
    botorch_paths = draw_matheron_paths(model, torch.Size([DRAWS]))
    prior_map = botorch_paths["prior_paths"].feature_map
    assert isinstance(prior_map, HarmonicFeatureMap)
    assert float(prior_map.truncation.missing_variance) <= 1e-12  # a Mercer sum: exact
    with torch.no_grad():
        botorch_draws = botorch_paths(x)
        zonal_draws = draw_posterior_paths(sgpr, torch.Size([DRAWS]))(x)
    mean, covariance = exact.mean.squeeze(-1), exact.distribution.covariance_matrix
    assert_moments_match(botorch_draws, mean, covariance)
    assert_moments_match(zonal_draws, mean, covariance)
    reference_mean, reference_covariance = moments(botorch_draws)
    assert_moments_match(zonal_draws, reference_mean, reference_covariance, count_reference=DRAWS)


def svgp(num_outputs: int = 1) -> SVGP:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(50, 2, generator=generator, dtype=torch.float64) * 2 - 1
    y = torch.sin(3 * x[:, 0]) + 0.5 * torch.cos(2 * x[:, 1])
    kernel = ScaleKernel(ArcCosineKernel(3, homogeneous=True)).double()
    features = SphericalHarmonicFeatures(3, 5, kernel=kernel)
    model = SVGP(kernel, features, 2, num_outputs=num_outputs)
    if num_outputs == 1:
        model.set_optimal_variational_distribution(x, y)
    return model


def test_botorch_draw_matheron_paths_on_zonal_models_gives_the_inter_domain_paths():
    torch.manual_seed(0)
    model = svgp()
    x = torch.tensor([[0.1, -0.3], [0.5, 0.5], [-0.7, 0.2]], dtype=torch.float64)
    paths = draw_matheron_paths(model, torch.Size([DRAWS]))
    with torch.no_grad():
        draws = paths(x)  # BoTorch's convention: [S, N]
        posterior = model.posterior(x)
    assert draws.shape == (DRAWS, 3)
    assert_moments_match(
        draws, posterior.mean.squeeze(-1), posterior.distribution.covariance_matrix
    )


def sgpr_on_data() -> SGPR:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(50, 2, generator=generator, dtype=torch.float64) * 2 - 1
    kernel = ScaleKernel(ArcCosineKernel(3, homogeneous=True)).double()
    model = SGPR(kernel, SphericalHarmonicFeatures(3, 5, kernel=kernel), 2)
    model.fit_statistics(x, torch.sin(3 * x[:, 0]))
    return model


def exact_on_data() -> ExactZonalGP:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(30, 2, generator=generator, dtype=torch.float64) * 2 - 1
    kernel = ScaleKernel(ArcCosineKernel(3, homogeneous=True)).double()
    return ExactZonalGP(kernel, x, torch.sin(3 * x[:, 0]), noise=0.01)


@pytest.mark.parametrize(
    "make", [svgp, sgpr_on_data, exact_on_data], ids=["SVGP", "SGPR", "exact GP"]
)
def test_pathwise_thompson_sampling_takes_a_zonal_model(make):
    torch.manual_seed(0)
    model = make()
    acquisition = PathwiseThompsonSampling(model)
    probe = (torch.rand(5, 1, 2, dtype=torch.float64) * 2 - 1).requires_grad_(True)
    first, second = acquisition(probe), acquisition(probe)
    assert first.shape == (5,)
    torch.testing.assert_close(first, second, atol=0, rtol=0)  # one fixed draw
    first.sum().backward()
    assert torch.isfinite(probe.grad).all() and probe.grad.abs().sum() > 0
    bounds = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    candidate, value = optimize_acqf(
        acquisition, bounds=bounds, q=1, num_restarts=2, raw_samples=16, options={"maxiter": 20}
    )
    assert candidate.shape == (1, 2) and ((candidate >= -1) & (candidate <= 1)).all()
    torch.testing.assert_close(acquisition(candidate.unsqueeze(0)), value.reshape(1))


def test_pathwise_thompson_sampling_of_a_two_output_model_through_an_objective():
    torch.manual_seed(0)
    model = svgp(num_outputs=2)
    weights = torch.tensor([1.0, -0.5], dtype=torch.float64)
    acquisition = PathwiseThompsonSampling(model, objective=LinearMCObjective(weights))
    probe = torch.rand(4, 1, 2, dtype=torch.float64) * 2 - 1
    values = acquisition(probe)
    paths = acquisition.samples  # BoTorch's MatheronPathModel: [b, q, 1, m] outputs
    outputs = paths(probe.unsqueeze(-2)).squeeze(-2)  # [4, 1, 2]
    torch.testing.assert_close(values, (outputs @ weights).sum(-1))


def test_importing_the_models_alone_registers_zonal_with_botorch():
    """A user who imports only ``zonal.models`` (never ``zonal.sampling``) gets BoTorch's
    pathwise draws of a zonal model (``get_optimal_samples``, as joint entropy search builds
    them): a fresh interpreter, so no other test's import registers it first."""
    code = (
        "import torch\n"
        "from botorch.acquisition.utils import get_optimal_samples\n"
        "from gpytorch.kernels import ScaleKernel\n"
        "from zonal.kernels import ArcCosineKernel\n"
        "from zonal.models import ExactZonalGP\n"
        "x = torch.rand(20, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))\n"
        "kernel = ScaleKernel(ArcCosineKernel(3, homogeneous=True)).double()\n"
        "model = ExactZonalGP(kernel, x, torch.sin(3 * x[:, 0]), noise=0.05).eval()\n"
        "bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)\n"
        "optima, values = get_optimal_samples(model, bounds, num_optima=3)\n"
        "print(tuple(optima.shape), tuple(values.shape))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "(3, 2) (3, 1)"
