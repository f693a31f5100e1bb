r"""Writing a Gaussian :math:`q(u) = \mathcal{N}(m, S)` into GPyTorch's variational families.

Each family stores :math:`q` in its own parameters; zonal sets :math:`q` (the Titsias optimum, a
copied network's weights, a scaled identity) through this one function, so every family is handled
in one place:

.. math::

    \mathtt{CholeskyVariationalDistribution} \quad & m, \ \operatorname{chol}(S) \\
    \mathtt{MeanFieldVariationalDistribution} \quad & m, \ \sqrt{\operatorname{diag} S}
    \qquad (S \text{ must be diagonal}) \\
    \mathtt{NaturalVariationalDistribution} \quad & \theta_1 = S^{-1} m, \ \theta_2 = -S^{-1} / 2 \\
    \mathtt{TrilNaturalVariationalDistribution} \quad & \theta_1 = S^{-1} m, \
    T = \operatorname{chol}(S)^{-1} \qquad (\theta_2 = -T^\top T / 2) \\
    \mathtt{DeltaVariationalDistribution} \quad & m \qquad (S \text{ must be None})

These five are the families the strategy supports; any other raises ``UnsupportedFamilyError``.
"""

from __future__ import annotations

import torch
from gpytorch.variational import (
    CholeskyVariationalDistribution,
    DeltaVariationalDistribution,
    MeanFieldVariationalDistribution,
    NaturalVariationalDistribution,
    TrilNaturalVariationalDistribution,
    _VariationalDistribution,
)

from zonal.linalg import cholesky

SUPPORTED_FAMILIES = (
    CholeskyVariationalDistribution,
    MeanFieldVariationalDistribution,
    NaturalVariationalDistribution,
    TrilNaturalVariationalDistribution,
    DeltaVariationalDistribution,
)


class UnsupportedFamilyError(ValueError):
    """A variational distribution zonal's strategy cannot read or write."""


def check_family(distribution: _VariationalDistribution) -> None:
    """Raise ``UnsupportedFamilyError`` unless ``distribution`` is one of ``SUPPORTED_FAMILIES``."""
    if not isinstance(distribution, SUPPORTED_FAMILIES):
        names = ", ".join(family.__name__ for family in SUPPORTED_FAMILIES)
        raise UnsupportedFamilyError(
            f"{type(distribution).__name__} is not supported by InterDomainVariationalStrategy; "
            f"use one of {names}"
        )


def parameter_like(distribution: _VariationalDistribution) -> torch.Tensor:
    """A tensor with the dtype and device of the distribution's parameters."""
    return next(distribution.parameters())


@torch.no_grad()
def write_gaussian(
    distribution: _VariationalDistribution,
    mean: torch.Tensor,
    covariance: torch.Tensor | None,
) -> None:
    """Store q = N(mean [*b, M], covariance [*b, M, M]) in ``distribution``'s parameters.

    ``covariance`` is None only for a ``DeltaVariationalDistribution`` (a point mass).
    """
    check_family(distribution)
    reference = parameter_like(distribution)
    mean = mean.to(reference)
    if isinstance(distribution, DeltaVariationalDistribution):
        if covariance is not None:
            raise UnsupportedFamilyError(
                "a DeltaVariationalDistribution holds a point mass: set its mean only"
            )
        distribution.variational_mean.copy_(mean.expand_as(distribution.variational_mean))
        return
    if covariance is None:
        raise ValueError(f"{type(distribution).__name__} needs a covariance")
    covariance = covariance.to(reference)
    if isinstance(distribution, MeanFieldVariationalDistribution):
        off_diagonal = covariance - torch.diag_embed(covariance.diagonal(dim1=-2, dim2=-1))
        if off_diagonal.abs().max() > 1e-12 * covariance.abs().max():
            raise UnsupportedFamilyError(
                "MeanFieldVariationalDistribution holds a diagonal covariance; this q has "
                "correlations: use CholeskyVariationalDistribution"
            )
        distribution.variational_mean.copy_(mean.expand_as(distribution.variational_mean))
        stddev = covariance.diagonal(dim1=-2, dim2=-1).sqrt()  # [*b, M]
        distribution._variational_stddev.copy_(stddev.expand_as(distribution._variational_stddev))
        return
    factor = cholesky(covariance, name="variational covariance S")  # [*b, M, M]
    if isinstance(distribution, CholeskyVariationalDistribution):
        distribution.variational_mean.copy_(mean.expand_as(distribution.variational_mean))
        distribution.chol_variational_covar.copy_(
            factor.expand_as(distribution.chol_variational_covar)
        )
        return
    identity = torch.eye(factor.shape[-1], dtype=factor.dtype, device=factor.device)
    inverse_factor = torch.linalg.solve_triangular(factor, identity, upper=False)  # L^{-1}
    precision = inverse_factor.mT @ inverse_factor  # S^{-1} [*b, M, M]
    natural_vec = (precision @ mean.unsqueeze(-1)).squeeze(-1)  # S^{-1} m [*b, M]
    distribution.natural_vec.copy_(natural_vec.expand_as(distribution.natural_vec))
    if isinstance(distribution, NaturalVariationalDistribution):
        distribution.natural_mat.copy_((-0.5 * precision).expand_as(distribution.natural_mat))
    else:
        distribution.natural_tril_mat.copy_(inverse_factor.expand_as(distribution.natural_tril_mat))
