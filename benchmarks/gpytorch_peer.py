"""GPyTorch's documented deep GP, the peer of zonal's deep models in the benchmarks: layers of
SVGPs with learned inducing points, a constant mean and an ARD kernel, then a Gaussian likelihood."""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.means import ConstantMean
from gpytorch.models.deep_gps import DeepGP, DeepGPLayer
from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy

KERNELS = ("rbf", "matern52")


class PeerLayer(DeepGPLayer):
    """A layer as in GPyTorch's deep GP tutorial: ARD ``kernel`` (rbf or matern52), constant mean,
    inducing points [M, D] (or [P, M, D] for P outputs) learned."""

    def __init__(
        self, input_dims: int, output_dims: int | None, points: torch.Tensor, kernel: str = "rbf"
    ) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"unknown peer kernel {kernel!r}; use one of {KERNELS}")
        batch_shape = torch.Size([output_dims]) if output_dims is not None else torch.Size()
        distribution = CholeskyVariationalDistribution(points.shape[-2], batch_shape=batch_shape)
        strategy = VariationalStrategy(self, points, distribution, learn_inducing_locations=True)
        super().__init__(strategy, input_dims, output_dims)
        self.mean_module = ConstantMean(batch_shape=batch_shape)
        options = {"batch_shape": batch_shape, "ard_num_dims": input_dims}
        base = RBFKernel(**options) if kernel == "rbf" else MaternKernel(nu=2.5, **options)
        self.covar_module = ScaleKernel(base, batch_shape=batch_shape)

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


class PeerDeepGP(DeepGP):
    """``layers`` applied in order, then a float64 Gaussian likelihood."""

    def __init__(self, layers: list[PeerLayer]) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)
        self.likelihood = GaussianLikelihood().double()

    def check_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, D] in float64 (the input check ``zonal.models.fit_dgp`` calls)."""
        width = self.layers[0].input_dims
        if x.dim() != 2 or x.shape[-1] != width:
            raise ValueError(f"inputs must be [N, {width}], got {tuple(x.shape)}")
        return x.to(torch.float64)

    def forward(self, x: torch.Tensor):
        output = x
        for layer in self.layers:
            output = layer(output)
        return output
