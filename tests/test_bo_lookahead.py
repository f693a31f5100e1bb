"""Look-ahead acquisitions in zonal.bo (zonal.bo.lookahead): on the sphere in the loop
(``optimize(acquisition="kg" | "mes" | "jes")``) and in the box with BoTorch's ``optimize_acqf``.
Checked against independent facts: proposed points lie on the sphere; the one-shot knowledge
gradient of a shallow model equals BoTorch's ``qKnowledgeGradient``; JES's optima are the maxima
of the drawn paths over the candidate set."""

from __future__ import annotations

import pytest
import torch
from botorch.acquisition import qKnowledgeGradient
from botorch.acquisition.multi_step_lookahead import qMultiStepLookahead
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.sampling.pathwise import draw_matheron_paths

from test_contract import INPUT_DIM, dgp, sgpr, training_data
from zonal.bo import (
    LoopSettings,
    MultiStepLookahead,
    lookahead_acquisition,
    optimal_samples,
    optimize,
    smooth_sphere,
)

FAST = LoopSettings(
    num_restarts=2,
    raw_samples=8,
    num_inducing=8,
    deep_steps=5,
    deep_warm_steps=2,
    posterior_samples=4,
    ascent_options={"max_iterations": 5},
    num_fantasies=3,
    num_optima=3,
    num_candidates=64,
)
BOUNDS = torch.tensor([[-1.0] * INPUT_DIM, [1.0] * INPUT_DIM], dtype=torch.float64)


@pytest.mark.parametrize(
    ("model", "acquisition"),
    [("shallow", "kg"), ("shallow", "mes"), ("shallow", "jes"), ("deep", "kg"), ("deep", "mes")],
)
def test_the_loop_proposes_points_on_the_sphere(model, acquisition):
    state = optimize(
        smooth_sphere, 3, 6, model=model, acquisition=acquisition, settings=FAST, progress=False
    )
    assert state.X.shape == (6, 3)
    torch.testing.assert_close(state.X.norm(dim=-1), torch.ones(6, dtype=torch.float64))


def test_knowledge_gradient_of_a_shallow_model_is_botorchs():
    x, y = training_data(30)
    model = sgpr(x, y)
    X = training_data(4, seed=5)[0].reshape(1, 4, INPUT_DIM)  # [b, q + F = 1 + 3, d]
    ours = lookahead_acquisition("kg", model, x, num_fantasies=3)
    sampler = SobolQMCNormalSampler(torch.Size([3]), seed=0)
    theirs = qKnowledgeGradient(model, num_fantasies=3, sampler=sampler)
    torch.testing.assert_close(ours(X), theirs(X), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("build", [sgpr, dgp])
def test_optimal_samples_are_the_paths_maxima_and_jes_optimises_in_the_box(build):
    x, y = training_data(30)
    torch.manual_seed(0)
    model = build(x, y)
    candidates = training_data(50, seed=6)[0]
    inputs, outputs = optimal_samples(model, candidates, 3, seed=1)
    assert inputs.shape == (3, INPUT_DIM) and outputs.shape == (3, 1)
    assert all(bool((candidates == row).all(-1).any()) for row in inputs)  # from the set
    torch.manual_seed(1)  # the same draws again: their maxima over the candidates
    with torch.no_grad():
        values = draw_matheron_paths(model, torch.Size([3]))(candidates).reshape(3, -1)
    torch.testing.assert_close(outputs.squeeze(-1), values.max(-1).values)
    acquisition = lookahead_acquisition("jes", model, candidates, num_optima=3)
    candidate, value = optimize_acqf(
        acquisition, BOUNDS, q=1, num_restarts=2, raw_samples=8, options={"maxiter": 4}
    )
    assert ((candidate >= -1) & (candidate <= 1)).all() and torch.isfinite(value)
    with torch.no_grad():  # the value returned is the acquisition's at the candidate returned
        again = acquisition(candidate.unsqueeze(0))
    torch.testing.assert_close(value.reshape(-1), again.reshape(-1), rtol=1e-9, atol=1e-12)


def test_multi_step_lookahead_of_a_shallow_model_is_botorchs_and_takes_a_deep_model():
    x, y = training_data(30)
    model = sgpr(x, y)
    torch.manual_seed(0)
    X = training_data(7, seed=8)[0].unsqueeze(0)  # [1, 1 + 2 + 2 * 2, d]

    def samplers():  # the same base samples for both
        return [SobolQMCNormalSampler(torch.Size([2]), seed=seed) for seed in (0, 1)]

    ours = MultiStepLookahead(model, batch_sizes=[1, 1], samplers=samplers())
    theirs = qMultiStepLookahead(model, batch_sizes=[1, 1], samplers=samplers())
    with torch.no_grad():
        expected = theirs(X)
    torch.testing.assert_close(ours(X), expected, atol=1e-12, rtol=1e-12)
    deep = dgp(x, y)
    acquisition = MultiStepLookahead(deep, batch_sizes=[1, 1], num_fantasies=[2, 2])
    q = acquisition.get_augmented_q_batch_size(1)
    candidate, value = optimize_acqf(
        acquisition, BOUNDS, q=q, num_restarts=2, raw_samples=8, options={"maxiter": 3}
    )
    assert candidate.shape == (1, INPUT_DIM) and torch.isfinite(value)  # the first step


@pytest.mark.parametrize("build", [sgpr, dgp])
def test_knowledge_gradient_evaluate_gives_each_t_batch_its_own_value(build):
    """``evaluate`` (the inner problem solved in the box): one value per t-batch, each the value
    of that t-batch evaluated alone (BoTorch's ``evaluate`` averaged a deep model's [b] values
    into one number), and for a shallow model BoTorch's own."""
    x, y = training_data(30)
    torch.manual_seed(0)
    model = build(x, y)
    X = training_data(3, seed=5)[0].unsqueeze(1)  # [b = 3, q = 1, d]
    options = {"num_restarts": 8, "raw_samples": 64, "options": {"seed": 0, "maxiter": 200}}
    acquisition = lookahead_acquisition("kg", model, x, num_fantasies=3)
    values = acquisition.evaluate(X, bounds=BOUNDS, **options).detach()
    alone = torch.cat([acquisition.evaluate(rows, bounds=BOUNDS, **options) for rows in X])
    assert values.shape == (3,) and alone.shape == (3,)
    torch.testing.assert_close(values, alone.detach(), rtol=1e-5, atol=1e-8)
    assert len(set(values.tolist())) == 3  # three points, three values
    # the inner maximum is at least KG's value at any fantasy points (the one-shot forward)
    inner = training_data(32 * 3, seed=9)[0].reshape(32, 3, INPUT_DIM)  # [32 sets, F, d]
    with torch.no_grad():
        for point, value in zip(X, values, strict=True):
            batch = torch.cat([point.expand(32, 1, INPUT_DIM), inner], dim=-2)  # [32, 1 + F, d]
            assert float(value) >= float(acquisition(batch).max()) - 1e-8
    if build is sgpr:
        sampler = SobolQMCNormalSampler(torch.Size([3]), seed=0)
        theirs = qKnowledgeGradient(model, num_fantasies=3, sampler=sampler)
        torch.testing.assert_close(values, theirs.evaluate(X, bounds=BOUNDS, **options).detach())
