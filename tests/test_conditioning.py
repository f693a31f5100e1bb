"""Conditioning on observations and fantasies (zonal.models.conditioning,
zonal.variational.online), each claim against an independent truth: SGPR conditioned on q rows
against SGPR fitted on all rows; SVGP's online update against the Titsias optimum on all rows and
against the dense closed form of the same q(u) update; fantasy models against a loop over single
fantasies; transforms against models fitted on data transformed by hand."""

from __future__ import annotations

import copy

import pytest
import torch
from botorch.models.transforms import Normalize, Standardize
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.likelihoods import BernoulliLikelihood
from gpytorch.means import ConstantMean

from test_contract import (
    INPUT_DIM,
    arccos,
    dgp,
    sgpr,
    svgp_activated,
    svgp_harmonic,
    svgp_points,
    training_data,
)
from zonal.features import SphericalHarmonicFeatures
from zonal.models import SGPR, SVGP, MomentMatchedModel, StackedModel, fit_svgp
from zonal.models.conditioning import ConditioningError, condition_on_observations

TOLERANCE = {"atol": 1e-10, "rtol": 1e-10}


def moments(model, x):
    with torch.no_grad():
        distribution = model.posterior(x).distribution
    return distribution.mean, distribution.covariance_matrix


def assert_same_posterior(first, second, x, **tolerance):
    tolerance = tolerance or TOLERANCE
    for a, b in zip(moments(first, x), moments(second, x), strict=True):
        torch.testing.assert_close(a, b, **tolerance)


@pytest.fixture(scope="module")
def data():
    x, y = training_data(60)
    test_x, _ = training_data(9, seed=11)
    return x, y, test_x


# ------------------------------------------------------------------ SGPR: exact
def refitted_sgpr(model: SGPR, x, y) -> SGPR:
    """The same SGPR (same hyperparameters) with statistics from all rows."""
    full = copy.deepcopy(model)
    full.fit_statistics(x, y)
    return full


def test_sgpr_conditioned_on_q_rows_equals_sgpr_fitted_on_all_rows(data):
    x, y, test_x = data
    model = sgpr(x[:45], y[:45])
    full = refitted_sgpr(model, x, y)
    conditioned = model.condition_on_observations(x[45:], y[45:].unsqueeze(-1))
    assert_same_posterior(conditioned, full, test_x)
    torch.testing.assert_close(conditioned.elbo(), full.elbo(), **TOLERANCE)
    assert conditioned.batch_shape == torch.Size() and model.stat_count == 45
    # conditioned twice (5 rows, then 10): the same model again
    twice = model.condition_on_observations(x[45:50], y[45:50].unsqueeze(-1))
    twice = twice.condition_on_observations(x[50:], y[50:].unsqueeze(-1))
    assert_same_posterior(twice, full, test_x)


def test_new_rows_statistics_are_the_statistics_pass(data):
    """The conditioning's differentiable, batched statistics of new rows equal the statistics
    pass's own (``chunk_statistics``) on each t-batch."""
    x, y, _ = data
    model = sgpr(x[:45], y[:45])
    rows, cross, yy, radius2, count = model._row_statistics(
        x[45:].reshape(3, 5, INPUT_DIM), y[45:].reshape(3, 5), None
    )
    for batch in range(3):
        parts = model.chunk_statistics(
            x[45 + 5 * batch : 50 + 5 * batch], y[45:].reshape(3, 5)[batch]
        )
        actual = (rows[batch].mT @ rows[batch], cross[batch], yy[batch], radius2[batch], count)
        for mine, theirs in zip(actual, parts, strict=True):
            torch.testing.assert_close(mine, theirs, **TOLERANCE)


def test_sgpr_row_noise_weights_rows_exactly(data):
    """A row observed with noise s^2 / 2 carries the information of the same row observed twice
    with noise s^2 (N(y|f, s^2)^2 is proportional to N(y|f, s^2 / 2))."""
    x, y, test_x = data
    model = sgpr(x[:45], y[:45])
    noise = model.likelihood.noise.reshape(()).expand(15).clone()
    noise[:5] = noise[:5] / 2
    conditioned = model.condition_on_observations(x[45:], y[45:].unsqueeze(-1), noise.unsqueeze(-1))
    rows = torch.cat([x, x[45:50]]), torch.cat([y, y[45:50]])
    assert_same_posterior(conditioned, refitted_sgpr(model, *rows), test_x)


# ------------------------------------------------------------------ SVGP: online conditioning
@pytest.mark.parametrize("build", [svgp_harmonic, svgp_activated, svgp_points])
def test_svgp_conditioned_from_titsias_optimum_is_titsias_optimum_on_all_rows(data, build):
    x, y, test_x = data
    conditioned = build(x[:45], y[:45]).condition_on_observations(x[45:], y[45:].unsqueeze(-1))
    assert_same_posterior(conditioned, build(x, y), test_x, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("whiten", [True, False])
def test_svgp_conditioned_posterior_is_the_dense_closed_form(data, whiten):
    """Any q(u) = N(m, S) (here random, with a constant prior mean): q_new(u) = N(m', S') with
    S' = (S^-1 + A N^-1 A^T)^-1, m' = S' (S^-1 m + A N^-1 (y - mu)), A = Kuu^-1 Kuf, and the
    dense predictive N(A*^T m' + mu, K** - Kfu Kuu^-1 Kuf + A*^T S' A*) (whitened q converted
    to u first)."""
    x, y, test_x = data
    kernel = arccos()
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, 5, kernel=kernel)
    model = SVGP(kernel, features, INPUT_DIM, whiten=whiten, mean_module=ConstantMean())
    model.mean_module.constant.data.fill_(0.3)
    generator = torch.Generator().manual_seed(1)
    size = features.num_inducing
    mean = torch.randn(size, generator=generator, dtype=torch.float64)
    factor = torch.randn(size, size, generator=generator, dtype=torch.float64) / size
    strategy = model.inducing_strategy
    strategy.set_variational(mean, factor @ factor.mT + 0.1 * torch.eye(size), whitened=whiten)
    new_x, new_y = x[:6], y[:6]
    noise = torch.linspace(0.05, 0.2, 6, dtype=torch.float64)
    conditioned = model.condition_on_observations(new_x, new_y.unsqueeze(-1), noise.unsqueeze(-1))

    with torch.no_grad():
        q = strategy.current_q()
        m_u, s_u = strategy.to_unwhitened(q.mean, q.covariance_matrix) if whiten else (
            q.mean, q.covariance_matrix)  # fmt: skip
        kuu = features.kuu(kernel).to_dense()
        lift = model.input_map.lift
        a_new = torch.linalg.solve(kuu, features.kuf(kernel, lift(new_x)))  # [M, q]
        precision = torch.linalg.inv(s_u) + a_new @ torch.diag(1 / noise) @ a_new.mT
        s_new = torch.linalg.inv(precision)
        residual = new_y - 0.3
        m_new = s_new @ (torch.linalg.solve(s_u, m_u) + a_new @ (residual / noise))
        kuf = features.kuf(kernel, lift(test_x))
        a_test = torch.linalg.solve(kuu, kuf)
        expected_mean = a_test.mT @ m_new + 0.3
        kff = kernel(lift(test_x)).to_dense()
        expected_cov = kff - kuf.mT @ a_test + a_test.mT @ s_new @ a_test
    actual_mean, actual_cov = moments(conditioned, test_x)  # (the naive path's inverses: 1e-8)
    torch.testing.assert_close(actual_mean.squeeze(-1), expected_mean, atol=1e-8, rtol=1e-6)
    torch.testing.assert_close(actual_cov, expected_cov, atol=1e-8, rtol=1e-6)


def test_conditioning_refuses_what_it_cannot_do(data):
    x, y, _ = data
    kernel = arccos()
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, 4, kernel=kernel)
    classifier = SVGP(kernel, features, INPUT_DIM, likelihood=BernoulliLikelihood())
    with pytest.raises(ConditioningError, match=r"GaussianLikelihood.*BernoulliLikelihood"):
        classifier.condition_on_observations(x[:3], torch.ones(3, 1))
    point_mass = SVGP(kernel, features, INPUT_DIM, variational_family="delta")
    with pytest.raises(ValueError, match="DeltaVariationalDistribution"):
        point_mass.condition_on_observations(x[:3], y[:3].unsqueeze(-1))
    model = svgp_harmonic(x, y)
    with pytest.raises(ConditioningError, match=r"\[\.\.\., q, 1\]"):
        model.condition_on_observations(x[:3], y[:4].unsqueeze(-1))


# ------------------------------------------------------------------ fantasies
def single_fantasies(model, X, Y):
    """The loop: model conditioned on one t-batch and one fantasy at a time."""
    per_component = bool(model._is_ensemble)
    return [
        [
            condition_on_observations(model, X[j], Y[i, j], per_component=per_component)
            for j in range(X.shape[0])
        ]
        for i in range(Y.shape[0])
    ]


def stacked(x, y):
    return StackedModel([sgpr(x, y), svgp_points(x, y), dgp(x, y)], [0.5, 0.25, 0.25])


@pytest.mark.parametrize("build", [sgpr, svgp_activated, dgp, stacked])
def test_fantasies_equal_a_loop_over_single_fantasies(data, build):
    x, y, test_x = data
    torch.manual_seed(0)
    model = build(x, y)
    X = training_data(6, seed=7)[0].reshape(2, 3, INPUT_DIM)  # [b = 2, q = 3, d]
    sampler = SobolQMCNormalSampler(torch.Size([3]), seed=0)
    fantasy = model.fantasize(X, sampler)
    assert fantasy.batch_shape == torch.Size([3, 2])
    Y = sampler(model.posterior(X, observation_noise=True))  # the same draws (cached base samples)
    mean, covariance = moments(fantasy, test_x)  # [3, 2, (T,) 9, 1]
    assert mean.shape[:2] == torch.Size([3, 2])
    for i, row in enumerate(single_fantasies(model, X, Y)):
        for j, single in enumerate(row):
            single_mean, single_covariance = moments(single, test_x)
            torch.testing.assert_close(mean[i, j], single_mean, atol=1e-9, rtol=1e-9)
            torch.testing.assert_close(covariance[i, j], single_covariance, atol=1e-9, rtol=1e-9)


def test_one_layer_dgp_conditions_like_the_svgp_it_is(data):
    """With no hidden layer the deep model's update is exact: a one-layer DGP conditioned equals
    an SVGP with the same kernel, features and q(u), conditioned."""
    from zonal.models import DGP, DGPLayer

    x, y, test_x = data
    svgp = svgp_harmonic(x[:40], y[:40])
    layer = DGPLayer(svgp.covar_module, svgp.features, INPUT_DIM, None)
    q = svgp.inducing_strategy.current_q()
    layer.variational_strategy.set_variational(q.mean, q.covariance_matrix, whitened=True)
    deep = DGP([layer], copy.deepcopy(svgp.likelihood), num_posterior_samples=2)
    rows = x[40:45], y[40:45].unsqueeze(-1)
    expected_mean, expected_cov = moments(svgp.condition_on_observations(*rows), test_x)
    mean, covariance = moments(deep.condition_on_observations(*rows), test_x)  # [S, 9(, 1)]
    for s in range(2):
        torch.testing.assert_close(mean[s], expected_mean, **TOLERANCE)
        torch.testing.assert_close(covariance[s], expected_cov, **TOLERANCE)


# ------------------------------------------------------------------ transforms
def test_transforms_equal_a_model_on_data_transformed_by_hand(data):
    """Normalize + Standardize: the model's posterior is the untransformed model's on the data
    transformed by hand, mapped back (mean * s + m, covariance * s^2), before and after
    conditioning; its log density adds -log s."""
    x, y, test_x = data
    x_raw, y_raw = 3 * x + 1, 5 * y - 2  # data in other units
    kernel = arccos()
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, 5, kernel=kernel)
    bounds = torch.stack([x_raw.min(0).values, x_raw.max(0).values])
    transformed = SVGP(
        kernel,
        features,
        INPUT_DIM,
        input_transform=Normalize(INPUT_DIM),
        outcome_transform=Standardize(1),
    )
    fit_svgp(transformed, x_raw, y_raw.unsqueeze(-1), num_steps=3, batch_size=60)
    plain = SVGP(copy.deepcopy(kernel), features, INPUT_DIM)
    plain.load_state_dict(transformed.state_dict(), strict=False)
    x_hand = (x_raw - bounds[0]) / (bounds[1] - bounds[0])
    center, scale = y_raw.mean(), y_raw.std()
    test_raw = 3 * test_x + 1
    test_hand = (test_raw - bounds[0]) / (bounds[1] - bounds[0])
    rows_raw = (3 * test_x[:2] + 1, 5 * torch.tensor([[0.1], [0.2]], dtype=torch.float64) - 2)
    rows_hand = (
        (rows_raw[0] - bounds[0]) / (bounds[1] - bounds[0]),
        (rows_raw[1] - center) / scale,
    )
    for model, reference in (
        (transformed, plain),
        (transformed.condition_on_observations(*rows_raw),
         plain.condition_on_observations(*rows_hand)),
    ):  # fmt: skip
        mean, covariance = moments(model, test_raw)
        expected_mean, expected_cov = moments(reference, test_hand)
        torch.testing.assert_close(mean, expected_mean * scale + center, atol=1e-9, rtol=1e-9)
        torch.testing.assert_close(covariance, expected_cov * scale**2, atol=1e-9, rtol=1e-9)
    targets = 5 * training_data(9, seed=11)[1] - 2
    expected = plain.log_predictive_density(test_hand, (targets - center) / scale) - scale.log()
    torch.testing.assert_close(transformed.log_predictive_density(test_raw, targets), expected)
    assert torch.equal(x_hand, transformed.input_transform(x_raw))


def test_moment_matched_model_has_the_mixture_moments(data):
    """MomentMatchedModel: mean and variance equal the mixture's ``predict``; the covariance is
    (1/S) sum_s (C_s + mu_s mu_s^T) - m m^T, computed here component by component."""
    x, y, test_x = data
    torch.manual_seed(0)
    deep = dgp(x, y)
    matched = MomentMatchedModel(deep)
    mean, covariance = moments(matched, test_x)
    expected_mean, expected_variance = deep.predict(test_x)
    torch.testing.assert_close(mean, expected_mean, **TOLERANCE)
    torch.testing.assert_close(covariance.diagonal(), expected_variance, **TOLERANCE)
    components = deep.posterior(test_x).distribution
    second = sum(
        components.covariance_matrix[s] + torch.outer(components.mean[s], components.mean[s])
        for s in range(deep.num_posterior_samples)
    )
    expected = second / deep.num_posterior_samples - torch.outer(expected_mean, expected_mean)
    torch.testing.assert_close(covariance, expected, **TOLERANCE)
    conditioned = matched.condition_on_observations(x[:3], y[:3].unsqueeze(-1))
    reference = deep.condition_on_observations(x[:3], y[:3].unsqueeze(-1))
    torch.testing.assert_close(moments(conditioned, test_x)[0], reference.predict(test_x)[0])


@pytest.mark.parametrize("build", [sgpr, svgp_points, dgp])
def test_fantasy_gradients_in_the_new_points_are_finite_differences(data, build):
    """The knowledge gradient differentiates the fantasy model in the fantasised points: the
    gradient of sum(fantasy posterior mean) in X against central differences."""
    x, y, test_x = data
    torch.manual_seed(0)
    model = build(x, y)
    sampler = SobolQMCNormalSampler(torch.Size([2]), seed=0)

    def value(X):
        return model.fantasize(X, sampler).posterior(test_x[:3]).mean.sum()

    X = training_data(2, seed=13)[0].requires_grad_(True)  # [q = 2, d]
    (gradient,) = torch.autograd.grad(value(X), X)
    step = 1e-6
    with torch.no_grad():
        expected = torch.zeros_like(X)
        for index in range(X.numel()):
            shift = torch.zeros_like(X).reshape(-1)
            shift[index] = step
            shift = shift.reshape(X.shape)
            expected.view(-1)[index] = (value(X + shift) - value(X - shift)) / (2 * step)
    torch.testing.assert_close(gradient, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("build", [svgp_harmonic, svgp_activated, svgp_points])
def test_svgp_conditioned_twice_is_conditioned_once_on_all_rows(data, build):
    """The online updates compose: q conditioned on rows B, then C, is q conditioned on B and C
    (here from the Titsias optimum on A: the Titsias optimum on A, B and C)."""
    x, y, test_x = data
    model = build(x[:40], y[:40])
    twice = model.condition_on_observations(x[40:48], y[40:48].unsqueeze(-1))
    twice = twice.condition_on_observations(x[48:], y[48:].unsqueeze(-1))
    assert_same_posterior(twice, build(x, y), test_x, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("build", [sgpr, svgp_points, dgp])
def test_fantasies_of_fantasies_have_the_nested_batch_shape(data, build):
    """Multi-step look-ahead: a fantasy model fantasised again, with gradients in the points."""
    x, y, test_x = data
    torch.manual_seed(0)
    model = build(x, y)
    X = training_data(2, seed=14)[0].requires_grad_(True)
    first = model.fantasize(X, SobolQMCNormalSampler(torch.Size([2]), seed=0))  # [2]
    second = first.fantasize(X[:1].expand(2, 1, INPUT_DIM), SobolQMCNormalSampler(torch.Size([3])))
    assert second.batch_shape == torch.Size([3, 2])
    mean = second.posterior(test_x[:4]).mean  # [3, 2, (S,) 4, 1]
    (gradient,) = torch.autograd.grad(mean.sum(), X)
    assert torch.isfinite(gradient).all()


def test_multi_output_svgp_conditions_each_output_like_a_single_output_svgp(data):
    """P outputs share the features, each has its own q(u_p) and noise: conditioned on Y [q, P],
    output p's posterior is that of a single-output SVGP with q(u_p) and noise_p, conditioned on
    Y[:, p]; t-batched inputs stay apart from the outputs; a fantasy model has the batch
    [F, *b] and outputs [.., q, P]."""
    x, y, test_x = data
    kernel = arccos()
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, 4, kernel=kernel)
    joint = SVGP(kernel, features, INPUT_DIM, num_outputs=2)
    generator = torch.Generator().manual_seed(2)
    size = features.num_inducing
    mean = torch.randn(2, size, generator=generator, dtype=torch.float64)
    factor = torch.randn(2, size, size, generator=generator, dtype=torch.float64) / size
    covariance = factor @ factor.mT + 0.1 * torch.eye(size, dtype=torch.float64)
    joint.inducing_strategy.set_variational(mean, covariance, whitened=True)
    joint.likelihood.task_noises = torch.tensor([0.05, 0.2], dtype=torch.float64)
    targets = torch.stack([y[:5], 1 - y[:5]], -1)  # [q, P]
    conditioned = joint.condition_on_observations(x[:5], targets)
    posterior = conditioned.posterior(test_x)
    noises = joint.likelihood.task_noises + joint.likelihood.noise
    for output in range(2):
        single = SVGP(kernel, features, INPUT_DIM)
        single.inducing_strategy.set_variational(mean[output], covariance[output], whitened=True)
        single.likelihood.noise = noises[output].detach()
        reference = single.condition_on_observations(x[:5], targets[:, output : output + 1])
        expected = reference.posterior(test_x)
        torch.testing.assert_close(posterior.mean[..., output], expected.mean[..., 0], **TOLERANCE)
        torch.testing.assert_close(
            posterior.variance[..., output], expected.variance[..., 0], **TOLERANCE
        )
    batched = joint.posterior(x[:4].reshape(2, 2, INPUT_DIM)).mean  # [b, q, P], b = P = 2
    for index in range(2):  # t-batches apart from the outputs' batch
        single = joint.posterior(x[2 * index : 2 * index + 2]).mean
        torch.testing.assert_close(batched[index], single, **TOLERANCE)
    fantasy = joint.fantasize(
        x[:4].reshape(2, 2, INPUT_DIM), SobolQMCNormalSampler(torch.Size([3]))
    )
    assert fantasy.batch_shape == torch.Size([3, 2])
    assert fantasy.posterior(test_x).mean.shape == (3, 2, len(test_x), 2)


@pytest.mark.parametrize("family", ["meanfield", "natural", "tril-natural"])
def test_every_gaussian_family_conditions_alike(data, family):
    """The same q(u) stored in another variational family gives the same conditioned model."""
    x, y, test_x = data
    kernel = arccos()
    features = SphericalHarmonicFeatures(INPUT_DIM + 1, 4, kernel=kernel)
    size = features.num_inducing
    mean = torch.linspace(-1, 1, size, dtype=torch.float64)
    covariance = torch.diag(torch.linspace(0.1, 0.5, size, dtype=torch.float64))
    models = []
    for name in ("cholesky", family):
        model = SVGP(kernel, features, INPUT_DIM, variational_family=name)
        model.inducing_strategy.set_variational(mean, covariance, whitened=True)
        models.append(model.condition_on_observations(x[:4], y[:4].unsqueeze(-1)))
    assert_same_posterior(*models, test_x, atol=1e-9, rtol=1e-9)
