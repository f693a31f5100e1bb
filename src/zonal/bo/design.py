r"""Near-uniform point sets on :math:`\mathbb{S}^{d-1}`: initial candidates and inducing locations.

``sobol_sphere(count, ambient_dim, seed)`` maps a scrambled Sobol sequence in :math:`[0, 1]^d`
through the standard normal quantile function and projects radially: if :math:`u` is uniform on
the cube then :math:`z = \Phi^{-1}(u)` is standard normal on :math:`\mathbb{R}^d` and
:math:`z / \|z\|` is uniform on :math:`\mathbb{S}^{d-1}`, so the low discrepancy of :math:`u`
carries over to a near-uniform (quasi-random) design on the sphere.
``uniform_sphere`` is the same with pseudo-random normals (the seed's "sampled uniformly at random
from the hypersphere", seed 004 app. A.2).
"""

from __future__ import annotations

import torch
from torch.quasirandom import SobolEngine

from zonal._validation import check_ambient_dim

#: keeps Phi^{-1}(u) finite at the ends of [0, 1]
QUANTILE_MARGIN = 1e-10


def sobol_sphere(
    count: int,
    ambient_dim: int,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""``count`` quasi-uniform unit vectors [count, d]: normalised
    :math:`\Phi^{-1}(\text{scrambled Sobol})`."""
    ambient_dim = check_ambient_dim(ambient_dim)
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    engine = SobolEngine(ambient_dim, scramble=True, seed=seed)
    cube = engine.draw(count, dtype=torch.float64).clamp(QUANTILE_MARGIN, 1 - QUANTILE_MARGIN)
    normal = torch.special.ndtri(cube)  # [count, d]
    points = normal / normal.norm(dim=-1, keepdim=True)
    return points.to(dtype=dtype, device=device)


def uniform_sphere(
    count: int,
    ambient_dim: int,
    generator: torch.Generator,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | None = None,
) -> torch.Tensor:
    """``count`` independent uniform unit vectors [count, d] (normalised standard normals)."""
    ambient_dim = check_ambient_dim(ambient_dim)
    normal = torch.randn(count, ambient_dim, generator=generator, dtype=torch.float64)
    points = normal / normal.norm(dim=-1, keepdim=True)  # [count, d]
    return points.to(dtype=dtype, device=device)


__all__ = ["sobol_sphere", "uniform_sphere"]
