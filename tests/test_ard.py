"""Input relevance (ARD) in the sphere embedding: z = [s * x, b] / ||[s * x, b]|| with learnable
s > 0. The scaled embedding is the unscaled one of s * x; the 1-homogeneous extension uses the
scaled radius; gradients in s match finite differences, in the embedding and in every model that
reads its inputs through it (SVGP, SGPR, DGP, activated DGP, residual DGP); s = 1 reproduces the
unscaled models bit for bit; the SGPR's collapsed bound with scales is the dense Titsias bound; an
input the target ignores gets a vanishing scale; bad scales raise named errors."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from torch.func import functional_call

from zonal.geometry import SphereEmbedding
from zonal.kernels import ArcCosineKernel
from zonal.models import SGPR, SVGP, ActivatedDGP, inducing_point_dgp
from zonal.models.residual_dgp import residual_dgp
from zonal.tabular.recipes import build_kernel, gaussian_likelihood, harmonic_features

SCALES = torch.tensor([0.7, 1.6, 0.4], dtype=torch.float64)
INPUT_DIM = len(SCALES)


def inputs(num: int = 9, seed: int = 0, dim: int = INPUT_DIM) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return 2.0 * torch.randn(num, dim, generator=generator, dtype=torch.float64)


def regression(num: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    x = inputs(num, seed)
    return x, torch.sin(x[:, 0]) + 0.3 * x[:, 1]


def scaled(initial: float | torch.Tensor = SCALES, bias: float = 1.0) -> SphereEmbedding:
    return SphereEmbedding(bias, input_scales=initial, input_dim=INPUT_DIM)


# ------------------------------------------------------------------------------ the embedding
@pytest.mark.parametrize("bias", [0.3, 1.0, 4.0])
def test_scaled_embedding_is_the_unscaled_embedding_of_scaled_inputs(bias):
    x = inputs()
    embedding = scaled(bias=bias)
    s = embedding.input_scales.detach()
    z, r = embedding(x)
    z_plain, r_plain = SphereEmbedding(bias)(x * s)
    assert torch.equal(z, z_plain) and torch.equal(r, r_plain)
    assert torch.equal(embedding.lift(x), SphereEmbedding(bias).lift(x * s))
    torch.testing.assert_close(embedding.inverse(z), x, rtol=1e-12, atol=1e-12)


def test_homogeneous_extension_uses_the_scaled_radius():
    """k_hom([s x, b], [s x', b]) = r r' k_S(z . z') with r = sqrt(sum_d s_d^2 x_d^2 + b^2)."""
    x1, x2 = inputs(5, seed=1), inputs(4, seed=2)
    embedding = scaled(bias=1.5)
    radius1 = torch.sqrt((SCALES**2 * x1**2).sum(-1) + 1.5**2)  # [5], computed independently
    radius2 = torch.sqrt((SCALES**2 * x2**2).sum(-1) + 1.5**2)  # [4]
    torch.testing.assert_close(embedding.radius(x1), radius1, rtol=1e-14, atol=0)
    (z1, _), (z2, _) = embedding(x1), embedding(x2)
    on_sphere = ArcCosineKernel(INPUT_DIM + 1)
    homogeneous = ArcCosineKernel(INPUT_DIM + 1, homogeneous=True)
    with torch.no_grad():
        expected = on_sphere(z1, z2).to_dense() * radius1[:, None] * radius2[None, :]
        lifted = homogeneous(embedding.lift(x1), embedding.lift(x2)).to_dense()
    torch.testing.assert_close(lifted, expected, rtol=1e-12, atol=1e-12)


def test_embedding_gradients_in_the_scales_match_finite_differences():
    embedding = scaled()
    x = inputs(6)

    def embed(raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return functional_call(embedding, {"raw_input_scales": raw}, (x,))

    raw = embedding.raw_input_scales.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(embed, (raw,), eps=1e-6, atol=1e-8)


def test_state_dict_round_trip():
    embedding = scaled()
    with torch.no_grad():
        embedding.raw_input_scales.add_(torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64))
    state = embedding.state_dict()
    assert {"fixed_bias", "raw_input_scales"} <= set(state)
    fresh = scaled(1.0)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.input_scales, embedding.input_scales)
    x = inputs()
    assert torch.equal(fresh(x)[0], embedding(x)[0])
    fixed = SphereEmbedding(1.0, input_scales=SCALES, learn_input_scales=False)
    assert "fixed_input_scales" in fixed.state_dict()
    assert not list(fixed.parameters())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"input_scales": torch.ones(2, dtype=torch.float64), "input_dim": 3}, "length 2"),
        ({"input_scales": 1.0}, "needs input_dim"),
        ({"input_scales": 0.0, "input_dim": 3}, "finite and > 0"),
        ({"input_scales": torch.tensor([1.0, -1.0])}, "finite and > 0"),
        ({"input_scales": torch.tensor([1.0, math.nan])}, "finite and > 0"),
        ({"input_scales": torch.tensor([1.0, math.inf])}, "finite and > 0"),
        ({"input_scales": torch.ones(2, 2)}, "tensor \\[D\\]"),
        ({"input_scales": True}, "number or a tensor"),
        ({"input_scales": 1.0, "input_dim": 0}, "input_dim must be a positive integer"),
        ({"input_dim": 3}, "only read with input_scales"),
    ],
)
def test_bad_input_scales_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        SphereEmbedding(1.0, **options)


def test_inputs_of_the_wrong_width_are_named():
    with pytest.raises(ValueError, match="4 columns but the embedding has 3 input scales"):
        scaled().lift(inputs(dim=4))


# ------------------------------------------------------------------------------ the models
def harmonic_parts(budget: int = 30):
    kernel = build_kernel("arccos", INPUT_DIM + 1, budget)
    return kernel, harmonic_features(kernel, INPUT_DIM + 1, budget)


def make_svgp(embedding: SphereEmbedding) -> SVGP:
    kernel, features = harmonic_parts()
    return SVGP(kernel, features, INPUT_DIM, likelihood=gaussian_likelihood(), input_map=embedding)


def make_sgpr(embedding: SphereEmbedding) -> SGPR:
    kernel, features = harmonic_parts()
    return SGPR(kernel, features, INPUT_DIM, input_map=embedding)


def make_dgp(embedding: SphereEmbedding):
    x, _ = regression()
    model = inducing_point_dgp(x, [INPUT_DIM, 2, 1], gaussian_likelihood(), num_inducing=6)
    model.layers[0].input_map = embedding
    return model


def make_adgp(embedding: SphereEmbedding) -> ActivatedDGP:
    model = ActivatedDGP(INPUT_DIM, [2], gaussian_likelihood(), num_inducing=6, mean="constant")
    model.layers[0].input_map = embedding
    return model


def make_residual(embedding: SphereEmbedding):
    return residual_dgp(INPUT_DIM, 1, 10, input_map=embedding, likelihood=gaussian_likelihood())


MODELS = {
    "svgp": make_svgp,
    "sgpr": make_sgpr,
    "dgp": make_dgp,
    "adgp": make_adgp,
    "residual-dgp": make_residual,
}


def negative_objective(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The training loss of each model: minus the collapsed bound (SGPR, the statistics recomputed
    with gradients as ``fit_input_scales`` does), minus the ELBO (SVGP), minus the deep ELBO with
    three samples drawn from a fixed seed (DGPs: common random numbers across evaluations)."""
    if isinstance(model, SGPR):
        return -model._bound(*model._statistics(x, y))
    if isinstance(model, SVGP):
        elbo = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(x))
        return -elbo(model(x), y)
    elbo = gpytorch.mlls.DeepApproximateMLL(
        gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=len(x))
    )
    with torch.random.fork_rng(devices=[]), gpytorch.settings.num_likelihood_samples(3):
        torch.manual_seed(0)
        return -elbo(model(x), y)


def scale_parameter(model) -> torch.nn.Parameter:
    (parameter,) = [p for name, p in model.named_parameters() if name.endswith("raw_input_scales")]
    return parameter


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_trains_the_scales_with_exact_gradients(name):
    """The autograd derivative of the model's loss along a direction of the raw scales equals the
    central finite difference (step 1e-5, relative tolerance 1e-5), and is not zero."""
    torch.manual_seed(0)
    model = MODELS[name](scaled())
    x, y = regression()
    parameter = scale_parameter(model)
    direction = torch.tensor([0.6, -0.3, 0.8], dtype=torch.float64)
    negative_objective(model, x, y)  # GPyTorch initialises an untouched q(u) at its first call
    negative_objective(model, x, y).backward()
    derivative = float(parameter.grad @ direction)
    step = 1e-5
    values = []
    for sign in (1.0, -1.0):
        with torch.no_grad():
            parameter.add_(sign * step * direction)
            values.append(float(negative_objective(model, x, y)))
            parameter.sub_(sign * step * direction)
    finite_difference = (values[0] - values[1]) / (2 * step)
    assert abs(derivative) > 1e-3
    assert derivative == pytest.approx(finite_difference, rel=1e-5)


def perturb(model, seed: int) -> None:
    """Move every parameter a little (a non-trivial q(u) and hyperparameters), and mark q(u) as
    initialised (GPyTorch would otherwise draw a fresh one at the first call)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            if name.endswith("variational_params_initialized"):
                buffer.fill_(1)
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
            parameter.add_(0.05 * noise.to(parameter.dtype))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_unit_scales_reproduce_the_unscaled_model_exactly(name):
    torch.manual_seed(3)
    plain = MODELS[name](SphereEmbedding(1.0))
    torch.manual_seed(3)
    unit = MODELS[name](scaled(1.0))
    perturb(plain, seed=4)
    missing, unexpected = unit.load_state_dict(plain.state_dict(), strict=False)
    assert unexpected == [] and missing
    assert all("input_scales" in key for key in missing)  # the scales, their constraint
    x, y = regression()
    x_test = inputs(7, seed=5)
    if isinstance(plain, SGPR):
        plain.fit_statistics(x, y)
        unit.fit_statistics(x, y)
        assert torch.equal(plain.elbo(), unit.elbo())
    with torch.no_grad():
        for first, second in zip(plain.predict(x_test), unit.predict(x_test), strict=True):
            assert torch.equal(first, second)


# ------------------------------------------------------------------------------ the SGPR scheme
def dense_titsias_bound(model: SGPR, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log N(y | 0, Qff + s^2 I) - tr(Kff - Qff) / (2 s^2), every matrix dense (Titsias, 2009)."""
    lifted = model.input_map.lift(x)  # [N, D + 1]
    kff = model.kernel(lifted).to_dense()  # [N, N]
    kuf = model.features.kuf(model.kernel, lifted)  # [M, N]
    kuu = model.features.kuu(model.kernel).to_dense()  # [M, M]
    qff = kuf.mT @ torch.linalg.solve(kuu, kuf)  # [N, N]
    noise = model.likelihood.noise.reshape(())
    covariance = qff + noise * torch.eye(len(y), dtype=torch.float64)
    marginal = torch.distributions.MultivariateNormal(torch.zeros_like(y), covariance)
    return marginal.log_prob(y) - torch.trace(kff - qff) / (2 * noise)


def test_sgpr_bound_with_scales_is_the_dense_bound_and_its_gradient():
    model = make_sgpr(scaled())
    x, y = regression(30)
    model.fit_statistics(x, y)
    with torch.no_grad():
        torch.testing.assert_close(
            model.elbo(), dense_titsias_bound(model, x, y), rtol=1e-10, atol=0
        )
    parameter = scale_parameter(model)
    model._bound(*model._statistics(x, y)).backward()
    gradient = parameter.grad.clone()
    parameter.grad = None
    dense_titsias_bound(model, x, y).backward()
    torch.testing.assert_close(gradient, parameter.grad, rtol=1e-9, atol=1e-12)


def test_sgpr_refuses_statistics_of_other_scales_until_the_next_pass():
    model = make_sgpr(scaled())
    x, y = regression(60)
    model.fit_statistics(x, y)
    model.fit_input_scales(x, y, subsample_size=40, max_iter=3)
    with pytest.raises(ValueError, match="input scales changed since the statistics"):
        model.elbo()
    with pytest.raises(ValueError, match="input scales changed since the statistics"):
        model.predict(x)
    model.fit_statistics(x, y)
    with torch.no_grad():
        torch.testing.assert_close(
            model.elbo(), dense_titsias_bound(model, x, y), rtol=1e-10, atol=0
        )


def test_sgpr_scale_fitting_needs_learnable_scales():
    x, y = regression()
    with pytest.raises(ValueError, match="learnable input scales"):
        make_sgpr(SphereEmbedding(1.0)).fit_input_scales(x, y)
    fixed = SphereEmbedding(1.0, input_scales=SCALES, learn_input_scales=False)
    with pytest.raises(ValueError, match="learnable input scales"):
        make_sgpr(fixed).fit_input_scales(x, y)
    with pytest.raises(ValueError, match="subsample_size must be a positive integer"):
        make_sgpr(scaled()).fit_input_scales(x, y, subsample_size=0)


def test_an_ignored_input_gets_a_vanishing_scale():
    """y = sin(2 x_1) + noise 0.1 ignores x_2 and x_3: after the alternating scheme their scales
    fall below 1% of x_1's (observed: ~1e-5 relative), and the full-data bound is finite."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(400, INPUT_DIM, generator=generator, dtype=torch.float64)
    noise = 0.1 * torch.randn(400, generator=generator, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0]) + noise
    kernel = build_kernel("arccos", INPUT_DIM + 1, 200)
    features = harmonic_features(kernel, INPUT_DIM + 1, 200)
    model = SGPR(kernel, features, INPUT_DIM, input_map=scaled(1.0))
    model.fit_input_scales(x, y, subsample_size=300, max_iter=50)
    model.fit_statistics(x, y)
    model.fit(max_iter=20)
    s = model.input_map.input_scales.detach()
    assert float(s[1:].max()) < 0.01 * float(s[0])
    assert math.isfinite(float(model.elbo()))
