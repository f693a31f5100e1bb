"""SVGP with inter-domain features on the sphere (seed 000 sec. 3.1, 4; seed 002 sec. 5).

Inputs x in R^D are lifted to [x, b] in R^{D+1} by a ``SphereEmbedding``; the kernel, homogeneous on
R^{D+1}, is the 1-homogeneous extension of a zonal kernel on S^D, so every prediction is already in
data space (mean r mu, variance r^2 sigma^2 with r = ||[x, b]||, seed 000 sec. 4.1). Without an
embedding the inputs must be unit vectors. Train with ``gpytorch.mlls.VariationalELBO`` (minibatch)
or ``zonal.models.training.fit``.
"""

from __future__ import annotations

import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.means import Mean
from gpytorch.models import ApproximateGP
from gpytorch.variational import (
    CholeskyVariationalDistribution,
    IndependentMultitaskVariationalStrategy,
    MeanFieldVariationalDistribution,
)

from zonal._validation import check_finite
from zonal.geometry import SphereEmbedding
from zonal.features import InducingFeatures
from zonal.linalg import cholesky
from zonal.variational import InterDomainVariationalStrategy

VARIATIONAL_FAMILIES = {
    "cholesky": CholeskyVariationalDistribution,
    "meanfield": MeanFieldVariationalDistribution,
}


class SVGP(ApproximateGP):
    """Sparse variational GP with any ``zonal.features`` inducing features.

    Args:
        kernel: a GPyTorch kernel; for harmonic and activated features a ``ZonalKernel``
            (optionally in a ``ScaleKernel``), homogeneous when an embedding is used.
        features: the inducing features (shared by all outputs).
        input_dim: D, the data dimension (checked on every call); ambient_dim is D + 1 with an
            embedding, D without.
        embedding: a ``SphereEmbedding`` (default: bias 1) or None for inputs already on the sphere.
        num_outputs: P independent outputs (a batch of q(u), one per output).
        mean_module: prior mean (default zero).
        variational_family: ``"cholesky"`` (full S) or ``"meanfield"`` (diagonal S).
        whiten: whitened parametrisation (default True).
    """

    def __init__(
        self,
        kernel: Kernel,
        features: InducingFeatures,
        input_dim: int,
        *,
        embedding: SphereEmbedding | str | None = "default",
        num_outputs: int = 1,
        mean_module: Mean | None = None,
        variational_family: str = "cholesky",
        whiten: bool = True,
    ) -> None:
        if variational_family not in VARIATIONAL_FAMILIES:
            raise ValueError(
                f"unknown variational_family {variational_family!r}; "
                f"use one of {sorted(VARIATIONAL_FAMILIES)}"
            )
        if num_outputs < 1:
            raise ValueError(f"num_outputs must be >= 1, got {num_outputs}")
        batch_shape = torch.Size([num_outputs]) if num_outputs > 1 else torch.Size()
        distribution = VARIATIONAL_FAMILIES[variational_family](
            features.num_inducing, batch_shape=batch_shape
        )
        distribution.to(torch.float64)
        strategy = InterDomainVariationalStrategy(self, features, distribution, whiten=whiten)
        if num_outputs > 1:
            strategy = IndependentMultitaskVariationalStrategy(strategy, num_tasks=num_outputs)
        super().__init__(strategy)
        self.covar_module = kernel
        self.mean_module = mean_module
        self.input_dim = int(input_dim)
        self.num_outputs = num_outputs
        self.embedding = SphereEmbedding(1.0) if embedding == "default" else embedding
        ambient_dim = getattr(features, "ambient_dim", None)
        expected = self.input_dim + (1 if self.embedding is not None else 0)
        if ambient_dim is not None and ambient_dim != expected:
            raise ValueError(
                f"features live in ambient_dim={ambient_dim} but inputs of dimension "
                f"{self.input_dim} {'plus a bias ' if self.embedding is not None else ''}give {expected}"
            )

    @property
    def features(self) -> InducingFeatures:
        """The inducing features."""
        strategy = self.variational_strategy
        return getattr(strategy, "base_variational_strategy", strategy).features

    def lift(self, x: torch.Tensor) -> torch.Tensor:
        """Check x [..., N, D] and lift it to [..., N, D + 1] (or pass unit vectors through)."""
        if not isinstance(x, torch.Tensor) or x.dim() < 2:
            raise ValueError("inputs must be a tensor [N, D] (or [..., N, D])")
        if x.shape[-1] != self.input_dim:
            raise ValueError(
                f"the model was built for inputs of dimension {self.input_dim}, got {x.shape[-1]}"
            )
        check_finite(x, "inputs")
        return x if self.embedding is None else self.embedding.lift(x)

    @torch.no_grad()
    def set_optimal_variational_distribution(
        self, x: torch.Tensor, y: torch.Tensor, noise: float | torch.Tensor
    ) -> None:
        """Set q(u) to the optimum for a Gaussian likelihood (Titsias, 2009), single output.

        Computed in whitened coordinates v = L^{-1} u (L L^T = Kuu), where it stays well
        conditioned even when Kuu is (nearly) singular:

            A = L^{-1} Kuf,   S_v = (I + A A^T / s^2)^{-1},   m_v = S_v A y / s^2,

        i.e. q(u) = N(L m_v, L S_v L^T). An unwhitened strategy stores that q(u). At this q the
        ELBO equals the collapsed bound (``SGPR.elbo``) for the same features and kernel.
        """
        if self.num_outputs != 1:
            raise ValueError("the closed-form optimum is implemented for a single output")
        strategy = self.variational_strategy
        distribution = strategy._variational_distribution
        if not hasattr(distribution, "chol_variational_covar"):
            raise ValueError("the closed-form optimum needs the 'cholesky' variational family")
        kernel = self.covar_module
        lifted = self.lift(torch.as_tensor(x, dtype=torch.float64))
        y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
        noise = torch.as_tensor(noise, dtype=torch.float64)
        kuu = self.features.kuu(kernel)
        kuu = kuu.to_dense() if hasattr(kuu, "to_dense") else kuu  # [M, M]
        factor = cholesky(kuu, name="Kuu")
        projection = torch.linalg.solve_triangular(
            factor, self.features.kuf(kernel, lifted), upper=False
        )  # A [M, N]
        identity = torch.eye(len(kuu), dtype=kuu.dtype)
        precision = identity + projection @ projection.T / noise  # I + A A^T / s^2
        covariance = torch.cholesky_inverse(cholesky(precision, name="I + A A^T / noise"))
        covariance = 0.5 * (covariance + covariance.mT)  # S_v [M, M]
        mean = covariance @ (projection @ y) / noise  # m_v [M]
        if not strategy.whiten:
            mean, covariance = factor @ mean, factor @ covariance @ factor.mT
        distribution.variational_mean.copy_(mean)
        distribution.chol_variational_covar.copy_(cholesky(covariance, name="optimal S"))
        strategy.variational_params_initialized.fill_(1)

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """The prior p(f(x)) on lifted inputs (GPyTorch calls this with prior=True)."""
        mean = x.new_zeros(x.shape[:-1]) if self.mean_module is None else self.mean_module(x)
        return MultivariateNormal(mean, self.covar_module(x))

    def __call__(self, x: torch.Tensor, prior: bool = False, **kwargs) -> MultivariateNormal:
        """q(f(x)) for data-space inputs x [N, D] (already in data space: no rescaling needed)."""
        return super().__call__(self.lift(x), prior=prior, **kwargs)
