"""BoTorch's look-ahead acquisitions on every zonal model, and the works / seconds table.

Each cell (model x capability) runs the capability as an experienced BoTorch user would, asserts
what it must give (shapes, finite values, candidates in the box; the knowledge gradient against
a loop over single fantasies, computed by hand), and records the seconds. BoTorch's
``SingleTaskVariationalGP`` is the anchor row: its cells are recorded (works, or the error it
raises), not asserted. The table is printed at the end of the module (``pytest -s`` or the
terminal summary).
"""

from __future__ import annotations

import math
import time

import pytest
import torch
from botorch.acquisition import PosteriorMean, qLogNoisyExpectedImprovement
from botorch.acquisition.active_learning import qNegIntegratedPosteriorVariance
from botorch.acquisition.joint_entropy_search import qJointEntropySearch
from botorch.acquisition.knowledge_gradient import qKnowledgeGradient
from botorch.acquisition.max_value_entropy_search import (
    qLowerBoundMaxValueEntropy,
    qMaxValueEntropy,
)
from botorch.models import SingleTaskVariationalGP
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler

from test_contract import (
    INPUT_DIM,
    activated_dgp,
    dgp,
    exact,
    residual,
    sgpr,
    svgp_activated,
    svgp_harmonic,
    svgp_points,
    training_data,
)
from zonal.bo import KnowledgeGradient, optimal_samples
from zonal.models import MomentMatchedModel, StackedModel, ZonalModel
from zonal.models.conditioning import condition_on_observations

BOUNDS = torch.tensor([[-1.0] * INPUT_DIM, [1.0] * INPUT_DIM], dtype=torch.float64)
FANTASIES = 3
OPTIMISE = {"num_restarts": 2, "raw_samples": 8, "options": {"maxiter": 4}}


def stacked(x, y):
    return StackedModel([sgpr(x, y), svgp_points(x, y), dgp(x, y)], [0.5, 0.25, 0.25])


def anchor(x, y):
    """BoTorch's own variational GP (untrained: conditioning does not depend on training)."""
    return SingleTaskVariationalGP(x, y.unsqueeze(-1), inducing_points=12)


MODELS = {
    "SGPR (harmonic)": sgpr,
    "exact GP": exact,
    "SVGP (harmonic)": svgp_harmonic,
    "SVGP (activated)": svgp_activated,
    "SVGP (points)": svgp_points,
    "DGP": dgp,
    "ActivatedDGP": activated_dgp,
    "ResidualDGP": residual,
    "StackedModel": stacked,
    "BoTorch SingleTaskVariationalGP (anchor)": anchor,
}
ANCHOR = "BoTorch SingleTaskVariationalGP (anchor)"
TABLE: dict[tuple[str, str], str] = {}
_BUILT: dict[str, object] = {}


def model_named(name: str):
    if name not in _BUILT:
        x, y = training_data(40)
        torch.manual_seed(0)
        _BUILT[name] = MODELS[name](x, y)
    return _BUILT[name]


def candidates(count: int, seed: int) -> torch.Tensor:
    return training_data(count, seed=seed)[0]


# ------------------------------------------------------------------ capabilities
def condition(model):
    x, y = training_data(4, seed=21)
    conditioned = model.condition_on_observations(x, y.unsqueeze(-1))
    mean = conditioned.posterior(candidates(5, 22)).mean
    assert torch.isfinite(mean).all() and mean.shape[-2:] == (5, 1)


def fantasize(model):
    X = candidates(6, 23).reshape(2, 3, INPUT_DIM)
    fantasy = model.fantasize(X, SobolQMCNormalSampler(torch.Size([FANTASIES]), seed=0))
    mean = fantasy.posterior(candidates(5, 22)).mean
    assert mean.shape[:2] == (FANTASIES, 2) and torch.isfinite(mean).all()


def knowledge_gradient(model):
    """optimize_acqf on the one-shot KG; its value at a fixed X against the loop
    (1/F) sum_f mean_f(x_f), mean_f the posterior mean of the model conditioned on fantasy f."""
    sampler = SobolQMCNormalSampler(torch.Size([FANTASIES]), seed=0)
    family = KnowledgeGradient if isinstance(model, ZonalModel) else qKnowledgeGradient
    acquisition = family(model, num_fantasies=FANTASIES, sampler=sampler)
    candidate, value = optimize_acqf(acquisition, BOUNDS, q=1, **OPTIMISE)
    assert candidate.shape == (1, INPUT_DIM) and bool(math.isfinite(value))
    assert ((candidate >= -1) & (candidate <= 1)).all()
    X = candidates(1 + FANTASIES, 24).unsqueeze(0)  # [1, 1 + F, d]
    with torch.no_grad():
        value = acquisition(X)
        Y = sampler(model.posterior(X[:, :1], observation_noise=True))  # [F, 1, (S,) 1, 1]
        expected = []
        for f in range(FANTASIES):
            single = condition_on_observations(
                model, X[0, :1], Y[f, 0], per_component=bool(model._is_ensemble)
            )
            expected.append(PosteriorMean(single)(X[:, 1 + f : 2 + f]))
    torch.testing.assert_close(value, torch.stack(expected).mean(0), atol=1e-8, rtol=1e-8)


def gaussian_view(model):
    """Deep and stacked models through their moment-matched Gaussian (MES and JES read one
    Gaussian per point)."""
    is_mixture = isinstance(model, ZonalModel) and model._is_ensemble
    return MomentMatchedModel(model) if is_mixture else model


def max_value_entropy(model):
    pending = candidates(2, 25)
    model = gaussian_view(model)
    acquisition = qMaxValueEntropy(
        model, candidate_set=candidates(64, 26), num_fantasies=FANTASIES, X_pending=pending
    )
    candidate, value = optimize_acqf(acquisition, BOUNDS, q=1, **OPTIMISE)
    assert bool(math.isfinite(value)) and candidate.shape == (1, INPUT_DIM)


def gibbon_with_pending(model):
    """GIBBON with pending points calls the model for one normal over the candidates and the
    pending points (``model(X)``: the latent posterior; it failed on the exact GP, the SGPR and
    the moment-matched view, which had no ``forward``)."""
    model = gaussian_view(model)
    acquisition = qLowerBoundMaxValueEntropy(
        model, candidate_set=candidates(64, 26), X_pending=candidates(2, 25)
    )
    values = acquisition(candidates(3, 29).unsqueeze(1))  # [3, 1, d] -> [3]
    assert values.shape == (3,) and torch.isfinite(values).all()
    candidate, value = optimize_acqf(acquisition, BOUNDS, q=1, **OPTIMISE)
    assert bool(math.isfinite(value)) and candidate.shape == (1, INPUT_DIM)


def test_a_stacked_model_called_for_one_normal_names_the_moment_matched_view():
    """``model(X)`` of a mixture: the stacked model raises (GIBBON's call), naming the view."""
    from botorch.exceptions.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="MomentMatchedModel"):
        model_named("StackedModel")(candidates(3, 30))
    view = MomentMatchedModel(model_named("StackedModel"))
    assert view(candidates(3, 30)).mean.shape == (3,)


def joint_entropy_search(model):
    model = gaussian_view(model)
    inputs, outputs = optimal_samples(model, candidates(64, 26), 4)
    acquisition = qJointEntropySearch(model, inputs, outputs, estimation_type="LB")
    candidate, value = optimize_acqf(acquisition, BOUNDS, q=1, **OPTIMISE)
    assert bool(math.isfinite(value)) and candidate.shape == (1, INPUT_DIM)


def integrated_variance(model):
    acquisition = qNegIntegratedPosteriorVariance(model, mc_points=candidates(16, 27))
    _, value = optimize_acqf(acquisition, BOUNDS, q=1, **OPTIMISE)
    assert bool(math.isfinite(value)) and float(value) <= 0


def noisy_ei_with_pending(model):
    acquisition = qLogNoisyExpectedImprovement(
        model,
        X_baseline=candidates(8, 28),
        X_pending=candidates(2, 25),
        sampler=SobolQMCNormalSampler(torch.Size([32]), seed=0),
    )
    candidate, value = optimize_acqf(acquisition, BOUNDS, q=1, **OPTIMISE)
    assert bool(math.isfinite(value)) and candidate.shape == (1, INPUT_DIM)


def with_transforms(name: str):
    """The model built on data in other units with Normalize + Standardize, conditioned and
    fantasised; the posterior comes back in the data's units."""
    x, y = training_data(40)
    x_raw, y_raw = 4 * x + 3, 10 * y + 50
    torch.manual_seed(0)
    if name == ANCHOR:
        model = SingleTaskVariationalGP(
            x_raw,
            y_raw.unsqueeze(-1),
            inducing_points=12,
            input_transform=Normalize(INPUT_DIM),
            outcome_transform=Standardize(1),
        )
    else:
        model = _transformed_zonal(name, x_raw, y_raw)
    fantasy = model.fantasize(x_raw[:2], SobolQMCNormalSampler(torch.Size([FANTASIES]), seed=0))
    mean = fantasy.posterior(x_raw[:5]).mean  # [F, 5, 1]
    assert torch.isfinite(mean).all() and mean.shape[0] == FANTASIES
    fitted_mean = model.posterior(x_raw[:5]).mean
    if getattr(model, "_is_ensemble", False):
        fitted_mean = fitted_mean.mean(-3)
    assert (fitted_mean - 50).abs().max() < 30  # in the data's units, not standardised ones


def _transformed_zonal(name: str, x_raw, y_raw):
    """A zonal model of kind ``name`` whose transforms are learnt on (x_raw, y_raw)."""
    from zonal.models import fit_dgp

    def build(kind):
        model = kind(*training_data(40))  # the architecture (refitted below)
        model.set_transforms(Normalize(INPUT_DIM), Standardize(1))
        x, y = model.transform_training_data(x_raw, y_raw)
        if hasattr(model, "fit_statistics"):
            model.fit_statistics(x, y)
        elif hasattr(model, "set_training_data"):  # the exact GP
            model.set_training_data(x, y)
        elif model._is_ensemble:
            model.outcome_transform.eval()
            fit_dgp(model, x_raw, y_raw, num_steps=5, batch_size=40)
        else:
            model.set_optimal_variational_distribution(x_raw, y_raw)
        return model

    if name == "StackedModel":
        components = [build(sgpr), build(svgp_points), build(dgp)]
        return StackedModel(components, [0.5, 0.25, 0.25])
    return build(MODELS[name])


CAPABILITIES = {
    "condition_on_observations": condition,
    "fantasize": fantasize,
    "qKG + optimize_acqf": knowledge_gradient,
    "qMES (X_pending)": max_value_entropy,
    "GIBBON (X_pending)": gibbon_with_pending,
    "qJES": joint_entropy_search,
    "qNIPV": integrated_variance,
    "qLogNEI + X_pending": noisy_ei_with_pending,
    "Normalize + Standardize": None,
}
#: cells where a mixture model goes through ``MomentMatchedModel``
MOMENT_MATCHED = {"qMES (X_pending)", "GIBBON (X_pending)", "qJES"}
ENSEMBLES = {"DGP", "ActivatedDGP", "ResidualDGP", "StackedModel"}


@pytest.mark.parametrize("capability", list(CAPABILITIES))
@pytest.mark.parametrize("name", list(MODELS))
def test_capability(name, capability):
    model = None if capability == "Normalize + Standardize" else model_named(name)
    started = time.perf_counter()
    try:
        if model is None:
            with_transforms(name)
        else:
            CAPABILITIES[capability](model)
    except Exception as error:  # the anchor's failures are recorded, not raised
        TABLE[name, capability] = f"fails: {type(error).__name__}"
        if name == ANCHOR:
            return
        raise
    matched = " (moment-matched)" if name in ENSEMBLES and capability in MOMENT_MATCHED else ""
    TABLE[name, capability] = f"works{matched}, {time.perf_counter() - started:.2f} s"


@pytest.fixture(scope="module", autouse=True)
def print_table(request):
    yield
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    header = ["model", *CAPABILITIES]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in MODELS:
        cells = [TABLE.get((name, capability), "not run") for capability in CAPABILITIES]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    if reporter is not None:
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)
