"""Mean functions of (hidden) GP layers. They see the lifted input :math:`[h, b]`; the bias column
is dropped where the mean is a function of :math:`h` alone (Salimbeni and Deisenroth's identity
mean)."""

from __future__ import annotations

import torch
from gpytorch.means import ConstantMean, LinearMean, Mean, ZeroMean


class IdentityMean(Mean):
    """mean_p(h) = h_p for output p of a layer with as many outputs as inputs.

    Inputs [..., P, N, D + 1] (a batch over outputs, as in GPyTorch's deep GP layers) or
    [..., N, D + 1] for a single output (then D must be 1).
    """

    def __init__(self, num_outputs: int, lifted: bool = True) -> None:
        super().__init__()
        self.num_outputs = num_outputs
        self.lifted = lifted

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x[..., :-1] if self.lifted else x  # drop the bias column
        if h.shape[-1] != self.num_outputs:
            raise ValueError(
                f"an identity mean needs as many inputs as outputs, got {h.shape[-1]} inputs "
                f"for {self.num_outputs} outputs"
            )
        if self.num_outputs == 1:
            return h[..., 0]
        # out[..., p, n] = h[..., p, n, p]
        return torch.diagonal(h, dim1=-3, dim2=-1).transpose(-1, -2)  # [..., P, N]


def make_mean(kind: str, input_dim: int, num_outputs: int, *, lifted: bool = True) -> Mean:
    """``"zero"``, ``"constant"``, ``"identity"`` or ``"linear"`` (affine in h: linear in [h, b]).

    ``lifted``: the mean sees [h, b] (a ``SphereEmbedding``) rather than h itself (``OnSphere``).
    """
    batch_shape = torch.Size([num_outputs]) if num_outputs > 1 else torch.Size()
    if kind == "zero":
        return ZeroMean(batch_shape=batch_shape)
    if kind == "constant":
        return ConstantMean(batch_shape=batch_shape).to(torch.float64)
    if kind == "identity":
        return IdentityMean(num_outputs, lifted=lifted)
    if kind == "linear":
        width = input_dim + int(lifted)
        return LinearMean(width, batch_shape=batch_shape, bias=not lifted).to(torch.float64)
    raise ValueError(f"unknown mean {kind!r}; use zero, constant, identity or linear")
