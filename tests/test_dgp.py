"""Deep GPs: the activated DGP's posterior mean is a network, one layer is an SVGP, the ELBO bounds
the marginal likelihood, and predictions are the Monte Carlo mixture."""

import math

import gpytorch
import pytest
import torch
from torch.distributions import MultivariateNormal

from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import ArcCosineKernel
from zonal.models import SVGP
from zonal.models.activated_dgp import (
    ActivatedDGP,
    mean_prior_penalty,
    train_network,
    two_stage_fit,
)
from zonal.models.dgp import DGP, DGPLayer


def data(num_points=50, input_dim=2, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, input_dim, dtype=torch.float64, generator=generator)
    return x, torch.sin(2 * x[:, 0]) * x[:, -1]


def randomise_means(model, seed=1):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model.layers:
            distribution = layer.variational_strategy._variational_distribution
            distribution.variational_mean.copy_(
                torch.randn(
                    distribution.variational_mean.shape, generator=generator, dtype=torch.float64
                )
            )
            layer.variational_strategy.variational_params_initialized.fill_(1)


@pytest.mark.parametrize("hidden_dims", [[], [3], [4, 2], [3, 3, 2]])
@pytest.mark.parametrize("activation", ["relu", "softplus"])
def test_network_equals_posterior_mean_both_ways(hidden_dims, activation):
    x, _ = data(30)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = ActivatedDGP(
        2, hidden_dims, likelihood, num_inducing=9, activation=activation, mean="constant"
    )
    randomise_means(model)
    network = model.to_torch_module()
    assert isinstance(network, torch.nn.Module)
    assert (network(x) - model.posterior_mean(x)).abs().max() < 1e-10
    trained_elsewhere = model.network_like(seed=7)
    model.from_torch_module(trained_elsewhere)
    assert (trained_elsewhere(x) - model.posterior_mean(x)).abs().max() < 1e-10


def test_posterior_mean_of_one_layer_is_the_predictive_mean():
    x, _ = data(20)
    model = ActivatedDGP(2, [], gpytorch.likelihoods.GaussianLikelihood().double(), num_inducing=6)
    randomise_means(model)
    model.eval()
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(3):
        predictive = model(x).mean  # [S, N], identical samples for deterministic inputs
    assert (predictive - model.posterior_mean(x)).abs().max() < 1e-12


def test_one_layer_dgp_equals_the_svgp():
    x, y = data(40)
    kernel = ArcCosineKernel(3, homogeneous=True)
    features = SphericalHarmonicFeatures(3, 4, kernel=kernel)
    svgp = SVGP(kernel, features, 2)
    layer = DGPLayer(kernel, features, 2, None)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    dgp = DGP([layer], likelihood)
    generator = torch.Generator().manual_seed(0)
    mean = torch.randn(features.num_inducing, generator=generator, dtype=torch.float64)
    factor = torch.tril(
        0.2
        * torch.randn(
            features.num_inducing, features.num_inducing, generator=generator, dtype=torch.float64
        ),
        -1,
    )
    factor = factor + torch.eye(features.num_inducing, dtype=torch.float64) * 0.7
    for strategy in (svgp.variational_strategy, layer.variational_strategy):
        with torch.no_grad():
            strategy._variational_distribution.variational_mean.copy_(mean)
            strategy._variational_distribution.chol_variational_covar.copy_(factor)
        strategy.variational_params_initialized.fill_(1)
    svgp_elbo = gpytorch.mlls.VariationalELBO(likelihood, svgp, num_data=len(y))
    dgp_elbo = gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(likelihood, dgp, num_data=len(y))
    )
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(4):
        assert abs(float(svgp_elbo(svgp(x), y)) - float(dgp_elbo(dgp(x), y))) < 1e-8
        svgp.eval()
        dgp.eval()
        svgp_posterior = svgp(x)
        dgp.num_posterior_samples = 4
        mean, variance = dgp.predict(x)
    assert (mean - svgp_posterior.mean).abs().max() < 1e-8
    assert (variance - svgp_posterior.variance).abs().max() < 1e-8


def test_elbo_is_below_the_exact_log_marginal_likelihood():
    x, y = data(30)
    kernel = ArcCosineKernel(3, homogeneous=True)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = torch.tensor(0.1, dtype=torch.float64)
    layer = DGPLayer(kernel, SphericalHarmonicFeatures(3, 8, kernel=kernel), 2, None)
    model = DGP([layer], likelihood)
    from zonal.models.dgp import fit_dgp

    fit_dgp(
        model,
        x,
        y,
        num_steps=150,
        lr=0.05,
        num_samples=1,
        parameters=list(layer.variational_strategy._variational_distribution.parameters()),
    )
    lifted = layer.input_map.lift(x)
    covariance = kernel(lifted).to_dense() + float(likelihood.noise) * torch.eye(
        len(y), dtype=torch.float64
    )
    exact = MultivariateNormal(torch.zeros_like(y), covariance).log_prob(y)
    objective = gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(y))
    )
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(2):
        elbo = float(objective(model(x), y)) * len(y)
    assert elbo <= float(exact) + 1e-8
    assert elbo > float(exact) - 0.1 * abs(float(exact))  # a trained bound, not a trivial one


def test_mixture_moments_and_log_mean_exp():
    x, y = data(15)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = ActivatedDGP(2, [3], likelihood, num_inducing=8)
    randomise_means(model)
    model.eval()
    model.num_posterior_samples, model.posterior_seed = 16, 5
    mean, variance = model.predict(x)
    expanded = x.expand(16, *x.shape)  # [S, N, D]: the inner layers' draws come from the seed
    torch.manual_seed(5)
    with torch.no_grad():
        output = model(expanded, are_samples=True)
    sample_means, sample_variances = output.mean, output.variance  # [16, N]
    assert (mean - sample_means.mean(0)).abs().max() < 1e-12
    spread = sample_means.var(0, unbiased=False)
    assert (variance - (sample_variances.mean(0) + spread)).abs().max() < 1e-12
    assert spread.max() > 1e-6  # the spread of the per-sample means is really there
    model.posterior_seed = 6
    density = model.log_predictive_density(x, y)
    torch.manual_seed(6)
    with torch.no_grad():
        output = model(expanded, are_samples=True)
        noise = float(likelihood.noise)
        per_sample = -0.5 * (
            torch.log(2 * math.pi * (output.variance + noise))
            + (y - output.mean) ** 2 / (output.variance + noise)
        )
    expected = torch.logsumexp(per_sample, 0) - math.log(16)
    assert (density - expected).abs().max() < 1e-10


def test_two_stage_training_runs_and_improves():
    x, y = data(120)
    model = ActivatedDGP(
        2, [3], gpytorch.likelihoods.GaussianLikelihood().double(), num_inducing=16
    )
    traces = two_stage_fit(model, x, y, network_steps=150, elbo_steps=60, lr=0.02)
    assert traces["network"][-1] < traces["network"][0]
    assert traces["elbo"][-1] < traces["elbo"][0]
    mean, _ = model.predict(x)
    assert ((mean - y) ** 2).mean() < 0.5 * y.var()


def test_a_one_column_target_trains_the_network_as_a_vector_does_and_float32_fits():
    """y [N, 1] is the y [N] of a one-output network (``mse_loss`` would broadcast [N] against
    [N, 1] to [N, N]); a mismatched width is named; a float32 model trains its network in float32."""
    x, y = data(60)

    def fitted(targets, dtype=torch.float64):
        torch.manual_seed(0)
        model = ActivatedDGP(2, [3], gpytorch.likelihoods.GaussianLikelihood(), num_inducing=8).to(
            dtype
        )
        traces = two_stage_fit(model, x.to(dtype), targets.to(dtype), network_steps=40,
                               elbo_steps=5, lr=0.02)  # fmt: skip
        return traces["network"]

    assert fitted(y.unsqueeze(-1)) == fitted(y)
    with pytest.raises(ValueError, match=r"needs targets \[N\], got \(60, 2\)"):
        fitted(torch.stack([y, y], -1))
    single = fitted(y, torch.float32)
    assert single[-1] < single[0]


def test_two_stage_fit_trains_the_network_on_the_transformed_targets():
    """With a ``Standardize`` outcome transform the network stage fits the standardised targets,
    as the ELBO stage reads them: the model fitted on y = 100 + 30 f(x) predicts, right after the
    copy, the same model fitted on the standardised targets mapped back (it trained the network
    on the raw y, 4.7e6 MSE after the copy)."""
    from botorch.models.transforms.outcome import Standardize

    x, y = data(80)
    raw = 100 + 30 * y
    transform = Standardize(m=1).double()
    standardised, _ = transform(raw.unsqueeze(-1))  # [N, 1]

    def fitted(targets, outcome_transform):
        model = ActivatedDGP(2, [3], gpytorch.likelihoods.GaussianLikelihood().double(),
                             num_inducing=8, outcome_transform=outcome_transform)  # fmt: skip
        two_stage_fit(model, x, targets, network_steps=40, elbo_steps=0, lr=0.02)
        return model.predict(x)[0]

    with_transform = fitted(raw, Standardize(m=1).double())
    by_hand = fitted(standardised.squeeze(-1), None)
    mean, std = transform.means.reshape(()), transform.stdvs.reshape(())
    torch.testing.assert_close(with_transform, by_hand * std + mean, atol=1e-8, rtol=1e-8)


def test_two_stage_fit_and_the_widths_are_checked_by_name():
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = ActivatedDGP(2, [3], likelihood, num_inducing=5)
    x, y = data(20)
    with pytest.raises(ValueError, match=r"\[N, 2\]"):
        two_stage_fit(model, x[:, :1], y, network_steps=2, elbo_steps=0)
    broken = x.clone()
    broken[4, 1] = float("nan")
    with pytest.raises(ValueError, match="row 4"):  # before the network trains on it
        two_stage_fit(model, broken, y, network_steps=2, elbo_steps=0)
    for widths, message in (
        ({"hidden_dims": [0]}, r"hidden_dims\[0\] must be a positive int, got 0"),
        ({"hidden_dims": 5}, "hidden_dims must be a list of widths"),
        ({"hidden_dims": [3], "output_dim": 0}, "output_dim must be a positive int"),
    ):
        with pytest.raises(ValueError, match=message):
            ActivatedDGP(2, likelihood=likelihood, **widths)
    with pytest.raises(ValueError, match="input_dim must be a positive int"):
        ActivatedDGP(0, [3], likelihood)
    import numpy as np

    taken = ActivatedDGP(np.int64(2), np.array([3]), likelihood, num_inducing=5)
    assert len(taken.layers) == 2


def test_bad_input():
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = ActivatedDGP(2, [3], likelihood, num_inducing=5)
    other = ActivatedDGP(2, [4], likelihood, num_inducing=5)
    with pytest.raises(ValueError, match=r"layer 0.*\(2, 5, 3\).*\(2, 5, 4\)"):
        model.from_torch_module(other.to_torch_module())
    with pytest.raises(ValueError, match="unknown activation"):
        ActivatedDGP(2, [], likelihood, activation="sigmoidish")
    x = torch.zeros(4, 2, dtype=torch.float64)
    x[1, 0] = float("nan")
    with pytest.raises(ValueError, match="row 1"):
        model(x)
    with pytest.raises(ValueError, match=r"\[N, 2\]"):
        model(torch.zeros(4, 3, dtype=torch.float64))


def test_variational_scale_survives_the_first_call():
    model = ActivatedDGP(2, [3], gpytorch.likelihoods.GaussianLikelihood().double(), num_inducing=5)
    model.set_variational_scale(0.1)
    x, _ = data(5)
    model(x)
    for layer in model.layers:
        factor = layer.variational_strategy._variational_distribution.chol_variational_covar
        assert torch.allclose(factor, 0.1 * torch.eye(5, dtype=torch.float64).expand_as(factor))


def test_binary_network_loss_has_the_bernoulli_likelihood_link():
    from zonal.models.activated_dgp import probit_cross_entropy

    f = torch.tensor([-1.0, 0.3, 2.0], dtype=torch.float64)
    y = torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)
    likelihood = gpytorch.likelihoods.BernoulliLikelihood()
    expected = -likelihood(f).log_prob(y).mean()
    assert abs(float(probit_cross_entropy(f, y) - expected)) < 1e-12


@pytest.mark.parametrize("kernel_variance", [1e-3, 10.0])
def test_copy_with_a_kernel_variance_keeps_the_network_and_sets_q(kernel_variance):
    x, _ = data(25)
    model = ActivatedDGP(2, [3], gpytorch.likelihoods.GaussianLikelihood().double(), num_inducing=7)
    network = model.network_like(seed=3)
    model.from_torch_module(network, kernel_variance=kernel_variance, variational_scale=0.05)
    assert (network(x) - model.posterior_mean(x)).abs().max() < 1e-10
    for layer in model.layers:
        outputscale = float(layer.covar_module.outputscale)  # through a softplus: 1e-7 relative
        assert abs(outputscale - kernel_variance) < 1e-6 * kernel_variance
        factor = layer.variational_strategy._variational_distribution.chol_variational_covar
        assert torch.allclose(factor, 0.05 * torch.eye(7, dtype=torch.float64).expand_as(factor))
    with pytest.raises(ValueError, match="kernel_variance"):
        model.from_torch_module(network, kernel_variance=0.0)


def test_copy_with_one_kernel_variance_per_layer_keeps_the_network():
    from zonal.tabular.recipes.network import (
        ADGP_CLASSIFIER_OUTPUT_VARIANCE,
        ADGP_KERNEL_VARIANCE,
        copy_variances,
    )

    x, _ = data(25)
    model = ActivatedDGP(2, [3], gpytorch.likelihoods.GaussianLikelihood().double(), num_inducing=7)
    network = model.network_like(seed=3)
    variances = copy_variances(len(model.layers), "bce")  # a classifier's
    assert variances == [ADGP_KERNEL_VARIANCE, ADGP_CLASSIFIER_OUTPUT_VARIANCE]
    assert copy_variances(2, "mse") == [ADGP_KERNEL_VARIANCE] * 2
    model.from_torch_module(network, kernel_variance=variances, variational_scale=0.05)
    assert (network(x) - model.posterior_mean(x)).abs().max() < 1e-10
    for layer, variance in zip(model.layers, variances, strict=True):
        assert abs(float(layer.covar_module.outputscale) - variance) < 1e-6 * variance
    with pytest.raises(ValueError, match="holds 3 values for 2 layers"):
        model.from_torch_module(network, kernel_variance=[1.0, 1.0, 1.0])


def test_noise_starts_at_the_networks_training_error():
    from zonal.models.activated_dgp import noise_from_network

    x, y = data(30)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = ActivatedDGP(2, [], likelihood, num_inducing=5)
    network = model.network_like(seed=1)
    expected = float(torch.mean((network(x) - y) ** 2))
    assert abs(noise_from_network(likelihood, network, x, y) - expected) < 1e-12
    assert abs(float(likelihood.noise) - expected) < 1e-9
    exact = lambda h: y[: len(h)]  # noqa: E731  (a network with zero training error)
    assert abs(noise_from_network(likelihood, exact, x, y) - 2e-4) < 1e-10  # twice the floor


def test_softmax_head_predicts_the_copied_networks_classes():
    """With SoftmaxLikelihood(mixing_weights=False) the activated DGP's class probabilities are
    the softmax of its network's outputs once the DGP's variances vanish; GPyTorch's default
    mixing weights (a random C x C matrix the network lacks) are refused."""
    classes = 3
    with pytest.raises(ValueError, match="mixing_weights=False"):
        ActivatedDGP(
            2,
            [3],
            gpytorch.likelihoods.SoftmaxLikelihood(num_features=classes, num_classes=classes),
            output_dim=classes,
        )
    likelihood = gpytorch.likelihoods.SoftmaxLikelihood(num_classes=classes, mixing_weights=False)
    model = ActivatedDGP(2, [3], likelihood, output_dim=classes, num_inducing=10)
    network = model.network_like(seed=3)
    x, _ = data(50)
    labels = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()  # three classes
    train_network(network, x, labels, loss="ce", num_steps=100, lr=0.05)
    model.from_torch_module(network, kernel_variance=1e-10, variational_scale=1e-8)
    model.eval()
    with torch.no_grad():
        expected = torch.softmax(network(x), dim=-1)  # [N, C]
        components = model.latent_distribution(x)  # batch [S], [N, C]
        probabilities = likelihood(components).probs  # [samples, S, N, C]
        probabilities = probabilities.reshape(-1, *expected.shape).mean(0)  # [N, C]
    assert len(set(expected.argmax(-1).tolist())) == classes  # every class is predicted
    assert (probabilities - expected).abs().max() < 1e-4
    assert torch.equal(probabilities.argmax(-1), expected.argmax(-1))


@pytest.mark.parametrize("outputs", [1, 3])
def test_the_mean_prior_penalty_is_the_mean_term_of_the_kl(outputs):
    """``mean_prior_penalty`` of a network layer equals KL(q || p) of the DGP layer it is copied
    into minus the same KL with a zero mean, KL computed by torch.distributions over u with
    p(u) = N(0, Kuu) and q's covariance L S L^T (whitened S), per output; and its gradient in the
    network's directions and output weights matches finite differences."""
    likelihood = (gpytorch.likelihoods.BernoulliLikelihood() if outputs == 1 else
                  gpytorch.likelihoods.SoftmaxLikelihood(num_classes=outputs,
                                                         mixing_weights=False))  # fmt: skip
    model = ActivatedDGP(2, [3], likelihood, output_dim=outputs, num_inducing=6)
    network = model.network_like(seed=3)
    model.from_torch_module(network, kernel_variance=[1e-3, 0.7], variational_scale=0.2)
    layer = model.layers[-1]
    penalty = mean_prior_penalty(layer, network[-1]).detach()
    with torch.no_grad():
        kuu = layer.features.kuu(layer.covar_module)  # [M, M]
        root = torch.linalg.cholesky(kuu)  # L
        covariance = root @ (0.2**2 * torch.eye(6, dtype=torch.float64)) @ root.mT  # L S L^T
        prior = MultivariateNormal(torch.zeros(6, dtype=torch.float64), kuu)
        expected = 0.0
        for mean in network[-1].output_weights.mT:  # v_p [M], u's mean Kuu v_p
            kl = torch.distributions.kl_divergence(
                MultivariateNormal(kuu @ mean, covariance), prior
            )
            kl_zero = torch.distributions.kl_divergence(
                MultivariateNormal(torch.zeros(6, dtype=torch.float64), covariance), prior
            )
            expected += float(kl - kl_zero)
        strategy_kl = layer.variational_strategy.kl_divergence().sum()  # zonal's whitened KL
        zero = model.network_like(seed=3)
        zero[-1].output_weights.zero_()
        zero[-1].raw_weights.copy_(network[-1].raw_weights)
        model.from_torch_module(zero, variational_scale=0.2)
        strategy_kl_zero = layer.variational_strategy.kl_divergence().sum()
    assert abs(float(penalty) - expected) < 1e-8 * max(1.0, expected)
    assert abs(float(strategy_kl - strategy_kl_zero) - expected) < 1e-8 * max(1.0, expected)
    last = network[-1]
    inputs = (last.raw_weights.detach().clone().requires_grad_(),
              last.output_weights.detach().clone().requires_grad_())  # fmt: skip

    def of(raw_weights, output_weights):
        directions = raw_weights / raw_weights.norm(dim=-1, keepdim=True)
        kuu = layer.features.kuu(layer.covar_module, directions)
        return 0.5 * (output_weights * (kuu @ output_weights)).sum()

    assert abs(float(of(*inputs)) - float(penalty)) < 1e-12 * max(1.0, expected)

    class Penalty(torch.nn.Module):  # the library's penalty as a function of last's parameters
        def __init__(self) -> None:
            super().__init__()
            self.last = last

        def forward(self) -> torch.Tensor:
            return mean_prior_penalty(layer, self.last)

    penalty_module = Penalty()

    def library(raw_weights, output_weights):
        values = {"last.raw_weights": raw_weights, "last.output_weights": output_weights}
        return torch.func.functional_call(penalty_module, values, ())

    assert torch.autograd.gradcheck(library, inputs)  # its gradient against finite differences


def test_a_network_trained_with_the_prior_term_is_the_map_mean_of_its_last_layer():
    """On separable rows the probit loss alone grows the latent without bound; with the last
    layer's prior term (``train_network(..., penalty=...)``, ``mean_prior_penalty`` / N added to
    every minibatch's loss) the network has a smaller prior term and a smaller latent, and
    reaches a lower MAP objective than the same network trained without it."""
    from zonal.models.activated_dgp import probit_cross_entropy

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(120, 3, generator=generator, dtype=torch.float64)
    y = (x[:, 0] > 0).double()
    model = ActivatedDGP(3, [2], gpytorch.likelihoods.BernoulliLikelihood(), num_inducing=12)
    layer = model.layers[-1]
    terms = {}
    for prior in (True, False):
        network = model.network_like(seed=1)
        penalty = (
            (lambda network=network: mean_prior_penalty(layer, network[-1])) if prior else None
        )
        train_network(network, x, y, loss="bce", num_steps=300, lr=0.05, penalty=penalty)
        with torch.no_grad():
            value = float(mean_prior_penalty(layer, network[-1]))
            objective = float(probit_cross_entropy(network(x), y)) + value / len(x)
            terms[prior] = (value, objective, float(network(x).abs().median()))
    with_prior, objective, latent = terms[True]
    plain, plain_objective, plain_latent = terms[False]
    assert with_prior < 0.5 * plain
    assert objective < plain_objective
    assert latent < plain_latent


@pytest.mark.parametrize(("likelihood", "last"), [("bernoulli", 1.0), ("gaussian", 1e-3)])
def test_a_fitted_classifiers_last_layer_starts_at_unit_kernel_variance(likelihood, last):
    """``zonal fit --model adgp``: a classifier's last layer keeps (after 4 ELBO steps at the
    default rate, within 20%) the unit variance of the copy; a regression's the 1e-3 of every
    layer (at 1e-3 a classifier's latent variance stayed near 0: overconfident)."""
    from zonal.tabular.fitting import fit_data

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(60, 2, generator=generator, dtype=torch.float64).numpy()
    y = (x[:, 0] > 0).astype(int) if likelihood == "bernoulli" else x[:, 0]
    fitted = fit_data(x, y, feature_columns=["a", "b"], likelihood=likelihood, model="adgp",
                      num_inducing=8, steps=4, budget=None)  # fmt: skip
    layers = fitted.trained.model.layers
    assert abs(float(layers[-1].covar_module.outputscale) / last - 1) < 0.2
    assert abs(float(layers[0].covar_module.outputscale) / 1e-3 - 1) < 0.2
