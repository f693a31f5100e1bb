"""The neural network that an activated DGP's posterior mean *is* (seed 000 eqs. 3-4, 14).

One ``ActivatedLayer`` maps h [N, D] to

    out = V^T (r g~(W z)) + c,    [s * h, b] = r z (r = ||[s * h, b]||, z on S^D),  W rows unit,

where g~ = sum_{n kept} sigma_n Z_n is the activation truncated to the levels the layer's kernel
keeps (seed 000 eq. 14) and r g~(w . z) is its 1-homogeneous extension: for the exact ReLU this is
relu(w . [s * h, b]), a fully connected layer with bias b w_{D+1}. The hidden width of the
equivalent network is M (inducing variables per layer); the layer's output width is the GP
layer's number of outputs, so two consecutive layers multiply to the low-rank weight
W_{l+1} V_l^T of seed 000 sec. 3.2.

The optional per-input scales s > 0 (ARD; s = 1 without them) are those of the DGP layer's
``SphereEmbedding(input_scales=...)``: learnt with the network, they set how much each input
weighs in the radius r and the direction z, which for a smooth activation the directions W
alone cannot reweight.

``ActivatedNetwork`` is a plain ``torch.nn.Module``: train it with any PyTorch tooling (stage 1 of
the two-stage recipe) and hand it to ``ActivatedDGP.from_torch_module``.
"""

from __future__ import annotations

import torch
from gpytorch.constraints import Positive
from torch import nn

from zonal.kernels.mercer import mercer_sum


class ActivatedLayer(nn.Module):
    """h [N, D] -> V^T r g~(W [s * h, b] / r) + c: [N, P].

    Args:
        input_dim: D.
        hidden_width: M (rows of W).
        output_dim: P.
        coefficients: sigma_n of the truncated activation [N~ + 1] (zero where the kernel's
            eigenvalue is zero).
        bias: b, the constant appended to h.
        output_bias: learn the constant c (a constant mean function in the DGP).
        input_scales: None (s = 1, no parameter) or initial per-input scales s [D] > 0, learnt
            through the same ``Positive`` (softplus) constraint as ``SphereEmbedding``'s.
    """

    coefficients: torch.Tensor  # buffers
    bias: torch.Tensor

    def __init__(
        self,
        input_dim: int,
        hidden_width: int,
        output_dim: int,
        coefficients: torch.Tensor,
        *,
        bias: float = 1.0,
        output_bias: bool = False,
        input_scales: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.input_dim, self.hidden_width, self.output_dim = input_dim, hidden_width, output_dim
        if input_scales is not None:
            scales = torch.as_tensor(input_scales, dtype=torch.float64).detach().clone()
            if scales.shape != (input_dim,) or not bool(torch.all(scales > 0)):
                raise ValueError(
                    f"input_scales must be {input_dim} positive numbers (one per input), got "
                    f"shape {tuple(scales.shape)}"
                )
            self.input_scales_constraint = Positive()
            raw = self.input_scales_constraint.inverse_transform(scales)
            self.raw_input_scales = nn.Parameter(raw)
        self.register_buffer("coefficients", coefficients.to(torch.float64).clone())
        self.register_buffer("bias", torch.tensor(float(bias), dtype=torch.float64))
        directions = torch.randn(
            hidden_width, input_dim + 1, generator=generator, dtype=torch.float64
        )
        self.raw_weights = nn.Parameter(directions / directions.norm(dim=-1, keepdim=True))
        scale = hidden_width**-0.5
        self.output_weights = nn.Parameter(
            scale * torch.randn(hidden_width, output_dim, generator=generator, dtype=torch.float64)
        )
        self.output_bias = (
            nn.Parameter(torch.zeros(output_dim, dtype=torch.float64)) if output_bias else None
        )

    @property
    def input_scales(self) -> torch.Tensor | None:
        """s [D] > 0, or None without input scales."""
        if not hasattr(self, "raw_input_scales"):
            return None
        return self.input_scales_constraint.transform(self.raw_input_scales)

    @property
    def weights(self) -> torch.Tensor:
        """Unit directions W [M, D + 1]."""
        return self.raw_weights / self.raw_weights.norm(dim=-1, keepdim=True)

    def hidden(self, h: torch.Tensor) -> torch.Tensor:
        """The M activations r g~(w_m . z): [N, M]."""
        scales = self.input_scales
        if scales is not None:
            h = h * scales.to(h.dtype)  # [N, D]
        lifted = torch.cat([h, self.bias.to(h.dtype).expand(*h.shape[:-1], 1)], dim=-1)
        radius = lifted.norm(dim=-1, keepdim=True)  # [N, 1]
        cosines = ((lifted / radius) @ self.weights.T).clamp(-1, 1)  # [N, M]
        return radius * mercer_sum(cosines, self.coefficients, self.input_dim + 1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = self.hidden(h) @ self.output_weights  # [N, P]
        return out if self.output_bias is None else out + self.output_bias


class ActivatedNetwork(nn.Sequential):
    """A stack of ``ActivatedLayer``s; the last layer's single output is squeezed if asked."""

    def __init__(self, *layers: ActivatedLayer, squeeze_output: bool = True) -> None:
        super().__init__(*layers)
        self.squeeze_output = squeeze_output

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = super().forward(h)
        return out.squeeze(-1) if self.squeeze_output and out.shape[-1] == 1 else out
