r"""Top layers of a convolutional DKM: the spatial dimension is collapsed before the output GP
(seed 003 appendix E).

* **Linear** (E.1, eqs. 91-93): a convolution whose filter covers the whole feature map with no
  padding (:math:`\lvert D \rvert = S`), so the output has one location: the kernelised
  convolution of ``zonal.dkm.convolution`` with that geometry and mixing matrices
  [M_out, M, H, W].
* **Global average pooling** (E.3): features averaged over the locations. Inducing points have no
  location, so :math:`K_{ii} = \Omega_{ii}` (eq. 108) and
  :math:`K_{i,j} = \Xi_{ij} = \frac{1}{S} \sum_s \Omega_{i,js}` (eq. 113); the diagonal
  :math:`K_{jj} = \frac{1}{S^2} \sum_{rs} \Omega_{jr,js}` needs the covariances of all locations
  of an image, which are not kept, so the corrected Nystrom approximation
  :math:`\Omega_{tt} \approx \Omega_{ti} \Omega_{ii}^{-1} \Omega_{it} + D` (:math:`D` diagonal,
  restoring the known diagonal; eqs. 119-125) gives

  .. math::

      K_{jj} = \Xi_j^\top \Omega_{ii}^{-1} \Xi_j + \frac{1}{S^2} \sum_s
      \big(\Omega_{js,js} - \Omega_{js,i} \Omega_{ii}^{-1} \Omega_{i,js}\big).
"""

from __future__ import annotations

import torch

from zonal.dkm.convolution import ConvGeometry, convolve_cross, convolve_diagonal, convolve_inducing


def linear_top(
    gram_ii: torch.Tensor, cross: torch.Tensor, diagonal: torch.Tensor, mixing: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(K_ii [M_out, M_out], K_ti [P, M_out], diag K_tt [P]) of the linear top layer (eqs. 91-93)
    from Omega blocks [M, M], [P, H, W, M], [P, H, W] and mixing [M_out, M, H, W]."""
    geometry = ConvGeometry((int(cross.shape[1]), int(cross.shape[2])), 1, 0)
    kernel_ii = convolve_inducing(gram_ii, mixing)
    kernel_ti = convolve_cross(cross, mixing, geometry).flatten(1)  # [P, M_out]
    return kernel_ii, kernel_ti, convolve_diagonal(diagonal, geometry).flatten(1).squeeze(-1)


def global_average_pooling_top(
    gram_ii: torch.Tensor, chol_ii: torch.Tensor, cross: torch.Tensor, diagonal: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(K_ii [M, M], K_ti [P, M], diag K_tt [P]) of global average pooling with the corrected
    Nystrom diagonal (module docstring); chol_ii is the Cholesky factor of Omega_ii [M, M]."""
    size = chol_ii.shape[-1]
    locations = cross.shape[1] * cross.shape[2]
    pooled = cross.mean((1, 2))  # Xi [P, M]
    whitened_pooled = torch.linalg.solve_triangular(chol_ii, pooled.mT, upper=False)  # [M, P]
    flat = cross.reshape(-1, size)  # [P S, M]
    whitened = torch.linalg.solve_triangular(chol_ii, flat.mT, upper=False)  # [M, P S]
    nystrom_diagonal = whitened.square().sum(0).reshape(diagonal.shape)  # [P, H, W]
    correction = (diagonal - nystrom_diagonal).clamp_min(0).flatten(1).sum(-1) / locations**2
    return gram_ii, pooled, whitened_pooled.square().sum(0) + correction
