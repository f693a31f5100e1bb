r"""Residual deep GPs on :math:`\mathbb{S}^D` (seed 004 sec. 3.1.2, eq. 3.3).

.. math::

    F = g \circ (\exp \circ v^{L-1}) \circ \dots \circ (\exp \circ v^1), \qquad
    h_{l+1} = \exp_{h_l}(v^l(h_l)),

with :math:`v^l` Gaussian vector fields on the sphere (``zonal.models.vector_field``) and :math:`g`
a GP on the sphere (a ``DGPLayer`` with ``OnSphere`` inputs). Every hidden point stays on the
sphere, so every layer can use inducing points on the sphere or spherical-harmonic features
(seed 004 ch. 5).

Data enter once, through the model's input map: ``OnSphere`` for unit vectors, or
``SphereEmbedding(b)`` for :math:`x \in \mathbb{R}^D`, :math:`z = [x, b] / r`,
:math:`r = \|[x, b]\|` (seed 004 eq. 5.4). With the embedding the output is carried back to the
data by the 1-homogeneous extension, :math:`F(x) = r\, g(h(z))`: a Gaussian
:math:`\mathcal{N}(m, C)` of :math:`g` becomes
:math:`\mathcal{N}(r m, \operatorname{diag}(r) C \operatorname{diag}(r))` (seed 000 eq. 7;
seed 004 sec. 5.1, "the posterior distribution is rescaled appropriately"), so that with no hidden
layer the model is zonal's ``SVGP`` with the homogeneous kernel.

Training is doubly stochastic (Salimbeni and Deisenroth 2017): each of :math:`S` samples draws
every hidden layer's :math:`v` at each point from its marginal :math:`q(v(h))` with one
reparametrised draw, maps the point by :math:`\exp`, and the ELBO is
``DeepApproximateMLL(VariationalELBO)`` (``fit_dgp`` takes the model: the KL terms of all layers,
fields included, are summed by GPyTorch's deep-GP strategy). The posterior is the Gaussian mixture
over :math:`S` such samples, their draws taken from ``posterior_seed`` and shared across t-batches
(``zonal.models.dgp.DGP.latent_distribution``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import cast

import gpytorch
import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.kernels import Kernel, MaternKernel, RBFKernel, ScaleKernel
from gpytorch.likelihoods import Likelihood
from linear_operator.operators import DiagLinearOperator

from zonal._validation import check_unit_vectors
from zonal.features import InducingFeatures, InducingPoints, SphericalHarmonicFeatures
from zonal.geometry import EuclideanInput, InputMap, OnSphere, SphereEmbedding, exp_map
from zonal.models.dgp import DGP, POSTERIOR_SAMPLES, DGPLayer
from zonal.models.kmeans import kmeans
from zonal.models.vector_field import (
    FrameVectorField,
    GaussianVectorField,
    ProjectedVectorField,
    check_sphere_features,
    sphere_kernel,
)

Noise = Callable[[torch.Size], torch.Tensor]
CONSTRUCTIONS = {"projected": ProjectedVectorField, "frame": FrameVectorField}


class ResidualDGP(DGP):
    r""":math:`g \circ (\exp \circ v^{L-1}) \circ \dots \circ (\exp \circ v^1)` on
    :math:`\mathbb{S}^{d-1}` (seed 004 eq. 3.3).

    Args:
        fields: the hidden layers, Gaussian vector fields on :math:`\mathbb{S}^{d-1}` (none: a
            shallow GP).
        output_layer: :math:`g`, a ``DGPLayer`` on :math:`\mathbb{S}^{d-1}`
            (``input_map=OnSphere()``, input_dims :math:`d`), one output or several
            (``output_dims``; a multitask likelihood then).
        likelihood: default Gaussian.
        input_map: ``SphereEmbedding(b)`` (default :math:`b = 1`) for data in
            :math:`\mathbb{R}^{d-1}`, or ``OnSphere()`` for unit vectors in :math:`\mathbb{R}^d`.
        num_posterior_samples, posterior_seed: the mixture of ``posterior`` (see ``DGP``).
        input_transform, outcome_transform: BoTorch transforms, as ``SingleTaskGP`` takes them.
    """

    def __init__(
        self,
        fields: Sequence[GaussianVectorField],
        output_layer: DGPLayer,
        likelihood: Likelihood | None = None,
        *,
        input_map: InputMap | None = None,
        num_posterior_samples: int = POSTERIOR_SAMPLES,
        posterior_seed: int | None = 0,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ) -> None:
        for index, field in enumerate(fields):
            if not isinstance(field, GaussianVectorField):
                raise ValueError(
                    f"hidden layer {index} must be a GaussianVectorField, got {type(field).__name__}"
                )
        if not isinstance(output_layer, DGPLayer) or not isinstance(
            output_layer.input_map, OnSphere
        ):
            raise ValueError("the output layer must be a DGPLayer with input_map=OnSphere()")
        super().__init__(
            [*fields, output_layer],
            likelihood,
            num_posterior_samples=num_posterior_samples,
            posterior_seed=posterior_seed,
            input_transform=input_transform,
            outcome_transform=outcome_transform,
        )
        self.ambient_dim = output_layer.input_dims
        self.sphere_input = SphereEmbedding(1.0) if input_map is None else input_map
        if not isinstance(self.sphere_input, OnSphere | SphereEmbedding):
            raise ValueError("input_map must be OnSphere() or SphereEmbedding(b)")
        embedded = isinstance(self.sphere_input, SphereEmbedding)
        self.input_dim = self.input_dims = self.ambient_dim - int(embedded)

    @property
    def fields(self) -> list[GaussianVectorField]:
        r"""The hidden layers :math:`v^1, \dots, v^{L-1}`."""
        return cast("list[GaussianVectorField]", list(self.layers[:-1]))  # from a ModuleList

    @property
    def output_layer(self) -> DGPLayer:
        """:math:`g`, the GP on the sphere that gives the output."""
        return cast(DGPLayer, self.layers[-1])

    def to_sphere(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(:math:`z` [..., N, d] on the sphere, radii :math:`r` [..., N] or None without an
        embedding)."""
        if isinstance(self.sphere_input, SphereEmbedding):
            return self.sphere_input(x)
        return self.sphere_input.lift(x), None

    def hidden_points(self, z: torch.Tensor, noise: Noise) -> torch.Tensor:
        r""":math:`h_L` [..., N, d]: :math:`z` [..., N, d] moved by every field,
        :math:`h \leftarrow \exp_h(v(h))` with :math:`v` drawn from :math:`q(v(h))` by standard
        normal ``noise(shape)`` (shape [..., N, P] or a trailing part of it)."""
        h = z
        for field in self.fields:
            eps = noise(torch.Size([*h.shape[:-1], field.num_components]))  # [..., N, P]
            h = exp_map(h, field.sample(h, eps))  # [..., N, d]
        return h

    def output_distribution(
        self, h: torch.Tensor, radius: torch.Tensor | None
    ) -> MultivariateNormal:
        r""":math:`g`'s :math:`q` at hidden points :math:`h` [..., N, d], times the radius
        :math:`r` [..., N] of an embedding:
        :math:`\mathcal{N}(r m, \operatorname{diag}(r) C \operatorname{diag}(r))` (each output of a
        multi-output :math:`g` alike)."""
        output = self._output_marginal(h)
        if radius is None:
            return output
        if not isinstance(output, MultitaskMultivariateNormal):
            radius = radius.expand(output.mean.shape)  # [..., N]
            scale = DiagLinearOperator(radius)
            covariance = scale @ output.lazy_covariance_matrix @ scale
            return MultivariateNormal(output.mean * radius, covariance)
        outputs = output.mean.shape[-1]
        radius = radius.expand(output.mean.shape[:-1])  # [..., N]
        per_entry = radius.unsqueeze(-2).expand(*radius.shape[:-1], outputs, radius.shape[-1])
        scale = DiagLinearOperator(per_entry.reshape(*radius.shape[:-1], -1))  # output-major
        covariance = scale @ output.lazy_covariance_matrix @ scale
        return MultitaskMultivariateNormal(
            output.mean * radius.unsqueeze(-1), covariance, interleaved=False
        )

    def forward(self, x: torch.Tensor, *, are_samples: bool = False) -> MultivariateNormal:
        """:math:`q(F(x))` for :math:`x` [..., N, D], one reparametrised draw of every hidden field
        per sample (deterministic :math:`x`: ``num_likelihood_samples`` samples in front, as
        ``DGP.forward``)."""
        z, radius = self.to_sphere(self.check_inputs(x))
        if not are_samples:
            samples = gpytorch.settings.num_likelihood_samples.value()
            z = z.expand(samples, *z.shape)  # [S, ..., N, d]
            radius = None if radius is None else radius.expand(samples, *radius.shape)

        def noise(shape: torch.Size) -> torch.Tensor:
            return torch.randn(shape, dtype=z.dtype, device=z.device)

        return self.output_distribution(self.hidden_points(z, noise), radius)

    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        r"""The :math:`S` mixture components of :math:`q(F(X))` for :math:`X` [*b, q, D]: batch
        [*b, S], event [q] (batch [*F, *b, S] for a conditioned model, ``DGP._conditioned``).

        Field :math:`l`'s components are drawn with :math:`\varepsilon` [S, q, P] from
        ``posterior_seed`` (fresh when None), shared by every t-batch, as in
        ``DGP.latent_distribution``.
        """
        return self.output_distribution(*self._output_stage(X))

    def _output_stage(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(h_L [*b, S, q, d], the points the output layer g sees, and the radius [*b, 1, q] of
        an embedding or None)."""
        samples = self.num_posterior_samples
        z, radius = self.to_sphere(X)
        z = z.unsqueeze(-3).expand(*z.shape[:-2], samples, *z.shape[-2:])  # [*b, S, q, d]
        if radius is not None:
            radius = radius.unsqueeze(-2)  # [*b, 1, q]
        generator = None
        if self.posterior_seed is not None:
            generator = torch.Generator(device=X.device).manual_seed(self.posterior_seed)

        def noise(shape: torch.Size) -> torch.Tensor:
            return torch.randn(shape[-3:], generator=generator, dtype=X.dtype, device=X.device)

        return self.hidden_points(z, noise), radius

    def posterior_mean(self, x: torch.Tensor) -> torch.Tensor:
        r"""The composition of the posterior means, :math:`r\, g_{\mathrm{mean}}(h_L)` with
        :math:`h_{l+1} = \exp_{h_l}(\text{mean field of } v^l \text{ at } h_l)`: [N] (or
        [N, P])."""
        h, radius = self.to_sphere(self.check_inputs(x))
        for field in self.fields:
            h = exp_map(h, field.mean(h))
        mean = self.output_layer.mean_function(h)  # [N] or [N, P]
        if radius is None:
            return mean
        return mean * (radius if mean.dim() == 1 else radius.unsqueeze(-1))


def sphere_features(inducing: torch.Tensor | int, ambient_dim: int) -> InducingFeatures:
    """Inducing features of one layer on S^{d-1}: fixed inducing points Z [M, d] (unit vectors),
    or, for an int M, spherical harmonics of the complete levels that fit in M."""
    if isinstance(inducing, torch.Tensor):
        return InducingPoints(inducing, learn_points=False)
    return SphericalHarmonicFeatures(ambient_dim, num_inducing=int(inducing))


def residual_dgp(
    input_dim: int,
    num_hidden_layers: int,
    inducing: torch.Tensor | int,
    *,
    input_map: InputMap | None = None,
    construction: str = "projected",
    nu: float = 2.5,
    lengthscale: float = 1.0,
    outputscale: float = 1.0,
    hidden_variance: float = 0.01,
    hidden_scale: float = 0.01,
    mean: str = "constant",
    likelihood: Likelihood | None = None,
    max_degree: int = 30,
) -> ResidualDGP:
    r"""The residual DGP of seed 004 sec. 3.2 / ch. 5 with ``num_hidden_layers`` vector fields.

    Every layer uses the Matérn-:math:`\nu` kernel of the sphere (heat kernel for
    :math:`\nu = \infty`) at ``lengthscale`` and the features ``sphere_features(inducing, d)``; the
    output layer's variance is ``outputscale``. The hidden layers start near the identity: their
    prior variances share a small total, :math:`\sigma_l^2 = \mathtt{hidden\_variance} / (L - 1)`,
    and their whitened :math:`q(u)` is :math:`\mathcal{N}(0, \mathtt{hidden\_scale}^2 I)`
    (near-deterministic, as in Salimbeni and Deisenroth; 1 is the prior), so that
    :math:`\mathbb{E} \lvert v^l(x) \rvert^2 \le (d - 1) \sigma_l^2` at the start (for
    ``hidden_scale`` :math:`\le 1`).

    Args:
        input_dim: :math:`D` of the data (:math:`d = D + 1` with the default
            ``SphereEmbedding(1.0)``; :math:`d = D` with ``OnSphere()``).
        num_hidden_layers: :math:`L - 1 \ge 0`.
        inducing: fixed inducing points :math:`Z` [M, d] on the sphere, or a feature budget
            :math:`M`.
        construction: ``"projected"`` (eq. 3.1) or ``"frame"`` (parallel-transport frame).
        mean: the output layer's prior mean (``"zero"`` or ``"constant"``).
    """
    if num_hidden_layers < 0:
        raise ValueError(f"num_hidden_layers must be >= 0, got {num_hidden_layers}")
    if construction not in CONSTRUCTIONS:
        raise ValueError(
            f"construction must be one of {sorted(CONSTRUCTIONS)}, got {construction!r}"
        )
    input_map = SphereEmbedding(1.0) if input_map is None else input_map
    ambient_dim = input_map.ambient_dim(input_dim)

    def kernel(variance: float) -> Kernel:
        return sphere_kernel(
            ambient_dim, nu, lengthscale=lengthscale, outputscale=variance, max_degree=max_degree
        )

    fields = []
    for _ in range(num_hidden_layers):
        field = CONSTRUCTIONS[construction](
            ambient_dim,
            sphere_features(inducing, ambient_dim),
            kernel(hidden_variance / num_hidden_layers),
        ).to(torch.float64)
        field.variational_strategy.set_variational_scale(hidden_scale, zero_mean=True)
        fields.append(field)
    output_kernel = kernel(outputscale)
    features = sphere_features(inducing, ambient_dim)
    check_sphere_features(features, output_kernel, ambient_dim)
    output_layer = DGPLayer(
        output_kernel, features, ambient_dim, None, mean=mean, input_map=OnSphere()
    ).to(torch.float64)
    return ResidualDGP(fields, output_layer, likelihood, input_map=input_map)


# ------------------------------------------------------------------------- baseline (eq. 3.5)
def euclidean_kernel(width: int, nu: float = 2.5) -> Kernel:
    """sigma^2 times a Matérn-nu (RBF for nu = inf) ARD kernel on R^width, float64."""
    if nu == math.inf:
        return ScaleKernel(RBFKernel(ard_num_dims=width)).to(torch.float64)
    return ScaleKernel(MaternKernel(nu=nu, ard_num_dims=width)).to(torch.float64)


def hybrid_dgp(
    x_train: torch.Tensor,
    num_hidden_layers: int,
    *,
    num_inducing: int,
    nu: float = 2.5,
    lengthscale: float = 1.0,
    inner_scale: float = 1e-5,
    mean: str = "constant",
    likelihood: Likelihood | None = None,
    generator: torch.Generator | None = None,
    learn_inducing: bool = True,
) -> DGP:
    r"""The baseline of seed 004 eq. 3.5: :math:`F = F_{\mathrm{Euclidean}} \circ f` on
    :math:`\mathbb{S}^{d-1}`, a ``DGP`` on unit vectors.

    :math:`f: \mathbb{S}^{d-1} \to \mathbb{R}^d` is a GP on the sphere (Matérn-:math:`\nu` of the
    sphere, 1-homogeneous so that its inducing points may leave the sphere while learned:
    :math:`u = \|z\| f(z / \|z\|)` is still an inducing variable of :math:`f`);
    :math:`F_{\mathrm{Euclidean}}` is Salimbeni and Deisenroth's DGP,
    :math:`\mathbb{R}^d \to \mathbb{R}^d` hidden layers and an :math:`\mathbb{R}^d \to \mathbb{R}`
    output, Euclidean Matérn-:math:`\nu` ARD kernels. Hidden layers have the identity mean (seed 004
    eq. 2.23) and whitened :math:`q(u) = \mathcal{N}(0, \mathtt{inner\_scale}^2 I)`; the output
    layer has ``mean`` and :math:`q` at the prior. Every layer's :math:`M` inducing locations start
    at the k-means centres of the training inputs (those of :math:`f` projected onto the sphere) and
    are learned, as in seed 004 sec. 3.2 (``learn_inducing=False`` keeps them there: the seed's
    suspected cause of the baseline's best runs). ``num_hidden_layers`` :math:`\ge 1` counts
    :math:`f` and the Euclidean hidden layers.
    """
    if num_hidden_layers < 1:
        raise ValueError(f"the baseline needs num_hidden_layers >= 1, got {num_hidden_layers}")
    ambient_dim = x_train.shape[-1]
    check_unit_vectors(x_train, ambient_dim, "training inputs")
    centres = kmeans(x_train, num_inducing, generator=generator)  # [M, d]
    on_sphere = centres / centres.norm(dim=-1, keepdim=True)
    kernel = sphere_kernel(ambient_dim, nu, lengthscale=lengthscale, homogeneous=True)
    layers = [
        DGPLayer(
            kernel,
            InducingPoints(on_sphere, learn_points=learn_inducing),
            ambient_dim,
            ambient_dim,
            mean="identity",
            input_map=OnSphere(),
        )
    ]
    for _ in range(num_hidden_layers - 1):
        layers.append(
            DGPLayer(
                euclidean_kernel(ambient_dim, nu),
                InducingPoints(centres, learn_points=learn_inducing),
                ambient_dim,
                ambient_dim,
                mean="identity",
                input_map=EuclideanInput(),
            )
        )
    for layer in layers:
        layer.variational_strategy.set_variational_scale(inner_scale, zero_mean=True)
    output = DGPLayer(
        euclidean_kernel(ambient_dim, nu),
        InducingPoints(centres, learn_points=learn_inducing),
        ambient_dim,
        None,
        mean=mean,
        input_map=EuclideanInput(),
    )
    layers = [layer.to(device=x_train.device, dtype=x_train.dtype) for layer in [*layers, output]]
    return DGP(layers, likelihood)


__all__ = [
    "CONSTRUCTIONS",
    "ResidualDGP",
    "euclidean_kernel",
    "hybrid_dgp",
    "residual_dgp",
    "sphere_features",
]
