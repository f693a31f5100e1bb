"""``ZonalKernel``: a GPyTorch kernel k(x, x') = s(x . x') on S^{d-1} with its eigenvalue sequence.

A zonal kernel is fixed by its shape function s: [-1, 1] -> R, or equally by its eigenvalues
lambda_n, one per harmonic level (seed 000 eqs. 8-10):

    s(t) = sum_{n>=0} lambda_n Z_n(t),   Z_n(t) = (n + alpha) / alpha C_n^alpha(t),  alpha = (d-2)/2,
    lambda_n = omega_d / C_n^alpha(1) int_{-1}^1 s(t) C_n^alpha(t) (1 - t^2)^{(d-3)/2} dt   (eq. 9).

Subclasses supply the closed form ``shape(t)`` where one exists, and/or ``_compute_eigenvalues``;
by default the eigenvalues come from ``zonal.harmonics.funk_hecke`` applied to the shape and stay
differentiable in the hyperparameters. The kernel is evaluated by the closed form when it has one,
and otherwise by the truncated Mercer sum up to ``max_degree`` (``zonal.kernels.mercer``).

With ``homogeneous=True`` the kernel takes raw vectors in R^d and is extended 1-homogeneously,
k(x, x') = ||x|| ||x'|| s(x . x' / (||x|| ||x'||)) (seed 000 eq. 7, seed 002 eq. 11); otherwise its
inputs must be unit vectors and are checked.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from gpytorch.kernels import Kernel

from zonal._validation import check_ambient_dim, check_degree, check_finite, check_unit_vectors
from zonal.harmonics import funk_hecke
from zonal.kernels.mercer import mercer_sum

_EVALUATIONS = ("auto", "closed_form", "mercer")


_TILE = 256


def _mirror_upper_triangle_(t: torch.Tensor) -> None:
    """Copy the upper triangle of square t [..., N, N] onto the lower one, in place, tile by tile.

    Tiles of 256 x 256 keep the transposed reads in cache (8x faster than t + t.mT at N = 4096);
    works under autograd (the clamp before it does not save its output).
    """
    n = t.shape[-1]
    for i in range(0, n, _TILE):
        for j in range(i + _TILE, n, _TILE):
            t[..., j : j + _TILE, i : i + _TILE] = t[..., i : i + _TILE, j : j + _TILE].mT
        tile = t[..., i : i + _TILE, i : i + _TILE]
        tile.copy_(torch.triu(tile) + torch.triu(tile, 1).mT)


class ZonalKernel(Kernel):
    """Base class of the zonal kernels: shape function, eigenvalues, Gram matrices.

    Args:
        ambient_dim: d, the inputs live on S^{d-1} subset R^d.
        max_degree: truncation L of the Mercer sum, used when the kernel is evaluated by its
            eigenvalues (kernels without a closed form, or ``evaluation="mercer"``).
        homogeneous: take raw vectors and multiply by ||x|| ||x'|| (1-homogeneous extension).
        evaluation: ``"auto"`` (closed form if there is one), ``"closed_form"`` or ``"mercer"``.
        num_nodes: quadrature nodes per piece for Funk-Hecke eigenvalues (default max(4 L, 500)).
        dtype: dtype of the hyperparameters (float64 by default).
        **kwargs: passed to ``gpytorch.kernels.Kernel`` (``batch_shape``, ``active_dims``, ...).

    Shapes: hyperparameters are [*batch_shape, 1, 1]; ``shape(t)`` maps cosines t [..., N, M] to
    kernel values [..., N, M] (broadcasting batch dimensions); ``eigenvalues(L)`` returns
    [*batch_shape, L + 1].
    """

    has_lengthscale = False
    #: points in (-1, 1) where the shape function is not smooth (split the Funk-Hecke quadrature)
    shape_kinks: ClassVar[tuple[float, ...]] = ()

    def __init__(
        self,
        ambient_dim: int,
        *,
        max_degree: int = 30,
        homogeneous: bool = False,
        evaluation: str = "auto",
        num_nodes: int | None = None,
        dtype: torch.dtype = torch.float64,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.ambient_dim = check_ambient_dim(ambient_dim)
        self.max_degree = check_degree(max_degree)
        if not isinstance(homogeneous, bool):
            raise ValueError(f"homogeneous must be a bool, got {homogeneous!r}")
        self.homogeneous = homogeneous
        if evaluation not in _EVALUATIONS:
            raise ValueError(f"evaluation must be one of {_EVALUATIONS}, got {evaluation!r}")
        if evaluation == "closed_form" and not self.has_closed_form:
            raise ValueError(f"{type(self).__name__} has no closed form; use evaluation='mercer'")
        self.evaluation = evaluation
        self.num_nodes = None if num_nodes is None else check_degree(num_nodes, "num_nodes")
        self._dtype = dtype
        if self.has_lengthscale:
            self.raw_lengthscale.data = self.raw_lengthscale.data.to(dtype)

    def _set_lengthscale(self, value: torch.Tensor | float) -> None:
        # GPyTorch turns a Python float into float32 first (0.7 -> 0.699999988); keep float64.
        if not torch.is_tensor(value):
            value = torch.as_tensor(
                value, dtype=self.raw_lengthscale.dtype, device=self.raw_lengthscale.device
            )
        super()._set_lengthscale(value)

    # ------------------------------------------------------------------ subclass interface
    @property
    def has_closed_form(self) -> bool:
        """Whether ``shape`` is implemented in closed form."""
        return type(self).shape is not ZonalKernel.shape

    def shape(self, t: torch.Tensor) -> torch.Tensor:
        """The shape function s(t) in closed form, t [..., N, M] -> [..., N, M]."""
        raise NotImplementedError(f"{type(self).__name__} has no closed-form shape function")

    def _compute_eigenvalues(self, max_degree: int) -> torch.Tensor:
        """lambda_0..lambda_L [*batch_shape, L + 1]; default: Funk-Hecke of ``shape`` (eq. 9)."""
        return self._funk_hecke(self.shape, max_degree)

    def spectrum_settings(self) -> tuple:
        """Non-tensor settings the eigenvalues depend on (part of the cache key)."""
        return (self.ambient_dim, self.num_nodes)

    # ------------------------------------------------------------------ eigenvalues
    def _hyper_dtype(self) -> torch.dtype:
        for tensor in self.parameters():
            return tensor.dtype
        return self._dtype

    def _hyper_device(self) -> torch.device | None:
        for tensor in self.parameters():
            return tensor.device
        return None

    def _funk_hecke(self, shape_fn, max_degree: int) -> torch.Tensor:
        """Funk-Hecke coefficients of a batched shape function: [*batch_shape, L + 1].

        ``shape_fn`` maps t [1, Q] to [*batch_shape, 1, Q]; each batch member goes through
        ``zonal.harmonics.funk_hecke`` (differentiable in the hyperparameters).
        """
        num_nodes = self.num_nodes or max(4 * max_degree, 500)
        dtype, device = self._hyper_dtype(), self._hyper_device()
        batch_shape = self.batch_shape
        size = batch_shape.numel()

        def member(index: int):
            def shape_of_member(t: torch.Tensor) -> torch.Tensor:
                values = shape_fn(t.reshape(1, -1))  # [*batch_shape, 1, Q] or [1, Q]
                values = values.expand(*batch_shape, 1, t.numel()).reshape(size, -1)
                return values[index]  # [Q]

            return shape_of_member

        rows = [
            funk_hecke(
                member(i),
                self.ambient_dim,
                max_degree,
                kinks=self.shape_kinks,
                num_nodes=num_nodes,
                dtype=dtype,
                device=device,
            )
            for i in range(size)
        ]  # size x [L + 1]
        return torch.stack(rows).reshape(*batch_shape, max_degree + 1)

    def _cache(self) -> dict:
        return self.__dict__.setdefault("_eigenvalue_cache", {})

    def _snapshot(self) -> tuple[torch.Tensor, ...]:
        tensors = [p for _, p in self.named_parameters()] + [b for _, b in self.named_buffers()]
        return tuple(tensor.detach().clone() for tensor in tensors)

    def eigenvalues(self, max_degree: int | None = None) -> torch.Tensor:
        """lambda_0..lambda_L on S^{d-1}, shape [*batch_shape, L + 1] (L defaults to max_degree).

        Cached per truncation; an entry is reused only while every parameter and buffer holds the
        value it had when the entry was made and the settings (``spectrum_settings``) agree. An
        entry that carries an autograd graph is dropped once a backward pass has gone through it
        (its graph is then freed), so the eigenvalues stay differentiable in the hyperparameters.
        """
        max_degree = self.max_degree if max_degree is None else check_degree(max_degree)
        cache = self._cache()
        key = (max_degree, self.spectrum_settings())
        snapshot = self._snapshot()
        needs_graph = torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters())
        entry = cache.get(key)
        if entry is not None:
            old_snapshot, values, has_graph = entry
            same = len(old_snapshot) == len(snapshot) and all(
                a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
                for a, b in zip(old_snapshot, snapshot, strict=True)
            )
            if same and (has_graph or not needs_graph):
                return values
        values = self._compute_eigenvalues(max_degree)
        if max_degree > self.max_degree and not self.uses_closed_form:
            # evaluated as the truncated Mercer sum: the kernel has no mass above its truncation
            keep = torch.arange(max_degree + 1, device=values.device) <= self.max_degree
            values = values * keep.to(values.dtype)
        if not needs_graph:
            values = values.detach()
        has_graph = values.requires_grad
        cache[key] = (snapshot, values, has_graph)
        if has_graph:

            def drop_after_backward(grad: torch.Tensor) -> None:
                if cache.get(key, (None, None))[1] is values:
                    del cache[key]

            values.register_hook(drop_after_backward)
        return values

    def clear_cache(self) -> None:
        """Forget all cached eigenvalues."""
        self._cache().clear()

    def __getstate__(self) -> dict:
        # Cached eigenvalues may carry an autograd graph: never copy or pickle them.
        state = dict(super().__getstate__())
        state.pop("_eigenvalue_cache", None)
        return state

    # ------------------------------------------------------------------ evaluation
    @property
    def uses_closed_form(self) -> bool:
        """Whether ``forward`` evaluates the closed form (else the truncated Mercer sum)."""
        return self.has_closed_form and self.evaluation != "mercer"

    def mercer(self, t: torch.Tensor, max_degree: int | None = None) -> torch.Tensor:
        """Truncated Mercer sum sum_{n<=L} lambda_n Z_n(t) at cosines t [..., N, M] (eq. 10)."""
        eigenvalues = self.eigenvalues(max_degree).to(dtype=t.dtype, device=t.device)
        # eigenvalues [*batch_shape, L + 1] -> coefficients [*batch_shape, 1, 1, L + 1]
        coeffs = eigenvalues.unsqueeze(-2).unsqueeze(-2)
        return mercer_sum(t, coeffs, self.ambient_dim)

    def evaluate_cosines(self, t: torch.Tensor) -> torch.Tensor:
        """Kernel values at cosines t [..., N, M] (closed form or truncated Mercer sum)."""
        return self.shape(t) if self.uses_closed_form else self.mercer(t)

    def _cosines(
        self, x1: torch.Tensor, x2: torch.Tensor, diag: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Cosines t [..., N, M] (diag: [..., N]) clamped to [-1, 1], and ||x|| ||x'|| if needed."""
        same = x1.shape == x2.shape and torch.equal(x1, x2)
        if self.homogeneous:
            for name, x in (("x1", x1), ("x2", x2)):
                if x.shape[-1] != self.ambient_dim:
                    raise ValueError(
                        f"{name} must have last dimension ambient_dim={self.ambient_dim}, "
                        f"got shape {tuple(x.shape)}"
                    )
                check_finite(x, name)
            norm1 = x1.norm(dim=-1)  # [..., N]
            norm2 = norm1 if same else x2.norm(dim=-1)  # [..., M]
            if (norm1 == 0).any() or (norm2 == 0).any():
                raise ValueError("homogeneous zonal kernels need non-zero input vectors")
            unit1 = x1 / norm1.unsqueeze(-1)  # [..., N, d]
            unit2 = x2 / norm2.unsqueeze(-1)  # [..., M, d]
        else:
            check_unit_vectors(x1, self.ambient_dim, "x1")
            if not same:
                check_unit_vectors(x2, self.ambient_dim, "x2")
            unit1, unit2 = x1, x2
        if diag:
            if same:  # k(x, x) = s(1): the cosine is exactly one, with no gradient
                t = torch.ones(unit1.shape[:-1], dtype=unit1.dtype, device=unit1.device)
            else:
                t = (unit1 * unit2).sum(-1).clamp(-1, 1)  # [..., N]
            scale = norm1 * norm2 if self.homogeneous else None
            return t, scale
        t = unit1 @ unit2.transpose(-2, -1)  # [..., N, M]
        t = t.clamp(-1, 1) if t.requires_grad else t.clamp_(-1, 1)
        if same:  # exactly symmetric (matmul need not be), diagonal pinned to exactly 1
            _mirror_upper_triangle_(t)
            t.diagonal(dim1=-2, dim2=-1).fill_(1.0)
        scale = norm1.unsqueeze(-1) * norm2.unsqueeze(-2) if self.homogeneous else None
        return t, scale

    def forward(
        self,
        x1: torch.Tensor,
        x2: torch.Tensor,
        diag: bool = False,
        last_dim_is_batch: bool = False,
        **params: Any,
    ) -> torch.Tensor:
        """K(x1, x2) [..., N, M], or its diagonal [..., N] with ``diag=True``."""
        if last_dim_is_batch:
            raise ValueError("zonal kernels act on whole vectors: last_dim_is_batch is unsupported")
        t, scale = self._cosines(x1, x2, diag)
        # diag: t [..., N] -> [..., N, 1] so that hyperparameters [*batch, 1, 1] broadcast
        values = (
            self.evaluate_cosines(t.unsqueeze(-1)).squeeze(-1) if diag else self.evaluate_cosines(t)
        )
        if scale is not None:
            values = values * scale
        return values
