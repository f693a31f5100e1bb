"""The truncated Mercer / addition-theorem sum of a zonal kernel, in O(N M) memory.

For a zonal kernel with eigenvalues lambda_n on S^{d-1} (seed 000 eq. 10, seed 002 eq. 14),

    k(x, x') = sum_{n=0}^{L} lambda_n Z_n(x . x'),   Z_n(t) = (n + alpha) / alpha C_n^alpha(t).

Stacking Z_0..Z_L for a Gram matrix costs N M (L + 1) memory (13 GB for 4096 x 4096 at L = 100);
here the sum is accumulated along the three-term recurrence, so the forward pass holds three N x M
tensors, and the backward pass recomputes what it needs:

    d/dt sum_n a_n C_n^alpha(t) = sum_{n>=1} a_n 2 alpha C_{n-1}^{alpha+1}(t)   (a series again),
    d/da_n sum_m a_m C_m^alpha(t) = C_n^alpha(t).

alpha = 0 (the circle) uses the Chebyshev normalisation C_n^0 = (2 / n) T_n of ``zonal.harmonics``,
whose derivative is 2 C_{n-1}^1.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from zonal._validation import check_ambient_dim
from zonal.harmonics import addition_factor, gegenbauer_alpha


def _gegenbauer_iter(t: torch.Tensor, max_degree: int, alpha: float) -> Iterator[torch.Tensor]:
    """C_0^alpha(t), ..., C_L^alpha(t), one tensor [*t.shape] at a time (out of place)."""
    prev = torch.ones_like(t)
    yield prev
    if max_degree == 0:
        return
    if alpha == 0:
        # Chebyshev: T_n = 2 t T_{n-1} - T_{n-2}; C_n^0 = (2 / n) T_n.
        cheb_prev, cheb = prev, t
        yield 2 * t
        for n in range(2, max_degree + 1):
            cheb_prev, cheb = cheb, 2 * t * cheb - cheb_prev
            yield (2.0 / n) * cheb
        return
    cur = 2 * alpha * t
    yield cur
    for n in range(2, max_degree + 1):
        prev, cur = cur, (2 * (n + alpha - 1) * t * cur - (n + 2 * alpha - 2) * prev) / n
        yield cur


_BLOCK = 1 << 15  # entries per block: four float64 blocks stay in a core's L2 cache


def _series_forward(t: torch.Tensor, coeffs: torch.Tensor, alpha: float) -> torch.Tensor:
    """sum_n coeffs[..., n] C_n^alpha(t) without an autograd graph.

    With one set of coefficients (no batch in ``coeffs``) a large ``t`` is cut into blocks of
    ``_BLOCK`` entries that run the whole recurrence in cache (about 2x faster for 4096 x 4096).
    """
    if coeffs[..., 0].numel() == 1 and t.numel() > _BLOCK:
        out_shape = torch.broadcast_shapes(t.shape, coeffs.shape[:-1])
        flat_t = t.reshape(-1)  # [T]
        flat_coeffs = coeffs.reshape(-1)  # [L + 1]
        out = torch.empty_like(flat_t)
        for start in range(0, flat_t.numel(), _BLOCK):
            block = slice(start, start + _BLOCK)
            out[block] = _series_unblocked(flat_t[block], flat_coeffs, alpha)
        return out.reshape(out_shape)
    return _series_unblocked(t, coeffs, alpha)


def _series_unblocked(t: torch.Tensor, coeffs: torch.Tensor, alpha: float) -> torch.Tensor:
    """sum_n coeffs[..., n] C_n^alpha(t), accumulated in place along the recurrence."""
    max_degree = coeffs.shape[-1] - 1
    out_shape = torch.broadcast_shapes(t.shape, coeffs.shape[:-1])
    out = coeffs[..., 0].expand(out_shape).clone()  # C_0 = 1
    if max_degree == 0:
        return out
    prev = torch.ones_like(t)
    if alpha == 0:
        cur = t.clone()  # T_1
        out.addcmul_(cur, coeffs[..., 1], value=2.0)  # C_1^0 = 2 T_1
        for n in range(2, max_degree + 1):
            prev.mul_(-1).addcmul_(t, cur, value=2.0)  # T_n into the T_{n-2} buffer
            prev, cur = cur, prev
            out.addcmul_(cur, coeffs[..., n], value=2.0 / n)
        return out
    cur = t * (2 * alpha)  # C_1
    out.addcmul_(cur, coeffs[..., 1])
    for n in range(2, max_degree + 1):
        prev.mul_(-(n + 2 * alpha - 2) / n).addcmul_(t, cur, value=2 * (n + alpha - 1) / n)
        prev, cur = cur, prev
        out.addcmul_(cur, coeffs[..., n])
    return out


class _GegenbauerSeries(torch.autograd.Function):
    """S(t; a) = sum_n a_n C_n^alpha(t), differentiable to any order in t and a."""

    @staticmethod
    def forward(ctx, t: torch.Tensor, coeffs: torch.Tensor, alpha: float) -> torch.Tensor:
        ctx.save_for_backward(t, coeffs)
        ctx.alpha = alpha
        return _series_forward(t, coeffs, alpha)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        t, coeffs = ctx.saved_tensors
        alpha = ctx.alpha
        max_degree = coeffs.shape[-1] - 1
        grad_t = grad_coeffs = None
        if ctx.needs_input_grad[0]:
            if max_degree == 0:
                grad_t = torch.zeros_like(t)
            else:
                scale = 2.0 if alpha == 0 else 2.0 * alpha
                derivative = _GegenbauerSeries.apply(t, coeffs[..., 1:] * scale, alpha + 1)
                grad_t = (grad_output * derivative).sum_to_size(t.shape)
        if ctx.needs_input_grad[1]:
            batch = coeffs.shape[:-1]
            grad_coeffs = torch.stack(
                [
                    (grad_output * c_n).sum_to_size(batch) if batch else (grad_output * c_n).sum()
                    for c_n in _gegenbauer_iter(t, max_degree, alpha)
                ],
                dim=-1,
            )  # [*batch, L + 1]
        return grad_t, grad_coeffs, None


def gegenbauer_series(t: torch.Tensor, coeffs: torch.Tensor, alpha: float) -> torch.Tensor:
    """sum_{n=0}^{L} coeffs[..., n] C_n^alpha(t): shape broadcast(t.shape, coeffs.shape[:-1]).

    ``coeffs`` [..., L + 1] must broadcast against ``t`` once its last dimension is dropped (give a
    Gram matrix t [*b, N, M] coefficients [*b, 1, 1, L + 1]). Memory O(t.numel()), differentiable in
    ``t`` and ``coeffs`` (derivatives by the recurrences of the module docstring).
    """
    if coeffs.dim() == 0 or coeffs.shape[-1] == 0:
        raise ValueError("coeffs needs a last dimension of size L + 1 >= 1")
    return _GegenbauerSeries.apply(t, coeffs, float(alpha))


def mercer_sum(t: torch.Tensor, eigenvalues: torch.Tensor, ambient_dim: int) -> torch.Tensor:
    """k(t) = sum_{n=0}^{L} lambda_n Z_n(t), Z_n = (n + alpha)/alpha C_n^alpha (seed 000 eq. 10).

    Args:
        t: cosines x . x' in [-1, 1], any shape, e.g. [*b, N, M].
        eigenvalues: lambda_0..lambda_L, shape [..., L + 1], broadcasting against ``t`` once the last
            dimension is dropped (for t [*b, N, M] pass [*b, 1, 1, L + 1]).
        ambient_dim: d, for S^{d-1} subset R^d.

    Returns:
        The truncated sum, shape broadcast(t.shape, eigenvalues.shape[:-1]).
    """
    d = check_ambient_dim(ambient_dim)
    max_degree = eigenvalues.shape[-1] - 1
    factors = torch.tensor(
        [addition_factor(n, d) for n in range(max_degree + 1)],
        dtype=eigenvalues.dtype,
        device=eigenvalues.device,
    )  # [L + 1]
    return gegenbauer_series(t, eigenvalues * factors, gegenbauer_alpha(d))
