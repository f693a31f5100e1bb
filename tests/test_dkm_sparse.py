"""The sparse fully connected DKM (seed 003 eqs. 10-11, appendix D) against dense naive paths:
the conditional Gram blocks against the conditional formulas with explicit inverses, the whole
predictive against a dense loop over the joint Gram matrix, the sparse objective with inducing
points = training points against the dense objective of eq. 5, the minibatch objective's mean over
an epoch against the full-batch one; then training, the model contract and bad input."""

import math

import numpy as np
import pytest
import torch
from gpytorch.likelihoods import GaussianLikelihood, MultitaskGaussianLikelihood, SoftmaxLikelihood

from zonal.dkm import (
    ArcCosineGram,
    SparseDKM,
    conditional_blocks,
    dkm_objective,
    fit_dkm,
    gaussian_log_marginal,
    input_gram,
)
from zonal.linalg import NotPositiveDefiniteError


def generator(seed):
    return torch.Generator().manual_seed(seed)


def random_psd(size, seed, scale=1.0):
    root = torch.randn(size, size, generator=generator(seed), dtype=torch.float64)
    return scale * root @ root.mT + 0.1 * torch.eye(size, dtype=torch.float64)


def perturb(model, seed):
    """Move every learned block off its NNGP initialisation (random but positive definite)."""
    with torch.no_grad():
        for index, parameter in enumerate(model.grams.values()):
            parameter.assign(
                parameter.matrix + random_psd(len(parameter.matrix), seed + index, 0.02)
            )
        size = model.output_mean.shape[0]
        model.output_mean.copy_(
            torch.randn(
                model.output_mean.shape, generator=generator(seed + 50), dtype=torch.float64
            )
        )
        model.output_covariance.assign(random_psd(size, seed + 60, 0.05))


def naive_predictive(model, inputs):
    """Mean [n, C] and covariance [n, n] by a dense loop: the joint Gram matrix of inducing and
    test points, K of it, explicit inverses of K_ii (seed 003 eqs. 10, 86-87)."""
    inducing = model.inducing_inputs.detach()
    size = len(inducing)
    gram = input_gram(torch.cat([inducing, inputs]))
    for index in range(model.num_layers):
        kernel = model.kernel(gram)
        k_ii, k_ti, k_tt = kernel[:size, :size], kernel[size:, :size], kernel[size:, size:]
        learned = str(index) in model.grams
        g_ii = model.grams[str(index)].matrix.detach() if learned else k_ii
        inverse = torch.linalg.inv(k_ii)
        g_ti = k_ti @ inverse @ g_ii
        g_tt = k_tt - k_ti @ inverse @ k_ti.mT + k_ti @ inverse @ g_ii @ inverse @ k_ti.mT
        gram = torch.cat([torch.cat([g_ii, g_ti.mT], 1), torch.cat([g_ti, g_tt], 1)])
    kernel = model.kernel(gram)
    k_ii, k_ti, k_tt = kernel[:size, :size], kernel[size:, :size], kernel[size:, size:]
    inverse = torch.linalg.inv(k_ii)
    covariance_a = model.output_covariance.matrix.detach()
    mean = k_ti @ inverse @ model.output_mean.detach()
    covariance = k_tt - k_ti @ inverse @ k_ti.mT + k_ti @ inverse @ covariance_a @ inverse @ k_ti.mT
    return mean, covariance


def test_conditional_blocks_equal_the_dense_conditional_formulas():
    """G_ti = K_ti K_ii^-1 G_ii, G_tt = K_tt - K_ti K_ii^-1 K_it + K_ti K_ii^-1 G_ii K_ii^-1 K_it
    and the mean K_ti K_ii^-1 mu, with explicit inverses; diagonal and full forms."""
    joint = random_psd(9, seed=1)  # inducing 4 + test 5
    k_ii, k_ti, k_tt = joint[:4, :4], joint[4:, :4], joint[4:, 4:]
    g_ii = random_psd(4, seed=2)
    mean_i = torch.randn(4, 3, generator=generator(3), dtype=torch.float64)
    inverse = torch.linalg.inv(k_ii)
    expected_tt = k_tt - k_ti @ inverse @ k_ti.mT + k_ti @ inverse @ g_ii @ inverse @ k_ti.mT
    full = conditional_blocks(
        torch.linalg.cholesky(k_ii), k_ti, k_tt, torch.linalg.cholesky(g_ii), mean_i
    )
    diagonal = conditional_blocks(
        torch.linalg.cholesky(k_ii), k_ti, k_tt.diagonal(), torch.linalg.cholesky(g_ii)
    )
    torch.testing.assert_close(full.cross, k_ti @ inverse @ g_ii, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(full.tt, expected_tt, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(diagonal.tt, expected_tt.diagonal(), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(full.mean, k_ti @ inverse @ mean_i, rtol=1e-10, atol=1e-12)


def test_conditional_with_the_nngp_inducing_block_returns_the_kernel_blocks():
    """nu = inf sets G_ii = K_ii, and then G_ti = K_ti, G_tt = K_tt (the NNGP) to 1e-10."""
    joint = random_psd(9, seed=4)
    k_ii, k_ti, k_tt = joint[:4, :4], joint[4:, :4], joint[4:, 4:]
    chol = torch.linalg.cholesky(k_ii)
    blocks = conditional_blocks(chol, k_ti, k_tt, chol)
    torch.testing.assert_close(blocks.cross, k_ti, rtol=0, atol=1e-10)
    torch.testing.assert_close(blocks.tt, k_tt, rtol=0, atol=1e-10)


@pytest.mark.parametrize("nu", [(0.5, 2.0), (math.inf, 1.0)])
def test_predictive_equals_a_dense_loop_over_the_joint_gram_matrix(nu):
    """The model's joint posterior and per-point marginals equal the dense naive predictive (with
    a NNGP layer where nu = inf)."""
    x = torch.randn(12, 3, generator=generator(5), dtype=torch.float64)
    likelihood = MultitaskGaussianLikelihood(num_tasks=2, rank=0, has_task_noise=False)
    model = SparseDKM(x[:5], 2, likelihood, nu=nu)
    perturb(model, seed=6)
    expected_mean, expected_covariance = naive_predictive(model, x[5:])
    posterior = model.posterior(x[5:])
    torch.testing.assert_close(posterior.mean, expected_mean, rtol=1e-8, atol=1e-10)
    covariance = posterior.distribution.covariance_matrix[::2, ::2]  # channel 0, interleaved
    torch.testing.assert_close(covariance, expected_covariance, rtol=1e-8, atol=1e-10)
    mean, variance = model.marginals(x[5:])
    torch.testing.assert_close(mean, expected_mean, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(variance, expected_covariance.diagonal(), rtol=1e-8, atol=1e-10)


def test_sparse_objective_with_inducing_points_at_the_data_is_the_dense_objective():
    """Inducing inputs = training inputs, G^l_ii = the dense G^l and q(f_i) the exact GP posterior:
    then G_ti = G_tt = G^l, the sparse GP-ELBO is the log marginal likelihood, and P times eq. 76
    equals eq. 5."""
    x = torch.randn(6, 3, generator=generator(7), dtype=torch.float64)
    targets = torch.randn(6, generator=generator(8), dtype=torch.float64)
    kernel, nu, noise = ArcCosineGram(1), (0.5, 2.0), 0.1
    model = SparseDKM(x, 2, GaussianLikelihood(), nu=nu)
    model.likelihood.noise = noise
    grams, previous = [], input_gram(x)
    for index in range(2):
        grams.append(kernel(previous) + random_psd(6, seed=9 + index, scale=0.02))
        model.grams[str(index)].assign(grams[-1])
        previous = grams[-1]
    top = kernel(grams[-1])
    solve = torch.linalg.solve(top + noise * torch.eye(6, dtype=torch.float64), top)  # (K+s)^-1 K
    with torch.no_grad():
        model.output_mean.copy_((solve.mT @ targets).unsqueeze(-1))
        model.output_covariance.assign(top - top @ solve)
    sparse = 6 * model.objective(x, targets, num_train=6)
    dense = dkm_objective(
        input_gram(x),
        grams,
        kernel,
        nu,
        lambda gram: gaussian_log_marginal(kernel(gram), targets.unsqueeze(-1), noise),
    )
    torch.testing.assert_close(sparse, dense, rtol=1e-9, atol=1e-9)


def test_minibatch_objective_averages_to_the_full_batch_objective():
    """The mean of eq. 76 over the batches of an epoch (a partition) is the full-batch value: the
    expectation over uniformly drawn batches."""
    x = torch.randn(12, 3, generator=generator(10), dtype=torch.float64)
    targets = torch.randn(12, generator=generator(11), dtype=torch.float64)
    model = SparseDKM(x[:5], 2, GaussianLikelihood(), nu=0.3)
    perturb(model, seed=12)
    order = torch.randperm(12, generator=generator(13))
    with torch.no_grad():
        batches = [model.objective(x[i], targets[i], 12) for i in order.split(4)]
        full = model.objective(x, targets, 12)
    torch.testing.assert_close(torch.stack(batches).mean(), full, rtol=1e-12, atol=1e-12)


def test_a_gram_matrix_that_is_no_longer_positive_definite_stops_training_at_its_step(
    monkeypatch,
):
    """``fit_dkm`` names the epoch and step where a Gram matrix broke (parameters driven to NaN)
    and leaves the parameters as the last finite step left them."""
    from zonal.dkm import TrainingDivergedError

    x = torch.cat([torch.randn(40, 2, generator=generator(20), dtype=torch.float64),
                   torch.ones(40, 1, dtype=torch.float64)], 1)  # fmt: skip
    model = SparseDKM(x[:8], 1, GaussianLikelihood(), nu=1.0)
    original, calls = SparseDKM.objective, {"count": 0}

    def breaking(self, *args, **kwargs):
        calls["count"] += 1
        if calls["count"] == 3:
            raise NotPositiveDefiniteError("K_ii contains NaN or infinite entries")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SparseDKM, "objective", breaking)
    fit_dkm(model, x, x[:, 0], epochs=1, batch_size=20, lr=0.01)  # two steps
    before = {name: value.detach().clone() for name, value in model.state_dict().items()}
    with pytest.raises(TrainingDivergedError, match="epoch 1, step 1 of 2: K_ii") as raised:
        fit_dkm(model, x, x[:, 0], epochs=1, batch_size=20, lr=0.01)
    assert isinstance(raised.value.__cause__, NotPositiveDefiniteError)
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)


def test_regression_training_raises_the_objective_and_fits_the_data():
    """A two-layer DKM on a smooth 2-d function: the objective rises and the test RMSE is a fraction
    of the targets' spread; the learned Gram blocks moved away from the NNGP (nu = 1)."""
    rng = np.random.default_rng(0)
    inputs = torch.as_tensor(rng.uniform(-2, 2, size=(300, 2)))
    features = torch.cat([inputs, torch.ones(300, 1, dtype=torch.float64)], 1)  # a bias feature
    targets = torch.sin(2 * inputs[:, 0]) + 0.5 * inputs[:, 1] ** 2
    targets = targets + 0.05 * torch.as_tensor(rng.standard_normal(300))
    model = SparseDKM(features[:20], 2, GaussianLikelihood(), nu=1.0)
    start = model.grams["0"].matrix.detach().clone()
    history = fit_dkm(model, features[:200], targets[:200], epochs=60, batch_size=100, lr=0.03)
    assert np.mean(history[-4:]) > np.mean(history[:4]) + 0.5
    mean, _ = model.predict(features[200:])
    rmse = float((mean - targets[200:]).square().mean().sqrt())
    assert rmse < 0.25 * float(targets.std())
    assert (model.grams["0"].matrix.detach() - start).abs().max() > 1e-3


def test_categorical_training_on_digits_reaches_ninety_percent():
    """A two-layer categorical DKM (Monte Carlo likelihood) on 400 digits (8x8): test accuracy
    >= 90% on 400 held-out digits, and the objective rises."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    inputs = torch.as_tensor(digits.data, dtype=torch.float64) / 16
    inputs = torch.cat([inputs, torch.ones(len(inputs), 1, dtype=torch.float64)], 1)
    labels = torch.as_tensor(digits.target)
    order = torch.randperm(len(inputs), generator=generator(14))
    train, test = order[:400], order[400:800]
    likelihood = SoftmaxLikelihood(num_classes=10, mixing_weights=False)
    model = SparseDKM(inputs[train[:40]], 2, likelihood, nu=1.0, likelihood_samples=50)
    history = fit_dkm(model, inputs[train], labels[train], epochs=20, batch_size=100, lr=0.02)
    assert np.mean(history[-4:]) > np.mean(history[:4]) + 0.5
    predicted = model.class_log_probabilities(inputs[test]).argmax(-1)
    assert float((predicted == labels[test]).double().mean()) >= 0.9


def test_predict_and_log_density_are_the_posterior_moments_and_its_gaussian_marginal():
    x = torch.randn(10, 3, generator=generator(15), dtype=torch.float64)
    y = torch.randn(4, generator=generator(16), dtype=torch.float64)
    model = SparseDKM(x[:6], 1, GaussianLikelihood(), nu=1.0)
    perturb(model, seed=17)
    posterior = model.posterior(x[6:])
    mean, variance = model.predict(x[6:])
    torch.testing.assert_close(mean, posterior.mean.squeeze(-1), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(variance, posterior.variance.squeeze(-1), rtol=1e-10, atol=1e-12)
    noise = float(model.likelihood.noise.detach())
    _, noisy = model.predict(x[6:], include_noise=True)
    torch.testing.assert_close(noisy, variance + noise, rtol=1e-12, atol=0)
    expected = torch.distributions.Normal(mean, (variance + noise).sqrt()).log_prob(y)
    torch.testing.assert_close(model.log_predictive_density(x[6:], y), expected, rtol=1e-10, atol=0)


def test_categorical_log_density_matches_gauss_hermite_quadrature():
    """log E_q[softmax(f)_y] by Monte Carlo (20000 draws) against a tensor-product Gauss-Hermite
    rule over the 3 independent output channels, within 4 Monte Carlo standard errors."""
    x = torch.randn(9, 3, generator=generator(18), dtype=torch.float64)
    labels = torch.tensor([0, 2, 1])
    likelihood = SoftmaxLikelihood(num_classes=3, mixing_weights=False)
    model = SparseDKM(x[:6], 1, likelihood, nu=1.0, likelihood_samples=20_000)
    perturb(model, seed=19)
    mean, variance = model.marginals(x[6:])  # [3, 3], [3]
    nodes, weights = np.polynomial.hermite_e.hermegauss(30)  # for the weight exp(-t^2 / 2)
    weights = weights / weights.sum()
    grid = np.stack(np.meshgrid(nodes, nodes, nodes, indexing="ij"), -1).reshape(-1, 3)
    grid_weights = np.einsum("i,j,k->ijk", weights, weights, weights).reshape(-1)
    expected, bound = [], []
    for point in range(3):
        draws = mean[point].numpy() + np.sqrt(variance[point].item()) * grid  # [Q, 3]
        probability = np.exp(draws - np.logaddexp.reduce(draws, axis=1, keepdims=True))
        target = probability[:, labels[point].item()]
        value = float(grid_weights @ target)
        spread = math.sqrt(float(grid_weights @ (target - value) ** 2))
        expected.append(math.log(value))
        bound.append(4 * spread / math.sqrt(20_000) / value)  # delta method on the log
    actual = model.log_predictive_density(x[6:], labels)
    assert (
        (actual - torch.tensor(expected, dtype=torch.float64)).abs() <= torch.tensor(bound)
    ).all()


def test_batched_posterior_is_the_posterior_of_each_batch():
    """X [b, q, D] (BoTorch's q-batches) gives, batch by batch, the posterior of X[b]."""
    x = torch.randn(12, 3, generator=generator(20), dtype=torch.float64)
    model = SparseDKM(x[:6], 2, GaussianLikelihood(), nu=1.0)
    perturb(model, seed=21)
    batched = model.posterior(x[6:].reshape(2, 3, 3))
    for index in range(2):
        single = model.posterior(x[6 + 3 * index : 9 + 3 * index])
        torch.testing.assert_close(batched.mean[index], single.mean, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(
            batched.distribution.covariance_matrix[index],
            single.distribution.covariance_matrix,
            rtol=1e-12,
            atol=1e-14,
        )


def test_float32_model_agrees_with_float64():
    """model.float() computes in float32 (the fast path) and agrees to float32 accuracy."""
    x = torch.randn(10, 3, generator=generator(22), dtype=torch.float64)
    model = SparseDKM(x[:6], 2, GaussianLikelihood(), nu=1.0)
    perturb(model, seed=23)
    mean64, variance64 = model.predict(x[6:])
    model.float()
    mean32, variance32 = model.predict(x[6:].float())
    assert mean32.dtype == torch.float32
    torch.testing.assert_close(mean32.double(), mean64, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(variance32.double(), variance64, rtol=1e-3, atol=1e-4)


def test_bad_input_is_refused_by_name():
    x = torch.randn(8, 3, dtype=torch.float64)
    model = SparseDKM(x[:4], 1, GaussianLikelihood())
    with pytest.raises(ValueError, match=r"inputs must have shape \[N, 3\]"):
        model.predict(torch.randn(5, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="NaN"):
        model.predict(torch.full((2, 3), math.nan, dtype=torch.float64))
    with pytest.raises(ValueError, match="nu of layer 1 must be >= 0"):
        SparseDKM(x[:4], 2, GaussianLikelihood(), nu=-1.0)
    with pytest.raises(ValueError, match="mixing_weights=False"):
        SparseDKM(x[:4], 1, SoftmaxLikelihood(num_classes=3, num_features=3))
    with pytest.raises(ValueError, match="class labels must lie in"):
        classifier = SparseDKM(x[:4], 1, SoftmaxLikelihood(num_classes=3, mixing_weights=False))
        classifier.log_predictive_density(x[:2], torch.tensor([0, 5]))
    with pytest.raises(NotPositiveDefiniteError, match="G\\^1_ii"):
        model_with_gram = SparseDKM(x[:4], 1, GaussianLikelihood())
        model_with_gram.grams["0"].assign(-torch.eye(4, dtype=torch.float64))


def test_resumed_training_is_the_uninterrupted_training():
    """One epoch, a checkpoint, and a resumed second epoch give the objectives and parameters of
    two epochs straight (same batches, same Monte Carlo draws, same Adam moments)."""
    x = torch.randn(30, 3, generator=generator(30), dtype=torch.float64)
    labels = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    likelihood = SoftmaxLikelihood(num_classes=3, mixing_weights=False)

    def fresh():
        return SparseDKM(x[:5], 2, likelihood, nu=1.0, likelihood_samples=8)

    straight = fresh()
    expected = fit_dkm(straight, x, labels, epochs=2, batch_size=8, lr=0.05, milestones=[1])
    saved = []
    first = fresh()
    fit_dkm(
        first, x, labels, epochs=1, batch_size=8, lr=0.05, milestones=[1], checkpoint=saved.append
    )
    resumed = fresh()
    history = fit_dkm(
        resumed, x, labels, epochs=2, batch_size=8, lr=0.05, milestones=[1], resume=saved[-1]
    )
    assert history == expected
    for (name, value), other in zip(
        straight.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(value, other, rtol=0, atol=0, msg=name)


def test_progress_bar_shows_the_epoch_callbacks_figures(monkeypatch):
    """The figures an epoch callback returns (an accuracy, say) appear in the bar beside the
    objective and the points per second from the next step on."""
    import tqdm.auto

    postfixes = []

    class RecordingBar(tqdm.auto.tqdm):
        def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):
            postfixes.append(dict(ordered_dict))

    monkeypatch.setattr(tqdm.auto, "tqdm", RecordingBar)
    x = torch.randn(24, 3, generator=generator(31), dtype=torch.float64)
    labels = (x[:, 0] > 0).long()
    model = SparseDKM(x[:4], 2, SoftmaxLikelihood(num_classes=2, mixing_weights=False), nu=1.0)
    fit_dkm(model, x, labels, epochs=2, batch_size=4, progress=True,
            epoch_callback=lambda epoch, objective: {"accuracy": 0.5 + epoch})  # fmt: skip
    assert len(postfixes) == 12  # 6 steps per epoch
    assert all({"objective", "points/s"} <= set(postfix) for postfix in postfixes)
    assert [postfix.get("accuracy") for postfix in postfixes] == [None] * 6 + ["0.5"] * 6
