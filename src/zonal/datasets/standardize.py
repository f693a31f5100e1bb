"""Per-column standardisation fitted on training data only, with the inverse maps for predictions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

ArrayT = TypeVar("ArrayT", np.ndarray, torch.Tensor)


def _like(values: np.ndarray, reference: ArrayT) -> ArrayT:
    """``values`` as the same kind of array as ``reference`` (numpy, or torch on its device)."""
    if isinstance(reference, torch.Tensor):
        return torch.as_tensor(values, dtype=reference.dtype, device=reference.device)
    return values


@dataclass(frozen=True)
class Standardizer:
    """z = (x - mean) / std per column, with mean and std of the training rows only.

    The moments are computed on each column divided by its largest magnitude, so that neither
    tiny units (1e-13) nor huge ones (1e300) underflow or overflow, and a column counts as constant
    only when its spread is below ``relative_tolerance`` times its largest magnitude (the spread
    float64 cannot resolve); constant columns get std = 1, so they map to 0 instead of NaN. Works
    on numpy arrays and torch tensors, [N, D] or [N] (a single column).

    For predictions of a standardised target, ``inverse_transform`` maps means back and
    ``inverse_transform_variance`` maps variances back: var * std**2.
    """

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(
        cls, data: np.ndarray | torch.Tensor, relative_tolerance: float = 1e-12
    ) -> Standardizer:
        """Fit on the training rows ``data`` [N, D] or [N] (population std, ddof = 0)."""
        values = data.detach().cpu().numpy() if isinstance(data, torch.Tensor) else np.asarray(data)
        values = values.astype(np.float64, copy=False)
        if values.ndim not in (1, 2) or values.shape[0] == 0:
            raise ValueError(f"fit needs a non-empty [N] or [N, D] array, got shape {values.shape}")
        if not np.isfinite(values).all():
            raise ValueError("fit data contain NaN or infinite values")
        magnitude = np.abs(values).max(axis=0)  # [D]
        magnitude = np.where(magnitude > 0, magnitude, 1.0)
        scaled = values / magnitude  # [N, D], entries in [-1, 1]
        spread = scaled.std(axis=0)
        constant = spread <= relative_tolerance
        mean = scaled.mean(axis=0) * magnitude
        std = np.where(constant, 1.0, spread * magnitude)
        return cls(mean=mean, std=std)

    def transform(self, data: ArrayT) -> ArrayT:
        """(data - mean) / std."""
        return (data - _like(self.mean, data)) / _like(self.std, data)

    def inverse_transform(self, data: ArrayT) -> ArrayT:
        """data * std + mean: standardised values (or predictive means) back in original units."""
        return data * _like(self.std, data) + _like(self.mean, data)

    def inverse_transform_variance(self, variance: ArrayT) -> ArrayT:
        """variance * std**2: predictive variances of a standardised target in original units."""
        return variance * _like(self.std, variance) ** 2

    def inverse_transform_std(self, std: ArrayT) -> ArrayT:
        """std * scale: predictive standard deviations in original units."""
        return std * _like(self.std, std)
