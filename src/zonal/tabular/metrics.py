"""Validation metrics: class probabilities under a model's predictive distribution, the validation
log likelihood that early stopping and the model choice maximise, and the metrics reported.
"""

from __future__ import annotations

import math

import torch

from zonal.datasets import Standardizer
from zonal.models import StackedModel, ZonalModel
from zonal.tabular.targets import (
    Target,
)

#: Monte Carlo draws of the latent GPs per component for softmax class probabilities
SOFTMAX_DRAWS = 256
#: rows per chunk when class probabilities are computed
PROBABILITY_CHUNK = 512


@torch.no_grad()
def class_probabilities(
    model: ZonalModel,
    x: torch.Tensor,
    target: Target,
    *,
    seed: int = 0,
    draws: int = SOFTMAX_DRAWS,
) -> torch.Tensor:
    """p(class | x) [N, C] under the model's predictive distribution.

    Bernoulli (probit): P(y = 1) = Phi(mu / sqrt(1 + sigma^2)), exact per Gaussian component;
    softmax: E softmax(f) with f ~ N(mu, diag sigma^2) (independent latent GPs) by ``draws``
    Monte Carlo draws f = mu + sigma eps, the same standard normal eps [draws, C] (from ``seed``)
    for every row, so that a row's probabilities do not depend on the other rows. Deep models
    average their mixture components (their inner-layer draws come from the model's
    ``posterior_seed``); a ``StackedModel`` of classifiers gives sum_k w_k p_k(class | x), each
    component's probabilities from ``seed``.
    """
    if isinstance(model, StackedModel):
        weighted = [
            weight * class_probabilities(component, x, target, seed=seed, draws=draws)
            for weight, component in model.weighted_components()
        ]  # K' x [N, C]
        return torch.stack(weighted).sum(0)
    model.eval()
    x = model.check_inputs(x)
    generator = torch.Generator(device=x.device).manual_seed(seed)
    num_classes = len(target.classes)
    noise = torch.randn((draws, num_classes), generator=generator, dtype=x.dtype, device=x.device)
    chunks = []
    for start in range(0, len(x), PROBABILITY_CHUNK):
        distribution = model.latent_distribution(x[start : start + PROBABILITY_CHUNK])
        mean, variance = distribution.mean, distribution.variance.clamp(min=0)
        if target.likelihood == "bernoulli":  # mean [(S,) n]
            positive = torch.special.ndtr(mean / torch.sqrt(1 + variance))  # [(S,) n]
            probabilities = torch.stack([1 - positive, positive], dim=-1)  # [(S,) n, 2]
        else:  # mean [(S,) n, C]
            shared = noise.reshape(draws, *[1] * (mean.dim() - 1), num_classes)  # [K, 1.., C]
            logits = mean + variance.sqrt() * shared  # [K, (S,) n, C]
            probabilities = torch.softmax(logits, dim=-1).mean(0)  # [(S,) n, C]
        if model._is_ensemble:
            probabilities = probabilities.mean(0)  # [n, C]
        chunks.append(probabilities)
    return torch.cat(chunks)  # [N, C]


@torch.no_grad()
def row_log_densities(
    model: ZonalModel, target: Target, x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """log p(y_i | x_i) per row [N] (standardised units): of the true class under
    ``class_probabilities`` for a classifier, the model's ``log_predictive_density`` otherwise."""
    if target.is_classification:
        return _log_probabilities(class_probabilities(model, x, target), y)
    return model.log_predictive_density(x, y)


@torch.no_grad()
def validation_score(
    model: ZonalModel, target: Target, x_valid: torch.Tensor, y_valid: torch.Tensor
) -> float:
    """Mean log predictive density of the validation rows (standardised units): what early
    stopping and the model choice maximise."""
    return float(row_log_densities(model, target, x_valid, y_valid).mean())


def _log_probabilities(probabilities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log p_i(y_i) [N] for probabilities [N, C] and class indices [N]."""
    return probabilities.gather(-1, labels.long().unsqueeze(-1)).squeeze(-1).log()


@torch.no_grad()
def validation_metrics(
    model: ZonalModel, target: Target, x_valid: torch.Tensor, y_valid: torch.Tensor
) -> dict[str, float]:
    """``log_likelihood`` (mean log p(y | x)) and ``mse`` (regression, of the predictive mean) or
    ``accuracy`` (classification, of the most probable class), in standardised units."""
    if target.is_classification:
        probabilities = class_probabilities(model, x_valid, target)  # [N, C]
        accuracy = (probabilities.argmax(-1) == y_valid).double().mean()
        return {"log_likelihood": float(_log_probabilities(probabilities, y_valid).mean()),
                "accuracy": float(accuracy)}  # fmt: skip
    mean, _ = model.predict(x_valid)
    return {
        "log_likelihood": validation_score(model, target, x_valid, y_valid),
        "mse": float(torch.mean((mean - y_valid) ** 2)),
    }


def in_target_units(
    score: dict[str, float], target: Target, y_scaler: Standardizer
) -> dict[str, float]:
    """Regression metrics back in the target's units: mse * std^2, log likelihood - log std."""
    if target.is_classification:
        return dict(score)
    scale = float(y_scaler.std)
    converted = dict(score)
    if "mse" in score:
        converted["mse"] = score["mse"] * scale**2
        converted["log_likelihood"] = score["log_likelihood"] - math.log(scale)
    return converted


def selection_key(score: dict[str, float]) -> float:
    """Validation log likelihood, or the training objective per row without a validation split."""
    value = score.get("log_likelihood", score["objective"])
    return value if math.isfinite(value) else -math.inf
