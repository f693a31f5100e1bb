"""Classification in ``zonal fit`` / ``zonal predict``: the task detected from the target, the
class probabilities against independent computations, the activated DGP's classification head
against its network, and the named errors."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from gpytorch.likelihoods import BernoulliLikelihood, SoftmaxLikelihood

from zonal.cli import main
from zonal.models import SVGP, ActivatedDGP
from zonal.models.training import TrainingControl
from zonal.tabular import recipes
from zonal.tabular.fitting import fit_data
from zonal.tabular.metrics import class_probabilities
from zonal.tabular.predict import predict_data, predict_table
from zonal.tabular.recipes import UnsupportedLikelihoodError, resolve_spec
from zonal.tabular.saved import load_model, save_model
from zonal.tabular.tables import TableError, read_table
from zonal.tabular.targets import LabelError, Target, detect_target, encode_labels, label_texts

FAST = ["--model", "svgp-activated", "--num-inducing", "16", "--steps", "60", "--quiet"]


def ring_labels(num_rows: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two inputs; "in" inside the circle of radius 1, "out" outside."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_rows, 2))
    return x, np.where((x**2).sum(1) < 1.0, "in", "out").astype(object)


def write_table(path: Path, x: np.ndarray, labels: np.ndarray) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["a", "b", "label"])
        writer.writerows([p, q, label] for (p, q), label in zip(x, labels, strict=True))
    return path


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("zonal: error: ") and "Traceback" not in "\n".join(err)
    return err[-1]


# ---------------------------------------------------------------------------------- the task


def test_the_task_is_read_from_the_target_column():
    texts = lambda values: label_texts(np.asarray(values))[0]  # noqa: E731
    assert detect_target(texts(["b", "a", "b", "a"]), None) == Target("bernoulli", ("a", "b"))
    integers = np.repeat([10.0, 3.0, 7.0], 5)  # 15 rows, 3 integer values: classes by value
    assert detect_target(texts(integers), None) == Target("softmax", ("3", "7", "10"))
    # integers with fewer than 5 rows per value, or real values, are a regression target
    assert detect_target(texts([3.0, 2.0, 1.0]), None).likelihood == "gaussian"
    assert detect_target(texts(np.linspace(0, 1, 50)), None).likelihood == "gaussian"
    # --likelihood overrides the detection both ways
    assert detect_target(texts(integers), "gaussian").likelihood == "gaussian"
    assert detect_target(texts([0.5, 1.5, 0.5]), "bernoulli") == Target("bernoulli", ("0.5", "1.5"))
    with pytest.raises(LabelError, match=r"single class \('a'\)"):
        detect_target(texts(["a", "a", "a"]), None)
    with pytest.raises(LabelError, match="needs two classes but the target has 3; use the softmax"):
        detect_target(texts(["a", "b", "c"]), "bernoulli")
    # numbers written with thousands separators, a decimal comma or a unit are text, one row each
    written = (["6,885.0", "4,983.8", "6,162.0"], ["0,12", "0,57", "1,03"], ["4 EUR", "5 EUR"])
    for values in written:
        with pytest.raises(
            LabelError, match=f"{values[0]!r}.*not class labels. Write them plainly"
        ):
            detect_target(texts(values), None)
    # class labels with rare classes, or in a small table, are classes; softmax forces classes
    rare = ["ok"] * 998 + ["fault_a", "fault_b"]
    assert detect_target(texts(rare), None).classes == ("fault_a", "fault_b", "ok")
    assert detect_target(texts(["cat", "dog", "cat", "bird"]), None).likelihood == "softmax"
    assert detect_target(texts(["a", "b", "c"]), None).likelihood == "softmax"
    forced = detect_target(texts(written[0]), "softmax")
    assert forced.classes == ("4,983.8", "6,162.0", "6,885.0")


def test_numbers_written_as_text_are_one_class_whatever_their_spelling():
    """A text column of numbers ("0", "1.0", " 1 ": a CSV of floats, or a hand-edited one) is
    written as a numeric column of the same values is ("1.0" was a class of its own beside "1",
    and a CSV of floats and a Parquet file of ints gave different classes); a column with any
    text stays text; a model saved with classes "0.0", "1.0" still knows "0" and "1"."""
    texts, missing = label_texts(np.array(["0", "1", "1.0", " 1 ", "0.0", "NA"], dtype=object))
    assert texts.tolist()[:5] == ["0", "1", "1", "1", "0"] and missing.tolist() == [5]
    assert detect_target(texts[:5], "bernoulli").classes == ("0", "1")
    as_text = label_texts(np.array(["0.0", "1.0", "2.5"], dtype=object))[0]
    assert as_text.tolist() == label_texts(np.array([0.0, 1.0, 2.5]))[0].tolist()
    assert label_texts(np.array(["1", "1.0", "a"], dtype=object))[0].tolist() == ["1", "1.0", "a"]
    # codes a number would change stay as written: leading zeros, integers beyond 2^53
    codes = np.array(["007", "7", "0.5"], dtype=object)
    assert label_texts(codes)[0].tolist() == ["007", "7", "0.5"]
    ids = np.array(["9007199254740993", "9007199254740992"], dtype=object)
    assert label_texts(ids)[0].tolist() == ids.tolist()
    saved_before = Target("bernoulli", ("0.0", "1.0"))
    codes = encode_labels(saved_before, np.array(["1", "0", "1.0"], dtype=object), "t")
    assert codes.tolist() == [1, 0, 1]


def test_an_integer_target_read_as_classes_is_announced_with_the_switch(tmp_path, capsys):
    texts = lambda values: label_texts(np.asarray(values))[0]  # noqa: E731
    quality = detect_target(texts(np.repeat([3.0, 4.0, 5.0, 6.0], 6)), None)
    assert quality.ambiguous and quality.likelihood == "softmax"
    line = quality.announce("quality", lambda name: f"--likelihood {name}")
    assert line.startswith("target 'quality': classification (4 classes: 3, 4, 5, 6), softmax")
    assert "4 distinct integer values from 3 to 6, each on at least 5 rows" in line
    assert line.endswith("; for regression use --likelihood gaussian")
    labels = detect_target(texts(["a", "b"] * 5), None)
    assert not labels.ambiguous and "(text labels)" in labels.announce("c", str)
    counts = detect_target(texts(np.arange(40.0)), None)  # 40 integers: too many for classes
    assert counts.likelihood == "gaussian"
    assert "for classification use --likelihood softmax" in counts.announce(
        "n", lambda name: f"--likelihood {name}"
    )
    # every value needs 5 rows: a value on 2 rows makes the column regression, and says why
    rare = detect_target(texts(np.concatenate([np.repeat([0.0, 1.0], 10), [7.0, 7.0]])), None)
    assert rare.likelihood == "gaussian"
    assert "3 distinct, but 7 on 2 row(s) only" in rare.announce("r", str)
    assert detect_target(texts(np.repeat([0.0, 1.0, 7.0], 5)), None).likelihood == "softmax"
    asked = detect_target(texts(np.repeat([3.0, 4.0], 6)), "gaussian")
    assert asked.announce("q", str) == "target 'q': regression, Gaussian likelihood (as asked)"
    # the command line says it first, before any training output
    rng = np.random.default_rng(0)
    path = tmp_path / "q.csv"
    rows = [f"{a},{b},{int(q)}" for a, b, q in zip(rng.normal(size=40), rng.normal(size=40),
                                                     np.repeat([1, 2, 3, 4], 10), strict=True)]  # fmt: skip
    path.write_text("a,b,quality\n" + "\n".join(rows))
    assert main(["fit", str(path), "--target", "quality", *FAST]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("zonal: target 'quality': classification (4 classes")
    assert first.endswith("for regression use --likelihood gaussian")


def test_labels_are_kept_as_text_and_missing_labels_are_named(tmp_path, capsys):
    x, labels = ring_labels(40)
    labels[[3, 7]] = "NA"
    data = write_table(tmp_path / "missing.csv", x, labels)
    assert main(["fit", str(data), "--target", "label", *FAST]) == 1
    assert "missing labels in the target 'label' at line 5, line 9" in one_line_error(capsys)


# ---------------------------------------------------------------------------------- round trip


def test_text_labels_round_trip_through_fit_and_predict(tmp_path, capsys):
    x, labels = ring_labels(160)
    data = write_table(tmp_path / "ring.csv", x, labels)
    checkpoint, output = tmp_path / "ring.pt", tmp_path / "pred.csv"
    assert main(["fit", str(data), "--target", "label", "-o", str(checkpoint), *FAST]) == 0
    out = capsys.readouterr().out
    assert "classification (2 classes: in, out)" in out and "accuracy" in out
    fitted = load_model(checkpoint)
    assert fitted.target == Target("bernoulli", ("in", "out"))
    assert fitted.num_validation_rows == 16  # 10% of each class, stratified
    assert main(["predict", str(checkpoint), str(data), "-o", str(output)]) == 0
    with open(output, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["prob_in", "prob_out", "class"]
    probabilities = np.array([[float(row["prob_in"]), float(row["prob_out"])] for row in rows])
    predicted = np.array([row["class"] for row in rows])
    np.testing.assert_array_equal(predicted, np.array(["in", "out"])[probabilities.argmax(1)])
    majority = max(np.mean(labels == "in"), np.mean(labels == "out"))  # 0.63 here
    assert np.mean(predicted == labels) > majority + 0.1  # the ring is learnt
    assert "160 class probabilities of 'label'" in capsys.readouterr().out


def test_a_class_the_model_never_saw_is_named(tmp_path, capsys):
    x, labels = ring_labels(80)
    checkpoint = tmp_path / "ring.pt"
    data = write_table(tmp_path / "ring.csv", x, labels)
    assert main(["fit", str(data), "--target", "label", "-o", str(checkpoint), *FAST]) == 0
    labels[5] = "edge"
    other = write_table(tmp_path / "other.csv", x, labels)
    assert main(["predict", str(checkpoint), str(other), "-o", str(tmp_path / "p.csv")]) == 1
    line = one_line_error(capsys)
    assert "classes the model never saw: 'edge'" in line and "it knows 'in', 'out'" in line
    with pytest.raises(LabelError, match="never saw"):
        predict_table(load_model(checkpoint), read_table(other))


def test_sgpr_refuses_classification_by_name(tmp_path, capsys):
    with pytest.raises(UnsupportedLikelihoodError, match="cannot train a bernoulli likelihood"):
        resolve_spec(2, model="sgpr", likelihood="bernoulli")
    x, labels = ring_labels(40)
    data = write_table(tmp_path / "ring.csv", x, labels)
    assert main(["fit", str(data), "--target", "label", "--model", "sgpr"]) == 1
    assert "collapsed bound of a Gaussian likelihood" in one_line_error(capsys)


def test_an_empty_validation_split_is_named():
    x, labels = ring_labels(8)
    message = r"the validation split is empty: 0.01 of each class's rows \(the largest has \d\)"
    with pytest.raises(TableError, match=message):
        fit_data(x, labels, feature_columns=["a", "b"], validation_fraction=0.01, steps=2)
    with pytest.raises(TableError, match=r"empty: 0\.01 of 8 rows rounds to no row"):
        fit_data(x, x[:, 0], feature_columns=["a", "b"], validation_fraction=0.01, steps=2)


# ---------------------------------------------------------------------------------- probabilities


def _trained_svgp(likelihood, num_outputs: int, num_classes: int) -> SVGP:
    torch.manual_seed(0)
    x = torch.randn(60, 2, dtype=torch.float64)
    y = (x[:, 0] > 0).long() + ((x[:, 1] > 0).long() if num_classes > 2 else 0)
    kernel = recipes.build_kernel("arccos", 3, 30)
    features = recipes.harmonic_features(kernel, 3, 30)
    model = SVGP(kernel, features, 2, likelihood=likelihood, num_outputs=num_outputs)
    recipes.scheduled_adam(model, x, y, steps=30, batch_size=60, learning_rate=0.05)
    return model


def test_bernoulli_probabilities_are_the_probit_integral():
    """P(y = 1 | x) = E Phi(f), f ~ N(mu, s^2): against 400 000 Monte Carlo draws (4 standard
    errors)."""
    model = _trained_svgp(BernoulliLikelihood().double(), 1, 2)
    x = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    probabilities = class_probabilities(model, x, Target("bernoulli", ("0", "1")))
    mean, variance = model.predict(x)
    draws = mean + variance.sqrt() * torch.randn(400_000, 5, dtype=torch.float64)
    link = torch.special.ndtr(draws)  # [K, 5]
    error = link.std(0) / 400_000**0.5
    assert ((probabilities[:, 1] - link.mean(0)).abs() < 4 * error + 1e-12).all()
    torch.testing.assert_close(probabilities.sum(1), torch.ones(5, dtype=torch.float64))


def test_softmax_probabilities_match_gauss_hermite_quadrature():
    """E softmax(f), f ~ N(mu, diag s^2) over 3 classes: the seeded Monte Carlo estimate against
    a 30^3-node Gauss-Hermite product rule (4 Monte Carlo standard errors)."""
    model = _trained_svgp(SoftmaxLikelihood(num_classes=3, mixing_weights=False).double(), 3, 3)
    x = torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    draws = 20_000
    target = Target("softmax", ("0", "1", "2"))
    estimate = class_probabilities(model, x, target, draws=draws)  # [4, 3]
    exact, spread = _softmax_by_quadrature(model, x)
    assert ((estimate - exact).abs() < 4 * spread / draws**0.5 + 1e-12).all()


def _softmax_by_quadrature(model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(E softmax(f) [N, 3], the spread of softmax(f) [N, 3]) for f ~ N(mu, diag s^2) of the
    model's three latent GPs, by a 30^3-node Gauss-Hermite product rule."""
    mean, variance = model.predict(x)  # [N, 3]
    nodes, weights = np.polynomial.hermite_e.hermegauss(30)  # for the weight exp(-t^2 / 2)
    nodes, weights = torch.from_numpy(nodes), torch.from_numpy(weights / weights.sum())
    grid = torch.tensor(list(itertools.product(range(30), repeat=3)))  # [27000, 3]
    logits = mean.unsqueeze(1) + variance.sqrt().unsqueeze(1) * nodes[grid]  # [N, 27000, 3]
    exact = (weights[grid].prod(-1).unsqueeze(-1) * torch.softmax(logits, -1)).sum(1)  # [N, 3]
    spread = torch.sqrt((weights[grid].prod(-1).unsqueeze(-1)
                         * (torch.softmax(logits, -1) - exact.unsqueeze(1)) ** 2).sum(1))  # fmt: skip
    return exact, spread


def test_the_softmax_log_predictive_density_is_seeded_checked_and_near_quadrature():
    """Two calls agree (its Monte Carlo draws come from the model's seed), a label column
    [N, 1] is the labels [N], a non-integer label is named, and p(y | x) lies within 4 standard
    errors of its 256 draws of the quadrature."""
    model = _trained_svgp(SoftmaxLikelihood(num_classes=3, mixing_weights=False).double(), 3, 3)
    x = torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y = torch.tensor([0, 2, 1, 1])
    first = model.log_predictive_density(x, y)
    torch.testing.assert_close(model.log_predictive_density(x, y), first, atol=0, rtol=0)
    column = model.log_predictive_density(x, y.unsqueeze(-1))
    torch.testing.assert_close(column, first, atol=0, rtol=0)
    with pytest.raises(ValueError, match="integer class labels"):
        model.log_predictive_density(x, y + 0.5)
    exact, spread = _softmax_by_quadrature(model, x)
    rows = torch.arange(4)
    assert ((first.exp() - exact[rows, y]).abs() < 4 * spread[rows, y] / 256**0.5).all()


@pytest.mark.parametrize(("likelihood", "num_classes"), [("bernoulli", 2), ("softmax", 3)])
def test_the_activated_dgp_classifier_starts_at_its_network(likelihood, num_classes):
    """After the network stage the activated DGP's posterior mean is the network (to rounding);
    the class probabilities ``zonal predict`` writes are less confident than the network's
    (mean entropy higher: the last layer starts at the prior's unit variance,
    ``ADGP_CLASSIFIER_OUTPUT_VARIANCE``, so its latent variance is not ~0 as it was at 1e-3,
    which gave a test log likelihood of -41 per row on ionosphere) and name the same class on
    almost every row."""
    torch.manual_seed(0)
    x = torch.randn(200, 3, dtype=torch.float64)
    y = (x[:, 0] > 0).long() + ((x[:, 1] > 0).long() if num_classes > 2 else 0)
    spec = resolve_spec(3, model="adgp", steps=50, num_inducing=16, likelihood=likelihood,
                        num_classes=num_classes)  # fmt: skip
    model = recipes.build_deep(spec, x)
    copied: list[torch.nn.Module] = []
    copy_network = ActivatedDGP.from_torch_module

    def recording_copy(self, network, **options):
        copied.append(network)
        return copy_network(self, network, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ActivatedDGP, "from_torch_module", recording_copy)
        recipes.network_stage(model, spec, x, y, TrainingControl())
    (network,) = copied
    with torch.no_grad():
        output = network(x)  # [N] logits (probit) or [N, C]
        torch.testing.assert_close(model.posterior_mean(x), output, rtol=1e-10, atol=1e-10)
        if likelihood == "bernoulli":
            positive = torch.special.ndtr(output)
            expected = torch.stack([1 - positive, positive], -1)
        else:
            expected = torch.softmax(output, -1)
    target = Target(likelihood, tuple(map(str, range(num_classes))))
    probabilities = class_probabilities(model, x, target, draws=2000)

    def entropy(p: torch.Tensor) -> float:
        return float(-(p * p.clamp(min=1e-300).log()).sum(-1).mean())

    assert entropy(probabilities) > entropy(expected) + 0.05
    assert (probabilities.argmax(-1) == expected.argmax(-1)).double().mean() > 0.95


@pytest.mark.parametrize("model", ["adgp", "dgp", "svgp"])
def test_every_classifying_recipe_saves_and_reloads_its_probabilities(model, tmp_path):
    """Three classes (softmax over three latent GPs): the reloaded checkpoint writes the same
    probabilities, bit for bit (seeded inner-layer and softmax draws)."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(90, 2))
    labels = np.array(["low", "mid", "high"], dtype=object)[
        (x[:, 0] > -0.4).astype(int) + (x[:, 0] > 0.4)
    ]
    fitted = fit_data(x, labels, feature_columns=["a", "b"], model=model, num_inducing=8,
                      steps=20)  # fmt: skip
    assert fitted.target == Target("softmax", ("high", "low", "mid"))
    save_model(fitted, tmp_path / "model.pt")
    before = predict_data(fitted, x[:9])
    after = predict_data(load_model(tmp_path / "model.pt"), x[:9])
    assert list(before) == ["prob_high", "prob_low", "prob_mid", "class"]
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])
