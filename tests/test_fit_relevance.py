"""The relevance screen that starts ``auto``'s input scales (``zonal.tabular.relevance``): its
objective against GPyTorch's exact marginal likelihood, the scales it finds, and where the start
goes (the spec's ``initial_input_scales``, the embeddings and the activated DGP's network)."""

from __future__ import annotations

import math

import gpytorch
import numpy as np
import pytest
import torch

from zonal.models import ActivatedDGP
from zonal.tabular import candidates, relevance
from zonal.tabular.fitting import fit_data
from zonal.tabular.recipes import build_points_svgp, gaussian_likelihood, resolve_spec
from zonal.tabular.recipes.parts import input_embedding
from zonal.tabular.relevance import (
    SCALE_RANGE,
    _negative_log_marginal,
    _posterior_mean_slopes,
    _rbf,
    input_slopes,
    screened_input_scales,
)
from zonal.tabular.split import Split
from zonal.tabular.targets import Target


def _rows(count: int = 300, dim: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x [count, dim] standard normal; y = sin(2 x0) + x1 + 0.1 e: inputs 2.. are irrelevant."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, dim, generator=generator, dtype=torch.float64)
    noise = torch.randn(count, generator=generator, dtype=torch.float64)
    return x, torch.sin(2 * x[:, 0]) + x[:, 1] + 0.1 * noise


class _RBFGP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ZeroMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(ard_num_dims=x.shape[1])
        )

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def test_the_screen_objective_is_gpytorchs_exact_marginal_likelihood():
    """At lengthscales (0.7, 1.3, 2.0), variance 1.5 and noise 0.2, the screen's -log p(y) / n on
    40 rows equals GPyTorch's ``ExactMarginalLogLikelihood`` (zero mean, RBF-ARD, Gaussian noise;
    GPyTorch divides by n too) to 1e-8; two target columns give the mean of their own values."""
    x, y = _rows(40, 3)
    y = y - y.mean()
    lengthscales = torch.tensor([0.7, 1.3, 2.0], dtype=torch.float64)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = _RBFGP(x, y, likelihood).double()
    model.covar_module.base_kernel.lengthscale = lengthscales
    model.covar_module.outputscale = 1.5
    likelihood.noise = 0.2
    model.train()
    likelihood.train()
    with gpytorch.settings.fast_computations(False, False, False):
        expected = -gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)(model(x), y)
    with torch.no_grad():  # the values GPyTorch holds after its constraints' round trips
        log_args = (model.covar_module.base_kernel.lengthscale.reshape(-1).log(),
                    model.covar_module.outputscale.log(), likelihood.noise.reshape(()).log())  # fmt: skip
        found = _negative_log_marginal(x, y.unsqueeze(-1), *log_args)
    assert float(found) == pytest.approx(float(expected.detach()), abs=1e-8)
    other = torch.flip(y, [0]).unsqueeze(-1)
    both = _negative_log_marginal(x, torch.cat([y.unsqueeze(-1), other], -1), *log_args)
    single = _negative_log_marginal(x, other, *log_args)
    assert float(both) == pytest.approx(0.5 * float(found + single), abs=1e-12)


def test_the_slopes_are_the_posterior_means_gradients():
    """The closed-form slopes of the RBF-ARD posterior mean equal autograd's gradient of
    m(x) = k(x, X) (K + noise I)^{-1} Y at every row, for two target columns."""
    x, y = _rows(30, 3)
    targets = torch.stack([y, y.flip(0)], -1)  # [30, 2]
    lengthscales = torch.tensor([0.8, 1.5, 3.0], dtype=torch.float64)
    variance, noise = torch.tensor(1.3).double(), torch.tensor(0.05).double()
    found = _posterior_mean_slopes(x, targets, lengthscales, variance, noise)  # [30, 3, 2]
    weights = torch.linalg.solve(_rbf(x, lengthscales, variance) + noise * torch.eye(30), targets)
    points = x.clone().requires_grad_(True)
    for column in range(2):
        mean = (_cross_rbf(points, x, lengthscales, variance) @ weights[:, column]).sum()
        (gradient,) = torch.autograd.grad(mean, points)  # row i's mean depends on x_i only
        torch.testing.assert_close(found[:, :, column], gradient, rtol=1e-9, atol=1e-10)


def _cross_rbf(a, b, lengthscales, variance):
    """k(a_i, b_j) [n, m] written out, without ``torch.cdist``."""
    difference = (a.unsqueeze(1) - b.unsqueeze(0)) / lengthscales  # [n, m, D]
    return variance * torch.exp(-0.5 * difference.pow(2).sum(-1))


def test_the_screen_finds_the_relevant_inputs():
    """y = sin(2 x0) + x1 + noise on six inputs: the root-mean-square slopes are those of the
    function, sqrt(E[4 cos^2(2 x0)]) = 1.41 and 1, to 0.15, and under 0.05 for the four inputs it
    ignores (measured 1.44, 1.00, <= 0.002); the scales start every irrelevant input at least 20
    times below each relevant one, within the clamped range."""
    x, y = _rows()
    slopes, variance = input_slopes(x, y)
    truth = torch.tensor([math.sqrt(2 * (1 + math.exp(-8))), 1.0], dtype=torch.float64)
    torch.testing.assert_close(slopes[:2], truth, rtol=0, atol=0.15)
    assert (slopes[2:] < 0.05).all(), slopes
    assert variance == pytest.approx(float(y.var()), rel=1e-12)
    scales = torch.tensor(screened_input_scales(x, y))
    assert scales[2:].max() * 20 < scales[:2].min(), scales
    low, high = SCALE_RANGE
    assert scales.min() >= low - 1e-12 and scales.max() <= high + 1e-12


def test_one_hot_classes_read_the_relevant_inputs_too():
    """Classes by the sign of x1 (x0, x2, x3 irrelevant): the one-hot columns' screen gives x1 the
    largest scale, at least 5 times the others'."""
    x, _ = _rows(300, 4, seed=1)
    labels = (x[:, 1] > 0).long()
    classes = torch.nn.functional.one_hot(labels, 2).to(torch.float64)
    scales = torch.tensor(screened_input_scales(x, classes))
    others = torch.cat([scales[:1], scales[2:]])
    assert scales[1] > 5 * others.max(), scales


def test_the_screen_reads_at_most_its_rows_and_refuses_bad_shapes(monkeypatch):
    x, y = _rows(50, 2)
    seen = []
    original = relevance._negative_log_marginal

    def spy(inputs, *args):
        seen.append(len(inputs))
        return original(inputs, *args)

    monkeypatch.setattr(relevance, "_negative_log_marginal", spy)
    input_slopes(x, y, max_rows=20, iterations=3)
    assert seen and set(seen) == {20}
    with pytest.raises(ValueError, match=r"y must be \[N\] or \[N, C\] with N = 50"):
        input_slopes(x, y[:10])
    with pytest.raises(ValueError, match="rows x"):
        input_slopes(x[:1], y[:1])


def test_a_failed_screen_leaves_the_scales_at_one(monkeypatch):
    """A covariance that is not positive definite makes the screen answer None (a named error
    inside, no NaN scales out), and ``auto``'s options then carry no start: the scales start at
    1 as without the screen."""

    def refuse(matrix, *, name):
        raise relevance.NotPositiveDefiniteError(f"{name} is not positive definite")

    monkeypatch.setattr(relevance, "cholesky", refuse)
    x, y = _rows(600, 2)
    assert screened_input_scales(x, y) is None
    split = Split(x, y, x[:0], y[:0])
    options = {"num_inducing": 16}
    started = candidates.screened_start(["sgpr", "adgp"], split, Target("gaussian"), 0, options)
    assert started == options


def test_the_start_is_checked_and_reaches_the_embeddings():
    """``initial_input_scales`` needs ARD, one positive number per input; given, the embedding of
    the SVGP with inducing points starts there and its points are the rows lifted at it."""
    with pytest.raises(ValueError, match="give them with ard"):
        resolve_spec(2, model="svgp-points", initial_input_scales=[1.0, 2.0])
    with pytest.raises(ValueError, match="has 1 values for 2 input columns"):
        resolve_spec(2, model="svgp-points", ard=True, initial_input_scales=[1.0])
    with pytest.raises(ValueError, match=r"column 1 has 0\.0"):
        resolve_spec(2, model="svgp-points", ard=True, initial_input_scales=[1.0, 0.0])
    spec = resolve_spec(2, model="svgp-points", ard=True, initial_input_scales=[0.5, 3.0])
    assert spec["initial_input_scales"] == [0.5, 3.0]
    start = torch.tensor([0.5, 3.0], dtype=torch.float64)
    torch.testing.assert_close(input_embedding(spec).input_scales, start)
    assert "initial_input_scales" not in resolve_spec(2, model="svgp-points", ard=True)
    x, _ = _rows(12, 2)
    model = build_points_svgp({**spec, "num_inducing": 12}, x)
    points = model.features.points  # [12, 3]: the 12 rows, in a drawn order, lifted at the start
    lifted = torch.cat([x * start, torch.ones(12, 1, dtype=torch.float64)], -1)
    order = torch.argsort(points[:, 0])
    torch.testing.assert_close(points[order], lifted[torch.argsort(lifted[:, 0])])


def test_the_activated_dgp_and_its_network_start_at_given_scales():
    start = torch.tensor([0.2, 1.0, 4.0], dtype=torch.float64)
    model = ActivatedDGP(3, [4], gaussian_likelihood(), num_inducing=8, mean="constant",
                         input_scales=start)  # fmt: skip
    torch.testing.assert_close(model.layers[0].input_map.input_scales, start)
    torch.testing.assert_close(model.network_like(seed=1)[0].input_scales, start)
    assert model.layers[1].input_map.input_scales is None


def test_auto_starts_its_ard_candidates_at_the_screen(monkeypatch):
    """Under ``auto`` every candidate that learns input scales is built with the screen's start
    (the SGPR before the activated DGP learns none and gets none); a regression of at most
    ``SCREEN_ROWS`` training rows and ``ard=False`` are not screened."""
    screened, trained = [], {}
    original_screen, original_train = candidates.screened_input_scales, candidates.train

    def screen(x, y, *, seed):
        screened.append(original_screen(x, y, seed=seed))
        return screened[-1]

    def train(spec, x, y, control):
        trained[spec["model"]] = spec
        return original_train(spec, x, y, control)

    monkeypatch.setattr(candidates, "screened_input_scales", screen)
    monkeypatch.setattr(candidates, "train", train)
    x, y = _rows(700, 3)  # 560 training rows: above SCREEN_ROWS
    columns = ["a", "b", "c"]
    fit_data(x.numpy(), y.numpy(), feature_columns=columns, budget=10, seed=0,
             likelihood="gaussian", num_inducing=16, steps=10)  # fmt: skip
    assert len(screened) == 1 and screened[0] is not None
    assert {"sgpr", "adgp"} <= set(trained)
    for name, spec in trained.items():
        if spec["ard"]:
            assert spec["initial_input_scales"] == screened[0], name
        else:
            assert "initial_input_scales" not in spec, name
    assert not trained["sgpr"]["ard"] and trained["adgp"]["ard"]
    assert screened[0][2] < screened[0][0]  # x2 is irrelevant
    for rows, ard in ((700, False), (200, None)):
        screened.clear()
        trained.clear()
        fit_data(x[:rows].numpy(), y[:rows].numpy(), feature_columns=columns, budget=5,
                 seed=0, likelihood="gaussian", ard=ard, num_inducing=16, steps=10)  # fmt: skip
        assert not screened and all("initial_input_scales" not in s for s in trained.values())


def test_classifiers_are_not_screened(monkeypatch):
    """Classifiers start their scales at 1 (the two-class rule of session 30 failed)."""
    screened = []
    monkeypatch.setattr(candidates, "screened_input_scales", lambda *a, **k: screened.append(1))
    x, _ = _rows(700, 2)
    labels = np.where(x[:, 0] > 0, "up", "down")
    fit_data(x.numpy(), labels, feature_columns=["a", "b"], budget=3, seed=0)
    assert not screened
