"""Data to sphere and back: x in R^D -> z = [x, b] / ||[x, b]|| in S^D (seed 000 sec. 4.1).

Appending a bias b != 0 puts the data on the hyperplane {x_{D+1} = b} of R^{D+1}; projecting radially
maps it one-to-one onto the open hemisphere of S^D on b's side. A GP g on the sphere is carried back
to the data by the 1-homogeneous extension f(x) = r g(z) with r = ||[x, b]|| (seed 000 eq. 7,
Fig. 2), so a Gaussian prediction N(m, v) of g(z) becomes

    mean = m r,   variance = v r^2,   covariance between x_i and x_j = C_ij r_i r_j.

This is the one owner of the sphere projection in zonal (design notes sec. 2).
"""

from __future__ import annotations

import torch
from gpytorch.constraints import Positive
from torch import nn

from zonal._validation import check_finite


class SphereEmbedding(nn.Module):
    """x [..., D] -> (z [..., D + 1] on S^D, r [...]) with z = [x, b] / r, r = ||[x, b]||.

    Args:
        bias: b > 0 (its sign is a reflection of the sphere, so b > 0 loses nothing; b = 0 would
            let x = 0 have no direction).
        learn_bias: learn b (kept positive by GPyTorch's ``Positive`` constraint) or keep it fixed.
        dtype: dtype of b (float64 by default).
    """

    def __init__(
        self, bias: float = 1.0, *, learn_bias: bool = False, dtype: torch.dtype = torch.float64
    ) -> None:
        super().__init__()
        value = torch.as_tensor(bias, dtype=dtype)
        if value.dim() != 0 or not torch.isfinite(value) or value <= 0:
            raise ValueError(f"bias must be a finite number > 0, got {bias!r}")
        self.learn_bias = bool(learn_bias)
        self.bias_constraint = Positive()
        if self.learn_bias:
            self.raw_bias = nn.Parameter(self.bias_constraint.inverse_transform(value))
        else:
            self.register_buffer("fixed_bias", value)

    @property
    def bias(self) -> torch.Tensor:
        """b > 0, a scalar tensor."""
        if self.learn_bias:
            return self.bias_constraint.transform(self.raw_bias)
        return self.fixed_bias

    def lift(self, x: torch.Tensor) -> torch.Tensor:
        """[x, b] [..., D + 1] (the point on the hyperplane x_{D+1} = b)."""
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            raise ValueError("x must be a tensor [..., D] with D >= 1")
        check_finite(x, "x")
        bias = self.bias.to(dtype=x.dtype, device=x.device).expand(*x.shape[:-1], 1)
        return torch.cat([x, bias], dim=-1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(z, r): unit vectors z [..., D + 1] and radii r = ||[x, b]|| [...] (r >= b > 0)."""
        lifted = self.lift(x)  # [..., D + 1]
        radius = lifted.norm(dim=-1)  # [...]
        return lifted / radius.unsqueeze(-1), radius

    def radius(self, x: torch.Tensor) -> torch.Tensor:
        """r = ||[x, b]|| = sqrt(||x||^2 + b^2) [...]."""
        return self.lift(x).norm(dim=-1)

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        """x [..., D] from z [..., D + 1] on b's hemisphere: x = b z_{:D} / z_{D+1}."""
        last = z[..., -1:]
        if (last <= 0).any():
            raise ValueError(
                "z must lie on the open hemisphere z_{D+1} > 0 (the image of the data)"
            )
        return self.bias.to(dtype=z.dtype, device=z.device) * z[..., :-1] / last

    @staticmethod
    def to_data_scale(
        mean: torch.Tensor, variance: torch.Tensor, radius: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Predictions on the sphere to the data: (mean * r, variance * r^2), all [...]."""
        return mean * radius, variance * radius**2

    @staticmethod
    def covariance_to_data_scale(covariance: torch.Tensor, radius: torch.Tensor) -> torch.Tensor:
        """C [..., N, N] on the sphere to the data: C_ij r_i r_j, r [..., N]."""
        return covariance * radius.unsqueeze(-1) * radius.unsqueeze(-2)
