"""ExactZonalGP against independent truths: the posterior and the marginal likelihood against
dense numpy / scipy formulas with the first-order arc-cosine kernel written out by hand
(k(x, x') = r r' (sin t + (pi - t) cos t) / pi, Cho and Saul 2009, normalised to k = r^2 at t = 0);
conditioning on new rows against the model refitted on all rows at the same hyperparameters
(fantasy batches included); L-BFGS raising log p(y); checkpoints of another row count; BoTorch's
qLogEI through the model, with the factor computed once."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import scipy.stats
import torch
from botorch.acquisition.logei import qLogExpectedImprovement
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.kernels import ScaleKernel

from zonal.geometry import SphereEmbedding
from zonal.kernels import ArcCosineKernel
from zonal.models import ExactZonalGP


def arccos_gram(a: np.ndarray, b: np.ndarray, scales: np.ndarray, bias: float) -> np.ndarray:
    """The first-order arc-cosine kernel of [s * x, b] by hand (module docstring)."""
    lift_a = np.hstack([a * scales, np.full((len(a), 1), bias)])
    lift_b = np.hstack([b * scales, np.full((len(b), 1), bias)])
    norm_a, norm_b = np.linalg.norm(lift_a, axis=1), np.linalg.norm(lift_b, axis=1)
    cosine = np.clip(lift_a @ lift_b.T / np.outer(norm_a, norm_b), -1, 1)
    angle = np.arccos(cosine)
    return np.outer(norm_a, norm_b) * (np.sin(angle) + (np.pi - angle) * cosine) / np.pi


def make_model(n: int = 40, d: int = 3, seed: int = 0, noise: float = 0.05) -> ExactZonalGP:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=generator, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0]) + 0.3 * x[:, 1] ** 2 + 0.1 * torch.randn(n, generator=generator,
                                                                         dtype=torch.float64)  # fmt: skip
    kernel = ScaleKernel(ArcCosineKernel(d + 1, order=1, homogeneous=True)).double()
    kernel.outputscale = 1.7
    embedding = SphereEmbedding(1.3, input_scales=torch.tensor([0.5, 2.0, 1.0][:d]))
    model = ExactZonalGP(kernel, x, y, input_map=embedding, noise=noise)
    with torch.no_grad():
        model.constant.fill_(0.25)
    return model.eval()


def dense_posterior(model: ExactZonalGP, test: np.ndarray, extra=None):
    """(mean, cov) by numpy's solve on the hand-written kernel; ``extra`` = (x, y, noise) rows
    appended to the training rows."""
    scales = model.input_map.input_scales.detach().numpy()
    bias = float(model.input_map.bias)
    outputscale = float(model.kernel.outputscale)
    x, y = model.train_x.numpy(), model.train_y.numpy()
    noise = np.full(len(x), float(model.noise))
    if extra is not None:
        x = np.vstack([x, extra[0]])
        y = np.concatenate([y, extra[1]])
        noise = np.concatenate([noise, extra[2]])
    gram = outputscale * arccos_gram(x, x, scales, bias) + np.diag(noise)
    cross = outputscale * arccos_gram(test, x, scales, bias)
    prior = outputscale * arccos_gram(test, test, scales, bias)
    constant = float(model.constant)
    mean = constant + cross @ np.linalg.solve(gram, y - constant)
    cov = prior - cross @ np.linalg.solve(gram, cross.T)
    return mean, cov


def test_the_posterior_is_the_dense_closed_form():
    model = make_model()
    test = torch.randn(7, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    distribution = model.latent_distribution(test)
    mean, cov = dense_posterior(model, test.numpy())
    np.testing.assert_allclose(distribution.mean.detach().numpy(), mean, atol=1e-9, rtol=0)
    np.testing.assert_allclose(
        distribution.covariance_matrix.detach().numpy(), cov, atol=1e-9, rtol=0
    )
    predicted_mean, variance = model.predict(test, include_noise=True)
    np.testing.assert_allclose(variance.numpy(), np.diag(cov) + float(model.noise), atol=1e-9)
    np.testing.assert_allclose(predicted_mean.numpy(), mean, atol=1e-9)


def test_the_marginal_likelihood_is_scipys_multivariate_normal_density():
    model = make_model()
    scales = model.input_map.input_scales.detach().numpy()
    x, y = model.train_x.numpy(), model.train_y.numpy()
    gram = float(model.kernel.outputscale) * arccos_gram(x, x, scales, float(model.input_map.bias))
    expected = scipy.stats.multivariate_normal(
        np.full(len(y), float(model.constant)), gram + float(model.noise) * np.eye(len(y))
    ).logpdf(y)
    assert float(model.marginal_log_likelihood()) == pytest.approx(expected, abs=1e-9)


def test_leave_one_out_densities_are_the_dense_posteriors_of_the_other_rows():
    model = make_model(n=15)
    x, y = model.train_x.numpy(), model.train_y.numpy()
    expected = []
    for row in range(len(y)):
        others = np.delete(np.arange(len(y)), row)
        held_out = type(model)(model.kernel, torch.from_numpy(x[others]),
                               torch.from_numpy(y[others]), input_map=model.input_map,
                               noise=float(model.noise.detach()))  # fmt: skip
        with torch.no_grad():
            held_out.constant.copy_(model.constant)
        mean, cov = dense_posterior(held_out, x[row : row + 1])
        variance = cov[0, 0] + float(model.noise)
        expected.append(scipy.stats.norm(mean[0], math.sqrt(variance)).logpdf(y[row]))
    np.testing.assert_allclose(
        model.leave_one_out_log_density().numpy(), expected, atol=1e-9, rtol=0
    )


def test_conditioning_equals_the_model_on_all_rows_at_the_same_hyperparameters():
    model = make_model()
    generator = torch.Generator().manual_seed(7)
    new_x = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    new_y = torch.randn(4, generator=generator, dtype=torch.float64)
    new_noise = torch.tensor([0.01, 0.02, 0.05, 0.1], dtype=torch.float64)
    test = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    conditioned = model.condition_on_observations(
        new_x, new_y.unsqueeze(-1), noise=new_noise.unsqueeze(-1)
    )
    distribution = conditioned.latent_distribution(test)
    mean, cov = dense_posterior(
        model, test.numpy(), (new_x.numpy(), new_y.numpy(), new_noise.numpy())
    )
    np.testing.assert_allclose(distribution.mean.detach().numpy(), mean, atol=1e-9, rtol=0)
    np.testing.assert_allclose(distribution.covariance_matrix.detach().numpy(), cov, atol=1e-9)
    # twice: two rows, then the other two, is the same as four at once
    twice = model.condition_on_observations(
        new_x[:2], new_y[:2].unsqueeze(-1), noise=new_noise[:2].unsqueeze(-1)
    ).condition_on_observations(
        new_x[2:], new_y[2:].unsqueeze(-1), noise=new_noise[2:].unsqueeze(-1)
    )
    torch.testing.assert_close(twice.latent_distribution(test).mean, distribution.mean)


def test_fantasies_are_batches_of_conditioned_models():
    model = make_model()
    generator = torch.Generator().manual_seed(3)
    points = torch.randn(2, 1, 3, generator=generator, dtype=torch.float64)  # [b, q, D]
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([5]), seed=0)
    fantasy = model.fantasize(points, sampler)
    assert fantasy.batch_shape == torch.Size([5, 2])
    test = torch.randn(2, 3, 3, generator=generator, dtype=torch.float64)  # [b, q*, D]
    means = fantasy.posterior(test).mean.squeeze(-1)  # [5, 2, 3]
    assert means.shape == (5, 2, 3)
    # fantasy 4 of batch 1 against the dense model on the training rows plus that observation
    observed = fantasy._new_rows[1][4, 1].detach().numpy()  # [q]
    noise = np.full(1, float(model.noise))
    mean, _ = dense_posterior(model, test[1].numpy(), (points[1].numpy(), observed, noise))
    np.testing.assert_allclose(means[4, 1].detach().numpy(), mean, atol=1e-9)


def test_lbfgs_raises_the_marginal_likelihood_and_stops_at_the_deadline():
    model = make_model(n=60)
    before = float(model.marginal_log_likelihood())
    trace = model.fit(max_iter=30)
    after = float(model.marginal_log_likelihood())
    assert after > before + 1.0
    assert max(trace) == pytest.approx(after / 60, abs=1e-12)  # the best evaluation is kept
    # a deadline that leaves time enough ends where no deadline does (one L-BFGS run, stopped
    # from its closure: iterations run one per call had let the input scales diverge)
    timed = make_model(n=60)
    timed_trace = timed.fit(max_iter=30, deadline=time.monotonic() + 600)
    assert timed_trace == trace
    assert not model.training
    quick = make_model(n=60)
    trace = quick.fit(max_iter=1000, deadline=time.monotonic())
    assert len(trace) < 30  # one iteration, then the deadline stops it


def test_a_checkpoint_of_another_row_count_loads_and_predicts_the_same():
    model = make_model(n=40)
    other = make_model(n=10, seed=1)
    other.load_state_dict(model.state_dict())
    test = torch.randn(5, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.testing.assert_close(other.predict(test), model.predict(test))
    model.set_training_data(model.train_x[:20], model.train_y[:20])
    mean, _ = dense_posterior(model, test.numpy())
    np.testing.assert_allclose(model.predict(test)[0].numpy(), mean, atol=1e-9)


def test_botorch_qlogei_runs_through_the_model_and_factors_once(monkeypatch):
    model = make_model()
    calls = []
    original = model._train_factor
    monkeypatch.setattr(model, "_train_factor", lambda: calls.append(1) or original())
    acquisition = qLogExpectedImprovement(model, best_f=float(model.train_y.max()))
    x = torch.randn(4, 2, 3, dtype=torch.float64, requires_grad=True)
    values = acquisition(x)
    values.sum().backward()
    acquisition(x.detach() + 0.1)
    assert values.shape == (4,)
    assert torch.isfinite(x.grad).all()
    assert len(calls) == 1


@pytest.mark.parametrize("setting", ["noise", "outputscale", "constant"])
def test_a_hyperparameter_set_after_predicting_moves_the_posterior(setting):
    """GPyTorch's setters write through ``.data`` (no version bump): the factor kept in
    evaluation mode is computed again, so the posterior is the dense closed form at the new
    value (it stayed at the old one)."""
    model = make_model()
    test = torch.randn(5, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    before = model.latent_distribution(test).mean.detach().clone()
    if setting == "noise":
        model.likelihood.noise = 1.0
    elif setting == "outputscale":
        model.kernel.outputscale = 5.0
    else:
        model.constant.data.fill_(-1.0)
    distribution = model.latent_distribution(test)
    mean, cov = dense_posterior(model, test.numpy())
    assert not np.allclose(before.numpy(), mean, atol=1e-6)  # the change matters
    np.testing.assert_allclose(distribution.mean.detach().numpy(), mean, atol=1e-9, rtol=0)
    np.testing.assert_allclose(
        distribution.covariance_matrix.detach().numpy(), cov, atol=1e-9, rtol=0
    )


def test_calling_the_model_gives_its_latent_posterior():
    """``model(X)`` in evaluation mode is q(f(X)), as GPyTorch's exact GPs answer it (BoTorch's
    ``qLowerBoundMaxValueEntropy`` with pending points calls the model so)."""
    model = make_model()
    test = torch.randn(2, 4, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    called, latent = model(test), model.latent_distribution(test)
    torch.testing.assert_close(called.mean, latent.mean, rtol=0, atol=0)
    torch.testing.assert_close(called.covariance_matrix, latent.covariance_matrix, rtol=0, atol=0)


@pytest.mark.parametrize("problem", ["rows", "finite"])
def test_bad_training_data_is_named(problem):
    kernel = ScaleKernel(ArcCosineKernel(3, order=1, homogeneous=True)).double()
    x = torch.zeros(5, 2, dtype=torch.float64)
    if problem == "rows":
        with pytest.raises(ValueError, match="x has 5 rows but y has 4"):
            ExactZonalGP(kernel, x, torch.zeros(4, dtype=torch.float64))
    else:
        y = torch.tensor([0.0, 1.0, math.nan, 0.0, math.inf], dtype=torch.float64)
        with pytest.raises(ValueError, match=r"y contains NaN .*\(2 row\(s\), first at row 2\)"):
            ExactZonalGP(kernel, x, y)


def test_a_gpytorch_prior_on_the_kernel_is_part_of_the_fit():
    """``lengthscale_prior=NormalPrior(3, 0.01)`` on a chordal Matérn kernel pins the fitted
    lengthscale near 3, as GPyTorch's ``ExactMarginalLogLikelihood`` would (it was ignored: the
    fit went to the likelihood's own optimum); the trace's last value is
    (log p(y) + log p(lengthscale)) / N at the fitted parameters."""
    from gpytorch.priors import NormalPrior

    from zonal.kernels import ChordalMaternKernel

    generator = torch.Generator().manual_seed(1)
    x = torch.randn(40, 2, generator=generator, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(40, generator=generator, dtype=torch.float64)

    def fitted(prior):
        kernel = ChordalMaternKernel(3, homogeneous=True, lengthscale_prior=prior) \
            if prior is not None else ChordalMaternKernel(3, homogeneous=True)  # fmt: skip
        model = ExactZonalGP(ScaleKernel(kernel).double(), x, y, input_map=SphereEmbedding(1.0))
        return model, model.fit(max_iter=60)

    free, _ = fitted(None)
    pinned, trace = fitted(NormalPrior(3.0, 0.01))
    assert abs(float(free.kernel.base_kernel.lengthscale) - 3.0) > 0.1  # the data alone: elsewhere
    assert float(pinned.kernel.base_kernel.lengthscale) == pytest.approx(3.0, abs=0.02)
    with torch.no_grad():
        prior = NormalPrior(3.0, 0.01).log_prob(pinned.kernel.base_kernel.lengthscale).sum()
        expected = (pinned.marginal_log_likelihood() + prior) / 40
    assert max(trace) == pytest.approx(float(expected), rel=1e-7)
