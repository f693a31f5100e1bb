r"""Gaussian vector fields on :math:`\mathbb{S}^{d-1}` (seed 004 sec. 3.1.1, after Hutchinson et
al. 2021).

A Gaussian vector field :math:`v` on the sphere has :math:`v(x)` in the tangent space
:math:`T_x \mathbb{S}^{d-1} = \{u : x \cdot u = 0\}`. Both constructions here write it as a matrix
field :math:`A(x)` [d, P] with tangent columns applied to a :math:`P`-output GP :math:`g` on the
sphere (:math:`P` independent outputs sharing one kernel and one set of inducing features, each
with its own whitened :math:`q(u)`):

.. math::

    \text{projected (eq. 3.1):} \quad & v(x) = P_x g(x), \qquad P_x = I - x x^\top, \qquad
    g = (g_1, \dots, g_d), \qquad P = d; \\
    \text{coordinate frame:} \quad & v(x) = \sum_{i < d} g_i(x) e_i(x) = E(x) g(x), \qquad
    P = d - 1,

so that :math:`\operatorname{Cov}(v(x), v(x')) = A(x) \operatorname{Cov}(g(x), g(x')) A(x')^\top`;
under the prior of the projected construction this is :math:`k(x, x') P_x P_{x'}`. A doubly
stochastic layer draws :math:`g` at each point from its marginal
:math:`q(g(x)) = \mathcal{N}(\mu, \operatorname{diag}(\sigma^2))` and maps it,
:math:`v = A(x) (\mu + \sigma \odot \varepsilon)`: an exact draw of :math:`v(x)`'s marginal.

The frame is parallel transport from a pole :math:`p`: with :math:`b_1, \dots, b_{d-1}` an
orthonormal basis of :math:`T_p`,

.. math::

    e_i(x) = b_i - \frac{x \cdot b_i}{1 + p \cdot x} (p + x),

the transport of :math:`b_i` along the great circle from :math:`p` to :math:`x`. It is orthonormal,
tangent and smooth everywhere except at the antipode :math:`-p`, where :math:`1 + p \cdot x = 0`
and the frame has no limit (on :math:`\mathbb{S}^2` every frame has such a point: the hairy ball
theorem). Inputs within :math:`\sqrt{\mathrm{eps}}` of :math:`1 + p \cdot x = 0` raise
``FrameSingularityError``. The default pole is the last axis :math:`e_d`, so that the singular
point :math:`-e_d` lies outside the image of ``SphereEmbedding`` (the open hemisphere
:math:`x_d > 0`). A user frame (a function :math:`x \mapsto E(x)`) is checked to be tangent at
every call (``NotTangentError``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.kernels import Kernel, ScaleKernel
from linear_operator.operators import DenseLinearOperator
from torch import nn

from zonal._validation import check_ambient_dim, check_unit_vectors, unit_tolerance
from zonal.features import InducingFeatures, InducingPoints
from zonal.features.base import base_zonal_kernel
from zonal.geometry import OnSphere, project_to_tangent
from zonal.kernels import IntrinsicHeatKernel, IntrinsicMaternKernel
from zonal.models.dgp import DGPLayer
from zonal.variational import InterDomainVariationalStrategy

Frame = Callable[[torch.Tensor], torch.Tensor]


class NotTangentError(ValueError):
    """A vector field or frame that should be tangent to the sphere has a normal component."""


class FrameSingularityError(ValueError):
    """A point sits at the singular point of a coordinate frame (the antipode of its pole)."""


def sphere_kernel(
    ambient_dim: int,
    nu: float = 2.5,
    *,
    lengthscale: float = 1.0,
    outputscale: float = 1.0,
    homogeneous: bool = False,
    max_degree: int = 30,
) -> ScaleKernel:
    """sigma^2 k_nu on S^{d-1}: the intrinsic Matérn-nu kernel (seed 004 eq. 2.24) in a
    ``ScaleKernel``, or the heat kernel for nu = inf; float64, unit prior variance before scaling."""
    if nu == math.inf:
        base = IntrinsicHeatKernel(ambient_dim, homogeneous=homogeneous, max_degree=max_degree)
    else:
        base = IntrinsicMaternKernel(
            ambient_dim, nu, homogeneous=homogeneous, max_degree=max_degree
        )
    base.lengthscale = torch.tensor(lengthscale, dtype=torch.float64)
    kernel = ScaleKernel(base).to(torch.float64)
    kernel.outputscale = torch.tensor(outputscale, dtype=torch.float64)
    return kernel


def check_tangent(x: torch.Tensor, columns: torch.Tensor, name: str) -> None:
    """Raise ``NotTangentError`` unless every column u of ``columns`` [..., N, d, P] is tangent at
    its point x [..., N, d]: |x . u| <= tol max(1, |u|) (tol: 1e-6 in float64, 1e-4 in float32)."""
    normal = (x.unsqueeze(-1) * columns).sum(-2).abs()  # [..., N, P]
    scale = columns.norm(dim=-2).clamp(min=1)  # [..., N, P]
    largest = float((normal / scale).detach().max()) if normal.numel() else 0.0  # a check only
    if largest > unit_tolerance(x.dtype):
        raise NotTangentError(
            f"{name} is not tangent to the sphere: the largest |x . u| / max(1, |u|) is "
            f"{largest:.3g}"
        )


def check_sphere_features(features: InducingFeatures, kernel: Kernel, ambient_dim: int) -> None:
    """Inducing points of a GP on S^{d-1} must be fixed unit vectors [M, d] (a homogeneous kernel
    accepts any non-zero, learnable points: its inducing variables are then scaled values on the
    sphere)."""
    if not isinstance(features, InducingPoints):
        return
    points = features.points
    if points.shape[-1] != ambient_dim:
        raise ValueError(
            f"inducing points must be [M, {ambient_dim}] for S^{ambient_dim - 1}, "
            f"got {tuple(points.shape)}"
        )
    zonal, _ = base_zonal_kernel(kernel)
    if zonal.homogeneous:
        return
    check_unit_vectors(points.detach(), ambient_dim, "inducing points")
    if points.requires_grad:
        raise ValueError(
            "inducing points on the sphere must be fixed (InducingPoints(Z, learn_points=False)): "
            "a gradient step would move them off the sphere"
        )


class GaussianVectorField(nn.Module):
    r""":math:`v(x) = A(x) g(x)` on :math:`\mathbb{S}^{d-1}`: a :math:`P`-output GP :math:`g` on
    the sphere and a tangent matrix field :math:`A`.

    Subclasses implement ``_basis`` (:math:`A(x)` [..., N, d, P]); ``tangent_vectors`` may be
    overridden with a cheaper product. ``input_dims`` = ``output_dims`` = :math:`d` (points in,
    tangent vectors out).

    Args:
        ambient_dim: :math:`d`.
        num_components: :math:`P`, the outputs of :math:`g`.
        features: inducing features of :math:`g` on :math:`\mathbb{S}^{d-1}` (shared by its
            outputs).
        kernel: a zonal kernel on :math:`\mathbb{S}^{d-1}` (default: ``sphere_kernel(d)``,
            Matérn-5/2).
        whiten: whitened :math:`q(u)` (default True).
    """

    def __init__(
        self,
        ambient_dim: int,
        num_components: int,
        features: InducingFeatures,
        kernel: Kernel | None = None,
        *,
        whiten: bool = True,
    ) -> None:
        super().__init__()
        self.ambient_dim = check_ambient_dim(ambient_dim)
        self.input_dims = self.output_dims = self.ambient_dim
        kernel = sphere_kernel(self.ambient_dim) if kernel is None else kernel
        check_sphere_features(features, kernel, self.ambient_dim)
        self.gp = DGPLayer(
            kernel,
            features,
            self.ambient_dim,
            num_components,
            mean="zero",
            input_map=OnSphere(),
            whiten=whiten,
        )

    @property
    def variational_strategy(self) -> InterDomainVariationalStrategy:
        """The strategy of :math:`g` (one batch member per output)."""
        return self.gp.variational_strategy

    @property
    def num_components(self) -> int:
        """:math:`P`, the number of outputs of :math:`g`."""
        return self.gp.output_dims

    def _basis(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def tangent_basis(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`A(x)` [..., N, d, P] at unit vectors :math:`x` [..., N, d], checked to be
        tangent."""
        basis = self._basis(x)  # [..., N, d, P]
        expected = (*x.shape, self.num_components)
        if tuple(basis.shape) != expected:
            raise ValueError(f"the tangent basis must have shape {expected}, got {basis.shape}")
        check_tangent(x, basis, f"the tangent basis of {type(self).__name__}")
        return basis

    def tangent_vectors(self, x: torch.Tensor, components: torch.Tensor) -> torch.Tensor:
        """:math:`A(x) g` [..., N, d] for components :math:`g` [..., N, P]."""
        basis = self.tangent_basis(x)  # [..., N, d, P]
        return (basis @ components.unsqueeze(-1)).squeeze(-1)

    def component_distribution(self, x: torch.Tensor) -> MultitaskMultivariateNormal:
        """:math:`q(g(x))` for unit vectors :math:`x` [..., N, d]: a multitask normal [..., N, P]
        (outputs independent)."""
        return self.gp(x, are_samples=True)

    def sample(self, x: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        r""":math:`v(x) = A(x) (\mu + \sigma \odot \varepsilon)` [..., N, d]: a draw of each point's
        marginal :math:`q(v(x))`, with standard normal ``noise`` :math:`\varepsilon` [..., N, P]
        (broadcast against :math:`q(g(x))`). :math:`\sigma^2` is GPyTorch's marginal variance,
        floored at ``gpytorch.settings.min_variance`` (1e-10 in float64)."""
        components = self.component_distribution(x)
        draw = components.mean + components.variance.sqrt() * noise  # [..., N, P]
        return self.tangent_vectors(x, draw)

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        r"""The posterior mean field :math:`A(x) \mathbb{E}[g(x)]` [N, d] at unit vectors :math:`x`
        [N, d]."""
        components = self.gp.mean_function(x)  # [N, P]
        return self.tangent_vectors(x, components)

    def joint_distribution(self, x: torch.Tensor) -> MultivariateNormal:
        r""":math:`q(v(X))` over all points jointly, :math:`x` [N, d]: mean [N d] and the dense
        covariance [N d, N d] with blocks

        .. math::

            \operatorname{Cov}(v(x_i), v(x_j))
            = \sum_p A_i[:, p] \operatorname{Cov}(g_p(x_i), g_p(x_j)) A_j[:, p]^\top

        (rank at most :math:`N P`; for checks and small :math:`N`)."""
        basis = self.tangent_basis(x)  # [N, d, P]
        components = self.component_distribution(x)
        mean = self.tangent_vectors(x, components.mean)  # [N, d]
        blocks = components.lazy_covariance_matrix.to_dense()  # [N P, N P], outputs blocked
        count, outputs = x.shape[-2], self.num_components
        per_output = blocks.reshape(outputs, count, outputs, count).diagonal(dim1=0, dim2=2)
        covariance = torch.einsum("iap,ijp,jbp->iajb", basis, per_output, basis)  # [N, d, N, d]
        size = count * self.ambient_dim
        covariance = DenseLinearOperator(covariance.reshape(size, size))  # singular: kept lazy
        return MultivariateNormal(mean.reshape(size), covariance)


class ProjectedVectorField(GaussianVectorField):
    r""":math:`v(x) = P_x g(x)` with :math:`g` :math:`d` independent GPs on :math:`\mathbb{S}^{d-1}`
    (seed 004 eq. 3.1)."""

    def __init__(
        self,
        ambient_dim: int,
        features: InducingFeatures,
        kernel: Kernel | None = None,
        *,
        whiten: bool = True,
    ) -> None:
        super().__init__(ambient_dim, ambient_dim, features, kernel, whiten=whiten)

    def _basis(self, x: torch.Tensor) -> torch.Tensor:
        """P_x = I - x x^T [..., N, d, d]."""
        identity = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)
        return identity - x.unsqueeze(-1) * x.unsqueeze(-2)

    def tangent_vectors(self, x: torch.Tensor, components: torch.Tensor) -> torch.Tensor:
        r""":math:`P_x g = g - (x \cdot g)\, x` [..., N, d]
        (``zonal.geometry.project_to_tangent``)."""
        return project_to_tangent(x, components)


def pole_basis(pole: torch.Tensor) -> torch.Tensor:
    """An orthonormal basis b_1..b_{d-1} of T_p S^{d-1}, p = ``pole`` [d]: [d, d - 1].

    The first d - 1 columns of the Householder reflection H that maps e_d to p (H is orthogonal
    and H e_d = p); the identity's columns when p = e_d.
    """
    last = torch.zeros_like(pole)
    last[-1] = 1
    identity = torch.eye(len(pole), dtype=pole.dtype, device=pole.device)
    direction = last - pole  # [d]
    squared = direction @ direction
    if float(squared) == 0:
        return identity[:, :-1]
    reflection = identity - 2 * torch.outer(direction, direction) / squared  # [d, d]
    return reflection[:, :-1]


class FrameVectorField(GaussianVectorField):
    r""":math:`v(x) = \sum_{i < d} g_i(x) e_i(x)`: :math:`d - 1` GPs on :math:`\mathbb{S}^{d-1}`
    times a tangent frame (seed 004 sec. 3.1.1, construction 2).

    Args:
        ambient_dim: :math:`d`.
        features, kernel, whiten: those of :math:`g` (see ``GaussianVectorField``).
        pole: the unit vector :math:`p` whose antipode is the default frame's singular point
            (default :math:`e_d`); ignored with ``frame``.
        frame: a function :math:`x` [..., N, d] -> :math:`E(x)` [..., N, d, d - 1] with tangent
            columns, replacing the parallel-transport frame (checked at every call).
    """

    pole: torch.Tensor  # buffers: p [d] and an orthonormal basis of its tangent space [d, d - 1]
    pole_basis: torch.Tensor

    def __init__(
        self,
        ambient_dim: int,
        features: InducingFeatures,
        kernel: Kernel | None = None,
        *,
        pole: torch.Tensor | None = None,
        frame: Frame | None = None,
        whiten: bool = True,
    ) -> None:
        super().__init__(ambient_dim, ambient_dim - 1, features, kernel, whiten=whiten)
        if pole is None:
            pole = torch.zeros(self.ambient_dim, dtype=torch.float64)
            pole[-1] = 1
        check_unit_vectors(pole, self.ambient_dim, "pole")
        if pole.dim() != 1:
            raise ValueError(f"pole must be one unit vector [{self.ambient_dim}]")
        self.register_buffer("pole", pole.clone())
        self.register_buffer("pole_basis", pole_basis(self.pole))  # [d, d - 1]
        self.frame = frame

    def transport_frame(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`e_i(x) = b_i - (x \cdot b_i) / (1 + p \cdot x) (p + x)` [..., N, d, d - 1]:
        parallel transport of the pole's basis; ``FrameSingularityError`` within
        :math:`\sqrt{\mathrm{eps}}` of the antipode :math:`-p`."""
        pole = self.pole.to(x)  # [d]
        basis = self.pole_basis.to(x)  # [d, d - 1]
        denominator = 1 + x @ pole  # [..., N]
        tolerance = torch.finfo(x.dtype).eps ** 0.5
        closest = float(denominator.detach().min()) if denominator.numel() else math.inf
        if closest < tolerance:  # (detached: a check, not part of the graph)
            raise FrameSingularityError(
                "a point lies at the frame's singular point, the antipode of the pole "
                f"{self.pole.tolist()} (1 + p . x = {closest:.3g}); choose another pole"
            )
        along = (x @ basis) / denominator.unsqueeze(-1)  # [..., N, d - 1]
        shift = (pole + x).unsqueeze(-1) * along.unsqueeze(-2)  # [..., N, d, d - 1]
        return basis - shift

    def _basis(self, x: torch.Tensor) -> torch.Tensor:
        return self.transport_frame(x) if self.frame is None else self.frame(x)


__all__ = [
    "FrameSingularityError",
    "FrameVectorField",
    "GaussianVectorField",
    "NotTangentError",
    "ProjectedVectorField",
    "check_sphere_features",
    "check_tangent",
    "pole_basis",
    "sphere_kernel",
]
