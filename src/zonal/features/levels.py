"""Which levels of a zonal kernel an inducing feature may use, decided once per feature set.

The RKHS of a zonal kernel k(x, x') = sum_n lambda_n Z_n(x . x') holds the harmonics of the levels
with lambda_n > 0 only, with <f, g>_H = sum_{n, j} f_nj g_nj / lambda_n (seed 000 eq. 11). An
inter-domain feature u = <f, g>_H therefore needs g's level-n part to vanish where lambda_n = 0, and
a level whose eigenvalue is tiny but kept dominates Kuu through its 1 / lambda_n and leaves the
feature almost uninformative about the other levels.

Which levels count as zero is decided once, when the features are built from a kernel, never per
call: a per-call decision flips as the hyperparameters move and makes Kuu, Kuf and the ELBO jump.
A level is kept when its eigenvalue exceeds ``ZERO_EIGENVALUE`` times the largest one, the rule of
seed 000 app. C (tables C.1-C.2 set values below 1e-9 to zero): it removes the exact zeros (odd
levels >= 3 of the first-order arc-cosine kernel, the levels above a truncated spectrum) and the
levels lost in the quadrature noise of a fast-decaying spectrum (RBF, heat, polynomial decay with
a large beta).
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from zonal.features.base import base_zonal_kernel, kernel_eigenvalues

#: eigenvalues below this fraction of the largest count as zero (seed 000 tables C.1-C.2)
ZERO_EIGENVALUE = 1e-9


def kept_level_mask(
    kernel: Kernel, max_degree: int, threshold: float = ZERO_EIGENVALUE
) -> torch.Tensor:
    """Levels 0..max_degree with lambda_n > ``threshold`` * max_n' lambda_n': BoolTensor [L + 1].

    For a batch of kernels a level is kept when it is kept for any member, so that the features
    are one set for the whole batch (a member whose eigenvalue is zero at a kept level makes its
    Kuu non-finite, which the features report).
    """
    eigenvalues = kernel_eigenvalues(kernel, max_degree).detach()  # [*b, L + 1]
    eigenvalues = eigenvalues.reshape(-1, max_degree + 1)  # [B, L + 1]
    cutoff = threshold * eigenvalues.amax(-1, keepdim=True)  # [B, 1]
    return (eigenvalues > cutoff).any(0)  # [L + 1]


def nonzero_levels(
    kernel: Kernel, max_degree: int, threshold: float = ZERO_EIGENVALUE
) -> list[int]:
    """The degrees n <= max_degree that ``kept_level_mask`` keeps, ascending."""
    mask = kept_level_mask(kernel, max_degree, threshold)  # [L + 1]
    return torch.nonzero(mask).squeeze(-1).tolist()


def check_kernel_dim(kernel: Kernel, ambient_dim: int) -> None:
    """Raise a ``ValueError`` if the zonal kernel inside ``kernel`` lives on another sphere."""
    zonal, _ = base_zonal_kernel(kernel)
    if zonal.ambient_dim != ambient_dim:
        raise ValueError(
            f"the kernel has ambient_dim={zonal.ambient_dim} but the features ambient_dim="
            f"{ambient_dim}"
        )
