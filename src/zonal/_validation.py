"""Input checks shared by the public functions: each raises a ``ValueError`` that names the problem."""

from __future__ import annotations

import numbers

import torch


def check_degree(value: object, name: str = "max_degree") -> int:
    """Return ``value`` as a non-negative ``int`` or raise a ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            raise ValueError(f"{name} must be an int, got the float {value!r}")
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}")
    return int(value)


def check_ambient_dim(value: object) -> int:
    """Return ``value`` as an ``int`` >= 2 (the sphere S^{d-1} sits in R^d, d >= 2)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"ambient_dim must be an integer >= 2, got {value!r}")
    if value < 2:
        raise ValueError(f"ambient_dim must be >= 2 (S^{{d-1}} in R^d needs d >= 2), got {value}")
    return int(value)


def check_finite(tensor: torch.Tensor, name: str) -> None:
    """Raise if ``tensor`` holds NaN or infinite entries, naming the first bad row."""
    bad = ~torch.isfinite(tensor)
    if bad.any():  # rows: the last dimension's entries of [..., N, D]; a vector's entries
        flat_rows = bad.reshape(-1, tensor.shape[-1]).any(-1) if tensor.dim() > 1 else bad
        first = int(torch.nonzero(flat_rows.reshape(-1))[0].item())
        count = int(flat_rows.sum().item())
        raise ValueError(
            f"{name} contains NaN or infinite values ({count} row(s), first at row {first})"
        )


def unit_tolerance(dtype: torch.dtype) -> float:
    """Tolerance on | ||x|| - 1 | for inputs that must lie on the unit sphere."""
    return 1e-6 if dtype == torch.float64 else 1e-4


def check_unit_vectors(x: torch.Tensor, ambient_dim: int, name: str = "x") -> None:
    """Check that ``x`` is a finite tensor [..., ambient_dim] of unit vectors."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0 or x.shape[-1] != ambient_dim:
        raise ValueError(
            f"{name} must have last dimension ambient_dim={ambient_dim}, got shape {tuple(x.shape)}"
        )
    check_finite(x, name)
    norms = x.norm(dim=-1)  # [...]
    deviation = (norms - 1).abs()
    if deviation.numel() and deviation.max() > unit_tolerance(x.dtype):
        worst = float(deviation.max())
        raise ValueError(
            f"{name} must hold unit vectors (points on S^{ambient_dim - 1}); the largest "
            f"| ||x|| - 1 | is {worst:.3g}. Project with x / x.norm(dim=-1, keepdim=True) "
            "or use zonal's sphere embedding"
        )
