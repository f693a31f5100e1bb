"""Classification metrics: hand-computed values, the bin convention, and calibration of synthetic
classifiers whose true accuracy at each confidence is known."""

from __future__ import annotations

import math

import pytest
import torch

from zonal.calibration import (
    accuracy,
    classification_metrics,
    entropies,
    expected_calibration_error,
    predictive_entropy,
    reliability_diagram,
    test_log_likelihood,
)

HAND_PROBABILITIES = torch.tensor([[0.9, 0.1], [0.82, 0.18], [0.15, 0.85], [0.38, 0.62]])
HAND_LABELS = torch.tensor([0, 1, 1, 0])


def test_hand_computed_example():
    """Confidences 0.9 (right, bin 14 of 15), 0.82 (wrong) and 0.85 (right) (both bin 13), 0.62
    (wrong, bin 10): ECE = 1/4 |1 - 0.9| + 2/4 |1/2 - 0.835| + 1/4 |0 - 0.62| = 0.3475."""
    assert accuracy(HAND_PROBABILITIES, HAND_LABELS) == pytest.approx(0.5, abs=1e-15)
    expected_tll = (math.log(0.9) + math.log(0.18) + math.log(0.85) + math.log(0.38)) / 4
    assert test_log_likelihood(HAND_PROBABILITIES, HAND_LABELS) == pytest.approx(
        expected_tll, rel=1e-6
    )
    assert expected_calibration_error(HAND_PROBABILITIES, HAND_LABELS) == pytest.approx(
        0.3475, abs=1e-6
    )
    diagram = reliability_diagram(HAND_PROBABILITIES, HAND_LABELS)
    assert diagram.counts.tolist() == [0] * 9 + [1, 0, 0, 2, 1, 0]
    assert diagram.accuracy[12] == 0.5 and diagram.accuracy[9] == 0.0
    assert float(diagram.confidence[12]) == pytest.approx(0.835, abs=1e-6)
    assert torch.isnan(diagram.accuracy[0])
    entropy = [-(p * math.log(p) + (1 - p) * math.log(1 - p)) for p in (0.9, 0.82, 0.85, 0.62)]
    assert predictive_entropy(HAND_PROBABILITIES) == pytest.approx(sum(entropy) / 4, rel=1e-6)


def test_bins_are_closed_on_the_right():
    """With 4 bins a confidence of exactly 0.75 belongs to (0.5, 0.75], 0.7500001 to (0.75, 1]."""
    probabilities = torch.tensor([[0.75, 0.25], [0.7500001, 0.2499999]], dtype=torch.float64)
    diagram = reliability_diagram(probabilities, torch.tensor([0, 0]), num_bins=4)
    assert diagram.counts.tolist() == [0, 0, 1, 1]
    assert diagram.edges.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_entropy_is_zero_for_one_hot_and_log_c_for_uniform():
    """H = 0 at a vertex of the simplex (0 log 0 = 0) and log C at its centre."""
    one_hot = torch.eye(5, dtype=torch.float64)
    uniform = torch.full((3, 5), 0.2, dtype=torch.float64)
    assert entropies(one_hot).abs().max() == 0
    assert torch.allclose(entropies(uniform), torch.full((3,), math.log(5), dtype=torch.float64))


def test_a_perfectly_calibrated_classifier_has_ece_near_zero():
    """p1 ~ U(0, 1), y ~ Bernoulli(p1): P(correct | confidence c) = c exactly, so ECE is pure
    Monte Carlo error. With N = 200k points over the 7.5 bins in [1/2, 1] each bin holds ~27k
    points and |acc_b - conf_b| has standard deviation <= 0.5 / sqrt(27k) = 0.003: ECE < 0.01
    holds with overwhelming probability. The accuracy is E[max(p, 1 - p)] = 3/4 (sd 0.001)."""
    generator = torch.Generator().manual_seed(0)
    count = 200_000
    p1 = torch.rand(count, generator=generator, dtype=torch.float64)
    labels = (torch.rand(count, generator=generator, dtype=torch.float64) < p1).long()
    probabilities = torch.stack([1 - p1, p1], dim=-1)
    assert expected_calibration_error(probabilities, labels) < 0.01
    assert accuracy(probabilities, labels) == pytest.approx(0.75, abs=0.005)


def test_an_overconfident_classifier_has_ece_equal_to_its_gap():
    """Always 90 % confident but right only 60 % of the time: one filled bin, ECE = |0.6 - 0.9|
    = 0.3 up to the binomial error of the accuracy (sd sqrt(0.24 / 50k) = 0.0022)."""
    generator = torch.Generator().manual_seed(1)
    count = 50_000
    labels = (torch.rand(count, generator=generator) >= 0.6).long()  # class 0 with prob. 0.6
    probabilities = torch.tensor([0.9, 0.1]).expand(count, 2)
    assert expected_calibration_error(probabilities, labels) == pytest.approx(0.3, abs=0.01)
    metrics = classification_metrics(probabilities, labels)
    expected_tll = 0.6 * math.log(0.9) + 0.4 * math.log(0.1)
    assert metrics["tll"] == pytest.approx(expected_tll, abs=0.01)


def test_bad_input_raises_named_errors():
    """Rows off the simplex, labels out of range, wrong shapes and NaN are refused by name."""
    with pytest.raises(ValueError, match="sum to 1"):
        accuracy(torch.tensor([[0.5, 0.6]]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        accuracy(HAND_PROBABILITIES, torch.tensor([0, 1, 2, 0]))
    with pytest.raises(ValueError, match=r"labels must have shape \[4\]"):
        accuracy(HAND_PROBABILITIES, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"tensor \[N, C\]"):
        accuracy(torch.tensor([0.5, 0.5]), torch.tensor([0]))
    with pytest.raises(ValueError, match="NaN"):
        predictive_entropy(torch.tensor([[float("nan"), 0.5]]))
    with pytest.raises(ValueError, match="num_bins"):
        reliability_diagram(HAND_PROBABILITIES, HAND_LABELS, num_bins=0)
