r"""Sphere geometry: input maps onto :math:`\mathbb{S}^{d-1}` and the Riemannian maps of the sphere.

**Input maps** take a model's raw inputs to the representation its kernel reads. ``SphereEmbedding``
lifts data :math:`x \in \mathbb{R}^D` to :math:`[x, b] \in \mathbb{R}^{D+1}` (the kernel is then the
1-homogeneous extension of a zonal kernel on :math:`\mathbb{S}^D`); ``OnSphere`` passes inputs that
already are unit vectors through, after a check.

**Sphere maps** (seed 004 sec. 2.1 and 3.1), on :math:`\mathbb{S}^{d-1}` in :math:`\mathbb{R}^d`
with :math:`x \cdot x = 1`:

.. math::

    \text{tangent projection} \quad & P_x v = v - (x \cdot v)\, x, \\
    \text{exponential map} \quad & \exp_x(v) = \cos(\lvert v \rvert)\, x
    + \sin(\lvert v \rvert)\, v / \lvert v \rvert \qquad (v \text{ tangent at } x), \\
    \text{logarithm map} \quad & \log_x(y) = \theta\, (y - \cos(\theta)\, x) / \sin(\theta), \qquad
    \theta = \arccos(x \cdot y), \\
    \text{geodesic distance} \quad & d(x, y) = \theta
    = \operatorname{atan2}(\lvert x \wedge y \rvert, x \cdot y).

:math:`\sin(s) / s` and :math:`\theta / \sin(\theta)` use their Taylor series below a small angle,
so the maps are exact (and differentiable) at :math:`v = 0` and :math:`y = x`. The logarithm is
undefined at the antipode :math:`y = -x`.

The embedding: appending a bias :math:`b \ne 0` puts the data on the hyperplane
:math:`\{x_{D+1} = b\}` of :math:`\mathbb{R}^{D+1}`; projecting radially maps it one-to-one onto the
open hemisphere of :math:`\mathbb{S}^D` on :math:`b`'s side. A GP :math:`g` on the sphere is carried
back to the data by the 1-homogeneous extension :math:`f(x) = r\, g(z)` with :math:`r = \|[x, b]\|`
(seed 000 eq. 7, Fig. 2), so a Gaussian prediction :math:`\mathcal{N}(m, v)` of :math:`g(z)`
becomes

.. math::

    \text{mean} = m r, \qquad \text{variance} = v r^2, \qquad
    \text{covariance between } x_i \text{ and } x_j = C_{ij} r_i r_j.

Input relevance (ARD): ``SphereEmbedding(input_scales=...)`` embeds :math:`[s \odot x, b]` instead,
with one learnable :math:`s_d > 0` per input column, and the radius becomes
:math:`r = \|[s \odot x, b]\|`; every model that reads its inputs through the embedding (SVGP,
SGPR, the DGPs' first layer, the residual DGP) then learns the scales with its other
hyperparameters (the SGPR by the scheme of ``zonal.models.sgpr``).

This module is the one owner of sphere geometry in zonal (docs/design.md).
"""

from __future__ import annotations

import math

import torch
from gpytorch.constraints import Positive
from torch import nn

from zonal._validation import check_finite, check_unit_vectors, unit_tolerance

#: below this angle (radians) sin(s) / s and s / sin(s) are taken from their Taylor series
SMALL_ANGLE = 1e-4


class InputMap(nn.Module):
    """Raw inputs :math:`x` [..., D] -> the kernel's inputs [..., ambient_dim(D)].

    ``homogeneous`` says whether the lifted inputs carry a radius (the kernel must then be the
    1-homogeneous extension of a zonal kernel, ``homogeneous=True``) or are unit vectors.
    """

    homogeneous: bool = False

    def ambient_dim(self, input_dim: int) -> int:
        """:math:`d`, the dimension of the space the sphere of the lifted inputs sits in."""
        raise NotImplementedError

    def lift(self, x: torch.Tensor) -> torch.Tensor:
        """The kernel's inputs [..., ambient_dim]."""
        raise NotImplementedError


class OnSphere(InputMap):
    r"""Inputs that already lie on :math:`\mathbb{S}^{d-1}`: checked to be finite unit vectors and
    passed through."""

    homogeneous = False

    def ambient_dim(self, input_dim: int) -> int:
        return int(input_dim)

    def lift(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`x` [..., d] itself, after checking :math:`\|x\| = 1` (``ValueError``
        otherwise)."""
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            raise ValueError("x must be a tensor [..., d] of unit vectors")
        check_unit_vectors(x, x.shape[-1], "inputs")
        return x


class EuclideanInput(InputMap):
    """Inputs used as they are, by a Euclidean kernel (the Euclidean layers of eq. 3.5)."""

    homogeneous = False

    def ambient_dim(self, input_dim: int) -> int:
        return int(input_dim)

    def lift(self, x: torch.Tensor) -> torch.Tensor:
        check_finite(x.reshape(-1, x.shape[-1]), "layer inputs")
        return x


class SphereEmbedding(InputMap):
    r""":math:`x` [..., D] -> (:math:`z` [..., D + 1] on :math:`\mathbb{S}^D`, :math:`r` [...]) with
    :math:`z = [s \odot x, b] / r`, :math:`r = \|[s \odot x, b]\|`.

    Without input scales (the default) :math:`s = 1`: :math:`z = [x, b] / \|[x, b]\|` (seed 000
    sec. 4.1). With ``input_scales`` the embedding learns one positive scale :math:`s_d` per input
    column, the zonal kernels' counterpart of ARD lengthscales: the homogeneous kernel then reads
    :math:`[s \odot x, b]`, so :math:`k(x, x') = r r' k_S(z \cdot z')` with the scaled radius
    :math:`r = \|[s \odot x, b]\|`, and :math:`s_d \to 0` makes the model ignore column :math:`d`
    (it is the unscaled embedding of :math:`s \odot x`, exactly).

    Args:
        bias: :math:`b > 0` (its sign is a reflection of the sphere, so :math:`b > 0` loses nothing;
            :math:`b = 0` would let :math:`x = 0` have no direction).
        learn_bias: learn :math:`b` (kept positive by GPyTorch's ``Positive`` constraint) or keep it
            fixed.
        input_scales: None (no scales), a number (every :math:`s_d`; give ``input_dim``) or a tensor
            [D] of initial values, all finite and > 0.
        learn_input_scales: learn :math:`s` (kept positive by a ``Positive`` constraint) or keep it
            fixed.
        input_dim: :math:`D`; needed when ``input_scales`` is a number, checked against a tensor's
            length.
        dtype: dtype of :math:`b` and :math:`s` (float64 by default).
    """

    fixed_bias: torch.Tensor  # buffers (a fixed bias, fixed input scales)
    fixed_input_scales: torch.Tensor

    homogeneous = True

    def __init__(
        self,
        bias: float = 1.0,
        *,
        learn_bias: bool = False,
        input_scales: float | torch.Tensor | None = None,
        learn_input_scales: bool = True,
        input_dim: int | None = None,
        dtype: torch.dtype = torch.float64,
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
        self.learn_input_scales = bool(learn_input_scales) and input_scales is not None
        if input_scales is None:
            if input_dim is not None:
                raise ValueError("input_dim is only read with input_scales; drop it or give scales")
            return
        scales = _initial_input_scales(input_scales, input_dim, dtype)  # [D]
        self.input_scales_constraint = Positive()
        if self.learn_input_scales:
            raw = self.input_scales_constraint.inverse_transform(scales)
            self.raw_input_scales = nn.Parameter(raw)
        else:
            self.register_buffer("fixed_input_scales", scales)

    @property
    def bias(self) -> torch.Tensor:
        """:math:`b > 0`, a scalar tensor."""
        if self.learn_bias:
            return self.bias_constraint.transform(self.raw_bias)
        return self.fixed_bias

    @property
    def has_input_scales(self) -> bool:
        """Whether the embedding scales its inputs (``input_scales`` given)."""
        return hasattr(self, "input_scales_constraint")

    @property
    def input_scales(self) -> torch.Tensor | None:
        """:math:`s` [D] > 0, or None without input scales."""
        if not self.has_input_scales:
            return None
        if self.learn_input_scales:
            return self.input_scales_constraint.transform(self.raw_input_scales)
        return self.fixed_input_scales

    def ambient_dim(self, input_dim: int) -> int:
        return int(input_dim) + 1

    def lift(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`[s \odot x, b]` [..., D + 1] (the point on the hyperplane :math:`x_{D+1} = b`;
        :math:`s = 1` without input scales)."""
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            raise ValueError("x must be a tensor [..., D] with D >= 1")
        check_finite(x, "x")
        scales = self.input_scales
        if scales is not None:
            if x.shape[-1] != len(scales):
                raise ValueError(
                    f"x has {x.shape[-1]} columns but the embedding has {len(scales)} input "
                    f"scales, got shape {tuple(x.shape)}"
                )
            x = x * scales.to(dtype=x.dtype, device=x.device)  # [..., D]
        bias = self.bias.to(dtype=x.dtype, device=x.device).expand(*x.shape[:-1], 1)
        return torch.cat([x, bias], dim=-1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r""":math:`(z, r)`: unit vectors :math:`z` [..., D + 1] and radii
        :math:`r = \|[s \odot x, b]\|` [...] (:math:`r \ge b > 0`)."""
        lifted = self.lift(x)  # [..., D + 1]
        radius = lifted.norm(dim=-1)  # [...]
        return lifted / radius.unsqueeze(-1), radius

    def radius(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`r = \|[s \odot x, b]\| = \sqrt{\|s \odot x\|^2 + b^2}` [...]."""
        return self.lift(x).norm(dim=-1)

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        """:math:`x` [..., D] from :math:`z` [..., D + 1] on :math:`b`'s hemisphere:
        :math:`x = b z_{:D} / (s z_{D+1})`."""
        last = z[..., -1:]
        if (last <= 0).any():
            raise ValueError(
                "z must lie on the open hemisphere z_{D+1} > 0 (the image of the data)"
            )
        x = self.bias.to(dtype=z.dtype, device=z.device) * z[..., :-1] / last  # [..., D]
        scales = self.input_scales
        return x if scales is None else x / scales.to(dtype=z.dtype, device=z.device)

    @staticmethod
    def to_data_scale(
        mean: torch.Tensor, variance: torch.Tensor, radius: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Predictions on the sphere to the data:
        :math:`(\mathtt{mean} \cdot r, \mathtt{variance} \cdot r^2)`, all [...]."""
        return mean * radius, variance * radius**2

    @staticmethod
    def covariance_to_data_scale(covariance: torch.Tensor, radius: torch.Tensor) -> torch.Tensor:
        """:math:`C` [..., N, N] on the sphere to the data: :math:`C_{ij} r_i r_j`, :math:`r`
        [..., N]."""
        return covariance * radius.unsqueeze(-1) * radius.unsqueeze(-2)


def _initial_input_scales(
    input_scales: float | torch.Tensor, input_dim: int | None, dtype: torch.dtype
) -> torch.Tensor:
    """The initial s [D] (float64 by default): finite and > 0, of length ``input_dim``."""
    if isinstance(input_scales, bool):
        raise ValueError(f"input_scales must be a number or a tensor [D], got {input_scales!r}")
    if input_dim is not None and (
        isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1
    ):
        raise ValueError(f"input_dim must be a positive integer, got {input_dim!r}")
    scales = torch.as_tensor(input_scales, dtype=dtype).detach().clone()
    if scales.dim() == 0:
        if input_dim is None:
            raise ValueError("a single input scale needs input_dim (the number of input columns)")
        scales = scales.expand(int(input_dim)).clone()
    if scales.dim() != 1 or len(scales) == 0:
        raise ValueError(f"input_scales must be a tensor [D], got shape {tuple(scales.shape)}")
    if input_dim is not None and len(scales) != input_dim:
        raise ValueError(f"input_scales has length {len(scales)} but input_dim is {input_dim}")
    if not bool(torch.isfinite(scales).all()) or bool((scales <= 0).any()):
        raise ValueError(f"input_scales must be finite and > 0, got {scales.tolist()}")
    return scales


# ---------------------------------------------------------------------------------- sphere maps
def _check_same_shape(x: torch.Tensor, other: torch.Tensor, name: str) -> None:
    if x.shape[-1:] != other.shape[-1:]:
        raise ValueError(
            f"points and {name} must share the last dimension, got {tuple(x.shape)} and "
            f"{tuple(other.shape)}"
        )


def _sinc(angle: torch.Tensor) -> torch.Tensor:
    """sin(s) / s, with 1 - s^2 / 6 + s^4 / 120 below ``SMALL_ANGLE`` (exact there in float64)."""
    small = angle.abs() < SMALL_ANGLE
    safe = torch.where(small, torch.ones_like(angle), angle)
    squared = angle * angle
    return torch.where(small, 1 - squared / 6 + squared * squared / 120, torch.sin(safe) / safe)


def project_to_tangent(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r""":math:`P_x v = v - (x \cdot v)\, x` [..., d]: the component of :math:`v` tangent to the
    sphere at :math:`x`."""
    _check_same_shape(x, v, "vectors")
    return v - (x * v).sum(-1, keepdim=True) * x


def exp_map(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r""":math:`\exp_x(v) = \cos\lvert v \rvert\, x + \sin\lvert v \rvert\, v / \lvert v \rvert`
    [..., d] for tangent vectors :math:`v` at points :math:`x`.

    The result is renormalised (one rounding step) so that it lies on the sphere to machine
    precision; :math:`v = 0` gives :math:`x` exactly. :math:`v` is not projected: pass
    ``project_to_tangent(x, v)``.
    """
    _check_same_shape(x, v, "tangent vectors")
    norm = v.norm(dim=-1, keepdim=True)  # [..., 1]
    point = torch.cos(norm) * x + _sinc(norm) * v  # [..., d]
    return point / point.norm(dim=-1, keepdim=True)


def geodesic_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r""":math:`d(x, y) = \operatorname{atan2}(\lvert x \wedge y \rvert, x \cdot y)` [...] (accurate
    near 0 and :math:`\pi`, unlike :math:`\arccos(x \cdot y)`)."""
    _check_same_shape(x, y, "points")
    cosine = (x * y).sum(-1)  # [...]
    sine = (y - cosine.unsqueeze(-1) * x).norm(dim=-1)  # |x ^ y| for unit x
    return torch.atan2(sine, cosine)


def log_map(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r""":math:`\log_x(y)` [..., d]: the tangent vector at :math:`x` of length :math:`d(x, y)`
    pointing along the geodesic.

    Raises ``ValueError`` for antipodal pairs (:math:`y = -x`), where no unique geodesic exists.
    """
    _check_same_shape(x, y, "points")
    cosine = (x * y).sum(-1, keepdim=True)  # [..., 1]
    direction = y - cosine * x  # [..., d], norm sin(theta)
    angle = torch.atan2(direction.norm(dim=-1, keepdim=True), cosine)  # [..., 1]
    if bool((math.pi - angle < math.sqrt(unit_tolerance(x.dtype))).any()):
        raise ValueError("log_map is undefined for antipodal points (y = -x)")
    return direction / _sinc(angle)
