"""The ELBO's optimum q(u) at fixed hyperparameters by natural-gradient steps
(``zonal.variational.nonconjugate``, ``SVGP.set_natural_gradient_optimum``), checked against
Titsias' closed form (Gaussian likelihood) and GPyTorch's own ELBO and its gradients (probit and
softmax classifiers)."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.likelihoods import BernoulliLikelihood, SoftmaxLikelihood

from zonal.features import ActivatedFeatures, InducingPoints, SphericalHarmonicFeatures
from zonal.kernels import ArcCosineKernel
from zonal.models import SVGP

INPUT_DIM = 2


def inputs(count: int = 60, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(count, INPUT_DIM, generator=generator, dtype=torch.float64)


def build(kind: str, *, likelihood=None, num_outputs: int = 1, whiten: bool = True) -> SVGP:
    """An SVGP of each feature kind, its q(u) moved off the prior (so that the steps have work)."""
    if kind == "points":
        kernel = ScaleKernel(RBFKernel()).double()
        features = InducingPoints(_lift(0.8 * inputs(12, seed=5)))
    else:
        kernel = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
        features = (
            SphericalHarmonicFeatures(INPUT_DIM + 1, 4, kernel=kernel)
            if kind == "harmonic"
            else ActivatedFeatures(INPUT_DIM + 1, 10, kernel=kernel, truncation_level=6)
        )
    model = SVGP(kernel, features, INPUT_DIM, likelihood=likelihood, num_outputs=num_outputs,
                 whiten=whiten)  # fmt: skip
    strategy = model.inducing_strategy
    generator = torch.Generator().manual_seed(3)
    shape = strategy.current_q().mean.shape  # [*b, M]
    mean = 0.3 * torch.randn(shape, generator=generator, dtype=torch.float64)
    root = 0.2 * torch.randn(*shape, shape[-1], generator=generator, dtype=torch.float64)
    covariance = root @ root.mT + 0.5 * torch.eye(shape[-1], dtype=torch.float64)
    strategy.set_variational(mean, covariance, whitened=True)
    return model


def _lift(x: torch.Tensor) -> torch.Tensor:
    """Rows [x, 1] (the default embedding's lift, bias 1): inducing points among the data's."""
    return torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=-1)


def whitened_q(model: SVGP) -> tuple[torch.Tensor, torch.Tensor]:
    strategy = model.inducing_strategy
    q = strategy.current_q()
    mean, covariance = q.mean.detach(), q.covariance_matrix.detach()
    if not strategy.whiten:
        mean, covariance = strategy.to_whitened(mean, covariance)
    return mean, covariance


def gpytorch_elbo(model: SVGP, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """N times GPyTorch's ``VariationalELBO`` (its expected log likelihood and KL), in nats."""
    model.train()
    objective = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(x))
    return objective(model(x), y) * len(x)


@pytest.mark.parametrize("kind", ["harmonic", "activated", "points"])
@pytest.mark.parametrize("whiten", [True, False])
def test_a_gaussian_likelihood_lands_on_the_titsias_optimum(kind, whiten):
    x = inputs()
    y = torch.sin(2 * x[:, 0]) + 0.3 * x[:, 1]
    model = build(kind, whiten=whiten)
    model.likelihood.noise = 0.05
    reference = build(kind, whiten=whiten)
    reference.load_state_dict(model.state_dict())
    reference.set_optimal_variational_distribution(x, y)
    result = model.set_natural_gradient_optimum(x, y)
    mean, covariance = whitened_q(model)
    expected_mean, expected_covariance = whitened_q(reference)
    torch.testing.assert_close(mean, expected_mean, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(covariance, expected_covariance, rtol=1e-7, atol=1e-8)
    assert result.steps >= 1 and result.converged
    assert result.trace[1] == pytest.approx(result.elbo, abs=1e-6)  # the first step is the optimum


def test_a_step_at_the_optimum_that_lowers_the_elbo_by_rounding_converges(monkeypatch):
    """At the optimum a full step changes the ELBO by rounding only; a fall of 1e-12 nats (seen on
    one machine with a Gaussian likelihood) must end the iterations as converged, not halve the
    step to its floor."""
    from zonal.variational import nonconjugate

    calls = []
    exact = nonconjugate.expected_log_likelihood

    def drifting(*args, **kwargs):  # each evaluation 1e-12 nats below the last one
        calls.append(None)
        return exact(*args, **kwargs) - 1e-12 * len(calls)

    monkeypatch.setattr(nonconjugate, "expected_log_likelihood", drifting)
    x = inputs()
    y = torch.sin(2 * x[:, 0]) + 0.3 * x[:, 1]
    model = build("harmonic", whiten=True)
    model.likelihood.noise = 0.05
    result = model.set_natural_gradient_optimum(x, y)
    assert result.converged and result.steps == 1 and result.tries == 2  # the optimum, confirmed


@pytest.mark.parametrize("kind", ["harmonic", "points"])
def test_a_probit_classifier_reaches_the_stationary_point_of_gpytorchs_elbo(kind):
    x = inputs(80)
    y = (x[:, 0] + 0.5 * torch.sin(3 * x[:, 1]) > 0).double()
    model = build(kind, likelihood=BernoulliLikelihood().double())
    start = float(gpytorch_elbo(model, x, y).detach())
    result = model.set_natural_gradient_optimum(x, y, tolerance=1e-9)
    assert result.converged and result.steps >= 2
    assert list(result.trace) == sorted(result.trace)  # every step taken raised the ELBO
    assert result.trace[0] == pytest.approx(start, rel=1e-9)  # its ELBO is GPyTorch's
    elbo = gpytorch_elbo(model, x, y)
    assert float(elbo) == pytest.approx(result.elbo, rel=1e-9)
    # stationary in both of q(u)'s parameters: the mean and the covariance's Cholesky root
    distribution = model.inducing_strategy._variational_distribution
    parameters = [distribution.variational_mean, distribution.chol_variational_covar]
    gradients = torch.autograd.grad(elbo, parameters)
    model.zero_grad()
    start_model = build(kind, likelihood=BernoulliLikelihood().double())
    start_elbo = gpytorch_elbo(start_model, x, y)
    start_distribution = start_model.inducing_strategy._variational_distribution
    start_gradients = torch.autograd.grad(
        start_elbo, [start_distribution.variational_mean, start_distribution.chol_variational_covar]
    )
    for gradient, start_gradient in zip(gradients, start_gradients, strict=True):
        assert gradient.norm() < 1e-4 * start_gradient.norm()


def test_a_softmax_classifier_beats_adam_on_its_variational_parameters():
    """Three classes (a q(u) per class): the steps' ELBO (GPyTorch's, estimated with 4,000
    draws, whose Monte Carlo error is below 0.05 nats here) is at least that of 400 Adam steps on
    q(u) alone from the same start."""
    x = inputs(90)
    y = torch.bucketize(x[:, 0] + 0.4 * x[:, 1], torch.tensor([-0.5, 0.5], dtype=torch.float64))
    likelihood = SoftmaxLikelihood(num_classes=3, mixing_weights=False).double()
    model = build("harmonic", likelihood=likelihood, num_outputs=3)
    adam = build("harmonic", likelihood=likelihood, num_outputs=3)
    adam.load_state_dict(model.state_dict())
    result = model.set_natural_gradient_optimum(x, y)
    assert result.converged and result.elbo > result.trace[0]
    parameters = [p for name, p in adam.named_parameters() if "variational_distribution" in name]
    optimiser = torch.optim.Adam(parameters, lr=0.02)
    torch.manual_seed(0)
    for _ in range(400):
        optimiser.zero_grad()
        (-gpytorch_elbo(adam, x, y)).backward()
        optimiser.step()
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(4000):
        torch.manual_seed(1)
        steps_elbo = float(gpytorch_elbo(model, x, y))
        torch.manual_seed(1)
        adam_elbo = float(gpytorch_elbo(adam, x, y))
    assert steps_elbo == pytest.approx(result.elbo, abs=0.5)  # the fixed draws' estimate
    assert steps_elbo >= adam_elbo - 0.05


@pytest.mark.parametrize("kind", ["harmonic", "activated", "points"])
@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("num_outputs", [1, 3])
def test_the_steps_marginals_are_the_models_q_f(kind, whiten, num_outputs):
    """The marginals the steps use (B, the prior mean and r = diag(Kff) - colsum(B * B), with
    q(v)) are the means and variances of the model's own q(f(x)), with a learned constant prior
    mean per output."""
    x = inputs(40)
    model = build(kind, num_outputs=num_outputs, whiten=whiten)
    batch = torch.Size([num_outputs]) if num_outputs > 1 else torch.Size()
    model.mean_module = gpytorch.means.ConstantMean(batch_shape=batch).double()
    with torch.no_grad():
        model.mean_module.constant.copy_(torch.linspace(-0.5, 0.7, num_outputs).reshape(batch))
    model.eval()
    with torch.no_grad():
        marginal = model(x)
        marginals, mean, covariance = model._whitened_marginals(x)
        mu, s = marginals.of(mean, covariance)  # [*b, N]
    expected_mu, expected_s = marginal.mean, marginal.variance  # [N] or [N, P]
    if num_outputs > 1:
        expected_mu, expected_s = expected_mu.mT, expected_s.mT
    torch.testing.assert_close(mu, expected_mu, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(s, expected_s, rtol=1e-9, atol=1e-10)


def test_wrong_targets_are_refused_by_shape():
    x = inputs()
    model = build("harmonic", likelihood=BernoulliLikelihood().double())
    with pytest.raises(ValueError, match="60 rows"):
        model.set_natural_gradient_optimum(x, torch.zeros(59, dtype=torch.float64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_steps_run_on_the_inputs_device():
    x = inputs(80).cuda()
    y = (x[:, 0] > 0).double()
    model = build("harmonic", likelihood=BernoulliLikelihood().double()).cuda()
    result = model.set_natural_gradient_optimum(x, y)
    assert result.converged
    assert model.inducing_strategy.current_q().mean.device.type == "cuda"
