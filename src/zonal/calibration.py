"""Metrics of a probabilistic classifier: accuracy, test log likelihood, expected calibration
error, predictive entropy and reliability-diagram data (seed 001 sec. 4.2; Ovadia et al., 2019).

Every function takes class probabilities p [N, C] (rows on the simplex) and integer labels
y [N] in [0, C). With the confidence c_i = max_k p_ik and the prediction yhat_i = argmax_k p_ik:

    accuracy = (1/N) sum_i [yhat_i = y_i],
    TLL      = (1/N) sum_i log p_{i, y_i},
    entropy  = (1/N) sum_i -sum_k p_ik log p_ik       (0 log 0 = 0),
    ECE      = sum_b (n_b / N) |acc_b - conf_b|,

where bin b = 1..B holds the points with c_i in ((b-1)/B, b/B] (B = 15 equal-width bins; a
confidence of exactly 0 falls into the first bin), n_b counts them, acc_b is their accuracy and
conf_b their mean confidence. Computed in float64 whatever the input's dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import torch

from zonal._validation import check_finite

#: equal-width confidence bins of the expected calibration error (Guo et al., 2017; Ovadia et al.)
ECE_BINS = 15
#: tolerance on |sum_k p_ik - 1| for probabilities
SIMPLEX_TOLERANCE = 1e-5


@overload
def check_probabilities(
    probabilities: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]: ...


@overload
def check_probabilities(
    probabilities: torch.Tensor, labels: None = None
) -> tuple[torch.Tensor, None]: ...


def check_probabilities(
    probabilities: torch.Tensor, labels: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(p [N, C] float64, y [N] int64) after checking shapes, the simplex and the label range;
    a ``ValueError`` naming the problem otherwise."""
    if not isinstance(probabilities, torch.Tensor) or probabilities.dim() != 2:
        found = tuple(probabilities.shape) if isinstance(probabilities, torch.Tensor) else None
        raise ValueError(f"probabilities must be a tensor [N, C], got {found}")
    if probabilities.shape[0] == 0 or probabilities.shape[1] < 2:
        raise ValueError(
            f"probabilities need N >= 1 rows and C >= 2 classes, got {tuple(probabilities.shape)}"
        )
    p = probabilities.to(torch.float64)
    check_finite(p, "probabilities")
    if (p < 0).any():
        raise ValueError("probabilities must be non-negative")
    deviation = (p.sum(-1) - 1).abs()  # [N]
    if deviation.max() > SIMPLEX_TOLERANCE:
        row = int(deviation.argmax())
        raise ValueError(
            f"probability rows must sum to 1: row {row} sums to {float(p[row].sum()):.8g}"
        )
    if labels is None:
        return p, None
    labels = torch.as_tensor(labels, device=p.device)
    if labels.shape != (p.shape[0],):
        raise ValueError(f"labels must have shape [{p.shape[0]}], got {tuple(labels.shape)}")
    if labels.is_floating_point() and not (labels == labels.round()).all():
        raise ValueError("labels must be integer class indices")
    labels = labels.long()
    num_classes = p.shape[1]
    if (labels < 0).any() or (labels >= num_classes).any():
        raise ValueError(
            f"labels must lie in [0, {num_classes}), got {int(labels.min())}..{int(labels.max())}"
        )
    return p, labels


def accuracy(probabilities: torch.Tensor, labels: torch.Tensor) -> float:
    """(1/N) sum_i [argmax_k p_ik = y_i] (ties go to the lowest class index)."""
    p, y = check_probabilities(probabilities, labels)
    return float((p.argmax(-1) == y).double().mean())


def log_likelihoods(probabilities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log p_{i, y_i} per point [N] (float64; -inf where the true class has probability 0)."""
    p, y = check_probabilities(probabilities, labels)
    return p.gather(-1, y.unsqueeze(-1)).squeeze(-1).log()  # [N]


def test_log_likelihood(probabilities: torch.Tensor, labels: torch.Tensor) -> float:
    """TLL = (1/N) sum_i log p_{i, y_i}."""
    return float(log_likelihoods(probabilities, labels).mean())


setattr(test_log_likelihood, "__test__", False)  # a metric, not a pytest test  # noqa: B010


def entropies(probabilities: torch.Tensor) -> torch.Tensor:
    """H(p_i) = -sum_k p_ik log p_ik per point [N] in nats (0 log 0 = 0)."""
    p, _ = check_probabilities(probabilities)
    return -torch.special.xlogy(p, p).sum(-1)  # [N]


def predictive_entropy(probabilities: torch.Tensor) -> float:
    """(1/N) sum_i H(p_i), between 0 (one-hot) and log C (uniform)."""
    return float(entropies(probabilities).mean())


@dataclass(frozen=True)
class ReliabilityDiagram:
    """Per confidence bin ((b-1)/B, b/B]: ``edges`` [B + 1], ``counts`` n_b [B], ``accuracy``
    acc_b [B] and ``confidence`` conf_b [B] (NaN in empty bins)."""

    edges: torch.Tensor
    counts: torch.Tensor
    accuracy: torch.Tensor
    confidence: torch.Tensor

    @property
    def expected_calibration_error(self) -> float:
        """ECE = sum_b (n_b / N) |acc_b - conf_b| over the non-empty bins."""
        filled = self.counts > 0
        weights = self.counts[filled].double() / self.counts.sum()
        gaps = (self.accuracy[filled] - self.confidence[filled]).abs()
        return float((weights * gaps).sum())


def reliability_diagram(
    probabilities: torch.Tensor, labels: torch.Tensor, num_bins: int = ECE_BINS
) -> ReliabilityDiagram:
    """Bin the points by confidence c_i = max_k p_ik into ``num_bins`` equal-width bins
    ((b-1)/B, b/B] and return the count, accuracy and mean confidence of each."""
    if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 1:
        raise ValueError(f"num_bins must be a positive integer, got {num_bins!r}")
    p, y = check_probabilities(probabilities, labels)
    confidence, prediction = p.max(-1)  # [N], [N]
    correct = (prediction == y).double()  # [N]
    bins = (torch.ceil(confidence * num_bins).long() - 1).clamp(0, num_bins - 1)  # [N]
    counts = torch.bincount(bins, minlength=num_bins)  # [B]
    correct_sums = torch.bincount(bins, weights=correct, minlength=num_bins)  # [B]
    confidence_sums = torch.bincount(bins, weights=confidence, minlength=num_bins)  # [B]
    safe = counts.clamp(min=1).double()
    empty = counts == 0
    nan = torch.full_like(safe, float("nan"))
    return ReliabilityDiagram(
        edges=torch.linspace(0, 1, num_bins + 1, dtype=torch.float64, device=p.device),
        counts=counts,
        accuracy=torch.where(empty, nan, correct_sums / safe),
        confidence=torch.where(empty, nan, confidence_sums / safe),
    )


def expected_calibration_error(
    probabilities: torch.Tensor, labels: torch.Tensor, num_bins: int = ECE_BINS
) -> float:
    """ECE = sum_b (n_b / N) |acc_b - conf_b| with ``num_bins`` equal-width confidence bins."""
    return reliability_diagram(probabilities, labels, num_bins).expected_calibration_error


def classification_metrics(
    probabilities: torch.Tensor, labels: torch.Tensor, num_bins: int = ECE_BINS
) -> dict[str, float]:
    """{"accuracy", "tll", "ece", "entropy"} of one set of predictions."""
    return {
        "accuracy": accuracy(probabilities, labels),
        "tll": test_log_likelihood(probabilities, labels),
        "ece": expected_calibration_error(probabilities, labels, num_bins),
        "entropy": predictive_entropy(probabilities),
    }


__all__ = [
    "ECE_BINS",
    "ReliabilityDiagram",
    "accuracy",
    "check_probabilities",
    "classification_metrics",
    "entropies",
    "expected_calibration_error",
    "log_likelihoods",
    "predictive_entropy",
    "reliability_diagram",
    "test_log_likelihood",
]
