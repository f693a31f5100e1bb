"""Collapsed SGPR with spherical-harmonic features: one pass over the data, then steps free of N.

For a Gaussian likelihood the optimal q(u) is available in closed form (Titsias, 2009). With
spherical-harmonic features Kuf = Phi_r^T (rows r_i phi(z_i), r_i = ||[x_i, b]||, seed 000 sec. 4.1)
and Kuu^{-1} = Lambda = diag(lambda_{n(m)}) (seed 002 eqs. 17-18), the bound

    log N(y | 0, Phi_r Lambda Phi_r^T + s^2 I) - (tr Kff - tr Qff) / (2 s^2)

depends on the data only through the sufficient statistics

    A = Phi_r^T Phi_r [M, M],  c = Phi_r^T y [M],  y^T y,  N,  sum_i r_i^2,

because tr Kff = k(1) sum_i r_i^2 (zonal kernels have a constant diagonal) and tr Qff = tr(Lambda A).
With B = I + Lambda^{1/2} A Lambda^{1/2} / s^2 = L_B L_B^T and w = L_B^{-1} Lambda^{1/2} c:

    bound = -N/2 log(2 pi s^2) - sum log diag L_B - y^T y / (2 s^2) + ||w||^2 / (2 s^4)
            - (k(1) sum r^2 - tr(Lambda A)) / (2 s^2).

The statistics are accumulated in one streaming pass over chunks (N may exceed memory); each
optimisation step then costs O(M^3), independent of N. Predictions (latent f at x*):

    mean = r* phi*^T Lambda^{1/2} B^{-1} Lambda^{1/2} c / s^2,
    var  = r*^2 (k(1) - phi*^T Lambda phi* + phi*^T Lambda^{1/2} B^{-1} Lambda^{1/2} phi*).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import torch
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import GaussianLikelihood
from linear_operator.operators import DiagLinearOperator
from torch import nn

from zonal._validation import check_finite
from zonal.geometry import SphereEmbedding
from zonal.features import InducingFeatures
from zonal.linalg import cholesky


class SGPR(nn.Module):
    """Sparse GP regression with a diagonal-Kuu feature and sufficient statistics.

    Args:
        kernel: a ``ZonalKernel`` (optionally in a ``ScaleKernel``), homogeneous when an embedding
            is used (the data-space GP is the 1-homogeneous extension).
        features: features with a diagonal Kuu (``SphericalHarmonicFeatures``, or
            ``SparseSphericalHarmonicFeatures`` with fixed phases).
        input_dim: D, the data dimension.
        embedding: a ``SphereEmbedding`` with a fixed bias (the statistics depend on it), the
            default bias 1, or None for inputs on the sphere.
        noise: initial Gaussian noise variance.
    """

    def __init__(
        self,
        kernel: Kernel,
        features: InducingFeatures,
        input_dim: int,
        *,
        embedding: SphereEmbedding | str | None = "default",
        noise: float = 0.1,
    ) -> None:
        super().__init__()
        if not isinstance(features.kuu(kernel), DiagLinearOperator):
            raise ValueError(
                "SGPR's one-pass statistics need features with a diagonal Kuu "
                "(spherical-harmonic features); use SVGP for other features"
            )
        self.kernel = kernel
        self.features = features
        for parameter in features.parameters():
            parameter.requires_grad_(False)  # the statistics are computed for fixed features
        self.input_dim = int(input_dim)
        self.embedding = SphereEmbedding(1.0) if embedding == "default" else embedding
        if self.embedding is not None and getattr(self.embedding, "learn_bias", False):
            raise ValueError("SGPR needs a fixed embedding bias: the statistics depend on it")
        self.likelihood = GaussianLikelihood().to(torch.float64)
        self.likelihood.noise = torch.tensor(noise, dtype=torch.float64)
        self.reset_statistics()

    # ------------------------------------------------------------------ data
    def lift(self, x: torch.Tensor) -> torch.Tensor:
        """Check x [N, D] and lift it to the kernel's input space."""
        if x.dim() != 2 or x.shape[-1] != self.input_dim:
            raise ValueError(
                f"inputs must have shape [N, {self.input_dim}] (the model's input dimension), "
                f"got {tuple(x.shape)}"
            )
        check_finite(x, "inputs")
        return x if self.embedding is None else self.embedding.lift(x)

    def reset_statistics(self) -> None:
        """Forget the accumulated data."""
        size = self.features.num_inducing
        self.register_buffer("stat_gram", torch.zeros(size, size, dtype=torch.float64))
        self.register_buffer("stat_cross", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("stat_yy", torch.zeros((), dtype=torch.float64))
        self.register_buffer("stat_radius2", torch.zeros((), dtype=torch.float64))
        self.register_buffer("stat_count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def accumulate(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Add a chunk (x [n, D], y [n]) to the sufficient statistics."""
        x = torch.as_tensor(x, dtype=torch.float64)
        y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
        if len(y) != len(x):
            raise ValueError(f"x has {len(x)} rows but y has {len(y)}")
        check_finite(y.unsqueeze(-1), "targets")
        lifted = self.lift(x)  # [n, D + 1]
        phi_r = self.features.kuf(self.kernel, lifted).T  # [n, M], rows r_i phi(z_i)
        self.stat_gram += phi_r.T @ phi_r
        self.stat_cross += phi_r.T @ y
        self.stat_yy += y @ y
        radius = lifted.norm(dim=-1) if self._homogeneous else torch.ones(len(x), dtype=x.dtype)
        self.stat_radius2 += (radius**2).sum()
        self.stat_count += len(y)

    def fit_statistics(
        self,
        x: torch.Tensor | np.ndarray | None = None,
        y: torch.Tensor | np.ndarray | None = None,
        *,
        chunks: Iterable[tuple[torch.Tensor, torch.Tensor]] | None = None,
        chunk_size: int = 4096,
    ) -> None:
        """One streaming pass: from arrays (x, y) (numpy memmaps are read chunk by chunk) or from
        an iterable of (x, y) chunks. Replaces earlier statistics."""
        self.reset_statistics()
        if chunks is None:
            if x is None or y is None:
                raise ValueError("give x and y, or chunks")
            chunks = (
                (x[i : i + chunk_size], y[i : i + chunk_size]) for i in range(0, len(x), chunk_size)
            )
        for x_chunk, y_chunk in chunks:
            self.accumulate(
                torch.as_tensor(np.asarray(x_chunk)), torch.as_tensor(np.asarray(y_chunk))
            )
        if self.stat_count == 0:
            raise ValueError("no data: the statistics are empty")

    @property
    def _homogeneous(self) -> bool:
        from zonal.features.base import base_zonal_kernel

        return bool(getattr(base_zonal_kernel(self.kernel)[0], "homogeneous", False))

    # ------------------------------------------------------------------ bound
    def _kernel_diagonal(self) -> torch.Tensor:
        """k(1): the constant diagonal of the zonal kernel on the sphere."""
        from zonal.features.base import base_zonal_kernel

        ambient_dim = base_zonal_kernel(self.kernel)[0].ambient_dim
        unit = torch.zeros(1, ambient_dim, dtype=torch.float64)
        unit[0, -1] = 1.0
        return self.kernel(unit, diag=True).reshape(())

    def _posterior_terms(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Lambda^{1/2} [M], L_B [M, M], noise variance s^2)."""
        eigenvalues = self.features.kuu(self.kernel).diagonal().reciprocal()  # [M] = Lambda
        root = eigenvalues.sqrt()  # [M]
        noise = self.likelihood.noise.reshape(())
        matrix = root[:, None] * self.stat_gram * root[None, :] / noise  # [M, M]
        matrix = matrix + torch.eye(len(root), dtype=matrix.dtype)
        return root, cholesky(matrix, name="SGPR matrix B = I + L^1/2 A L^1/2 / s^2"), noise

    def elbo(self) -> torch.Tensor:
        """The collapsed bound on log p(y) (a scalar), from the statistics alone."""
        if self.stat_count == 0:
            raise ValueError("call fit_statistics first")
        root, factor, noise = self._posterior_terms()
        count = self.stat_count
        w = torch.linalg.solve_triangular(
            factor, (root * self.stat_cross).unsqueeze(-1), upper=False
        ).squeeze(-1)  # [M]
        trace_kff = self._kernel_diagonal() * self.stat_radius2
        trace_qff = (root**2 * self.stat_gram.diagonal()).sum()
        return (
            -0.5 * count * torch.log(2 * math.pi * noise)
            - factor.diagonal().log().sum()
            - 0.5 * self.stat_yy / noise
            + 0.5 * (w @ w) / noise**2
            - 0.5 * (trace_kff - trace_qff) / noise
        )

    def fit(self, max_iter: int = 100, lr: float = 1.0) -> list[float]:
        """Maximise the bound over kernel hyperparameters and noise by L-BFGS; returns the trace."""
        parameters = [p for p in self.parameters() if p.requires_grad]
        optimiser = torch.optim.LBFGS(
            parameters, lr=lr, max_iter=max_iter, line_search_fn="strong_wolfe"
        )
        trace: list[float] = []

        def closure() -> torch.Tensor:
            optimiser.zero_grad()
            loss = -self.elbo() / self.stat_count
            loss.backward()
            trace.append(float(-loss.detach()))
            return loss

        optimiser.step(closure)
        return trace

    # ------------------------------------------------------------------ predictions
    @torch.no_grad()
    def predict(
        self, x: torch.Tensor, *, include_noise: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance [N] of f(x) (or y with ``include_noise``) in data space."""
        lifted = self.lift(torch.as_tensor(x, dtype=torch.float64))
        phi_r = self.features.kuf(self.kernel, lifted).T  # [N, M]
        root, factor, noise = self._posterior_terms()
        scaled = phi_r * root  # [N, M] = phi_r Lambda^{1/2}
        solved = torch.cholesky_solve((root * self.stat_cross).unsqueeze(-1), factor).squeeze(-1)
        mean = scaled @ solved / noise
        radius = (
            lifted.norm(dim=-1)
            if self._homogeneous
            else torch.ones(len(lifted), dtype=lifted.dtype)
        )
        projected = torch.linalg.solve_triangular(factor, scaled.T, upper=False)  # [M, N]
        variance = (
            self._kernel_diagonal() * radius**2 - (scaled**2).sum(-1) + (projected**2).sum(0)
        ).clamp(min=0)
        if include_noise:
            variance = variance + noise
        return mean, variance

    @torch.no_grad()
    def predictive_log_density(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """log N(y_i | mean_i, var_i + s^2) per point [N]."""
        mean, variance = self.predict(x, include_noise=True)
        y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
        return -0.5 * (torch.log(2 * math.pi * variance) + (y - mean) ** 2 / variance)
