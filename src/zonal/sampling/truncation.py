r"""Where to cut the Karhunen-Loeve expansion of a zonal GP prior, and what the cut costs.

A zonal kernel :math:`k(x, x') = \sum_n \lambda_n Z_n(x \cdot x')` with
:math:`Z_n = \sum_j \phi_{nj}(x) \phi_{nj}(x')` gives the exact prior draw (seed 004 sec. 2.2.2,
eq. 2.17 with the Mercer features)

.. math::

    f(x) = \sum_{n, j} \sqrt{\lambda_n}\, w_{nj} \phi_{nj}(x), \qquad w_{nj} \sim \mathcal{N}(0, 1),

whose covariance, truncated after level :math:`L`, is
:math:`k_L(x, x') = \sum_{n \le L} \lambda_n Z_n(x \cdot x')`. Since
:math:`\lvert Z_n(t) \rvert \le Z_n(1) = N_n^d` and :math:`\lambda_n \ge 0`, the truncation error is
bounded everywhere by the missing prior variance

.. math::

    \lvert k(x, x') - k_L(x, x') \rvert \le k(1) - \sum_{n \le L} \lambda_n N_n^d
    \qquad (\text{times } \|x\| \|x'\| \text{ if homogeneous}).

The rule: :math:`L` is the smallest degree whose missing variance is at most ``tolerance`` times
:math:`k(1)`, but no more than the last level that fits in ``max_features`` harmonics, and at least
the highest level an inducing feature needs (``required_levels``: the Matheron update needs the
prior's projection on every level the features use). A truncated Mercer sum (a kernel with no
closed form, evaluated as :math:`\sum_{n \le \mathtt{max\_degree}}`) has no mass above its own
truncation, so its missing variance reaches zero there. Levels whose eigenvalue is at most 1e-9
times the largest are left out (the project's zero-eigenvalue rule,
``zonal.features.ZERO_EIGENVALUE``) unless a feature uses them; their variance counts as missing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from gpytorch.kernels import Kernel

from zonal.features import ZERO_EIGENVALUE, kernel_eigenvalues, max_degree_for_budget
from zonal.features.base import base_zonal_kernel
from zonal.harmonics import num_harmonics

#: the largest missing prior variance, as a fraction of k(1), that the rule accepts. The missing
#: variance is an absolute error on the posterior covariance too (no data inform the levels left
#: out), and a posterior variance can be far below k(1): with 1e-3 an SGPR's posterior variance of
#: 0.006 came out as 0.0015. So the default asks for more than any posterior needs and lets the
#: budget decide for slowly decaying spectra.
DEFAULT_TOLERANCE = 1e-6
#: the largest number of harmonics (prior features) the rule may use
DEFAULT_MAX_FEATURES = 1024


@dataclass(frozen=True)
class HarmonicTruncation:
    r"""A truncated Karhunen-Loeve expansion: the levels kept and the prior variance left out.

    Attributes:
        ambient_dim: :math:`d`, the expansion lives on :math:`\mathbb{S}^{d-1}`.
        max_degree: :math:`L`, the highest level kept.
        levels: the degrees kept, ascending (levels with a zero eigenvalue are left out).
        num_features: sum of :math:`N_n^d` over ``levels``.
        total_variance: :math:`k(1)`, the prior variance at a unit vector, [*b] (b: the kernel's
            batch).
        missing_variance: :math:`k(1) - \sum_{n \in \mathtt{levels}} \lambda_n N_n^d`, [*b]: the
            bound on the covariance error at unit vectors.
    """

    ambient_dim: int
    max_degree: int
    levels: tuple[int, ...]
    num_features: int
    total_variance: torch.Tensor
    missing_variance: torch.Tensor

    @property
    def relative_missing_variance(self) -> torch.Tensor:
        r""":math:`\mathtt{missing\_variance} / \mathtt{total\_variance}`, [*b]."""
        return self.missing_variance / self.total_variance


def spectrum(kernel: Kernel, max_degree: int) -> torch.Tensor:
    """lambda_0..lambda_L of ``kernel`` (times a ScaleKernel's outputscale) as its Gram matrix uses
    them: [*b, L + 1].

    A truncated Mercer sum is defined by the eigenvalues at its own truncation, so those are read
    (padded with zeros above it) whatever L is asked for; a closed-form kernel's are computed to L.
    """
    zonal, _ = base_zonal_kernel(kernel)
    if zonal.uses_closed_form:
        return kernel_eigenvalues(kernel, max_degree)
    own = kernel_eigenvalues(kernel, zonal.max_degree)  # [*b, L_kernel + 1]
    if max_degree <= zonal.max_degree:
        return own[..., : max_degree + 1]
    padding = own.new_zeros(*own.shape[:-1], max_degree - zonal.max_degree)
    return torch.cat([own, padding], dim=-1)


def prior_variance(kernel: Kernel) -> torch.Tensor:
    """k(1) = s(1) (times the outputscale), the prior variance at a unit vector: [*b]."""
    zonal, outputscale = base_zonal_kernel(kernel)
    one = torch.ones(1, 1, dtype=zonal.dtype, device=zonal.device)  # [1, 1]
    variance = zonal.evaluate_cosines(one)[..., 0, 0]  # [*b]
    variance = variance.expand(zonal.batch_shape) if zonal.batch_shape else variance
    return variance if outputscale is None else variance * outputscale


@torch.no_grad()
def choose_truncation(
    kernel: Kernel,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    max_features: int = DEFAULT_MAX_FEATURES,
    required_levels: tuple[int, ...] = (),
) -> HarmonicTruncation:
    """The truncation of the module docstring's rule for a zonal kernel (optionally scaled).

    Args:
        kernel: a ``ZonalKernel``, optionally in a ``ScaleKernel``.
        tolerance: the largest accepted missing variance as a fraction of :math:`k(1)` (0: as far
            as the budget allows; exact for a truncated Mercer sum that fits).
        max_features: the budget of harmonics (``max_degree_for_budget``).
        required_levels: degrees that must be kept whatever the rule says.
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")
    zonal, _ = base_zonal_kernel(kernel)
    ambient_dim = zonal.ambient_dim
    cap = max_degree_for_budget(ambient_dim, int(max_features), kernel)
    floor = max(required_levels, default=0)
    degree = max(cap, floor)
    eigenvalues = spectrum(kernel, degree).detach()  # [*b, L + 1]
    flat = eigenvalues.reshape(-1, degree + 1)  # [B, L + 1]
    kept = (flat > ZERO_EIGENVALUE * flat.amax(-1, keepdim=True)).any(0)  # [L + 1]
    kept[list(required_levels)] = True
    counts = torch.tensor(
        [num_harmonics(ambient_dim, n) for n in range(degree + 1)],
        dtype=flat.dtype,
        device=flat.device,
    )  # [L + 1]
    mass = torch.where(kept, flat.clamp_min(0) * counts, 0.0)  # [B, L + 1]
    total = prior_variance(kernel).detach().reshape(-1)  # [B]
    relative = ((total.unsqueeze(-1) - mass.cumsum(-1)) / total.unsqueeze(-1)).amax(0)  # [L + 1]
    within = torch.nonzero(relative[: cap + 1] <= tolerance)
    rule = int(within[0]) if len(within) else cap
    last = max(rule, floor)
    levels = tuple(n for n in range(last + 1) if kept[n])
    if not levels:
        raise ValueError("the kernel has no non-zero eigenvalue within the feature budget")
    missing = total - mass[:, list(levels)].sum(-1)  # [B]
    shape = eigenvalues.shape[:-1]
    return HarmonicTruncation(
        ambient_dim=ambient_dim,
        max_degree=levels[-1],
        levels=levels,
        num_features=sum(num_harmonics(ambient_dim, n) for n in levels),
        total_variance=total.reshape(shape),
        missing_variance=missing.clamp_min(0).reshape(shape),
    )
