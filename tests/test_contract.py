"""The model contract (zonal.models.contract): every model (conditioned on new rows, or seen
through its moment-matched Gaussian, too) answers posterior, predict and log_predictive_density
the same way, and BoTorch's qLogExpectedImprovement + optimize_acqf take it
unchanged. Each claim is checked against an independent computation: the posterior's moments
against predict, the noisy posterior against the likelihood's noise, the log density against
Normal log densities (log-mean-exp over the mixture for deep models), batched posteriors against
one-at-a-time ones, and Monte Carlo samples against the moments."""

from __future__ import annotations

import math

import pytest
import torch
from botorch.acquisition import qLogExpectedImprovement
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.kernels import ScaleKernel

from zonal.features import ActivatedFeatures, InducingPoints, SphericalHarmonicFeatures
from zonal.kernels import ArcCosineKernel
from zonal.models import (
    SGPR,
    SVGP,
    ActivatedDGP,
    ExactZonalGP,
    ZonalModel,
    fit_svgp,
    inducing_point_dgp,
)
from zonal.tabular.recipes import gaussian_likelihood

INPUT_DIM = 2
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def objective(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(3 * x[..., 0]) + 0.5 * torch.cos(2 * x[..., 1])


def training_data(count: int = 60, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(count, INPUT_DIM, generator=generator, dtype=torch.float64) * 2 - 1
    return x, objective(x)


def arccos() -> ScaleKernel:
    return ScaleKernel(ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)).double()


def svgp_harmonic(x, y):
    kernel = arccos()
    model = SVGP(kernel, SphericalHarmonicFeatures(INPUT_DIM + 1, 6, kernel=kernel), INPUT_DIM)
    model.set_optimal_variational_distribution(x, y)
    return model


def svgp_activated(x, y):
    features = ActivatedFeatures(INPUT_DIM + 1, 24, activation="softplus", truncation_level=8)
    model = SVGP(arccos(), features, INPUT_DIM)
    model.set_optimal_variational_distribution(x, y)
    return model


def svgp_points(x, y):
    lifted = torch.cat([x[:12], torch.ones(12, 1, dtype=x.dtype)], -1)
    model = SVGP(arccos(), InducingPoints(lifted), INPUT_DIM)
    model.set_optimal_variational_distribution(x, y)
    return model


def sgpr(x, y):
    kernel = arccos()
    model = SGPR(kernel, SphericalHarmonicFeatures(INPUT_DIM + 1, 6, kernel=kernel), INPUT_DIM)
    model.fit_statistics(x, y)
    model.fit(max_iter=20)
    return model


def exact(x, y):
    model = ExactZonalGP(arccos(), x, y, noise=0.05)
    model.fit(max_iter=10)
    return model


def dgp(x, y):
    model = inducing_point_dgp(x, [INPUT_DIM, 3, 1], gaussian_likelihood(0.05), num_inducing=10)
    model.num_posterior_samples = 8
    fit_model_briefly(model, x, y)
    return model


def activated_dgp(x, y):
    model = ActivatedDGP(INPUT_DIM, [3], gaussian_likelihood(0.05), num_inducing=12)
    model.num_posterior_samples = 8
    fit_model_briefly(model, x, y)
    return model


def residual(x, y):
    from zonal.models import residual_dgp

    model = residual_dgp(INPUT_DIM, 1, 9, likelihood=gaussian_likelihood(0.05))
    model.num_posterior_samples = 8
    fit_model_briefly(model, x, y)
    return model


def fit_model_briefly(model, x, y):
    from zonal.models import fit_dgp

    fit_dgp(model, x, y, num_steps=15, lr=0.02, batch_size=len(x))


def conditioned(build):
    """``build`` fitted to all but the last 5 rows, then conditioned on them
    (``condition_on_observations``): a conditioned model answers the same contract."""

    def make(x, y):
        return build(x[:-5], y[:-5]).condition_on_observations(x[-5:], y[-5:].unsqueeze(-1))

    return make


def moment_matched(x, y):
    from zonal.models import MomentMatchedModel

    return MomentMatchedModel(activated_dgp(x, y))


MODELS = {
    "SVGP, harmonic features": svgp_harmonic,
    "SVGP, activated features": svgp_activated,
    "SVGP, inducing points": svgp_points,
    "SGPR, harmonic features": sgpr,
    "exact GP": exact,
    "DGP, 2 layers": dgp,
    "ActivatedDGP, 2 layers": activated_dgp,
    "ResidualDGP, 1 hidden field": residual,
    "SGPR, conditioned": conditioned(sgpr),
    "exact GP, conditioned": conditioned(exact),
    "SVGP, activated features, conditioned": conditioned(svgp_activated),
    "DGP, conditioned": conditioned(dgp),
    "ResidualDGP, conditioned": conditioned(residual),
    "ActivatedDGP, moment-matched": moment_matched,
}


@pytest.fixture(scope="module", params=list(MODELS))
def fitted(request):
    x, y = training_data()
    torch.manual_seed(0)
    return request.param, MODELS[request.param](x, y)


def component_moments(model: ZonalModel, x: torch.Tensor):
    """Per-component means and variances [S, N] (S = 1 for single-layer models)."""
    with torch.no_grad():
        distribution = model.latent_distribution(x)
    mean, variance = distribution.mean, distribution.variance
    if not model._is_ensemble:
        mean, variance = mean.unsqueeze(0), variance.unsqueeze(0)
    return mean, variance


def test_every_model_is_a_botorch_model_owning_its_likelihood(fitted):
    _, model = fitted
    from botorch.models.model import Model

    assert isinstance(model, Model) and isinstance(model, ZonalModel)
    assert model.num_outputs == 1 and model.batch_shape == torch.Size()
    assert any(module is model.likelihood for module in model.modules())


def test_predict_is_the_posterior_moments(fitted):
    _, model = fitted
    x, _ = training_data(25, seed=3)
    means, variances = component_moments(model, x)  # [S, N]
    expected_mean = means.mean(0)
    expected_variance = (variances + means**2).mean(0) - expected_mean**2
    mean, variance = model.predict(x)
    torch.testing.assert_close(mean, expected_mean, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(variance, expected_variance, atol=1e-10, rtol=1e-8)
    noise = float(model.likelihood.noise)
    _, noisy = model.predict(x, include_noise=True)
    torch.testing.assert_close(
        noisy - variance, torch.full_like(variance, noise), atol=1e-10, rtol=0
    )


def test_log_predictive_density_is_the_gaussian_mixture_density(fitted):
    _, model = fitted
    x, y = training_data(25, seed=4)
    means, variances = component_moments(model, x)
    noise = float(model.likelihood.noise)
    per_component = torch.distributions.Normal(means, (variances + noise).sqrt()).log_prob(y)
    expected = torch.logsumexp(per_component, 0) - math.log(len(means))
    torch.testing.assert_close(model.log_predictive_density(x, y), expected, atol=1e-9, rtol=1e-9)


def test_a_one_column_y_gives_the_densities_of_the_vector(fitted):
    """A single-output model's ``log_predictive_density`` takes y [N, 1] as y [N] ([N] out, not
    the [N, N] of a broadcast)."""
    _, model = fitted
    x, y = training_data(12, seed=4)
    torch.manual_seed(0)
    vector = model.log_predictive_density(x, y)
    torch.manual_seed(0)
    column = model.log_predictive_density(x, y.unsqueeze(-1))
    assert column.shape == (12,)
    torch.testing.assert_close(column, vector, atol=1e-12, rtol=1e-12)


def test_batched_posterior_equals_one_batch_at_a_time(fitted):
    _, model = fitted
    x, _ = training_data(12, seed=5)
    batched = x.reshape(4, 3, INPUT_DIM)  # [b, q, d]
    posterior = model.posterior(batched)
    covariance = posterior.distribution.covariance_matrix
    for index in range(4):
        single = model.posterior(batched[index])
        torch.testing.assert_close(
            posterior.mean[index], single.mean, atol=1e-10, rtol=1e-8
        )  # [q, 1] ([S, q, 1] for deep models)
        torch.testing.assert_close(
            covariance[index], single.distribution.covariance_matrix, atol=1e-10, rtol=1e-8
        )


def test_samples_have_the_posterior_moments(fitted):
    _, model = fitted
    x, _ = training_data(3, seed=6)
    posterior = model.posterior(x.unsqueeze(0))  # [1, q = 3, d]
    samples = posterior.rsample(torch.Size([4000])).detach()  # [4000, 1, (S,) q, 1]
    if model._is_ensemble:  # the mixture: components equally weighted
        samples = samples.reshape(-1, 3)  # every component draw is a mixture draw
        mean, variance = posterior.mixture_mean.reshape(-1), posterior.mixture_variance.reshape(-1)
    else:
        samples = samples.reshape(-1, 3)
        mean, variance = posterior.mean.reshape(-1), posterior.variance.reshape(-1)
    error = (samples.mean(0) - mean).abs()
    standard_error = (variance / len(samples)).sqrt()
    assert bool((error < 5 * standard_error + 1e-12).all())
    # a Gaussian sample variance's relative standard error is sqrt(2 / n): five of them
    tolerance = 5 * math.sqrt(2 / len(samples))  # 0.11 for 4,000 draws, 0.04 for 32,000
    torch.testing.assert_close(samples.var(0), variance, rtol=tolerance, atol=1e-10)


def test_qlogei_and_optimize_acqf_take_the_model_unchanged(fitted):
    name, model = fitted
    _, y = training_data()
    sampler = SobolQMCNormalSampler(torch.Size([64]), seed=0)
    acquisition = qLogExpectedImprovement(model, best_f=float(y.max()), sampler=sampler)
    bounds = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    probe = torch.rand(5, 1, INPUT_DIM, dtype=torch.float64) * 2 - 1
    first, second = acquisition(probe), acquisition(probe)
    torch.testing.assert_close(first, second, atol=0, rtol=0)  # deterministic (fixed draws)
    probe.requires_grad_(True)
    acquisition(probe).sum().backward()
    assert torch.isfinite(probe.grad).all() and probe.grad.abs().sum() > 0, name
    candidate, value = optimize_acqf(
        acquisition, bounds=bounds, q=1, num_restarts=2, raw_samples=16, options={"maxiter": 20}
    )
    assert candidate.shape == (1, INPUT_DIM)
    assert bool(((candidate >= -1) & (candidate <= 1)).all())
    with torch.no_grad():
        assert float(value) >= float(acquisition(probe.detach()).max()) - 1e-9


def test_a_zonal_kernel_in_botorchs_exact_gp():
    """A homogeneous arc-cosine kernel on R^2 itself (inputs away from the origin)."""
    x, y = training_data(30)
    x = 0.6 + 0.4 * x  # [0.2, 1]^2
    kernel = ScaleKernel(ArcCosineKernel(INPUT_DIM, homogeneous=True)).double()
    model = SingleTaskGP(x, y.unsqueeze(-1), covar_module=kernel)
    acquisition = qLogExpectedImprovement(model, best_f=float(y.max()))
    bounds = torch.tensor([[0.2, 0.2], [1.0, 1.0]], dtype=torch.float64)
    candidate, value = optimize_acqf(
        acquisition, bounds=bounds, q=2, num_restarts=2, raw_samples=16
    )
    assert candidate.shape == (2, INPUT_DIM)
    assert bool(((candidate >= 0.2) & (candidate <= 1)).all()) and torch.isfinite(value)


@pytest.mark.parametrize("shape", [(2, 3, 1), (3, 1), (2, 3), (3,)])
def test_a_noise_tensor_broadcasts_over_the_t_batches(fitted, shape):
    """``posterior(X [2, 3, D], observation_noise=noise)`` adds the noise to the diagonal of each
    (component's) covariance, BoTorch's [*b, q, 1] and zonal's [*b, q] broadcast over the
    t-batches ([3, 1] failed); a shape that cannot broadcast is named."""
    _, model = fitted
    x, _ = training_data(6, seed=5)
    X = x.reshape(2, 3, -1)  # [2, 3, D]
    noise = torch.linspace(0.1, 0.6, math.prod(shape), dtype=x.dtype).reshape(shape)
    with torch.no_grad():
        plain = model.posterior(X).distribution.covariance_matrix
        noisy = model.posterior(X, observation_noise=noise).distribution.covariance_matrix
    per_point = (noise.squeeze(-1) if shape[-1] == 1 else noise).expand(2, 3)  # [2, 3]
    if model._is_ensemble:
        per_point = per_point.unsqueeze(-2)  # [2, 1, 3] against [2, S, 3]
    added = noisy - plain  # [2, (S,) 3, 3]
    torch.testing.assert_close(
        added, torch.diag_embed(per_point.expand(added.shape[:-1])), atol=1e-10, rtol=0
    )
    with pytest.raises(ValueError, match=r"shape \(4, 1\) does not broadcast"):
        model.posterior(X, observation_noise=torch.ones(4, 1, dtype=x.dtype))


def test_predicting_inside_a_training_loop_leaves_the_model_training(fitted):
    """``predict`` and ``log_predictive_density`` evaluate in evaluation mode and give the mode
    back (they left a model training in evaluation mode, where GPyTorch keeps a memoised q(u), so
    a training loop that monitored its model trained on a stale one); ``posterior`` leaves it in
    evaluation mode, as BoTorch's models do."""
    _, model = fitted
    x, y = training_data(5, seed=6)
    model.train()
    frozen = model.likelihood.eval()  # a part the user keeps in evaluation mode stays there
    mean, _ = model.predict(x)
    model.log_predictive_density(x, y)
    assert model.training and not frozen.training
    assert all(part.training for part in model.modules() if part not in set(frozen.modules()))
    model.eval()
    torch.testing.assert_close(model.predict(x)[0], mean)  # the same numbers either way
    assert not model.training
    model.train()
    model.posterior(x)
    assert not model.training


def test_observation_noise_needs_a_gaussian_likelihood():
    from gpytorch.likelihoods import BernoulliLikelihood

    kernel = arccos()
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, 3, kernel=kernel)
    model = SVGP(kernel, features, INPUT_DIM, likelihood=BernoulliLikelihood())
    x, _ = training_data(4)
    model.posterior(x)  # the latent posterior is fine
    with pytest.raises(ValueError, match="Gaussian likelihood"):
        model.posterior(x, observation_noise=True)


def test_multi_output_svgp_equals_independent_single_output_svgps():
    """P outputs share the features but not q(u): each output's posterior and ELBO term is that
    of a single-output SVGP with the same q(u_p)."""
    x, y = training_data(30)
    targets = torch.stack([y, -2 * y + 0.3], -1)  # [N, 2]
    kernel = arccos()
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, 4, kernel=kernel)
    joint = SVGP(kernel, features, INPUT_DIM, num_outputs=2)
    fit_svgp(joint, x, targets, num_steps=5, lr=0.05, batch_size=len(x))
    joint.eval()
    distribution = joint.inducing_strategy._variational_distribution
    test_x, _ = training_data(7, seed=9)
    joint_mean, joint_variance = joint.predict(test_x)  # [N, 2]
    for output in range(2):
        single = SVGP(kernel, features, INPUT_DIM)
        single.inducing_strategy.set_variational(
            distribution.variational_mean[output].detach(),
            distribution.covariance_matrix[output].detach()
            if hasattr(distribution, "covariance_matrix")
            else (
                distribution.chol_variational_covar[output]
                @ distribution.chol_variational_covar[output].mT
            ).detach(),
            whitened=True,
        )
        mean, variance = single.predict(test_x)
        torch.testing.assert_close(joint_mean[:, output], mean, atol=1e-10, rtol=1e-10)
        torch.testing.assert_close(joint_variance[:, output], variance, atol=1e-10, rtol=1e-10)
    with pytest.raises(ValueError, match="out of range"):
        joint.posterior(test_x, output_indices=[2])
    only_second = joint.posterior(test_x, output_indices=[1])
    torch.testing.assert_close(only_second.mean.squeeze(-1), joint_mean[:, 1])


@pytest.mark.parametrize("device", DEVICES)
def test_models_follow_the_device_and_dtype_of_their_inputs(device):
    """float32 on request: the same predictions as float64 to float32 accuracy."""
    x, y = training_data(40)
    model = svgp_harmonic(x, y)
    mean64, variance64 = model.predict(x)
    model = model.to(device=device, dtype=torch.float32)
    mean32, variance32 = model.predict(x.to(device=device, dtype=torch.float32))
    assert mean32.dtype == torch.float32 and mean32.device.type == device
    torch.testing.assert_close(mean32.double().cpu(), mean64, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(variance32.double().cpu(), variance64, atol=1e-4, rtol=1e-3)
