r"""Which levels of a zonal kernel an inducing feature may use, decided once per feature set.

The RKHS of a zonal kernel :math:`k(x, x') = \sum_n \lambda_n Z_n(x \cdot x')` holds the harmonics
of the levels with :math:`\lambda_n > 0` only, with
:math:`\langle f, g \rangle_\mathcal{H} = \sum_{n, j} f_{nj} g_{nj} / \lambda_n` (seed 000 eq. 11).
An inter-domain feature :math:`u = \langle f, g \rangle_\mathcal{H}` therefore needs :math:`g`'s
level-:math:`n` part to vanish where :math:`\lambda_n = 0`, and a level whose eigenvalue is tiny but
kept dominates :math:`K_{uu}` through its :math:`1 / \lambda_n` and leaves the feature almost
uninformative about the other levels.

Which levels count as zero is decided once, when the features are built from a kernel, never per
call: a per-call decision flips as the hyperparameters move and makes :math:`K_{uu}`,
:math:`K_{uf}` and the ELBO jump.
A level is kept when its eigenvalue exceeds ``ZERO_EIGENVALUE`` times the largest one, the rule of
seed 000 app. C (tables C.1-C.2 set values below 1e-9 to zero): it removes the exact zeros (odd
levels >= 3 of the first-order arc-cosine kernel, the levels above a truncated spectrum) and the
levels lost in the quadrature noise of a fast-decaying spectrum (RBF, heat, polynomial decay with
a large :math:`\beta`).
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
    r"""Levels 0..max_degree with
    :math:`\lambda_n > \mathtt{threshold} \cdot \max_{n'} \lambda_{n'}`: BoolTensor [L + 1].

    For a batch of kernels a level is kept when it is kept for any member, so that the features
    are one set for the whole batch (a member whose eigenvalue is zero at a kept level makes its
    :math:`K_{uu}` non-finite, which the features report).
    """
    eigenvalues = kernel_eigenvalues(kernel, max_degree).detach()  # [*b, L + 1]
    eigenvalues = eigenvalues.reshape(-1, max_degree + 1)  # [B, L + 1]
    cutoff = threshold * eigenvalues.amax(-1, keepdim=True)  # [B, 1]
    return (eigenvalues > cutoff).any(0)  # [L + 1]


def nonzero_levels(
    kernel: Kernel, max_degree: int, threshold: float = ZERO_EIGENVALUE
) -> list[int]:
    r"""The degrees :math:`n \le \mathtt{max\_degree}` that ``kept_level_mask`` keeps, ascending."""
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
