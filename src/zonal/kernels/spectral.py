r"""A zonal kernel given by its spectrum: one learnable eigenvalue per harmonic level.

.. math::

    k(x, x') = \sum_{n=0}^{L} \lambda_n Z_n(x \cdot x'), \qquad \lambda_n \ge 0
    \qquad \text{(seed 000 eq. 10)},

with :math:`L = \operatorname{len}(\mathrm{eigenvalues}) - 1`. Any such sum is positive
semi-definite (Schoenberg), and every zonal kernel truncated at level :math:`L` is one. The
eigenvalues are stored through GPyTorch's ``Positive`` constraint when learnable (they must then
be > 0), or as a fixed buffer (zeros allowed).

A learnable spectrum carries its own scale: do not wrap it in ``gpytorch.kernels.ScaleKernel``,
whose outputscale times all :math:`\lambda_n` would be a flat direction of every objective.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from gpytorch.constraints import Positive

from zonal._validation import check_degree
from zonal.kernels.base import ZonalKernel


def _check_spectrum(values: torch.Tensor, strictly_positive: bool) -> None:
    if values.dim() == 0 or values.shape[-1] == 0:
        raise ValueError("eigenvalues must have a last dimension of size L + 1 >= 1")
    if not torch.isfinite(values).all():
        raise ValueError("eigenvalues must be finite")
    if (values < 0).any():
        worst = float(values.min())
        raise ValueError(
            f"eigenvalues of a positive semi-definite zonal kernel must be >= 0, got {worst:.3g}"
        )
    if strictly_positive and (values == 0).any():
        raise ValueError(
            "learnable eigenvalues must be > 0 (they are stored through a softplus); "
            "pass learn_eigenvalues=False to fix a spectrum with zeros"
        )


class SpectralZonalKernel(ZonalKernel):
    r"""Zonal kernel with eigenvalues :math:`\lambda_0, \dots, \lambda_L` [*batch_shape, L + 1]
    given per level.

    Args:
        ambient_dim: :math:`d`.
        eigenvalues: initial (or fixed) spectrum, shape [L + 1] or [*batch_shape, L + 1].
        learn_eigenvalues: learn them (positive, via ``Positive``) or keep them fixed.
        **kwargs: passed to ``ZonalKernel``/``Kernel`` (``batch_shape``, ...); ``max_degree`` is
            set from the spectrum.
    """

    def __init__(
        self,
        ambient_dim: int,
        eigenvalues: torch.Tensor | Sequence[float],
        *,
        learn_eigenvalues: bool = True,
        dtype: torch.dtype = torch.float64,
        **kwargs: Any,
    ) -> None:
        values = torch.as_tensor(eigenvalues, dtype=dtype)
        _check_spectrum(values, strictly_positive=learn_eigenvalues)
        if "max_degree" in kwargs:
            raise ValueError("max_degree is set by the length of the spectrum")
        super().__init__(ambient_dim, max_degree=values.shape[-1] - 1, dtype=dtype, **kwargs)
        values = values.expand(*self.batch_shape, values.shape[-1]).clone()
        self.learn_eigenvalues = learn_eigenvalues
        if learn_eigenvalues:
            self.register_parameter("raw_spectrum", torch.nn.Parameter(torch.zeros_like(values)))
            self.register_constraint("raw_spectrum", Positive())
            self.raw_spectrum.data = self.raw_spectrum_constraint.inverse_transform(values)
        else:
            self.register_buffer("fixed_spectrum", values)

    @property
    def spectrum(self) -> torch.Tensor:
        r"""The eigenvalues :math:`\lambda_0, \dots, \lambda_L` [*batch_shape, L + 1]."""
        if self.learn_eigenvalues:
            return self.raw_spectrum_constraint.transform(self.raw_spectrum)
        return self.fixed_spectrum

    @spectrum.setter
    def spectrum(self, value: torch.Tensor | Sequence[float]) -> None:
        reference = self.raw_spectrum if self.learn_eigenvalues else self.fixed_spectrum
        value = torch.as_tensor(value, dtype=reference.dtype, device=reference.device)
        _check_spectrum(value, strictly_positive=self.learn_eigenvalues)
        if value.shape[-1] != reference.shape[-1]:
            raise ValueError(
                f"the spectrum has {reference.shape[-1]} levels, got {value.shape[-1]} values"
            )
        value = value.expand_as(reference)
        if self.learn_eigenvalues:
            self.initialize(raw_spectrum=self.raw_spectrum_constraint.inverse_transform(value))
        else:
            self.fixed_spectrum.copy_(value)

    def eigenvalues(self, max_degree: int | None = None) -> torch.Tensor:
        r""":math:`\lambda_0, \dots, \lambda_L`, zero-padded beyond the spectrum's own
        truncation."""
        spectrum = self.spectrum  # [*batch_shape, L0 + 1]
        if max_degree is not None:
            max_degree = check_degree(max_degree)
        if max_degree is None or max_degree == spectrum.shape[-1] - 1:
            return spectrum
        if max_degree < spectrum.shape[-1] - 1:
            return spectrum[..., : max_degree + 1]
        padding = spectrum.new_zeros(*spectrum.shape[:-1], max_degree + 1 - spectrum.shape[-1])
        return torch.cat([spectrum, padding], dim=-1)
