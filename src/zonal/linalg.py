"""Cholesky with adaptive jitter, and a clear error instead of NaN when a matrix is not PD."""

from __future__ import annotations

import torch


class NotPositiveDefiniteError(ValueError):
    """A matrix that must be positive definite is not, even after the largest jitter."""


def cholesky(
    matrix: torch.Tensor, *, name: str = "matrix", max_tries: int = 6, jitter: float | None = None
) -> torch.Tensor:
    """Lower Cholesky factor [*b, M, M] of a symmetric PD matrix, with adaptive jitter.

    Tries the matrix as it is, then adds jitter * mean(diag) * 10^k (k = 0..max_tries-1) to the
    diagonal, starting from 1e-10 (float64) or 1e-6 (float32). Raises ``NotPositiveDefiniteError``
    naming ``name`` if every attempt fails, or if the matrix holds NaN.
    """
    if not torch.isfinite(matrix).all():
        raise NotPositiveDefiniteError(f"{name} contains NaN or infinite entries")
    factor, info = torch.linalg.cholesky_ex(matrix)
    if not info.any():
        return factor
    base = jitter if jitter is not None else (1e-10 if matrix.dtype == torch.float64 else 1e-6)
    scale = matrix.diagonal(dim1=-2, dim2=-1).abs().mean(-1, keepdim=True).clamp(min=1e-30)
    identity = torch.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
    for attempt in range(max_tries):
        amount = base * 10**attempt * scale  # [*b, 1]
        factor, info = torch.linalg.cholesky_ex(matrix + amount.unsqueeze(-1) * identity)
        if not info.any():
            return factor
    raise NotPositiveDefiniteError(
        f"{name} ({tuple(matrix.shape)}) is not positive definite, even with relative jitter "
        f"{base * 10 ** (max_tries - 1):.0e}"
    )
