"""``InterDomainVariationalStrategy.shared_projection``: within one natural-gradient training step
(``fit_svgp(natural_gradient=...)``) the step on q(u) and the ELBO's forward after it read one
B = L^{-1} Kuf, computed once, and the step's loss and gradients are those of computing it twice;
outside the context nothing is kept."""

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
from zonal.models import SVGP, fit_svgp

INPUT_DIM = 2
NUM_CLASSES = 3


def inputs(count: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(count, INPUT_DIM, generator=generator, dtype=torch.float64)


def labels(x: torch.Tensor, classes: int) -> torch.Tensor:
    score = torch.sin(2 * x[:, 0]) + x[:, 1]  # [N]
    if classes == 2:
        return (score > 0).double()
    return torch.bucketize(score, torch.tensor([-0.5, 0.5], dtype=torch.float64))  # [N] in 0..2


def build(kind: str, classes: int) -> SVGP:
    """An SVGP with learned input scales (so the lift is in the graph too), q(u) off the prior."""
    if kind == "points":
        kernel = ScaleKernel(RBFKernel()).double()
        rows = inputs(12, seed=5)
        features = InducingPoints(torch.cat([rows, torch.ones(12, 1, dtype=torch.float64)], -1))
    else:
        kernel = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
        features = SphericalHarmonicFeatures(INPUT_DIM + 1, 4, kernel=kernel)
    if classes == 2:
        likelihood, outputs = BernoulliLikelihood(), 1
    else:
        likelihood = SoftmaxLikelihood(
            num_features=classes, num_classes=classes, mixing_weights=False
        )
        outputs = classes
    embedding = SphereEmbedding(1.0, input_scales=1.0, input_dim=INPUT_DIM)
    model = SVGP(kernel, features, INPUT_DIM, likelihood=likelihood, input_map=embedding,
                 num_outputs=outputs)  # fmt: skip
    generator = torch.Generator().manual_seed(3)
    shape = (outputs, features.num_inducing) if outputs > 1 else (features.num_inducing,)
    mean = 0.3 * torch.randn(*shape, generator=generator, dtype=torch.float64)
    root = 0.2 * torch.randn(*shape, shape[-1], generator=generator, dtype=torch.float64)
    covariance = root @ root.mT + 0.5 * torch.eye(shape[-1], dtype=torch.float64)
    model.inducing_strategy.set_variational(mean, covariance, whitened=True)
    return model


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
@pytest.mark.parametrize("classes", [2, NUM_CLASSES])
def test_a_shared_step_computes_kuf_once_with_the_same_loss_and_gradients(
    kind, classes, monkeypatch
):
    x = inputs(60)
    y = labels(x, classes)
    model = build(kind, classes)
    twin = build(kind, classes)
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
    model = build("points", 2)
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
    y = labels(x, 2)
    model = build("harmonic", 2)
    twin = build("harmonic", 2)
    twin.load_state_dict(model.state_dict())
    shared = fit_svgp(model, x, y, num_steps=8, batch_size=50, lr=0.05, natural_gradient=0.5)
    strategy_type = type(model.inducing_strategy)
    monkeypatch.setattr(strategy_type, "shared_projection", lambda self: contextlib.nullcontext())
    plain = fit_svgp(twin, x, y, num_steps=8, batch_size=50, lr=0.05, natural_gradient=0.5)
    assert shared == pytest.approx(plain, rel=1e-10)
