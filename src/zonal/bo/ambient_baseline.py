r"""The ambient-space baseline for acquisition optimisation on :math:`\mathbb{S}^{d-1}`: optimise
:math:`a(x / \|x\|)` over the box :math:`[-1, 1]^d` with BoTorch's ``optimize_acqf`` (L-BFGS-B),
then normalise the result.

:math:`x / \|x\|` is a smooth map from :math:`\mathbb{R}^d \setminus \{0\}` onto the sphere, so this
unconstrained parametrisation reaches every point; the box holds the sphere's every direction. It
is the comparison asked of ``optimize_acqf_sphere`` (same acquisition, same restarts and raw
samples).
"""

from __future__ import annotations

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.optim import optimize_acqf
from torch import nn

from zonal._validation import check_ambient_dim
from zonal.bo.acquisition_optimization import acquisition_device, acquisition_dtype

#: smallest norm divided by (the box's corner points are far from it; x = 0 has no direction)
SMALLEST_NORM = 1e-12


class NormalisedInput(AcquisitionFunction):
    r""":math:`a(x / \|x\|)` for :math:`x \in \mathbb{R}^d` (:math:`x` [b, q, d] -> [b])."""

    def __init__(self, acq_function: AcquisitionFunction) -> None:
        nn.Module.__init__(self)
        self.acq_function = acq_function

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        r""":math:`a(X / \|X\|)` [b] for :math:`X` [b, q, d] (norms floored at
        ``SMALLEST_NORM``)."""
        return self.acq_function(X / X.norm(dim=-1, keepdim=True).clamp(min=SMALLEST_NORM))


def optimize_acqf_normalised(
    acq_function: AcquisitionFunction,
    ambient_dim: int,
    q: int,
    num_restarts: int,
    raw_samples: int,
    options: dict | None = None,
    *,
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""(candidates [q, d] on the sphere, :math:`a` at them []): ``optimize_acqf`` on the box
    :math:`[-1, 1]^d` of :math:`a(x / \|x\|)`, the result normalised (on the acquisition's
    device, in ``dtype``: by default the acquisition's, ``acquisition_dtype``)."""
    ambient_dim = check_ambient_dim(ambient_dim)
    dtype = acquisition_dtype(acq_function) if dtype is None else dtype
    ones = torch.ones(ambient_dim, dtype=dtype, device=acquisition_device(acq_function))
    bounds = torch.stack([-ones, ones])  # [2, d]
    candidate, value = optimize_acqf(
        NormalisedInput(acq_function),
        bounds=bounds,
        q=q,
        num_restarts=num_restarts,
        raw_samples=raw_samples,
        options=options,
    )
    assert value is not None  # None only with return_acq_values=False
    return candidate / candidate.norm(dim=-1, keepdim=True), value


__all__ = ["NormalisedInput", "optimize_acqf_normalised"]
