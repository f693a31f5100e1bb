"""Baselines for the benchmarks, each answering zonal's model contract: GPyTorch's SVGP with
learned inducing points (Hensman et al., 2013) and GPyTorch's deep GP (Salimbeni and Deisenroth,
2017).

``"rbf"`` and ``"matern52"`` are GPyTorch's standard SVGP with a stationary ARD kernel in data
space; ``"arccos"`` is zonal's SVGP with inducing points and the arc-cosine kernel, the DGP-1 model
of seed 000 table 1. ``GPyTorchDeepGP`` (built by ``gpytorch_deep_gp``) is GPyTorch's documented
deep GP with ARD kernels in every layer, the peer of zonal's deep models in the ``main-benchmark``
experiment and in ``benchmarks/`` (which import it from here: one copy).

Kept apart from the experiments so that their modules stay light to import (the registry imports
every experiment module to list them).
"""

from __future__ import annotations

import contextlib
import itertools

import gpytorch
import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel, MaternKernel, RBFKernel, ScaleKernel
from gpytorch.models.deep_gps import DeepGP, DeepGPLayer

from zonal.models import ZonalModel
from zonal.models.dgp import initial_inducing_points
from zonal.tabular.recipes import gaussian_likelihood
from zonal.variational.families import write_gaussian

POINT_KERNELS = ("rbf", "matern52", "arccos")


def stationary_kernel(name: str, input_dim: int) -> ScaleKernel:
    """ScaleKernel(RBF or Matérn-5/2) with one lengthscale per input dimension (ARD)."""
    if name == "rbf":
        base: Kernel = RBFKernel(ard_num_dims=input_dim)
    elif name == "matern52":
        base = MaternKernel(nu=2.5, ard_num_dims=input_dim)
    else:
        raise ValueError(f"unknown stationary kernel {name!r}; use 'rbf' or 'matern52'")
    return ScaleKernel(base).double()


def inducing_point_model(kernel: str, inducing_points: torch.Tensor) -> ZonalModel:
    """An SVGP with the inducing points Z [M, D] (in data space) and the kernel ``kernel``."""
    if kernel not in POINT_KERNELS:
        raise ValueError(
            f"unknown kernel {kernel!r} for inducing points; use one of {POINT_KERNELS}"
        )
    if kernel != "arccos":
        return InducingPointSVGP(inducing_points, kernel)
    from zonal.features import InducingPoints
    from zonal.kernels import ArcCosineKernel
    from zonal.models import SVGP

    input_dim = inducing_points.shape[1]
    lifted = torch.cat([inducing_points, inducing_points.new_ones(len(inducing_points), 1)], -1)
    zonal_kernel = ScaleKernel(ArcCosineKernel(input_dim + 1, homogeneous=True)).double()
    return SVGP(
        zonal_kernel, InducingPoints(lifted.double()), input_dim, likelihood=gaussian_likelihood()
    )


class InducingPointSVGP(gpytorch.models.ApproximateGP, ZonalModel):
    """GPyTorch's SVGP (Hensman et al., 2013): q(u) at M learned inducing points in data space,
    a constant mean and a stationary ARD kernel; whitened, full-covariance q(u); a Gaussian
    likelihood (noise 0.1 to start). It answers zonal's model contract, so the benchmarks treat
    it like any zonal model.

    Args:
        inducing_points: initial locations Z [M, D] (e.g. a random subset of the training inputs).
        kernel: ``"rbf"`` or ``"matern52"``.
    """

    def __init__(self, inducing_points: torch.Tensor, kernel: str = "rbf") -> None:
        if inducing_points.dim() != 2:
            raise ValueError(f"inducing points must be [M, D], got {tuple(inducing_points.shape)}")
        points = inducing_points.to(torch.float64).clone()
        distribution = gpytorch.variational.CholeskyVariationalDistribution(len(points))
        strategy = gpytorch.variational.VariationalStrategy(
            self, points, distribution, learn_inducing_locations=True
        )
        super().__init__(strategy)
        self.input_dim = points.shape[1]
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = stationary_kernel(kernel, self.input_dim)
        self.likelihood = gaussian_likelihood()
        self.double()

    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        """q(f(X)) [*b, q]."""
        return self(X)

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """The prior p(f(x))."""
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))


# ---------------------------------------------------------------------------------------- deep GP
DEEP_KERNELS = ("rbf", "matern52")
#: Monte Carlo samples of the inner layers behind ``posterior`` (as zonal's ``DGP``)
POSTERIOR_SAMPLES = 32


class GPyTorchDeepGPLayer(DeepGPLayer):
    """A layer as in GPyTorch's deep GP tutorial: constant mean, ``ScaleKernel`` over an ARD
    ``kernel`` (``"rbf"`` or ``"matern52"``), learned inducing points [M, D] (or [P, M, D] for
    P outputs) in the layer's input space, whitened Cholesky q(u).

    Args:
        input_dims: D, the width of the layer's input.
        output_dims: P, or None for a single squashed output (the last layer).
        points: initial inducing points [M, D] (or [P, M, D]).
        kernel: ``"rbf"`` or ``"matern52"``.
    """

    def __init__(
        self, input_dims: int, output_dims: int | None, points: torch.Tensor, kernel: str = "rbf"
    ) -> None:
        if kernel not in DEEP_KERNELS:
            raise ValueError(f"unknown deep-GP kernel {kernel!r}; use one of {DEEP_KERNELS}")
        batch_shape = torch.Size([output_dims]) if output_dims is not None else torch.Size()
        distribution = gpytorch.variational.CholeskyVariationalDistribution(
            points.shape[-2], batch_shape=batch_shape
        )
        strategy = gpytorch.variational.VariationalStrategy(
            self, points, distribution, learn_inducing_locations=True
        )
        super().__init__(strategy, input_dims, output_dims)
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=batch_shape)
        options = {"batch_shape": batch_shape, "ard_num_dims": input_dims}
        base = RBFKernel(**options) if kernel == "rbf" else MaternKernel(nu=2.5, **options)
        self.covar_module = ScaleKernel(base, batch_shape=batch_shape)

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """The prior p(f(x)) of the layer's outputs."""
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))


class GPyTorchDeepGP(DeepGP, ZonalModel):
    """GPyTorch's doubly-stochastic deep GP (``gpytorch.models.deep_gps.DeepGP``, Salimbeni and
    Deisenroth, 2017): ``layers`` applied in order, then a float64 Gaussian likelihood. Its own
    ``forward`` (``model(x)`` under ``gpytorch.settings.num_likelihood_samples(S)``) propagates S
    samples through the layers, drawing each hidden output from its marginal; train it with
    ``zonal.models.fit_dgp`` or ``DeepApproximateMLL``.

    It answers zonal's model contract through that same forward: ``latent_distribution`` runs it
    with ``num_posterior_samples`` samples drawn from ``posterior_seed`` (None: fresh draws), and
    the S outputs are the components of a ``GaussianMixturePosterior``, so ``predict`` gives the
    mixture moments and ``log_predictive_density`` the log-mean-exp over the components, exactly
    as for zonal's deep models.
    """

    _is_ensemble = True

    def __init__(
        self,
        layers: list[GPyTorchDeepGPLayer],
        likelihood: gpytorch.likelihoods.GaussianLikelihood | None = None,
        *,
        num_posterior_samples: int = POSTERIOR_SAMPLES,
        posterior_seed: int | None = 0,
    ) -> None:
        super().__init__()
        if not layers:
            raise ValueError("a deep GP needs at least one layer")
        if num_posterior_samples < 1:
            raise ValueError(f"num_posterior_samples must be >= 1, got {num_posterior_samples}")
        self.layers = torch.nn.ModuleList(layers)
        self.likelihood = gaussian_likelihood() if likelihood is None else likelihood
        self.input_dim = layers[0].input_dims
        self.num_posterior_samples = int(num_posterior_samples)
        self.posterior_seed = posterior_seed

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """The layers applied in order to x [*b, N, D]: an output with the samples in front."""
        output = x
        for layer in self.layers:
            output = layer(output)
        return output

    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        """The S components of q(f(X)) for X [*b, q, D]: batch [*b, S], event [q]."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(
                gpytorch.settings.num_likelihood_samples(self.num_posterior_samples)
            )
            if self.posterior_seed is not None:
                devices = [X.device] if X.device.type == "cuda" else []
                stack.enter_context(torch.random.fork_rng(devices=devices))
                torch.manual_seed(self.posterior_seed)
            output = self(X)  # batch [S, *b], event [q]
        batch = output.batch_shape
        if len(batch) == 1:
            return output
        order = (*range(1, len(batch)), 0)  # [*b, S]
        covariance = output.lazy_covariance_matrix.permute(*order, len(batch), len(batch) + 1)
        return MultivariateNormal(output.mean.permute(*order, len(batch)), covariance)


def gpytorch_deep_gp(
    x_train: torch.Tensor,
    num_layers: int,
    *,
    hidden_width: int,
    num_inducing: int,
    seed: int = 0,
    kernel: str = "rbf",
    inner_scale: float = 1e-2,
) -> GPyTorchDeepGP:
    """GPyTorch's deep GP of ``num_layers`` layers (hidden ones ``hidden_width`` wide), started
    as zonal's inducing-point DGP starts (``zonal.models.inducing_point_dgp``): first-layer
    inducing points at M random training inputs, hidden layers' at standard normal points, the
    hidden layers' whitened q(v) at N(0, inner_scale^2 I) and the last layer's at the prior."""
    if num_layers < 1 or num_inducing < 1 or hidden_width < 1:
        raise ValueError(
            f"num_layers, num_inducing and hidden_width must be >= 1, got "
            f"{num_layers}, {num_inducing}, {hidden_width}"
        )
    generator = torch.Generator().manual_seed(seed)
    dtype = torch.float64
    widths = [x_train.shape[-1], *([hidden_width] * (num_layers - 1)), 1]
    layers = []
    for index, (width_in, width_out) in enumerate(itertools.pairwise(widths)):
        last = index == num_layers - 1
        if index == 0:
            points = initial_inducing_points(x_train.to(dtype), num_inducing, 1.0, generator)
            points = points[:, :-1]  # [M, D]: data space, no lifting
        else:
            points = torch.randn(num_inducing, width_in, generator=generator, dtype=dtype)
        if not last:
            points = points.expand(width_out, *points.shape).clone()  # [P, M, D]
        layer = GPyTorchDeepGPLayer(width_in, None if last else width_out, points, kernel)
        layer = layer.to(device=x_train.device, dtype=dtype)
        scale = 1.0 if last else inner_scale
        eye = torch.eye(num_inducing, dtype=dtype, device=x_train.device)
        strategy = layer.variational_strategy
        write_gaussian(
            strategy._variational_distribution, eye.new_zeros(num_inducing), scale**2 * eye
        )
        strategy.variational_params_initialized.fill_(1)
        layers.append(layer)
    return GPyTorchDeepGP(layers)
