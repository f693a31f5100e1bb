r"""Arc-cosine kernels of orders 0, 1, 2 (Cho and Saul 2009; seed 000 eq. 7, appendix C).

Cho and Saul: for :math:`w \sim \mathcal{N}(0, I_d)` and the activation
:math:`\operatorname{relu}^m` (the step function for :math:`m = 0`),

.. math::

    2\, \mathbb{E}_w\big[\operatorname{relu}(w \cdot x)^m \operatorname{relu}(w \cdot x')^m\big]
    &= \frac{1}{\pi} \|x\|^m \|x'\|^m J_m(\theta), \\
    J_0 = \pi - \theta, \qquad J_1 &= \sin\theta + (\pi - \theta) \cos\theta, \\
    J_2 &= 3 \sin\theta \cos\theta + (\pi - \theta) (1 + 2 \cos^2\theta),

with :math:`\theta` the angle between :math:`x` and :math:`x'`. zonal uses the shape normalised to
:math:`s_m(1) = 1`:

.. math::

    s_m(t) = J_m(\arccos t) / J_m(0), \qquad J_m(0) = \pi,\ \pi,\ 3 \pi.

Eigenvalues (exact): write :math:`w = r u` with :math:`u` uniform on :math:`\mathbb{S}^{d-1}` and
:math:`\mathbb{E}[r^{2m}] = 1,\ d,\ d (d + 2)`, and expand the activation by Funk-Hecke,
:math:`a_m(u \cdot x) = \sum_n c_n Z_n(u \cdot x)`. The reproducing property
:math:`\mathbb{E}_u[Z_n(u \cdot x) Z_k(u \cdot x')] = \delta_{nk} Z_n(x \cdot x')` leaves

.. math::

    \lambda_n = 2\, \mathbb{E}[r^{2m}]\, c_n^2 / (J_m(0) / \pi)
    = 2 c_n^2,\ \ 2 d c_n^2,\ \ 2 d (d + 2) c_n^2 / 3.

For :math:`m = 1` the :math:`c_n` are the closed-form ReLU coefficients of seed 000 eqs. C.19-C.20
(``zonal.harmonics.arccos_eigenvalues``); for :math:`m = 0, 2` they come from Funk-Hecke quadrature
split at the kink :math:`t = 0`, which is exact for these piecewise polynomials.

Numerics: :math:`dJ_1/dt = J_0`, :math:`dJ_2/dt = 4 J_1` and :math:`dJ_0/dt = 1 / \sqrt{1 - t^2}`
are used as the backward pass, so gradients are finite and exact for orders 1 and 2 at
:math:`t = \pm 1` (where the naive autograd of :math:`\sqrt{1 - t^2}` and :math:`\arccos(t)` gives
:math:`\infty - \infty = \mathrm{NaN}`). Order 0 has an infinite slope at :math:`t = \pm 1`
(the kernel is not differentiable at coincident or antipodal points); its derivative there is taken
as 0, a supergradient of the cone :math:`\theta \mapsto -\lvert\theta\rvert`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from zonal.harmonics import arccos_eigenvalues, funk_hecke
from zonal.kernels.base import ZonalKernel
from zonal.kernels.tiles import CosineMap

SUPPORTED_ORDERS = (0, 1, 2)
_J_AT_ZERO = (math.pi, math.pi, 3 * math.pi)


def check_order(order: object) -> int:
    """Return ``order`` if it is a supported arc-cosine order (0, 1 or 2), else raise."""
    if isinstance(order, bool) or not isinstance(order, int) or order not in SUPPORTED_ORDERS:
        raise ValueError(f"arc-cosine order must be one of {SUPPORTED_ORDERS}, got {order!r}")
    return order


def _one_minus_t_squared(t: torch.Tensor) -> torch.Tensor:
    return ((1 - t) * (1 + t)).clamp_min(0)  # (1 - t)(1 + t) keeps precision near t = +-1


# asin(sqrt(z)) / sqrt(z) = sum_k c_k z^k on z in [0, 1/2]: a least-squares fit of degree 18 at 72
# Chebyshev nodes in 60-digit arithmetic (mpmath); in float64 asin(u) = u P(u^2) is then within a
# few units in the last place (tests/test_kernels_compile.py checks it against mpmath).
ASIN_COEFFICIENTS = (
    1.0,
    0.16666666666664698,
    0.07500000000464965,
    0.04464285670805879,
    0.030381965879733276,
    0.022371516088920858,
    0.017365538221973773,
    0.013787393522368912,
    0.013339371341015819,
    -0.003617853254378451,
    0.08395286854574689,
    -0.3173198148176277,
    1.0687443494526074,
    -2.6258024403358178,
    4.864605144947002,
    -6.492606744847992,
    5.969206755315709,
    -3.3818467029693404,
    0.912261948607691,
)


def arcsin_polynomial(u: torch.Tensor) -> torch.Tensor:
    """asin(u) for |u| <= 1/sqrt(2) as u P(u^2), P the polynomial of ``ASIN_COEFFICIENTS``.

    P is evaluated by Estrin's scheme (pairs c_k + c_{k+1} z, then pairs of those with z^2, z^4,
    ...): the same operations as Horner's rule, but a dependency chain of log2(19) steps, not 18.
    """
    power = u * u  # z
    terms: list = list(ASIN_COEFFICIENTS)
    while len(terms) > 1:
        pairs = [low + high * power for low, high in zip(terms[::2], terms[1::2], strict=False)]
        terms = pairs + terms[len(pairs) * 2 :]
        power = power * power
    return u * terms[0]


def angle_from_sine(t: torch.Tensor, sine: torch.Tensor) -> torch.Tensor:
    """pi - arccos(t) from t and sine = sqrt(1 - t^2), by asin on [-1/sqrt(2), 1/sqrt(2)] only.

    With theta = arccos t: pi - theta = pi/2 + asin(t) where |t| <= sin theta, pi - asin(sin theta)
    where t > sin theta, asin(sin theta) where t < -sin theta. Compiled, this polynomial is about
    2x faster than the vectorised library arccos (and keeps the relative accuracy of pi - theta near
    t = -1, which pi - arccos(t) loses); eager PyTorch runs ``torch.arccos`` instead.
    """
    if not torch.compiler.is_compiling():
        return torch.arccos(t).neg_().add_(math.pi)
    middle = t.abs() <= sine
    arcsine = arcsin_polynomial(torch.where(middle, t, sine))
    outer = torch.where(t > 0, math.pi - arcsine, arcsine)
    return torch.where(middle, math.pi / 2 + arcsine, outer)


def _sine_and_angle(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """sin theta = sqrt((1 - t)(1 + t)) and pi - theta for theta = arccos t (fresh buffers)."""
    sine = torch.sub(1, t).mul_(t + 1).clamp_min_(0).sqrt_()  # (1 - t)(1 + t): precise near +-1
    return sine, angle_from_sine(t, sine)


def arccos_values(t: torch.Tensor, order: int) -> torch.Tensor:
    """s_order(t) = J_order(arccos t) / J_order(0) without autograd, t clamped to [-1, 1].

    In place on fresh buffers, so t is not modified (the module docstring has J_0, J_1, J_2).
    Divisions are multiplications by reciprocals (cheaper; s_m(1) = 1 still holds exactly).
    """
    t = t.clamp(-1, 1)
    sine, angle = _sine_and_angle(t)
    if order == 0:
        return angle.mul_(1 / math.pi)  # (pi - theta) / pi
    if order == 1:
        return sine.addcmul_(t, angle).mul_(1 / math.pi)  # (sin theta + (pi - theta) t) / pi
    # (3 t sin theta + (pi - theta)(1 + 2 t^2)) / (3 pi)
    cubic = sine.mul_(t).mul_(3).addcmul_(angle, torch.mul(t, t).mul_(2).add_(1))
    return cubic.mul_(1 / (3 * math.pi))


def relu_pair_values(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(s_0(t), s_1(t)) sharing one arccos and one square root, t in [-1, 1] (no autograd)."""
    sine, angle = _sine_and_angle(t)
    first = sine.addcmul_(t, angle).mul_(1 / math.pi)
    return angle.mul_(1 / math.pi), first


def _order_zero_slope(t: torch.Tensor) -> torch.Tensor:
    """ds_0/dt = 1 / (pi sqrt(1 - t^2)) inside (-1, 1); 0 at t = +-1 (see module docstring)."""
    inside = t.abs() < 1
    safe = torch.where(inside, _one_minus_t_squared(t), torch.ones_like(t))
    return torch.where(inside, safe.rsqrt() / math.pi, torch.zeros_like(t))


class _ArcCosShape(torch.autograd.Function):
    """s_m(t) with the backward pass ds_1/dt = s_0, ds_2/dt = (4/3) s_1 (J_m' identities)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, order: int) -> torch.Tensor:
        low, high = torch.aminmax(t) if t.numel() else (t.new_zeros(()), t.new_zeros(()))
        if low < -1 or high > 1:  # rounding: evaluate (and differentiate) at the clamped value
            t = t.clamp(-1, 1)
        ctx.save_for_backward(t)
        ctx.order = order
        return arccos_values(t, order)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        (t,) = ctx.saved_tensors
        if ctx.order == 0:
            slope = _order_zero_slope(t)
        elif ctx.order == 1:
            slope = _ArcCosShape.apply(t, 0)
        else:
            slope = _ArcCosShape.apply(t, 1) * (4.0 / 3.0)
        return grad_output * slope, None


def arccos_shape(t: torch.Tensor, order: int = 1) -> torch.Tensor:
    r"""Normalised arc-cosine shape :math:`s_m(t) = J_m(\arccos t) / J_m(0)`, :math:`t` clamped to
    :math:`[-1, 1]`.

    :math:`s_0 = 1 - \theta / \pi`;
    :math:`s_1 = (\sqrt{1 - t^2} + t (\pi - \arccos t)) / \pi` (seed 000 eq. 7);
    :math:`s_2 = (3 t \sqrt{1 - t^2} + (\pi - \arccos t)(1 + 2 t^2)) / (3 \pi)`. Gradients are
    finite at :math:`t = \pm 1`; a :math:`t` outside :math:`[-1, 1]` (rounding) is evaluated and
    differentiated at the clamped value.
    """
    order = check_order(order)
    return _ArcCosShape.apply(t, order)


def _activation(order: int) -> Callable[[torch.Tensor], torch.Tensor]:
    if order == 0:
        return lambda t: (t > 0).to(t.dtype)
    return lambda t: torch.relu(t) ** order


def arccos_kernel_eigenvalues(
    ambient_dim: int, max_degree: int, order: int = 1, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    r"""Eigenvalues :math:`\lambda_0, \dots, \lambda_L` [L + 1] of :math:`s_\text{order}` on
    :math:`\mathbb{S}^{d-1}` (see the module docstring)."""
    order = check_order(order)
    if order == 1:
        return arccos_eigenvalues(ambient_dim, max_degree, dtype=dtype)
    coefficients = funk_hecke(
        _activation(order),
        ambient_dim,
        max_degree,
        kinks=(0.0,),
        num_nodes=max(max_degree + 8, 64),
        dtype=dtype,
    )  # [L + 1], exact: piecewise polynomial of degree <= order
    radial_moment = 1.0 if order == 0 else ambient_dim * (ambient_dim + 2)
    return 2 * radial_moment * coefficients**2 / (_J_AT_ZERO[order] / math.pi)


class ArcCosineKernel(ZonalKernel):
    r"""Arc-cosine kernel of order 0, 1 or 2: :math:`k(x, x') = s_\text{order}(x \cdot x')`
    (normalised, :math:`s(1) = 1`).

    With ``homogeneous=True`` it takes raw vectors and returns
    :math:`\|x\| \|x'\|\, s_\text{order}(\cos\theta)`; for order 1 that is exactly Cho and Saul's
    kernel :math:`(1/\pi) \|x\| \|x'\| J_1(\theta)` (seed 000 eq. 7). (For orders 0 and 2 Cho and
    Saul's kernel is :math:`m`-homogeneous, :math:`\|x\|^m \|x'\|^m`; zonal keeps the 1-homogeneous
    extension that the sphere embedding undoes.) Scale with ``gpytorch.kernels.ScaleKernel``.
    Eigenvalues are exact (module docstring).
    """

    def __init__(self, ambient_dim: int, order: int = 1, **kwargs: Any) -> None:
        self.order = check_order(order)
        super().__init__(ambient_dim, **kwargs)

    def shape(self, t: torch.Tensor) -> torch.Tensor:
        return arccos_shape(t, self.order)

    def closed_form_map(self, dtype: torch.dtype, device: torch.device) -> CosineMap:
        return CosineMap(arccos_values, (self.order,))

    def spectrum_settings(self) -> tuple:
        return (*super().spectrum_settings(), self.order)

    def _compute_eigenvalues(self, max_degree: int) -> torch.Tensor:
        values = arccos_kernel_eigenvalues(
            self.ambient_dim, max_degree, self.order, dtype=self.dtype
        ).to(self.device)  # [L + 1]: on the anchor's device (the kernel has no hyperparameters)
        return values.expand(*self.batch_shape, max_degree + 1)
