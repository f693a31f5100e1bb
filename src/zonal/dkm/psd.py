r"""Positive definite matrices as learnable parameters: :math:`G = V V^\top` with :math:`V` lower
triangular and a positive diagonal (a Cholesky factor), so :math:`G` is positive definite for every
value of the parameters.

The diagonal is stored as its logarithm; :math:`\log \lvert G \rvert = 2 \sum \log V_{kk}` is then
exact and cheap, which is what the KL terms of the DKM objective need (seed 003 eqs. 11, 75).
Seed 003 sec. 5 initialises the inducing Gram blocks at the NNGP and the output covariance as
:math:`A = V V^\top`; ``from_matrix`` starts the parameter at any given positive definite matrix.
"""

from __future__ import annotations

import torch

from zonal.linalg import cholesky


class CholeskyParameter(torch.nn.Module):
    """A positive definite [*b, P, P] matrix parametrised by its Cholesky factor (module docstring)."""

    def __init__(self, matrix: torch.Tensor, *, name: str = "matrix") -> None:
        super().__init__()
        if matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
            raise ValueError(
                f"{name} must be a square matrix [*b, P, P], got {tuple(matrix.shape)}"
            )
        factor = cholesky(matrix.detach(), name=name)  # [*b, P, P]
        self.log_diagonal = torch.nn.Parameter(factor.diagonal(dim1=-2, dim2=-1).log())
        self.lower = torch.nn.Parameter(factor.tril(-1))
        self.name = name

    @property
    def root(self) -> torch.Tensor:
        """:math:`V` [*b, P, P], lower triangular with a positive diagonal."""
        return self.lower.tril(-1) + torch.diag_embed(self.log_diagonal.exp())

    @property
    def matrix(self) -> torch.Tensor:
        r""":math:`G = V V^\top` [*b, P, P]."""
        root = self.root
        return root @ root.mT

    @torch.no_grad()
    def assign(self, matrix: torch.Tensor) -> None:
        """Set the parameter to the positive definite ``matrix`` [*b, P, P]."""
        factor = cholesky(matrix, name=self.name)
        self.log_diagonal.copy_(factor.diagonal(dim1=-2, dim2=-1).log())
        self.lower.copy_(factor.tril(-1))
