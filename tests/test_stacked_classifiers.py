"""A ``StackedModel`` of classifiers (``zonal.models.stacking``): its class probabilities are the
weighted sum of its components', its latent posterior the weighted mixture of theirs (multitask
normals in one interleaved order, whichever order each component keeps), and ``zonal fit
--model auto`` stacks its classifiers by the validation probabilities of the true classes, saves
the stack and predicts with it after reloading."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zonal.cli import main
from zonal.kernels import compile as compile_module
from zonal.models import SVGP
from zonal.models.stacking import WEIGHT_RESOLUTION, StackedModel, posterior_stacking_weights
from zonal.models.training import TrainingControl
from zonal.tabular import fitting, recipes, stacking
from zonal.tabular.fitting import fit_data
from zonal.tabular.metrics import SOFTMAX_DRAWS, class_probabilities
from zonal.tabular.model import STACKED
from zonal.tabular.recipes.parts import SCHEDULE
from zonal.tabular.recipes.svgp import CLASSIFIER_NATURAL_STEP
from zonal.tabular.saved import ModelFileError, load_model
from zonal.tabular.stacking import CLASSIFIER_CONCENTRATION
from zonal.tabular.targets import Target

NUM_ROWS, INPUT_DIM = 90, 2
CLASSES = ("a", "b", "c")
SOFTMAX = Target("softmax", CLASSES)
BERNOULLI = Target("bernoulli", ("no", "yes"))
SMALL = {"num_inducing": 16, "steps": 10}


def labelled_rows(num_rows: int = NUM_ROWS, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Inputs [N, 2] and three classes by angle around the origin (with label noise)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_rows, INPUT_DIM))
    angle = np.arctan2(x[:, 1], x[:, 0]) + 0.3 * rng.standard_normal(num_rows)
    codes = np.floor((angle + np.pi) / (2 * np.pi / 3)).astype(int) % 3
    return x, np.array(CLASSES)[codes]


def train_classifiers(target: Target) -> list:
    """An activated SVGP (C latent GPs, an interleaved multitask posterior) and an activated DGP
    (a mixture of non-interleaved ones), a few steps each."""
    x, labels = labelled_rows()
    codes = torch.from_numpy(np.searchsorted(CLASSES, labels)).to(torch.float64)
    if target.likelihood == "bernoulli":
        codes = (codes > 0).to(torch.float64)
    inputs = torch.from_numpy(x)
    models = []
    for name in ("svgp-activated", "adgp"):
        spec = recipes.resolve_spec(INPUT_DIM, model=name, steps=10, num_inducing=16,
                                    likelihood=target.likelihood,
                                    num_classes=len(target.classes))  # fmt: skip
        fit, _ = recipes.train(spec, inputs, codes, TrainingControl())
        models.append(fit.model)
    return models


@pytest.fixture(scope="module")
def softmax_components() -> list:
    return train_classifiers(SOFTMAX)


@pytest.fixture(scope="module")
def bernoulli_components() -> list:
    return train_classifiers(BERNOULLI)


@pytest.fixture(scope="module")
def query_inputs() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(5, INPUT_DIM, generator=generator, dtype=torch.float64)  # [n, D]


# ------------------------------------------------------------------------------- the model
@pytest.mark.parametrize("likelihood", ["softmax", "bernoulli"])
def test_class_probabilities_of_the_stack_are_the_weighted_sum_of_its_components(
    likelihood, softmax_components, bernoulli_components, query_inputs
):
    target, components = {"softmax": (SOFTMAX, softmax_components),
                          "bernoulli": (BERNOULLI, bernoulli_components)}[likelihood]  # fmt: skip
    stacked = StackedModel(components, [0.7, 0.3])
    for component in components:
        if component._is_ensemble:
            component.posterior_seed = 5
    expected = sum(weight * class_probabilities(component, query_inputs, target, seed=3)
                   for weight, component in zip([0.7, 0.3], components, strict=True))  # fmt: skip
    stacked.posterior_seed = 5
    got = class_probabilities(stacked, query_inputs, target, seed=3)  # [n, C]
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-14)
    torch.testing.assert_close(got.sum(-1), torch.ones(len(query_inputs), dtype=got.dtype))


def test_the_mixture_posterior_gives_the_weighted_class_probabilities(
    softmax_components, query_inputs
):
    """An independent path: E softmax(f) over the latent posterior's equally weighted mixture
    components (the same standard normal draws for every component, as ``class_probabilities``
    takes them) equals sum_k w_k p_k(class | x): the repeats carry the weights and the
    variances sit at their outputs."""
    stacked = StackedModel(softmax_components, [0.65, 0.35])
    stacked.posterior_seed = 2
    distribution = stacked.posterior(query_inputs).distribution
    mean, variance = distribution.mean, distribution.variance  # [T, n, C]
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn((SOFTMAX_DRAWS, len(CLASSES)), generator=generator, dtype=torch.float64)
    logits = mean + variance.sqrt() * noise[:, None, None, :]  # [K, T, n, C]
    from_posterior = torch.softmax(logits, -1).mean((0, 1))  # [n, C]
    expected = class_probabilities(stacked, query_inputs, SOFTMAX, seed=0)
    torch.testing.assert_close(from_posterior, expected, rtol=0, atol=1e-12)


def test_the_mixture_posterior_gives_the_weighted_probit_probabilities(
    bernoulli_components, query_inputs
):
    """The Bernoulli counterpart, by another path: the mean over the latent posterior's equally
    weighted mixture components of Phi(mu / sqrt(1 + sigma^2)) (each component's exact probit
    probability) equals sum_k w_k p_k(1 | x)."""
    stacked = StackedModel(bernoulli_components, [0.65, 0.35])
    stacked.posterior_seed = 2
    distribution = stacked.posterior(query_inputs).distribution
    mean, variance = distribution.mean, distribution.variance  # [T, n] (or [T, n, 1])
    normal = torch.distributions.Normal(0.0, 1.0)
    positive = normal.cdf(mean / (1 + variance).sqrt()).reshape(len(mean), -1).mean(0)  # [n]
    expected = class_probabilities(stacked, query_inputs, BERNOULLI, seed=0)  # [n, 2]
    torch.testing.assert_close(expected[:, 1], positive, rtol=0, atol=1e-12)
    torch.testing.assert_close(expected[:, 0], 1 - positive, rtol=0, atol=1e-12)


def test_the_mixture_covariance_is_each_components_in_the_interleaved_order(
    softmax_components, query_inputs
):
    """Entry (i c, j c') of each mixture component's covariance is Cov(f_c(x_i), f_c'(x_j)) of
    the component it repeats, read from that component's own layout entry by entry (the deep
    model keeps outputs first, the SVGP points first)."""
    svgp, adgp = softmax_components
    stacked = StackedModel([svgp, adgp], [0.5, 0.5])
    stacked.posterior_seed = adgp.posterior_seed = 4
    mixture = stacked.posterior(query_inputs).distribution
    covariance = mixture.lazy_covariance_matrix.to_dense()  # [T, nC, nC]
    assert mixture._interleaved and mixture.mean.shape[-2:] == (len(query_inputs), len(CLASSES))
    own = adgp.posterior(query_inputs).distribution
    assert not own._interleaved
    (_, _, _, svgp_repeats), (_, _, samples, adgp_repeats) = stacked._layout()
    deep = own.lazy_covariance_matrix.to_dense()  # [S, Cn, Cn], outputs first
    shallow = svgp.posterior(query_inputs).distribution.lazy_covariance_matrix.to_dense()
    n, outputs = len(query_inputs), len(CLASSES)
    for i in range(n):
        for j in range(n):
            for c in range(outputs):
                for d in range(outputs):
                    row, column = i * outputs + c, j * outputs + d
                    assert covariance[0, row, column] == shallow[row, column]
                    first_deep = svgp_repeats  # the svgp's repeats come first
                    torch.testing.assert_close(
                        covariance[first_deep + adgp_repeats * torch.arange(samples), row, column],
                        deep[:, c * n + i, d * n + j], rtol=0, atol=0,
                    )  # fmt: skip


def test_predict_gives_the_mixture_moments_of_each_latent_output(softmax_components, query_inputs):
    stacked = StackedModel(softmax_components, [0.25, 0.75])
    mean, variance = stacked.predict(query_inputs)  # [n, C]
    parts = [component.predict(query_inputs) for component in softmax_components]
    expected_mean = 0.25 * parts[0][0] + 0.75 * parts[1][0]
    second = sum(w * (v + m**2) for w, (m, v) in zip([0.25, 0.75], parts, strict=True))
    assert mean.shape == (len(query_inputs), len(CLASSES))
    torch.testing.assert_close(mean, expected_mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(variance, second - expected_mean**2, rtol=1e-10, atol=1e-12)


def test_construction_refuses_classifiers_that_do_not_mix(softmax_components, bernoulli_components):
    x, labels = labelled_rows()
    inputs = torch.from_numpy(x)
    spec = recipes.resolve_spec(INPUT_DIM, model="sgpr")
    regression, _ = recipes.train(spec, inputs, inputs[:, 0], TrainingControl())
    with pytest.raises(ValueError, match="not both"):
        StackedModel([regression.model, softmax_components[0]], [0.5, 0.5])
    with pytest.raises(ValueError, match="share one likelihood"):
        StackedModel([softmax_components[0], bernoulli_components[1]], [0.5, 0.5])
    spec = recipes.resolve_spec(INPUT_DIM, model="svgp-activated", steps=2, num_inducing=8,
                                likelihood="softmax", num_classes=4)  # fmt: skip
    codes = torch.from_numpy(np.searchsorted(CLASSES, labels)).to(torch.float64)
    four, _ = recipes.train(spec, inputs, codes, TrainingControl())
    with pytest.raises(ValueError, match="4 latent outputs but component 0 3"):
        StackedModel([softmax_components[0], four.model], [0.5, 0.5])


# ------------------------------------------------------------------------------- zonal fit
def test_auto_stacks_its_classifiers_with_posterior_weights_of_the_true_classes_probabilities(
    monkeypatch,
):
    """The weights are ``posterior_stacking_weights`` (Dirichlet(``CLASSIFIER_CONCENTRATION``))
    of log p_k(y_i | x_i), the true classes' probabilities on the scoring rows, rounded to
    multiples of 1/20; the stack's validation log likelihood is that of the weighted mixture of
    probabilities."""
    recorded = {}
    stack_fits = fitting.stack_fits

    def recording(fits, scores, split, target, **options):
        names = list(fits)
        picked = [class_probabilities(fits[name].model, split.x_valid, target)
                  .gather(1, split.y_valid.long()[:, None]).squeeze(1) for name in names]  # fmt: skip
        recorded["probabilities"] = torch.stack(picked, 1)  # [n_valid, K]
        recorded["names"] = names
        return stack_fits(fits, scores, split, target, **options)

    monkeypatch.setattr(fitting, "stack_fits", recording)
    x, labels = labelled_rows(150)
    fitted = fit_data(x, labels, feature_columns=["p", "q"], **SMALL)
    names = recorded["names"]
    assert names == ["svgp", "svgp-points", "adgp"]
    probabilities = recorded["probabilities"]
    posterior = posterior_stacking_weights(
        probabilities.log(), concentration=CLASSIFIER_CONCENTRATION, seed=0
    )
    weights = np.array([fitted.scores[name]["weight"] for name in names])
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.abs(weights - posterior.numpy()).max() <= 1.0 / WEIGHT_RESOLUTION + 1e-6
    if fitted.spec["model"] == STACKED:
        mixture = probabilities @ torch.from_numpy(weights)  # [n_valid]
        assert fitted.validation["log_likelihood"] == pytest.approx(
            float(mixture.log().mean()), abs=1e-12
        )
        assert fitted.spec["likelihood"] == "softmax" and fitted.spec["num_classes"] == 3
    else:
        assert fitted.scores[fitted.spec["model"]]["weight"] == 1.0


@pytest.mark.parametrize("num_classes", [2, 3])
@pytest.mark.parametrize("model", ["svgp", "svgp-points"])
def test_a_named_svgp_classifier_conditions_on_the_validation_rows_too(model, num_classes):
    """Its q(u) is the ELBO's optimum over every row, validation rows included, at the learned
    hyperparameters (``condition_on_all_rows``): natural-gradient steps from it on all rows find
    nothing more to gain (a trained q(u) that never saw those rows gains nats there)."""
    x, labels = labelled_rows(150)
    if num_classes == 2:
        labels = np.where(labels == "a", "a", "b")
    fitted = fit_data(x, labels, feature_columns=["p", "q"], model=model, **SMALL)
    assert fitted.num_validation_rows > 0 and len(fitted.target.classes) == num_classes
    inputs = torch.from_numpy(fitted.x_scaler.transform(x))  # [150, 2]
    codes = torch.tensor([fitted.target.classes.index(label) for label in labels])
    result = fitted.trained.model.set_natural_gradient_optimum(inputs, codes)
    assert result.elbo - result.trace[0] < 0.15  # nats over 150 rows (untreated: 37-66)


def test_a_stacked_classifier_round_trips_through_its_checkpoint_and_the_cli(
    monkeypatch, tmp_path, capsys
):
    chosen = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    monkeypatch.setattr(stacking, "validation_weights", lambda log_densities, **options: chosen)
    x, labels = labelled_rows(120)
    data, checkpoint, output = tmp_path / "train.csv", tmp_path / "model.pt", tmp_path / "p.csv"
    rows = [f"{a},{b},{label}" for (a, b), label in zip(x, labels, strict=True)]
    data.write_text("p,q,kind\n" + "\n".join(rows) + "\n")
    assert main(["fit", str(data), "--target", "kind", "-o", str(checkpoint), "--num-inducing",
                 "16", "--steps", "10"]) == 0  # fmt: skip
    assert "fitted stacked (0.50 svgp (" in capsys.readouterr().out  # the harmonic svgp, first
    loaded = load_model(checkpoint)
    assert loaded.spec["model"] == STACKED and loaded.spec["weights"] == [0.5, 0.3, 0.2]
    assert [part["likelihood"] for part in loaded.spec["components"]] == ["softmax"] * 3
    assert [part["model"] for part in loaded.spec["components"]] == ["svgp", "svgp-points", "adgp"]
    assert main(["predict", str(checkpoint), str(data), "-o", str(output)]) == 0
    table = np.genfromtxt(output, delimiter=",", names=True, dtype=None, encoding="utf-8")
    predicted = np.column_stack([table[f"prob_{label}"] for label in CLASSES])  # [N, 3]
    inputs = torch.from_numpy(loaded.x_scaler.transform(x))
    model = loaded.trained.model
    model.posterior_seed = 0  # what ``zonal predict`` sets (its --seed)
    expected = sum(weight * class_probabilities(component, inputs, loaded.target, seed=0)
                   for weight, component in zip([0.5, 0.3, 0.2], model.components, strict=True))  # fmt: skip
    np.testing.assert_allclose(predicted, expected.numpy(), rtol=1e-6, atol=1e-9)
    assert (table["class"] == np.array(CLASSES)[predicted.argmax(-1)]).all()
    # a component of another likelihood than the stack's is a damaged file
    state = torch.load(checkpoint, weights_only=True)
    state["spec"]["components"][1]["likelihood"] = "bernoulli"
    torch.save(state, checkpoint)
    with pytest.raises(ModelFileError, match="unknown model spec"):
        load_model(checkpoint)


@pytest.mark.parametrize("model", ["svgp", "svgp-points"])
def test_an_svgp_classifier_trains_q_by_natural_gradients_and_a_regression_does_not(
    model, monkeypatch
):
    """``zonal fit``'s SVGP classifiers move q(u) by natural-gradient steps at every minibatch
    step, of ``CLASSIFIER_NATURAL_STEP`` times the schedule's factors (docs/fit_evidence.md, session 34);
    their regressions keep Adam on q(u)."""
    steps: list[float] = []
    original = SVGP.natural_gradient_step

    def spy(self, *args, **kwargs):
        steps.append(kwargs["step"])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SVGP, "natural_gradient_step", spy)
    x, labels = labelled_rows(150)
    fit_data(x, labels, feature_columns=["p", "q"], model=model, **SMALL)
    factors = sorted({factor for _, factor in SCHEDULE}, reverse=True)
    assert sorted(set(steps), reverse=True) == pytest.approx(
        [CLASSIFIER_NATURAL_STEP * factor for factor in factors]
    )
    assert len(steps) == SMALL["steps"]
    steps.clear()
    fit_data(x, x[:, 0] + x[:, 1], feature_columns=["p", "q"], model=model, **SMALL)
    assert steps == []


def test_the_conditioning_fills_its_gram_matrices_without_compiling(monkeypatch):
    """Each Gram matrix of the conditioning on all rows is built once: compiling its tile
    function would cost seconds that one use does not win back, so it runs eagerly (and the
    setting is restored afterwards)."""
    seen: list[bool] = []
    original = SVGP.set_natural_gradient_optimum

    def spy(self, *args, **kwargs):
        seen.append(compile_module.SETTINGS.enabled)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SVGP, "set_natural_gradient_optimum", spy)
    with compile_module.compile_settings(enabled=True):
        x, labels = labelled_rows(150)
        fit_data(x, labels, feature_columns=["p", "q"], model="svgp-points", **SMALL)
        assert seen == [False] and compile_module.SETTINGS.enabled
