"""The (dense) DKM objective and the NNGP it reduces to (seed 003 eqs. 4-5, appendix A).

With G^0 = X X^T / N_0 and learned Gram matrices G^1..G^L,

    L(G^1, ..., G^L) = log P(Y | G^L) - sum_l nu_l KL(N(0, G^l) || N(0, K(G^{l-1}))),     (eq. 5)

the limit of the DGP log posterior divided by the width (eq. 45). The KL pull of strength nu_l keeps
G^l near the NNGP value K(G^{l-1}); with nu_l = inf the layer is exactly the NNGP layer (eq. 4) and
has no freedom. For a Gaussian likelihood the data term is the GP log marginal likelihood of each
output channel y_c under the kernel K(G^L) (eq. 42): sum_c log N(y_c; 0, K(G^L) + sigma^2 I).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from zonal.dkm.divergence import gaussian_kl
from zonal.dkm.gram_kernels import GramKernel
from zonal.linalg import cholesky


def check_nu(nu: float | Sequence[float], num_layers: int) -> tuple[float, ...]:
    """The per-layer regularisation strengths nu_1..nu_L (one number is used for every layer).

    Each must be >= 0 (``math.inf`` allowed: the NNGP layer); a named ``ValueError`` otherwise.
    """
    values = [nu] * num_layers if isinstance(nu, int | float) else list(nu)
    if len(values) != num_layers:
        raise ValueError(f"nu needs one value per layer ({num_layers}), got {len(values)}")
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ValueError(f"nu of layer {index + 1} must be a number >= 0, got {value!r}")
        if value < 0:
            raise ValueError(f"nu of layer {index + 1} must be >= 0, got {value}")
    return tuple(float(value) for value in values)


def input_gram(inputs: torch.Tensor) -> torch.Tensor:
    """G^0 = X X^T / N_0 [*b, P, P] of inputs X [*b, P, N_0] (seed 003 eq. 4)."""
    return inputs @ inputs.mT / inputs.shape[-1]


def nngp_grams(gram_input: torch.Tensor, kernel: GramKernel, num_layers: int) -> list[torch.Tensor]:
    """The NNGP chain G^l = K(G^{l-1}), l = 1..L (seed 003 eq. 4): the DKM with every nu = inf."""
    grams = [gram_input]
    for _ in range(num_layers):
        grams.append(kernel(grams[-1]))
    return grams[1:]


def gaussian_log_marginal(
    kernel_matrix: torch.Tensor, targets: torch.Tensor, noise: float | torch.Tensor
) -> torch.Tensor:
    """sum_c log N(y_c; 0, K + sigma^2 I) for K [P, P] and targets Y [P, C] (seed 003 eq. 42)."""
    size, channels = targets.shape
    covariance = kernel_matrix + noise * torch.eye(size, dtype=targets.dtype, device=targets.device)
    factor = cholesky(covariance, name="K(G^L) + noise I")  # [P, P]
    whitened = torch.linalg.solve_triangular(factor, targets, upper=False)  # [P, C]
    log_det = 2 * factor.diagonal().log().sum()
    return -0.5 * (whitened.square().sum() + channels * (log_det + size * math.log(2 * math.pi)))


def dkm_objective(
    gram_input: torch.Tensor,
    grams: Sequence[torch.Tensor | None],
    kernel: GramKernel,
    nu: float | Sequence[float],
    log_likelihood: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """L(G^1..G^L) of seed 003 eq. 5.

    Args:
        gram_input: G^0 [P, P].
        grams: G^1..G^L [P, P]; ``None`` for a layer fixed at its NNGP value K(G^{l-1}) (required
            where nu_l = inf, whose KL weight would otherwise be infinite).
        kernel: the Gram kernel K.
        nu: nu_l per layer (or one for all).
        log_likelihood: G^L -> log P(Y | G^L), e.g.
            ``lambda gram: gaussian_log_marginal(kernel(gram), Y, noise)``.
    """
    strengths = check_nu(nu, len(grams))
    previous = gram_input
    regulariser = gram_input.new_zeros(())
    for index, (gram, strength) in enumerate(zip(grams, strengths, strict=True)):
        prior = kernel(previous)  # K(G^{l-1}) [P, P]
        if gram is None:
            gram = prior
        elif math.isinf(strength):
            raise ValueError(
                f"nu = inf fixes G^{index + 1} = K(G^{index}): pass None for that layer's Gram"
            )
        elif strength > 0:
            regulariser = regulariser + strength * gaussian_kl(gram, prior)
        previous = gram
    return log_likelihood(previous) - regulariser
