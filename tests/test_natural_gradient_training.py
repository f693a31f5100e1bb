"""Training an SVGP with natural-gradient steps on q(u) and Adam on its hyperparameters
(``fit_svgp(natural_gradient=...)``, ``SVGP.natural_gradient_step``): each minibatch step is
GPyTorch's ``NGD`` step, a full-batch step of size 1 lands on Titsias' optimum, and the training
ends with q(u) at the ELBO's optimum for the hyperparameters it learned. Within a step, q(u)'s
step and the ELBO after it read one B = L^{-1} Kuf (``InterDomainVariationalStrategy.
shared_projection``), computed once, with the loss and gradients of computing it twice."""

from __future__ import annotations

import contextlib

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.likelihoods import BernoulliLikelihood, SoftmaxLikelihood

from zonal.features import InducingPoints, SphericalHarmonicFeatures
from zonal.geometry import SphereEmbedding
from zonal.kernels import ArcCosineKernel
from zonal.models import SGPR, SVGP, fit_svgp

INPUT_DIM = 2


def inputs(count: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(count, INPUT_DIM, generator=generator, dtype=torch.float64)


def labels(x: torch.Tensor) -> torch.Tensor:
    return (torch.sin(2 * x[:, 0]) + x[:, 1] > 0).double()  # [N] in {0, 1}


def build(
    kind: str,
    *,
    family: str = "cholesky",
    whiten: bool = True,
    likelihood=None,
    num_outputs: int = 1,
    input_map=None,
) -> SVGP:
    """The same SVGP for each ``family``: q(u) moved off the prior (so that a step has work); a
    batch of ``num_outputs`` q(u) for a softmax likelihood."""
    if kind == "points":
        kernel = ScaleKernel(RBFKernel()).double()
        rows = inputs(10, seed=5)
        features = InducingPoints(torch.cat([rows, torch.ones(10, 1, dtype=torch.float64)], -1))
    else:
        kernel = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
        features = SphericalHarmonicFeatures(INPUT_DIM + 1, 4, kernel=kernel)
    model = SVGP(kernel, features, INPUT_DIM, likelihood=likelihood, whiten=whiten,
                 variational_family=family, num_outputs=num_outputs,
                 input_map=input_map)  # fmt: skip
    shape = (num_outputs, features.num_inducing) if num_outputs > 1 else (features.num_inducing,)
    generator = torch.Generator().manual_seed(3)
    mean = 0.3 * torch.randn(*shape, generator=generator, dtype=torch.float64)
    root = 0.2 * torch.randn(*shape, shape[-1], generator=generator, dtype=torch.float64)
    covariance = root @ root.mT + 0.5 * torch.eye(shape[-1], dtype=torch.float64)
    model.inducing_strategy.set_variational(mean, covariance, whitened=True)
    return model


def q_of(model: SVGP) -> tuple[torch.Tensor, torch.Tensor]:
    q = model.inducing_strategy.current_q()
    return q.mean.detach().clone(), q.covariance_matrix.detach().clone()


@pytest.mark.parametrize("kind", ["points", "harmonic"])
@pytest.mark.parametrize("whiten", [True, False])
def test_a_minibatch_step_is_gpytorchs_ngd_step(kind, whiten):
    x = inputs(200)
    y = labels(x)
    batch = torch.arange(40, 90)
    ours = build(kind, whiten=whiten, likelihood=BernoulliLikelihood().double())
    theirs = build(kind, family="natural", whiten=whiten, likelihood=BernoulliLikelihood().double())
    start = q_of(ours)[0]
    ours.natural_gradient_step(x[batch], y[batch], step=0.3, num_data=len(x))
    theirs.train()
    objective = gpytorch.mlls.VariationalELBO(theirs.likelihood, theirs, num_data=len(x))
    optimiser = gpytorch.optim.NGD(theirs.variational_parameters(), num_data=len(x), lr=0.3)
    optimiser.zero_grad()
    (-objective(theirs(x[batch]), y[batch])).backward()
    optimiser.step()
    (mean, covariance), (their_mean, their_covariance) = q_of(ours), q_of(theirs)
    assert (mean - start).abs().max() > 0.05  # the step moved q
    torch.testing.assert_close(mean, their_mean, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(covariance, their_covariance, rtol=1e-9, atol=1e-10)


def test_a_full_batch_step_of_size_one_is_the_titsias_optimum():
    x = inputs(80)
    y = torch.sin(2 * x[:, 0]) + 0.3 * x[:, 1]
    model = build("harmonic")
    model.likelihood.noise = 0.05
    model.natural_gradient_step(x, y, step=1.0, num_data=len(x))
    reference = build("harmonic")
    reference.load_state_dict(model.state_dict())
    reference.set_optimal_variational_distribution(x, y)
    for ours, theirs in zip(q_of(model), q_of(reference), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-8, atol=1e-10)


def test_natural_gradient_training_ends_at_the_optimum_q_of_its_hyperparameters():
    """Full batches: after 60 steps q(u) is at the ELBO's optimum for the hyperparameters Adam
    learned (the optimum's steps raise the ELBO by < 0.2 nats; 0.03 measured), where Adam on both leaves it
    short by more than 1 nat; Adam moved the hyperparameters in both."""
    x = inputs(300)
    y = labels(x)
    rises = {}
    for natural in (None, 1.0):
        model = build("points", likelihood=BernoulliLikelihood().double())
        start = float(model.covar_module.outputscale.detach())
        fit_svgp(model, x, y, num_steps=60, batch_size=len(x), lr=0.05, natural_gradient=natural)
        assert float(model.covar_module.outputscale.detach()) != pytest.approx(start, abs=1e-3)
        result = model.set_natural_gradient_optimum(x, y)
        rises[natural] = result.elbo - result.trace[0]
    assert rises[1.0] < 0.2 < 1.0 < rises[None]


def test_minibatch_natural_gradient_steps_close_most_of_the_gap_to_the_optimum():
    """A model whose only parameters are q(u)'s (so Adam has nothing to move): 80 minibatch
    steps of size 0.3 (batches of 100 of 400 rows) bring q(u) within a tenth of its start's gap
    to the ELBO's optimum."""
    x = inputs(400)
    y = labels(x)
    model = build("harmonic", likelihood=BernoulliLikelihood().double())
    reference = build("harmonic", likelihood=BernoulliLikelihood().double())
    start = reference.set_natural_gradient_optimum(x, y)
    fit_svgp(model, x, y, num_steps=80, batch_size=100, natural_gradient=0.3)
    after = model.set_natural_gradient_optimum(x, y)
    assert after.elbo == pytest.approx(start.elbo, abs=0.5)  # the same optimum
    assert after.elbo - after.trace[0] < 0.1 * (start.elbo - start.trace[0])


def test_q_is_left_out_of_the_backward_pass_and_the_steps_are_unchanged():
    """During natural-gradient training q(u)'s parameters do not require gradients (the
    backward pass skips them) and afterwards they do again; the hyperparameters and q(u) end
    where the same steps end with q(u) in the backward pass (a loop written here: the natural
    step, then Adam on the hyperparameters from the ELBO's gradient), to 1e-10."""
    x = inputs(200)
    y = labels(x)
    model = build("points", likelihood=BernoulliLikelihood().double())
    reference = build("points", likelihood=BernoulliLikelihood().double())
    seen = []

    def record(step: int, loss: float) -> None:
        seen.append([p.requires_grad for p in model.variational_parameters()])

    fit_svgp(model, x, y, num_steps=6, batch_size=200, lr=0.05, natural_gradient=0.5,
             callback=record)  # fmt: skip
    assert seen and not any(any(flags) for flags in seen)
    assert all(p.requires_grad for p in model.variational_parameters())
    variational = {id(p) for p in reference.variational_parameters()}
    hyperparameters = [p for p in reference.parameters() if id(p) not in variational]
    optimiser = torch.optim.Adam(hyperparameters, lr=0.05)
    objective = gpytorch.mlls.VariationalELBO(reference.likelihood, reference, num_data=len(x))
    draws = torch.Generator().manual_seed(0)
    reference.train()
    for _ in range(6):
        reference.natural_gradient_step(x, y, step=0.5, num_data=len(x), generator=draws)
        optimiser.zero_grad()
        (-objective(reference(x), y)).backward()
        assert all(p.grad is not None for p in reference.variational_parameters())
        optimiser.step()
    for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours.detach(), theirs.detach(), rtol=1e-10, atol=1e-10)


def test_natural_gradient_needs_an_svgp_and_a_step_in_the_unit_interval():
    x = inputs(30)
    y = torch.sin(x[:, 0])
    kernel = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
    sgpr = SGPR(kernel, SphericalHarmonicFeatures(INPUT_DIM + 1, 3, kernel=kernel), INPUT_DIM)
    with pytest.raises(TypeError, match="natural_gradient needs an SVGP, got a SGPR"):
        fit_svgp(sgpr, x, y, num_steps=1, natural_gradient=0.5)
    for step in (0.0, 1.5):
        with pytest.raises(ValueError, match=r"natural_gradient must lie in \(0, 1\]"):
            fit_svgp(build("points"), x, y, num_steps=1, natural_gradient=step)


def labels_of(x: torch.Tensor, classes: int) -> torch.Tensor:
    """Two classes as ``labels``; three by thresholds on the same score."""
    if classes == 2:
        return labels(x)
    score = torch.sin(2 * x[:, 0]) + x[:, 1]  # [N]
    return torch.bucketize(score, torch.tensor([-0.5, 0.5], dtype=torch.float64))  # [N] in 0..2


def classifier(kind: str, classes: int) -> SVGP:
    """``build`` with learned input scales (so that the lift is in the graph too), Bernoulli or
    softmax."""
    if classes == 2:
        likelihood, outputs = BernoulliLikelihood(), 1
    else:
        likelihood = SoftmaxLikelihood(
            num_features=classes, num_classes=classes, mixing_weights=False
        )
        outputs = classes
    embedding = SphereEmbedding(1.0, input_scales=1.0, input_dim=INPUT_DIM)
    return build(kind, likelihood=likelihood, num_outputs=outputs, input_map=embedding)


def one_step(
    model: SVGP, x: torch.Tensor, y: torch.Tensor, shared: bool
) -> dict[str, torch.Tensor]:
    """A natural-gradient step on q(u) then the ELBO's loss and its gradients, as ``fit_svgp``
    takes them; returns the loss and each parameter's gradient."""
    model.train()
    objective = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=4 * len(x))
    strategy = model.inducing_strategy
    context = strategy.shared_projection() if shared else contextlib.nullcontext()
    generator = torch.Generator().manual_seed(7)
    with context:
        model.natural_gradient_step(x, y, step=0.3, num_data=4 * len(x), generator=generator)
        torch.manual_seed(11)  # the softmax ELBO's Monte Carlo draws
        loss = -objective(model(x), y)
    loss.backward()
    found = {"loss": loss.detach()}
    found.update({name: parameter.grad.clone() for name, parameter in model.named_parameters()
                  if parameter.grad is not None})  # fmt: skip
    return found


@pytest.mark.parametrize("kind", ["points", "harmonic"])
@pytest.mark.parametrize("classes", [2, 3])
def test_a_shared_step_computes_kuf_once_with_the_same_loss_and_gradients(
    kind, classes, monkeypatch
):
    x = inputs(60)
    y = labels_of(x, classes)
    model = classifier(kind, classes)
    twin = classifier(kind, classes)
    twin.load_state_dict(model.state_dict())
    calls: list[int] = []
    kuf = type(model.features).kuf

    def counted(self, kernel, points):
        calls.append(1)
        return kuf(self, kernel, points)

    monkeypatch.setattr(type(model.features), "kuf", counted)
    shared = one_step(model, x, y, shared=True)
    assert len(calls) == 1  # the natural-gradient step's, reused by the ELBO's forward
    plain = one_step(twin, x, y, shared=False)
    assert len(calls) == 3
    assert shared.keys() == plain.keys()
    assert "input_map.raw_input_scales" in shared  # the gradient reaches the lift's scales
    for name in plain:
        torch.testing.assert_close(shared[name], plain[name], rtol=1e-10, atol=1e-12, msg=name)


def test_nothing_is_kept_outside_the_context_and_it_does_not_nest():
    model = classifier("points", 2)
    strategy = model.inducing_strategy
    lifted = model.lift(inputs(20))
    with strategy.shared_projection():
        first = strategy.projection(lifted)
        assert strategy.projection(lifted.clone())[1] is first[1]
        assert strategy.projection(lifted[:10])[1] is not first[1]  # other rows, computed
        with pytest.raises(RuntimeError, match="already active"), strategy.shared_projection():
            pass
    assert strategy.projection(lifted)[1] is not first[1]
    with torch.no_grad():
        model.covar_module.outputscale = 2.0 * model.covar_module.outputscale
    with strategy.shared_projection():  # a new context sees the new hyperparameters
        again = strategy.projection(lifted)[1]
    assert not torch.allclose(again, first[1])


def test_fit_svgp_with_the_shared_projection_follows_the_twice_computed_path(monkeypatch):
    # the whole training loop: the same losses, step after step, as with B computed twice
    x = inputs(150)
    y = labels_of(x, 2)
    model = classifier("harmonic", 2)
    twin = classifier("harmonic", 2)
    twin.load_state_dict(model.state_dict())
    shared = fit_svgp(model, x, y, num_steps=8, batch_size=50, lr=0.05, natural_gradient=0.5)
    strategy_type = type(model.inducing_strategy)
    monkeypatch.setattr(strategy_type, "shared_projection", lambda self: contextlib.nullcontext())
    plain = fit_svgp(twin, x, y, num_steps=8, batch_size=50, lr=0.05, natural_gradient=0.5)
    assert shared == pytest.approx(plain, rel=1e-10)
