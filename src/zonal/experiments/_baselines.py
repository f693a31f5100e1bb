"""Baselines for the benchmarks: SVGPs with learned inducing points (Hensman et al., 2013).

``"rbf"`` and ``"matern52"`` are GPyTorch's standard SVGP with a stationary ARD kernel in data
space; ``"arccos"`` is zonal's SVGP with inducing points and the arc-cosine kernel, the DGP-1 model
of seed 000 table 1.

Kept apart from the experiments so that their modules stay light to import (the registry imports
every experiment module to list them).
"""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel, MaternKernel, RBFKernel, ScaleKernel

from zonal.models import ZonalModel
from zonal.recipes import gaussian_likelihood

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
