"""Stacking of predictive distributions (``zonal.models.stacking``, Yao et al. 2018).

The weights are checked against scipy's maximiser of the mean log mixture density, the rounding
against a brute-force search, and the ``StackedModel`` against the closed-form mixture moments and
densities computed by hand from its components, a quadrature of its density over y, and BoTorch's
acquisition machinery on its components alone.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from botorch.acquisition.logei import qLogExpectedImprovement
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from scipy import integrate
from scipy.optimize import minimize, minimize_scalar

from zonal.models.stacking import (
    WEIGHT_RESOLUTION,
    StackedModel,
    bootstrap_stacking_weights,
    posterior_stacking_weights,
    quantize_weights,
    stacking_weights,
)
from zonal.models.training import TrainingControl
from zonal.tabular import recipes

INPUT_DIM = 3
NUM_ROWS = 200
#: (recipe, options) of the three Gaussian-likelihood components: two single-layer, one deep
COMPONENT_RECIPES = (("sgpr", {}), ("svgp", {"ard": True}), ("adgp", {}))
#: weights that are already multiples of 1 / WEIGHT_RESOLUTION (quantizing leaves them)
WEIGHTS = (0.5, 0.3, 0.2)


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(NUM_ROWS, INPUT_DIM, generator=generator, dtype=torch.float64) * 2 - 1
    noise = 0.1 * torch.randn(NUM_ROWS, generator=generator, dtype=torch.float64)
    y = torch.sin(3 * x[:, 0]) + x[:, 1] ** 2 - 0.5 * x[:, 2] + noise  # [N]
    return x, (y - y.mean()) / y.std()


@pytest.fixture(scope="module")
def fits(data) -> list[recipes.Fit]:
    """Trained sgpr, svgp (ARD) and adgp fits on the same data, few steps each."""
    x, y = data
    trained = []
    for name, options in COMPONENT_RECIPES:
        spec = recipes.resolve_spec(INPUT_DIM, model=name, steps=30, **options)
        fit, _ = recipes.train(spec, x, y, TrainingControl())
        trained.append(fit)
    return trained


@pytest.fixture(scope="module")
def components(fits) -> list:
    return [fit.model for fit in fits]


@pytest.fixture(scope="module")
def stacked(components) -> StackedModel:
    return StackedModel(components, WEIGHTS)


@pytest.fixture(scope="module")
def query_inputs() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.rand(40, INPUT_DIM, generator=generator, dtype=torch.float64) * 2 - 1  # [N, D]


def synthetic_log_densities(num_rows: int = 400) -> torch.Tensor:
    """Held-out log densities L [n, 3] of three Gaussian predictors of y = sin(3 x) + noise that
    err differently: each is right on one third of [-1, 1] and wrong (0, or half the truth)
    elsewhere."""
    generator = torch.Generator().manual_seed(2)
    x = torch.rand(num_rows, generator=generator, dtype=torch.float64) * 2 - 1  # [n]
    truth = torch.sin(3 * x)
    y = truth + 0.2 * torch.randn(num_rows, generator=generator, dtype=torch.float64)
    means = torch.stack([torch.where(x < -1 / 3, truth, 0.0), torch.where(x > 1 / 3, truth, 0.0),
                         torch.where(x.abs() <= 1 / 3, truth, 0.5 * truth)], dim=1)  # fmt: skip
    return torch.distributions.Normal(means, 0.3).log_prob(y.unsqueeze(1))  # [n, 3]


def mean_log_mixture_density(log_densities: torch.Tensor, weights) -> float:
    """(1/n) sum_i log sum_k w_k exp(L_ik), the stacking objective."""
    log_weights = torch.as_tensor(weights, dtype=torch.float64).log()  # [K]
    return float(torch.logsumexp(log_densities + log_weights, dim=1).mean())


def scipy_stacking_weights(
    log_densities: torch.Tensor, row_weights: np.ndarray | None = None
) -> np.ndarray:
    """The maximiser of sum_i c_i log sum_k w_k exp(L_ik) over the simplex (c: ``row_weights``
    normalised, equal by default), by SLSQP."""
    shifted = log_densities - log_densities.max(dim=1, keepdim=True).values
    densities = shifted.exp().numpy()  # [n, K], each row's largest entry 1
    c = np.ones(len(densities)) if row_weights is None else np.asarray(row_weights, float)
    c = c / c.sum()

    def negative_objective(weights: np.ndarray) -> tuple[float, np.ndarray]:
        mixture = densities @ weights  # [n]
        gradient = -(c[:, None] * densities / mixture[:, None]).sum(0)  # [K]
        return -float(c @ np.log(mixture)), gradient

    num_models = densities.shape[1]
    result = minimize(
        negative_objective,
        np.full(num_models, 1 / num_models),
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * num_models,
        constraints=[
            {"type": "eq", "fun": lambda w: w.sum() - 1, "jac": lambda w: np.ones_like(w)}
        ],
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert result.success, result.message
    return result.x


# ------------------------------------------------------------------------------------ weights
def test_stacking_weights_maximise_the_mean_log_mixture_density_as_scipy_finds():
    """EM stops when a step gains less than 1e-10 in the objective: there the objective is within
    1e-9 of scipy's maximum and the weights (linear convergence) within 5e-5 of its maximiser."""
    log_densities = synthetic_log_densities()
    expected = scipy_stacking_weights(log_densities)
    assert expected.min() > 0.1  # an interior optimum: every model carries weight
    weights = stacking_weights(log_densities)
    np.testing.assert_allclose(weights.numpy(), expected, atol=5e-5)
    gap = mean_log_mixture_density(log_densities, expected) - mean_log_mixture_density(
        log_densities, weights
    )
    assert 0 <= gap < 1e-9
    converged = stacking_weights(log_densities, iterations=100_000, tolerance=0.0)
    np.testing.assert_allclose(converged.numpy(), expected, atol=1e-6)


def test_stacking_weights_of_two_models_match_a_bounded_scalar_search():
    log_densities = synthetic_log_densities()[:, :2]  # [n, 2]

    def negative_objective(weight: float) -> float:
        mixture = torch.logsumexp(
            log_densities + torch.tensor([weight, 1 - weight], dtype=torch.float64).log(), dim=1
        )
        return -float(mixture.mean())

    result = minimize_scalar(
        negative_objective, bounds=(1e-9, 1 - 1e-9), method="bounded", options={"xatol": 1e-10}
    )
    weights = stacking_weights(log_densities, iterations=100_000, tolerance=0.0)
    np.testing.assert_allclose(weights.numpy(), [result.x, 1 - result.x], atol=1e-6)


def test_integer_row_weights_equal_repeating_the_rows():
    """Row weights c_i = 1, 2, 3, ... weigh row i as c_i copies of it (the objective is the same
    function of w), and scaling every row weight changes nothing."""
    log_densities = synthetic_log_densities()[:40]  # [40, 3]
    counts = torch.arange(1, 41) % 4  # 0-3 copies of each row
    repeated = log_densities.repeat_interleave(counts, dim=0)  # [sum counts, 3]
    exact = {"iterations": 100_000, "tolerance": 0.0}
    expected = stacking_weights(repeated, **exact)
    weighted = stacking_weights(log_densities, row_weights=counts.double(), **exact)
    np.testing.assert_allclose(weighted.numpy(), expected.numpy(), atol=1e-9)
    scaled = stacking_weights(log_densities, row_weights=7.5 * counts.double(), **exact)
    np.testing.assert_allclose(scaled.numpy(), expected.numpy(), atol=1e-9)


def test_bootstrap_weights_tend_to_the_plain_weights_on_many_rows():
    """On 400 rows the Bayesian-bootstrap replicates agree: their mean is within 0.03 of the
    plain stacking weights (an interior optimum, every model weighted); the same seed gives the
    same weights, another seed others."""
    log_densities = synthetic_log_densities()
    plain = stacking_weights(log_densities)
    bagged = bootstrap_stacking_weights(log_densities, 50, seed=3)
    np.testing.assert_allclose(bagged.numpy(), plain.numpy(), atol=0.03)
    assert bagged.sum().item() == pytest.approx(1.0)
    torch.testing.assert_close(bootstrap_stacking_weights(log_densities, 50, seed=3), bagged)
    assert not torch.equal(bootstrap_stacking_weights(log_densities, 50, seed=4), bagged)


def test_bootstrap_weights_keep_a_model_that_wins_some_of_few_rows():
    """Five rows: model 0 is far better on three, model 1 on two. The plain weights are 3/5 and
    2/5 (each row is all one model's: w_k = the share of rows model k wins); a replicate weighs
    the rows by Dirichlet(1) and gives model 0 the total weight of its three rows, whose mean is
    3/5: the bootstrap mean is 3/5 too, within Monte Carlo error (sd 0.2 / sqrt(draws))."""
    log_densities = torch.tensor([[0.0, -50.0]] * 3 + [[-50.0, 0.0]] * 2, dtype=torch.float64)
    np.testing.assert_allclose(stacking_weights(log_densities).numpy(), [0.6, 0.4], atol=1e-6)
    bagged = bootstrap_stacking_weights(log_densities, 2000, seed=0)
    np.testing.assert_allclose(bagged.numpy(), [0.6, 0.4], atol=4 * 0.2 / 2000**0.5)
    with pytest.raises(ValueError, match="draws must be a positive integer"):
        bootstrap_stacking_weights(log_densities, 0)


def test_weighted_rows_give_scipys_weighted_optimum():
    """Row weights drawn as a Bayesian bootstrap's (normalised exponentials) on 60 rows: the EM
    maximiser is scipy's maximiser of the weighted objective."""
    log_densities = synthetic_log_densities()[:60]
    row_weights = np.random.default_rng(5).exponential(size=60)
    expected = scipy_stacking_weights(log_densities, row_weights)
    found = stacking_weights(log_densities, row_weights=torch.from_numpy(row_weights),
                             iterations=100_000, tolerance=0.0)  # fmt: skip
    np.testing.assert_allclose(found.numpy(), expected, atol=1e-6)


def test_a_batch_of_row_weights_solves_each_problem_as_alone():
    """Row weights [B, n]: each row of the batch gives the weights it gives alone (to the
    convergence of both; the batch runs until every problem has converged)."""
    log_densities = synthetic_log_densities()[:60]
    batch = torch.rand(4, 60, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    exact = {"iterations": 100_000, "tolerance": 0.0}
    together = stacking_weights(log_densities, row_weights=batch, **exact)  # [4, 3]
    assert together.shape == (4, 3)
    for weights, row in zip(together, batch, strict=True):
        alone = stacking_weights(log_densities, row_weights=row, **exact)
        np.testing.assert_allclose(weights.numpy(), alone.numpy(), atol=1e-9)


def test_row_weights_are_checked():
    log_densities = synthetic_log_densities()[:10]
    with pytest.raises(ValueError, match=r"\[n\] or \[B, n\] with n = 10, got \(9,\)"):
        stacking_weights(log_densities, row_weights=torch.ones(9))
    with pytest.raises(ValueError, match="finite and non-negative"):
        stacking_weights(log_densities, row_weights=-torch.ones(10))
    with pytest.raises(ValueError, match="no weight to any row"):
        stacking_weights(log_densities, row_weights=torch.zeros(10))


def test_stacking_weights_pick_a_model_that_dominates_every_row():
    log_densities = synthetic_log_densities()
    log_densities[:, 1] = log_densities[:, [0, 2]].max(dim=1).values + 1.0  # model 1 best
    weights = stacking_weights(log_densities)
    np.testing.assert_allclose(weights.numpy(), [0.0, 1.0, 0.0], atol=1e-6)


def test_stacking_weights_ignore_rows_where_every_model_gives_zero_density():
    log_densities = synthetic_log_densities()
    impossible = torch.full((7, 3), -math.inf, dtype=torch.float64)
    with_impossible = torch.cat([log_densities[:100], impossible, log_densities[100:]])
    torch.testing.assert_close(
        stacking_weights(with_impossible), stacking_weights(log_densities), rtol=0, atol=1e-12
    )


def test_stacking_weights_give_zero_to_a_model_of_zero_density_everywhere():
    log_densities = synthetic_log_densities()
    useless = torch.full((len(log_densities), 1), -math.inf, dtype=torch.float64)
    weights = stacking_weights(torch.cat([log_densities[:, :2], useless, log_densities[:, 2:]], 1))
    assert weights[2] == 0
    expected = scipy_stacking_weights(log_densities)
    np.testing.assert_allclose(weights[[0, 1, 3]].numpy(), expected, atol=5e-5)


def test_stacking_weights_keep_a_model_of_zero_density_on_some_rows_only():
    log_densities = synthetic_log_densities()
    log_densities[:5, 2] = -math.inf  # model 2 impossible on 5 rows, still useful elsewhere
    weights = stacking_weights(log_densities)
    expected = scipy_stacking_weights(log_densities)
    assert expected[2] > 0.1
    np.testing.assert_allclose(weights.numpy(), expected, atol=5e-5)


@pytest.mark.parametrize(
    ("log_densities", "message"),
    [
        (torch.zeros(5), r"\[n, K\]"),
        (torch.zeros(0, 3), r"\[n, K\]"),
        (torch.zeros(5, 0), r"\[n, K\]"),
        (torch.zeros(2, 3, 1), r"\[n, K\]"),
        (torch.tensor([[0.0, math.nan], [0.0, 0.0]]), "NaN"),
        (torch.tensor([[0.0, math.inf], [0.0, 0.0]]), r"\+inf"),
        (torch.full((3, 2), -math.inf), "zero density"),
    ],
)
def test_stacking_weights_refuse_invalid_log_densities(log_densities, message):
    with pytest.raises(ValueError, match=message):
        stacking_weights(log_densities)


# ------------------------------------------------------------------ posterior-mean weights
def quadrature_posterior_mean(log_densities: torch.Tensor, concentration: float) -> np.ndarray:
    """E[w | L] by quadrature over the simplex of K = 2 or 3 models: the density
    prod_k w_k^(a - 1) prod_i sum_k w_k p_ik, its normaliser and first moments integrated by
    scipy (densities scaled by the largest, which cancels)."""
    p = torch.exp(log_densities - log_densities.max()).numpy()  # [n, K]
    a = concentration

    def density(w: np.ndarray) -> float:
        return float(np.prod(w ** (a - 1)) * np.prod(p @ w))

    if p.shape[1] == 2:

        def pair(u):
            return np.array([u, 1 - u])

        total = integrate.quad(lambda u: density(pair(u)), 0, 1, limit=200)[0]
        first = integrate.quad(lambda u: u * density(pair(u)), 0, 1, limit=200)[0] / total
        return np.array([first, 1 - first])
    moments = []
    for weight in (lambda u, v: 1.0, lambda u, v: u, lambda u, v: v):
        moments.append(integrate.dblquad(
            lambda v, u, weight=weight: weight(u, v) * density(np.array([u, v, 1 - u - v])),
            0, 1, 0, lambda u: 1 - u, epsabs=0, epsrel=1e-7,
        )[0])  # fmt: skip
    first, second = moments[1] / moments[0], moments[2] / moments[0]
    return np.array([first, second, 1 - first - second])


@pytest.mark.parametrize(
    ("rows", "models", "concentration", "seed"),
    [(12, 2, 1.0, 1), (40, 2, 0.5, 2), (15, 3, 1.0, 3), (30, 3, 2.0, 4)],
)
def test_posterior_weights_match_quadrature_over_the_simplex(rows, models, concentration, seed):
    """The Gibbs sampler's posterior mean of the mixture weights equals scipy's quadrature of the
    posterior over the simplex within 0.01 (Monte Carlo: 16 chains x 1000 sweeps, standard error about 0.003;
    Rao-Blackwellised; the posterior's spread on these rows is 0.05-0.15)."""
    generator = torch.Generator().manual_seed(seed)
    log_densities = 1.5 * torch.randn(rows, models, generator=generator, dtype=torch.float64)
    found = posterior_stacking_weights(log_densities, concentration=concentration, seed=seed)
    expected = quadrature_posterior_mean(log_densities, concentration)
    np.testing.assert_allclose(found.numpy(), expected, atol=0.01)
    assert found.sum().item() == pytest.approx(1.0)


def test_posterior_weights_hedge_where_few_rows_cannot_tell_the_models_apart():
    """Eight rows on which model 1 is a little better everywhere (log densities 0 against
    -0.1): the likelihood's maximiser (the plain stacking weights) gives it all the weight, and
    so does every bootstrap replicate; the posterior under a uniform prior barely moves from
    uniform (the likelihood ratio of the two pure mixtures is only e^0.8), as quadrature says."""
    log_densities = torch.tensor([[-0.1, 0.0]] * 8, dtype=torch.float64)
    np.testing.assert_allclose(stacking_weights(log_densities).numpy(), [0.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(
        bootstrap_stacking_weights(log_densities, 200).numpy(), [0.0, 1.0], atol=1e-6
    )
    found = posterior_stacking_weights(log_densities)
    expected = quadrature_posterior_mean(log_densities, 1.0)
    assert 0.4 < expected[0] < 0.5
    np.testing.assert_allclose(found.numpy(), expected, atol=0.01)


def test_posterior_weights_tend_to_the_plain_weights_on_many_rows():
    """On 400 rows the posterior concentrates at the likelihood's maximiser: within 0.03 of the
    plain stacking weights; the same seed gives the same weights, another seed others."""
    log_densities = synthetic_log_densities()
    plain = stacking_weights(log_densities)
    found = posterior_stacking_weights(log_densities, seed=3)
    np.testing.assert_allclose(found.numpy(), plain.numpy(), atol=0.03)
    torch.testing.assert_close(posterior_stacking_weights(log_densities, seed=3), found)
    assert not torch.equal(posterior_stacking_weights(log_densities, seed=4), found)


def test_posterior_weights_leave_out_a_model_of_zero_density_everywhere_and_empty_rows():
    """A column that is -inf everywhere gets weight 0 and is no part of the prior (the others
    get the weights they get alone); rows of density 0 under every model are left out."""
    log_densities = synthetic_log_densities()[:30]
    alone = posterior_stacking_weights(log_densities, seed=1)
    useless = torch.full((30, 1), -math.inf, dtype=torch.float64)
    impossible = torch.full((4, 4), -math.inf, dtype=torch.float64)
    padded = torch.cat([torch.cat([log_densities[:, :1], useless, log_densities[:, 1:]], 1),
                        impossible])  # fmt: skip
    found = posterior_stacking_weights(padded, seed=1)
    assert found[1] == 0
    torch.testing.assert_close(found[[0, 2, 3]], alone)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concentration": 0.0}, "concentration must be a positive number"),
        ({"sweeps": 0}, "sweeps must be a positive integer"),
        ({"chains": 1.5}, "chains must be a positive integer"),
    ],
)
def test_posterior_weights_refuse_invalid_settings(options, message):
    with pytest.raises(ValueError, match=message):
        posterior_stacking_weights(torch.zeros(4, 2, dtype=torch.float64), **options)
    with pytest.raises(ValueError, match="zero density"):
        posterior_stacking_weights(torch.full((3, 2), -math.inf, dtype=torch.float64))


# ------------------------------------------------------------------------------------ rounding
@pytest.mark.parametrize(
    ("weights", "expected_units"),
    [
        # 10.6, 6.2, 3.2: floors 10, 6, 3 leave 1 unit, to the largest remainder 0.6
        ([0.53, 0.31, 0.16], [11, 6, 3]),
        # 5.2, 5.2, 9.6: floors leave 1 unit, to 9.6
        ([0.26, 0.26, 0.48], [5, 5, 10]),
        # unnormalised: 2 : 1 : 1 is 10, 5, 5 units exactly
        ([2.0, 1.0, 1.0], [10, 5, 5]),
        # 6.67 each: floors 18 leave 2 units, to the first two of equal remainders
        ([1.0, 1.0, 1.0], [7, 7, 6]),
        # 0.4, 19.6: the small weight rounds to 0
        ([0.02, 0.98], [0, 20]),
    ],
)
def test_quantize_weights_rounds_by_largest_remainder(weights, expected_units):
    quantized = quantize_weights(weights)
    units = quantized * WEIGHT_RESOLUTION
    assert torch.equal(units, torch.tensor(expected_units, dtype=torch.float64))
    assert abs(float(quantized.sum()) - 1) <= 4 * torch.finfo(torch.float64).eps


def test_quantize_weights_is_the_closest_rounding_to_multiples_of_a_twentieth():
    """Against brute force over every split of the 20 units into 3 parts: the rounding has the
    least squared distance to the scaled weights (the largest-remainder split minimises it)."""
    generator = torch.Generator().manual_seed(3)
    compositions = torch.tensor(
        [(a, b, WEIGHT_RESOLUTION - a - b)
         for a, b in itertools.product(range(WEIGHT_RESOLUTION + 1), repeat=2)
         if a + b <= WEIGHT_RESOLUTION],
        dtype=torch.float64,
    )  # fmt: skip
    for _ in range(50):
        weights = torch.rand(3, generator=generator, dtype=torch.float64) ** 3  # [3]
        scaled = weights / weights.sum() * WEIGHT_RESOLUTION
        best = float(((compositions - scaled) ** 2).sum(1).min())
        units = quantize_weights(weights) * WEIGHT_RESOLUTION
        torch.testing.assert_close(units, units.round(), rtol=0, atol=1e-12)
        assert float(units.sum()) == WEIGHT_RESOLUTION
        assert float(((units - scaled) ** 2).sum()) == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize(
    "weights",
    [[0.5, -0.1, 0.6], [0.0, 0.0], [0.5, math.nan], [0.5, math.inf], [], [[0.5, 0.5]]],
)
def test_quantize_weights_refuses_invalid_weights(weights):
    with pytest.raises(ValueError, match="weights must"):
        quantize_weights(weights)


# ------------------------------------------------------------------------------------ moments
@pytest.mark.parametrize("include_noise", [False, True])
def test_predict_gives_the_mixture_moments_of_the_components(
    stacked, components, query_inputs, include_noise
):
    moments = [component.predict(query_inputs, include_noise) for component in components]
    mean = sum(w * m for w, (m, _) in zip(WEIGHTS, moments, strict=True))  # [N]
    second_moment = sum(w * (v + m**2) for w, (m, v) in zip(WEIGHTS, moments, strict=True))
    stacked_mean, stacked_variance = stacked.predict(query_inputs, include_noise)
    torch.testing.assert_close(stacked_mean, mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(stacked_variance, second_moment - mean**2, rtol=0, atol=1e-12)
    # the components disagree here, so the mixture variance exceeds the mean of the variances
    spread = sum(w * (m - mean) ** 2 for w, (m, _) in zip(WEIGHTS, moments, strict=True))
    assert float(spread.min()) > 1e-6


@pytest.mark.parametrize("observation_noise", [False, True])
def test_posterior_mixture_moments_equal_predict(stacked, query_inputs, observation_noise):
    posterior = stacked.posterior(query_inputs, observation_noise=observation_noise)
    mean, variance = stacked.predict(query_inputs, include_noise=observation_noise)
    torch.testing.assert_close(posterior.mixture_mean.squeeze(-1), mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(posterior.mixture_variance.squeeze(-1), variance, rtol=0, atol=1e-10)


@pytest.mark.parametrize("noise_shape", [(40,), (40, 1)])  # [q] and [q, P]: both forms
def test_posterior_with_a_noise_tensor_adds_it_to_the_mixture_variance(
    stacked, query_inputs, noise_shape
):
    """Every component adds the given noise n_i, so the mixture variance grows by exactly n_i."""
    noise = torch.linspace(0.01, 0.5, len(query_inputs), dtype=torch.float64)  # [N]
    posterior = stacked.posterior(query_inputs, observation_noise=noise.reshape(noise_shape))
    mean, variance = stacked.predict(query_inputs)
    torch.testing.assert_close(posterior.mixture_mean.squeeze(-1), mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(
        posterior.mixture_variance.squeeze(-1), variance + noise, rtol=0, atol=1e-10
    )


def test_posterior_of_q_batches_of_single_layer_components_equals_predict(components, query_inputs):
    """Single-layer components have no inner draws: a q-batch [b, q, D] gives at each point the
    moments ``predict`` gives for the flattened inputs."""
    model = StackedModel(components[:2], [0.35, 0.65])
    batched = query_inputs.reshape(10, 4, INPUT_DIM)  # [b, q, D]
    posterior = model.posterior(batched, observation_noise=True)
    mean, variance = model.predict(query_inputs, include_noise=True)
    torch.testing.assert_close(posterior.mixture_mean.reshape(-1), mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(posterior.mixture_variance.reshape(-1), variance, rtol=0, atol=1e-10)


# ------------------------------------------------------------------------------------ densities
def test_log_predictive_density_is_the_log_of_the_weighted_density_sum(stacked, components, data):
    x, y = data
    densities = torch.stack(
        [component.log_predictive_density(x, y).exp() for component in components]
    )  # [K, N]
    expected = (torch.tensor(WEIGHTS, dtype=torch.float64).unsqueeze(1) * densities).sum(0).log()
    torch.testing.assert_close(stacked.log_predictive_density(x, y), expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    ("weights", "tolerance"),
    [
        # single-layer components: p(y | x) is an exact two-Gaussian mixture
        ((0.6, 0.4, 0.0), 1e-9),
        # the deep component draws its inner samples per row, so the grid's rows (one x) each
        # see other Monte Carlo draws: a Monte Carlo tolerance
        (WEIGHTS, 1e-3),
    ],
)
def test_predictive_density_integrates_to_one_with_the_predicted_moments(
    components, query_inputs, weights, tolerance
):
    """Trapezoid quadrature of p(y | x) over a fine y-grid for one x: mass 1, and the mean and
    variance of ``predict(include_noise=True)``."""
    model = StackedModel(components, weights)
    point = query_inputs[:1]  # [1, D]
    mean, variance = (value.item() for value in model.predict(point, include_noise=True))
    # the grid spans every mixture component by 10 of the widest standard deviations, in steps
    # of a tenth of the narrowest
    with torch.no_grad():
        mixture = model.posterior(point, observation_noise=True).distribution  # [T, 1]
    centres, scales = mixture.mean.squeeze(-1), mixture.variance.sqrt().squeeze(-1)  # [T]
    low, high = float(centres.min() - 10 * scales.max()), float(centres.max() + 10 * scales.max())
    count = math.ceil((high - low) / float(scales.min() / 10)) + 1
    grid = torch.linspace(low, high, count, dtype=torch.float64)  # [G]
    density = model.log_predictive_density(point.expand(count, -1), grid).exp()  # [G]
    mass = torch.trapezoid(density, grid)
    grid_mean = torch.trapezoid(grid * density, grid)
    grid_variance = torch.trapezoid((grid - mean) ** 2 * density, grid)
    assert float(mass) == pytest.approx(1.0, abs=tolerance)
    assert float(grid_mean) == pytest.approx(mean, abs=tolerance * math.sqrt(variance))
    assert float(grid_variance) == pytest.approx(variance, rel=tolerance)


@pytest.mark.parametrize("index", [0, 2])
def test_all_weight_on_one_component_reproduces_it(components, data, query_inputs, index):
    x, y = data
    weights = [0.0] * len(components)
    weights[index] = 1.0
    model = StackedModel(components, weights)
    component = components[index]
    for include_noise in (False, True):
        mean, variance = model.predict(query_inputs, include_noise)
        expected_mean, expected_variance = component.predict(query_inputs, include_noise)
        assert torch.equal(mean, expected_mean)
        torch.testing.assert_close(variance, expected_variance, rtol=0, atol=1e-12)
    assert torch.equal(model.log_predictive_density(x, y), component.log_predictive_density(x, y))


# ------------------------------------------------------------------------------------ BoTorch
def test_log_expected_improvement_of_one_component_matches_the_component_alone(
    components, data, query_inputs
):
    """A mixture that gives the svgp all the weight (its 20 repeats divided by their greatest
    common divisor: a mixture dimension of one) gives the svgp's own qLogEI; the sharing of base
    samples across several repeats is the next test's."""
    _, y = data
    model = StackedModel(components, [0.0, 1.0, 0.0])
    candidates = query_inputs[:12].reshape(6, 2, INPUT_DIM)  # [b, q, D]
    values = []
    for scored in (model, components[1]):
        sampler = SobolQMCNormalSampler(sample_shape=torch.Size([64]), seed=7)
        acquisition = qLogExpectedImprovement(scored, best_f=float(y.max()), sampler=sampler)
        values.append(acquisition(candidates))  # [b]
    assert values[0].isfinite().all()
    torch.testing.assert_close(values[0], values[1], rtol=0, atol=1e-10)


def test_log_expected_improvement_is_the_log_of_the_weighted_sum_over_components(
    stacked, components, data, query_inputs
):
    """qEI is an expectation, so on the mixture (base samples shared across its mixture dimension,
    the same inputs giving the deep component the same inner draws) it is sum_k w_k qEI_k:
    qLogEI = log sum_k w_k exp(qLogEI_k)."""
    _, y = data
    candidates = query_inputs[:12].reshape(6, 2, INPUT_DIM)  # [b, q, D]

    def log_expected_improvement(model) -> torch.Tensor:
        sampler = SobolQMCNormalSampler(sample_shape=torch.Size([64]), seed=11)
        acquisition = qLogExpectedImprovement(model, best_f=float(y.max()), sampler=sampler)
        with torch.no_grad():
            return acquisition(candidates)  # [b]

    per_component = torch.stack([log_expected_improvement(model) for model in components])
    log_weights = torch.tensor(WEIGHTS, dtype=torch.float64).log().unsqueeze(1)  # [K, 1]
    expected = torch.logsumexp(log_weights + per_component, dim=0)  # [b]
    assert float((per_component.max(0).values - per_component.min(0).values).min()) > 0.01
    torch.testing.assert_close(log_expected_improvement(stacked), expected, rtol=0, atol=1e-10)


def test_optimize_acqf_improves_log_expected_improvement_of_the_stacked_model(stacked, data):
    _, y = data
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([32]), seed=0)
    acquisition = qLogExpectedImprovement(stacked, best_f=float(y.max()), sampler=sampler)
    bounds = torch.tensor([[-1.0] * INPUT_DIM, [1.0] * INPUT_DIM], dtype=torch.float64)
    generator = torch.Generator().manual_seed(4)
    starts = torch.rand(2, 1, INPUT_DIM, generator=generator, dtype=torch.float64) * 2 - 1
    with torch.no_grad():
        start_values = acquisition(starts)  # [2]
    candidate, value = optimize_acqf(
        acquisition,
        bounds=bounds,
        q=1,
        num_restarts=2,
        batch_initial_conditions=starts,
        options={"maxiter": 20},
    )
    assert ((candidate >= -1) & (candidate <= 1)).all()
    torch.testing.assert_close(acquisition(candidate.unsqueeze(0)).squeeze(), value.squeeze())
    assert float(value) > float(start_values.max()) + 1e-6  # the gradient moved it uphill


# ------------------------------------------------------------------------------------ errors
def test_construction_refuses_bad_components(components, data):
    x, y = data
    with pytest.raises(ValueError, match="at least one component"):
        StackedModel([], [])
    with pytest.raises(ValueError, match="3 components but 2 weights"):
        StackedModel(components, [0.5, 0.5])
    with pytest.raises(ValueError, match="weights must"):
        StackedModel(components, [0.5, -0.1, 0.6])
    spec = recipes.resolve_spec(INPUT_DIM, model="svgp-activated", steps=5, likelihood="bernoulli")
    classifier, _ = recipes.train(spec, x, (y > 0).to(torch.float64), TrainingControl())
    with pytest.raises(ValueError, match="BernoulliLikelihood"):
        StackedModel([components[0], classifier.model], [0.5, 0.5])
    narrow_spec = recipes.resolve_spec(INPUT_DIM - 1, model="sgpr")
    narrow = recipes.get_recipe("sgpr").build({**narrow_spec, "kernel": "arccos"}, None)
    with pytest.raises(ValueError, match="different input dimensions"):
        StackedModel([components[0], narrow], [0.5, 0.5])
    with pytest.raises(ValueError, match="input dimension is 3"):
        StackedModel(components, WEIGHTS).predict(x[:, :2])
    single = recipes.get_recipe("sgpr").build(recipes.resolve_spec(INPUT_DIM, model="sgpr",
                                                                   kernel="arccos"), None)  # fmt: skip
    with pytest.raises(ValueError, match="different devices or dtypes"):
        StackedModel([components[0], single.float()], [0.5, 0.5])


def test_weights_are_normalised_and_quantized_at_construction(components):
    model = StackedModel(components, [5.3, 3.1, 1.6])
    expected = torch.tensor([0.55, 0.30, 0.15], dtype=torch.float64)
    torch.testing.assert_close(model.weights, expected, rtol=0, atol=1e-15)


def test_state_dict_round_trip_predicts_identically(stacked, fits, data, query_inputs):
    x, y = data
    fresh = [recipes.get_recipe(fit.spec["model"]).build(fit.spec, None) for fit in fits]
    restored = StackedModel(fresh, [1.0, 1.0, 1.0])
    restored.load_state_dict(stacked.state_dict())
    torch.testing.assert_close(restored.weights, stacked.weights, rtol=0, atol=0)
    for include_noise in (False, True):
        for got, expected in zip(
            restored.predict(query_inputs, include_noise),
            stacked.predict(query_inputs, include_noise),
            strict=True,
        ):
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        restored.log_predictive_density(x, y),
        stacked.log_predictive_density(x, y),
        rtol=0,
        atol=1e-12,
    )


def test_the_joint_posterior_at_many_points_samples_like_its_components(components):
    """A sparse model's latent covariance at q = 400 points has rank below q: each component
    samples it (its lazy covariance is factorised with GPyTorch's jitter) and so must the stack,
    whose empirical mixture mean from the samples matches ``predict``."""
    generator = torch.Generator().manual_seed(3)
    x = torch.rand(400, INPUT_DIM, generator=generator, dtype=torch.float64)  # [q, D], close points
    single_layer = StackedModel(components[:2], [0.5, 0.5])  # sgpr and svgp
    torch.manual_seed(0)
    samples = single_layer.posterior(x).rsample(torch.Size([256]))  # [256, T, q, 1]
    mean, variance = single_layer.predict(x)
    empirical = samples.squeeze(-1).mean(dim=(0, 1))  # [q]
    torch.testing.assert_close(empirical, mean, atol=6 * variance.sqrt().max() / 16, rtol=0)


def test_the_posterior_weights_of_one_row_are_its_closed_form():
    """On one row of densities p_k, the posterior mean of the weights under the uniform
    Dirichlet prior is E[w_j sum_k w_k p_k] / E[sum_k w_k p_k] = (p_j + S) / ((K + 1) S), S =
    sum_k p_k (the Dirichlet(1) moments E w_k = 1/K, E w_j w_k = (1 + [j = k]) / (K (K + 1))): no
    candidate takes more than 2 / (K + 1). Gibbs sampling within 0.01."""
    log_densities = torch.tensor([[0.3, -4.0, -1.2]], dtype=torch.float64)  # [1, K]
    densities = log_densities.exp()[0]
    closed = (densities + densities.sum()) / (4 * densities.sum())  # [K]
    sampled = posterior_stacking_weights(log_densities, concentration=1.0)
    torch.testing.assert_close(sampled, closed, atol=0.01, rtol=0)
