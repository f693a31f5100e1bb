r"""The (dense) DKM objective and the NNGP it reduces to (seed 003 eqs. 4-5, appendix A).

With :math:`G^0 = X X^\top / N_0` and learned Gram matrices :math:`G^1, \dots, G^L`,

.. math::

    \mathcal{L}(G^1, \dots, G^L) = \log P(Y \mid G^L)
    - \sum_l \nu_l \operatorname{KL}\big(\mathcal{N}(0, G^l) \,\|\, \mathcal{N}(0, K(G^{l-1}))\big),
    \qquad \text{(eq. 5)}

the limit of the DGP log posterior divided by the width (eq. 45). The KL pull of strength
:math:`\nu_l` keeps :math:`G^l` near the NNGP value :math:`K(G^{l-1})`; with :math:`\nu_l = \infty`
the layer is exactly the NNGP layer (eq. 4) and has no freedom. For a Gaussian likelihood the data
term is the GP log marginal likelihood of each output channel :math:`y_c` under the kernel
:math:`K(G^L)` (eq. 42): :math:`\sum_c \log \mathcal{N}(y_c; 0, K(G^L) + \sigma^2 I)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from zonal.dkm.divergence import gaussian_kl
from zonal.dkm.gram_kernels import GramKernel
from zonal.linalg import cholesky


def check_nu(nu: float | Sequence[float], num_layers: int) -> tuple[float, ...]:
    r"""The per-layer regularisation strengths :math:`\nu_1, \dots, \nu_L` (one number is used for
    every layer).

    Each must be :math:`\ge 0` (``math.inf`` allowed: the NNGP layer); a named ``ValueError``
    otherwise.
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
    r""":math:`G^0 = X X^\top / N_0` [*b, P, P] of inputs :math:`X` [*b, P, N_0] (seed 003
    eq. 4)."""
    return inputs @ inputs.mT / inputs.shape[-1]


def nngp_grams(gram_input: torch.Tensor, kernel: GramKernel, num_layers: int) -> list[torch.Tensor]:
    r"""The NNGP chain :math:`G^l = K(G^{l-1})`, :math:`l = 1, \dots, L` (seed 003 eq. 4): the DKM
    with every :math:`\nu = \infty`."""
    grams = [gram_input]
    for _ in range(num_layers):
        grams.append(kernel(grams[-1]))
    return grams[1:]


def gaussian_log_marginal(
    kernel_matrix: torch.Tensor, targets: torch.Tensor, noise: float | torch.Tensor
) -> torch.Tensor:
    r""":math:`\sum_c \log \mathcal{N}(y_c; 0, K + \sigma^2 I)` for :math:`K` [P, P] and targets
    :math:`Y` [P, C] (seed 003 eq. 42)."""
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
    r""":math:`\mathcal{L}(G^1, \dots, G^L)` of seed 003 eq. 5.

    Args:
        gram_input: :math:`G^0` [P, P].
        grams: :math:`G^1, \dots, G^L` [P, P]; ``None`` for a layer fixed at its NNGP value
            :math:`K(G^{l-1})` (required where :math:`\nu_l = \infty`, whose KL weight would
            otherwise be infinite).
        kernel: the Gram kernel :math:`K`.
        nu: :math:`\nu_l` per layer (or one for all).
        log_likelihood: :math:`G^L \mapsto \log P(Y \mid G^L)`, e.g.
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
