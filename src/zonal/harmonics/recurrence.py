r"""The three-term recurrence of the Gegenbauer polynomials, in every form zonal evaluates it.

One recurrence (DLMF 18.9.1; seed 000 appendix B.1) serves all degrees at once:

.. math::

    C_0 &= 1, \qquad C_1 = c_1 t, \qquad C_n = a_n t C_{n-1} - b_n C_{n-2} \quad (n \ge 2), \\
    c_1 &= 2 \alpha, \qquad a_n = 2 (n + \alpha - 1) / n, \qquad b_n = (n + 2 \alpha - 2) / n.

:math:`\alpha = 0` (the circle :math:`\mathbb{S}^1`, :math:`d = 2`): :math:`C_n^0` vanishes for
:math:`n \ge 1`, so zonal uses the Chebyshev limit
:math:`C_n^0 := \lim_{\alpha \to 0} C_n^\alpha / \alpha = (2 / n) T_n` (:math:`n \ge 1`),
:math:`C_0^0 = 1`. Substituting :math:`T_n = (n / 2) C_n^0` into
:math:`T_n = 2 t T_{n-1} - T_{n-2}` gives the same recurrence with :math:`\alpha = 0`, except
:math:`c_1 = 2` and :math:`b_2 = 1` (because :math:`T_0 = C_0^0` is not :math:`(0 / 2) C_0^0`).

Derivative (seed 000 eq. B.7): :math:`\frac{d}{dt} C_n^\alpha = 2 \alpha C_{n-1}^{\alpha+1}`, and
:math:`\frac{d}{dt} C_n^0 = 2 C_{n-1}^1`. The zonal harmonic is
:math:`Z_n = \frac{n + \alpha}{\alpha} C_n^\alpha` (``counts.addition_factor``).

Forms, all built on ``step_coefficients``:

* out of place, autograd-friendly: ``gegenbauer_iter`` (one degree at a time), ``gegenbauer_stack``;
* in place, no autograd: ``zonal_of_degree`` (one degree), ``clenshaw_series`` (a weighted sum);
* blocked: ``series_no_grad`` cuts a large ``t`` into cache-sized blocks;
* by harmonic level: ``zonal_by_level`` (one fused in-place recurrence, ``zonal_by_level_``;
  with autograd ``_ZonalByLevel``, whose derivative is the same recurrence one dimension up);
* custom autograd with the closed-form derivative: ``gegenbauer_differentiable`` (all degrees) and
  ``series_differentiable`` (a weighted sum, differentiable in :math:`t` and in the weights).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from fractions import Fraction
from typing import Any, overload

import torch

from zonal.harmonics.counts import addition_factor

#: entries per block of ``series_no_grad``: its three float64 buffers stay in a core's L2 cache
BLOCK = 1 << 15


@overload
def _numerators(degree: int, alpha: Fraction) -> tuple[Fraction, Fraction]: ...
@overload
def _numerators(degree: int, alpha: float) -> tuple[float, float]: ...
def _numerators(degree: int, alpha: float | Fraction) -> tuple[float | Fraction, float | Fraction]:
    """(n a_n, n b_n): n C_n = n a_n t C_{n-1} - n b_n C_{n-2}; exact for a ``Fraction`` alpha."""
    if alpha == 0 and degree == 2:
        return alpha + 2, alpha + 2  # 2 and 2, in alpha's type
    return 2 * (degree + alpha - 1), degree + 2 * alpha - 2


def step_coefficients(degree: int, alpha: float) -> tuple[float, float]:
    """(a_n, b_n) with C_n = a_n t C_{n-1} - b_n C_{n-2} for n = ``degree`` >= 2 (module docstring)."""
    scaled_a, scaled_b = _numerators(degree, alpha)
    return scaled_a / degree, scaled_b / degree


def first_coefficient(alpha: float) -> float:
    """c_1 with C_1 = c_1 t: 2 alpha, and 2 for the alpha = 0 (Chebyshev) normalisation."""
    return 2.0 if alpha == 0 else 2.0 * alpha


def derivative_scale(alpha: float) -> float:
    """s with d/dt C_n^alpha = s C_{n-1}^{alpha+1}: 2 alpha, and 2 for alpha = 0."""
    return first_coefficient(alpha)


def zonal_factor(degree: int, alpha: float) -> float:
    """(n + alpha) / alpha, so that Z_n = factor * C_n^alpha (``counts.addition_factor``)."""
    return addition_factor(degree, round(2 * alpha + 2))


# ---------------------------------------------------------------------------- out of place


def gegenbauer_iter(t: torch.Tensor, max_degree: int, alpha: float) -> Iterator[torch.Tensor]:
    """C_0(t), ..., C_L(t), one fresh tensor [*t.shape] at a time (plain autograd ops)."""
    previous = torch.ones_like(t)
    yield previous
    if max_degree == 0:
        return
    current = first_coefficient(alpha) * t
    yield current
    for n in range(2, max_degree + 1):
        scaled_a, scaled_b = _numerators(n, alpha)  # divided last: as accurate as it gets
        previous, current = current, (scaled_a * t * current - scaled_b * previous) / n
        yield current


def gegenbauer_stack(t: torch.Tensor, max_degree: int, alpha: float) -> torch.Tensor:
    """C_0..C_L at t stacked on a new last axis: [..., L + 1] (plain autograd ops)."""
    return torch.stack(list(gegenbauer_iter(t, max_degree, alpha)), dim=-1)


# ---------------------------------------------------------------------------- in place


def zonal_of_degree(t: torch.Tensor, degree: int, alpha: float) -> torch.Tensor:
    """Z_n(t) for the single degree n, by the recurrence on two buffers of t's shape (no autograd).

    ``t`` is read only; the lower degrees are overwritten as the recurrence goes.
    """
    with torch.no_grad():
        if degree == 0:
            return torch.ones_like(t)
        previous = torch.ones_like(t)
        current = t * first_coefficient(alpha)  # C_1
        for n in range(2, degree + 1):
            a, b = step_coefficients(n, alpha)
            previous.mul_(-b).addcmul_(t, current, value=a)  # C_n into the C_{n-2} buffer
            previous, current = current, previous
        return current.mul_(zonal_factor(degree, alpha))


def clenshaw_series(t: torch.Tensor, coeffs: torch.Tensor, alpha: float) -> torch.Tensor:
    """sum_n coeffs[..., n] C_n(t) by Clenshaw's backward recurrence, in place (no autograd).

    With C_{k+1} = a_{k+1} t C_k - b_{k+1} C_{k-1}:  h_{L+1} = h_{L+2} = 0,
    h_k = coeffs_k + a_{k+1} t h_{k+1} - b_{k+2} h_{k+2}  (k = L..1), and the sum is
    coeffs_0 + c_1 t h_1 - b_2 h_2. Two in-place operations per degree.
    """
    max_degree = coeffs.shape[-1] - 1
    out_shape = torch.broadcast_shapes(t.shape, coeffs.shape[:-1])
    dtype = torch.promote_types(t.dtype, coeffs.dtype)
    if max_degree == 0:
        return coeffs[..., 0].expand(out_shape).to(dtype, copy=True)
    upper = torch.zeros(out_shape, dtype=dtype, device=t.device)  # h_{k+2}
    current = coeffs[..., max_degree].expand(out_shape).to(dtype, copy=True)  # h_L
    for k in range(max_degree - 1, 0, -1):
        a_next, _ = step_coefficients(k + 1, alpha)
        _, b_after = step_coefficients(k + 2, alpha)
        torch.add(coeffs[..., k], upper, alpha=-b_after, out=upper)  # c_k - b_{k+2} h_{k+2}
        upper.addcmul_(t, current, value=a_next)  # h_k
        upper, current = current, upper
    # current = h_1, upper = h_2
    _, b_two = step_coefficients(2, alpha)
    torch.add(coeffs[..., 0], upper, alpha=-b_two, out=upper)
    return upper.addcmul_(t, current, value=first_coefficient(alpha))


def series_no_grad(t: torch.Tensor, coeffs: torch.Tensor, alpha: float) -> torch.Tensor:
    """sum_{n=0}^{L} coeffs[..., n] C_n^alpha(t) without an autograd graph (Clenshaw, in place).

    Shape broadcast(t.shape, coeffs.shape[:-1]). With one set of coefficients (no batch in
    ``coeffs``) a ``t`` of more than ``BLOCK`` entries is cut into blocks of ``BLOCK`` entries that
    run the whole recurrence in cache (about 2x faster on a 4096 x 4096 matrix).
    """
    with torch.no_grad():
        if coeffs[..., 0].numel() == 1 and t.numel() > BLOCK:
            flat_t = t.reshape(-1)  # [T]
            flat_coeffs = coeffs.reshape(-1)  # [L + 1]
            dtype = torch.promote_types(t.dtype, coeffs.dtype)
            out = torch.empty_like(flat_t, dtype=dtype)  # [T]
            for start in range(0, flat_t.numel(), BLOCK):
                block = slice(start, start + BLOCK)
                out[block] = clenshaw_series(flat_t[block], flat_coeffs, alpha)
            return out.reshape(torch.broadcast_shapes(t.shape, coeffs.shape[:-1]))
        return clenshaw_series(t, coeffs, alpha)


def gegenbauer_moments(
    t: torch.Tensor, weights: torch.Tensor, max_degree: int, alpha: float
) -> torch.Tensor:
    """m_n = sum_i weights_i C_n^alpha(t_i) for n = 0..L: [L + 1] (no autograd).

    ``t`` and ``weights`` hold the same number of entries (their shapes may differ by axes of
    size 1). The recurrence runs in place over blocks of ``BLOCK`` entries, each held in cache
    for every degree (two in-place operations and one dot product per degree), where stacking
    C_0..C_L of the whole of t reads and writes L + 1 arrays of t's size.
    """
    with torch.no_grad():
        flat_t = t.reshape(-1)  # [T]
        flat_weights = weights.reshape(-1)  # [T]
        if flat_t.numel() != flat_weights.numel():
            raise ValueError(
                f"t {tuple(t.shape)} and weights {tuple(weights.shape)} differ in size"
            )
        dtype = torch.promote_types(t.dtype, weights.dtype)
        moments = torch.zeros(max_degree + 1, dtype=dtype, device=t.device)  # [L + 1]
        steps = [step_coefficients(n, alpha) for n in range(2, max_degree + 1)]
        for start in range(0, flat_t.numel(), BLOCK):
            block_t = flat_t[start : start + BLOCK].to(dtype)  # [B]
            block_weights = flat_weights[start : start + BLOCK].to(dtype)  # [B]
            moments[0] += block_weights.sum()
            if max_degree == 0:
                continue
            previous = torch.ones_like(block_t)  # C_0
            current = block_t * first_coefficient(alpha)  # C_1
            moments[1] += torch.dot(block_weights, current)
            for n, (a, b) in enumerate(steps, start=2):
                previous.mul_(-b).addcmul_(block_t, current, value=a)  # C_n into C_{n-2}'s buffer
                previous, current = current, previous
                moments[n] += torch.dot(block_weights, current)
        return moments


def zonal_by_level(cosines: torch.Tensor, level_sizes: list[int], ambient_dim: int) -> torch.Tensor:
    """Z_{n(m)}(t_m) for columns grouped by degree: t [..., M] -> [..., M].

    Column block k (of ``level_sizes[k]`` columns, possibly 0) gets degree k. One fused in-place
    recurrence runs over a copy (``zonal_by_level_``); with autograd its derivative is the closed
    form dZ_n / dt = (n + alpha) / alpha s C_{n-1}^{alpha+1}(t), the same recurrence one dimension
    up (``_ZonalByLevel``), differentiable again to any order.
    """
    if torch.is_grad_enabled() and cosines.requires_grad:
        return _ZonalByLevel.apply(cosines, tuple(level_sizes), ambient_dim)
    return zonal_by_level_(cosines.clone(), level_sizes, ambient_dim)


@functools.lru_cache(maxsize=64)
def signed_recurrence(max_degree: int, alpha: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(g_k, w_k) for k = 0..L of the one-operation form of the recurrence.

    With s_0 = s_1 = 1, s_k = b_k s_{k-2} and signs e_k = (-1)^{floor(k / 2)}, the rescaled
    E_k = e_k C_k / s_k obey E_k = g_k t E_{k-1} + E_{k-2} (k >= 2), g_k = a_k e_k s_{k-1} /
    (e_{k-1} s_k), one fused multiply-add per degree with no sign change or rescaling of E_{k-2};
    E_0 = 1, E_1 = c_1 t. Then Z_k = w_k E_k with w_k = (n + alpha) / alpha e_k s_k (g_0 = g_1 = 0
    are unused). The b_k are positive for every d >= 2, so the rescaling is a positive constant.
    alpha = (d - 2) / 2 is a half-integer, so every coefficient is computed exactly (rationals)
    and rounded once: an error in the coefficients grows like L^2 along the recurrence.
    """
    exact_alpha = Fraction(alpha).limit_denominator(2)

    def numerators(k: int) -> tuple[Fraction, Fraction]:
        return _numerators(k, exact_alpha)

    scales, signs, steps = [Fraction(1), Fraction(1)], [1, 1], [Fraction(0), Fraction(0)]
    for k in range(2, max_degree + 1):
        scaled_a, scaled_b = numerators(k)
        scales.append(scaled_b / k * scales[k - 2])
        signs.append(-signs[k - 2])
        steps.append(scaled_a / k * signs[k] * scales[k - 1] / (signs[k - 1] * scales[k]))
    factors = [
        Fraction(max(k, 1)) if exact_alpha == 0 else (k + exact_alpha) / exact_alpha
        for k in range(max_degree + 1)
    ]  # (n + alpha) / alpha, its d = 2 limit n (1 for n = 0)
    weights = tuple(float(factors[k] * signs[k] * scales[k]) for k in range(max_degree + 1))
    return tuple(float(step) for step in steps[: max_degree + 1]), weights


def zonal_by_level_(
    cosines: torch.Tensor, level_sizes: list[int], ambient_dim: int
) -> torch.Tensor:
    """``zonal_by_level`` in place: t [..., M] is overwritten by Z_{n(m)}(t_m) and returned.

    One recurrence for all columns, in the form of ``signed_recurrence`` (one multiply-add per
    degree and entry): step k updates only the columns of degree >= k (a suffix, the columns being
    grouped by degree), and the columns of degree k are written back into t (times w_k) as soon as
    E_k is known, since their t is not read again. Two buffers the size of the suffix of degree
    >= 2, no per-level Python loop beyond the degrees themselves, no autograd.
    """
    alpha = (ambient_dim - 2) / 2
    offsets = [0]
    for size in level_sizes:
        offsets.append(offsets[-1] + size)
    max_degree = max((k for k, size in enumerate(level_sizes) if size), default=0)
    steps, weights = signed_recurrence(max_degree, alpha)
    first = first_coefficient(alpha)
    t = cosines
    with torch.no_grad():
        if max_degree >= 2:
            tail = t[..., offsets[2] :]  # degrees >= 2: [..., M_2]
            one = tail.new_ones(())
            previous = tail * first  # E_1
            current = torch.addcmul(one, tail, tail, value=steps[2] * first)  # E_2 = g_2 t E_1 + 1
            for k in range(2, max_degree + 1):
                start = offsets[k] - offsets[2]  # the suffix of degree >= k
                if k >= 3:
                    later = previous[..., start:]
                    later.addcmul_(tail[..., start:], current[..., start:], value=steps[k])  # E_k
                    previous, current = current, previous
                done = current[..., start : start + level_sizes[k]]  # E_k of degree k
                torch.mul(done, weights[k], out=t[..., offsets[k] : offsets[k + 1]])
        if len(level_sizes) > 1:
            t[..., offsets[1] : offsets[2]].mul_(first * weights[1])
        t[..., : offsets[1]].fill_(1.0)
    return t


# ---------------------------------------------------------------------------- custom autograd


class _ZonalByLevel(torch.autograd.Function):
    """``zonal_by_level`` with the closed-form derivative (seed 000 eq. B.7): for a column of
    degree n >= 1, dZ_n^alpha / dt = z_n s C_{n-1}^{alpha+1}(t) = (z_n s / z'_{n-1})
    Z_{n-1}^{alpha+1}(t), with z_n = (n + alpha) / alpha (``zonal_factor``), s = 2 alpha
    (``derivative_scale``; 2 for alpha = 0) and z'_{n-1} the zonal factor of alpha + 1: the
    columns of degree >= 1 as degree n - 1 in ambient dimension d + 2; degree-0 columns are
    constant. Forward and backward are each one in-place recurrence (``zonal_by_level_``) where
    autograd through the out-of-place recurrence kept every degree's intermediate and spent
    about 6 times the forward's time in its backward (slices of zeros added per degree)."""

    @staticmethod
    def forward(
        ctx: Any, cosines: torch.Tensor, level_sizes: tuple[int, ...], ambient_dim: int
    ) -> torch.Tensor:
        ctx.save_for_backward(cosines)
        ctx.level_sizes, ctx.ambient_dim = level_sizes, ambient_dim
        return zonal_by_level_(cosines.detach().clone(), list(level_sizes), ambient_dim)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (cosines,) = ctx.saved_tensors  # t [..., M]
        sizes, ambient_dim = ctx.level_sizes, ctx.ambient_dim
        alpha = (ambient_dim - 2) / 2
        constant = sizes[0]  # the degree-0 columns come first
        if len(sizes) == 1:  # degree 0 only: constant columns
            return torch.zeros_like(grad_output), None, None
        scales = [
            zonal_factor(n, alpha) * derivative_scale(alpha) / zonal_factor(n - 1, alpha + 1)
            for n in range(1, len(sizes))
        ]
        column_scales = torch.repeat_interleave(
            torch.tensor(scales, dtype=cosines.dtype, device=cosines.device),
            torch.tensor(sizes[1:], device=cosines.device),
            output_size=cosines.shape[-1] - constant,
        )  # [M - M_0]
        shifted = zonal_by_level(cosines[..., constant:], list(sizes[1:]), ambient_dim + 2)
        derivative = torch.cat(
            [torch.zeros_like(cosines[..., :constant]), shifted * column_scales], dim=-1
        )  # dZ / dt [..., M]
        return grad_output * derivative, None, None


class _Gegenbauer(torch.autograd.Function):
    """All degrees forward; back, the closed-form derivative s C_{n-1}^{alpha+1}."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, max_degree: int, alpha: float) -> torch.Tensor:
        ctx.save_for_backward(t)
        ctx.max_degree, ctx.alpha = max_degree, alpha
        return gegenbauer_stack(t, max_degree, alpha)  # [..., L + 1]

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (t,) = ctx.saved_tensors
        if ctx.max_degree == 0:
            return torch.zeros_like(t), None, None
        shifted = _Gegenbauer.apply(t, ctx.max_degree - 1, ctx.alpha + 1)  # [..., L]
        derivative = derivative_scale(ctx.alpha) * shifted  # [..., L], degrees 1..L
        return (grad_output[..., 1:] * derivative).sum(-1), None, None


def gegenbauer_differentiable(t: torch.Tensor, max_degree: int, alpha: float) -> torch.Tensor:
    """C_0..C_L at t: [..., L + 1], differentiable to any order by d/dt C_n = s C_{n-1}^{alpha+1}."""
    return _Gegenbauer.apply(t, max_degree, alpha)


class _GegenbauerSeries(torch.autograd.Function):
    """S(t; c) = sum_n c_n C_n^alpha(t), differentiable to any order in t and c.

    dS/dt = sum_{n>=1} c_n s C_{n-1}^{alpha+1}(t) (a series again), dS/dc_n = C_n^alpha(t), so
    the gradient in c is the moments sum_i g_i C_n(t_i) of the incoming gradient g
    (``gegenbauer_moments`` when there is one set of coefficients and no second derivative is
    being built; stacked autograd operations otherwise).
    """

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, coeffs: torch.Tensor, alpha: float) -> torch.Tensor:
        ctx.save_for_backward(t, coeffs)
        ctx.alpha = alpha
        return series_no_grad(t, coeffs, alpha)

    @staticmethod
    def backward(
        ctx: Any, grad_output: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        t, coeffs = ctx.saved_tensors
        alpha = ctx.alpha
        max_degree = coeffs.shape[-1] - 1
        grad_t: torch.Tensor | None = None
        grad_coeffs: torch.Tensor | None = None
        if ctx.needs_input_grad[0]:
            if max_degree == 0:
                grad_t = torch.zeros_like(t)
            else:
                shifted = coeffs[..., 1:] * derivative_scale(alpha)  # [..., L]
                derivative = _GegenbauerSeries.apply(t, shifted, alpha + 1)
                grad_t = (grad_output * derivative).sum_to_size(t.shape)
        if ctx.needs_input_grad[1] and coeffs[..., 0].numel() == 1 \
                and not torch.is_grad_enabled():  # fmt: skip
            # one set of coefficients, no second derivative: the moments of grad_output, in cache
            moments = gegenbauer_moments(t, grad_output, max_degree, alpha)  # [L + 1]
            grad_coeffs = moments.to(coeffs.dtype).reshape(coeffs.shape)
        elif ctx.needs_input_grad[1]:
            batch = coeffs.shape[:-1]
            grad_coeffs = torch.stack(
                [
                    (grad_output * c_n).sum_to_size(batch) if batch else (grad_output * c_n).sum()
                    for c_n in gegenbauer_iter(t, max_degree, alpha)
                ],
                dim=-1,
            )  # [*batch, L + 1]
        return grad_t, grad_coeffs, None


def series_differentiable(t: torch.Tensor, coeffs: torch.Tensor, alpha: float) -> torch.Tensor:
    """sum_n coeffs[..., n] C_n^alpha(t) (``series_no_grad``), differentiable in t and coeffs."""
    return _GegenbauerSeries.apply(t, coeffs, alpha)
