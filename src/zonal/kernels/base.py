r"""``ZonalKernel``: a GPyTorch kernel :math:`k(x, x') = s(x \cdot x')` on :math:`\mathbb{S}^{d-1}`
with its eigenvalue sequence.

A zonal kernel is fixed by its shape function :math:`s: [-1, 1] \to \mathbb{R}`, or equally by its
eigenvalues :math:`\lambda_n`, one per harmonic level (seed 000 eqs. 8-10):

.. math::

    s(t) &= \sum_{n \ge 0} \lambda_n Z_n(t), \qquad
    Z_n(t) = \frac{n + \alpha}{\alpha} C_n^\alpha(t), \qquad \alpha = \frac{d - 2}{2}, \\
    \lambda_n &= \frac{\omega_d}{C_n^\alpha(1)} \int_{-1}^{1} s(t)\, C_n^\alpha(t)\,
    (1 - t^2)^{(d-3)/2} \, dt \qquad \text{(eq. 9)}.

Subclasses supply the closed form ``shape(t)`` where one exists, and/or ``_compute_eigenvalues``;
by default the eigenvalues come from ``zonal.harmonics.funk_hecke`` applied to the shape and stay
differentiable in the hyperparameters. The kernel is evaluated by the closed form when it has one,
and otherwise by the truncated Mercer sum up to ``max_degree`` (``zonal.kernels.mercer``).

With ``homogeneous=True`` the kernel takes raw vectors in :math:`\mathbb{R}^d` and is extended
1-homogeneously, :math:`k(x, x') = \|x\| \|x'\|\, s\big(x \cdot x' / (\|x\| \|x'\|)\big)` (seed 000
eq. 7, seed 002 eq. 11); otherwise its inputs must be unit vectors and are checked.

Evaluation: when no gradient is needed (no input or hyperparameter requires one, or under
``torch.no_grad``) a Gram matrix is filled tile by tile in cache (``zonal.kernels.tiles``), by a
module-level function of the cosines (``cosine_map``) that large matrices run compiled
(``zonal.kernels.compile``); otherwise whole-matrix autograd operations build the graph.

dtype and device: float64 by default (``dtype=``). GPyTorch's ``Kernel.dtype`` / ``Kernel.device``
read the parameters only; a zonal kernel also carries a zero buffer ``anchor`` of its batch shape,
so that a kernel without hyperparameters reports both, follows ``.to(...)`` and batch indexing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import torch
from gpytorch.kernels import Kernel

from zonal._validation import check_ambient_dim, check_degree, check_finite, check_unit_vectors
from zonal.harmonics import funk_hecke, gegenbauer_alpha
from zonal.harmonics.recurrence import clenshaw_series
from zonal.kernels.mercer import mercer_sum, zonal_coefficients
from zonal.kernels.tiles import CosineMap, gram_no_grad

_EVALUATIONS = ("auto", "closed_form", "mercer")


class _UnitInputs(NamedTuple):
    """Inputs on the unit sphere, their norms (homogeneous kernels) and how x1 relates to x2."""

    unit1: torch.Tensor  # [..., N, d]
    unit2: torch.Tensor  # [..., M, d]
    norm1: torch.Tensor | None  # [..., N]
    norm2: torch.Tensor | None  # [..., M]
    equal: bool  # x1 == x2 in value
    symmetric: bool  # equal, and one autograd graph: K(x, x) symmetric with its derivatives


#: the keyword arguments of ``gpytorch.kernels.Kernel`` a zonal kernel passes on
KERNEL_OPTIONS = ("batch_shape", "active_dims", "lengthscale_prior", "lengthscale_constraint")


def check_kernel_options(kernel: type, options: dict[str, Any]) -> None:
    r"""Refuse the keyword arguments ``gpytorch.kernels.Kernel`` would take and ignore: an
    unknown name (a misspelt ``homogeneous``, say), ``ard_num_dims`` (a zonal kernel reads
    :math:`x \cdot x'` on the sphere; input relevance lives in the input map), and a lengthscale
    prior or constraint on a kernel without a lengthscale."""
    name = kernel.__name__
    if "ard_num_dims" in options:
        raise ValueError(
            f"{name} takes no ard_num_dims: a zonal kernel is a function of x . x' on the sphere; "
            "learn one scale per input column with the model's input map, "
            "zonal.geometry.SphereEmbedding(bias, input_scales=torch.ones(D))"
        )
    unknown = sorted(set(options) - set(KERNEL_OPTIONS))
    if unknown:
        raise TypeError(f"{name} got unexpected keyword argument(s) {', '.join(unknown)}")
    given = sorted({"lengthscale_prior", "lengthscale_constraint"} & set(options))
    if given and not getattr(kernel, "has_lengthscale", False):
        raise ValueError(f"{name} has no lengthscale: drop {', '.join(given)}")


class ZonalKernel(Kernel):
    r"""Base class of the zonal kernels: shape function, eigenvalues, Gram matrices.

    Args:
        ambient_dim: :math:`d`, the inputs live on :math:`\mathbb{S}^{d-1} \subset \mathbb{R}^d`.
        max_degree: truncation :math:`L` of the Mercer sum, used when the kernel is evaluated by its
            eigenvalues (kernels without a closed form, or ``evaluation="mercer"``).
        homogeneous: take raw vectors and multiply by :math:`\|x\| \|x'\|` (1-homogeneous
            extension).
        evaluation: ``"auto"`` (closed form if there is one), ``"closed_form"`` or ``"mercer"``.
        num_nodes: quadrature nodes per piece for Funk-Hecke eigenvalues (default
            :math:`\max(4 L, 500)`).
        dtype: dtype of the hyperparameters (float64 by default).
        **kwargs: passed to ``gpytorch.kernels.Kernel`` (``batch_shape``, ``active_dims``, ...).

    Shapes: hyperparameters are [*batch_shape, 1, 1]; ``shape(t)`` maps cosines :math:`t`
    [..., N, M] to kernel values [..., N, M] (broadcasting batch dimensions); ``eigenvalues(L)``
    returns [*batch_shape, L + 1].
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
        check_kernel_options(type(self), kwargs)
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
        # dtype / device of a kernel without hyperparameters (module docstring)
        self.register_buffer("anchor", torch.zeros(self.batch_shape, dtype=dtype), persistent=False)
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
        """The shape function :math:`s(t)` in closed form, :math:`t` [..., N, M] -> [..., N, M]."""
        raise NotImplementedError(f"{type(self).__name__} has no closed-form shape function")

    def _compute_eigenvalues(self, max_degree: int) -> torch.Tensor:
        """lambda_0..lambda_L [*batch_shape, L + 1]; default: Funk-Hecke of ``shape`` (eq. 9)."""
        return self._funk_hecke(self.shape, max_degree)

    def spectrum_settings(self) -> tuple:
        """Non-tensor settings the eigenvalues depend on (part of the cache key)."""
        return (self.ambient_dim, self.num_nodes)

    # ------------------------------------------------------------------ eigenvalues
    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the hyperparameters and buffers (float64 unless converted with ``.to``)."""
        return self._unique("dtype")

    @property
    def device(self) -> torch.device:
        """The device of the hyperparameters and buffers."""
        return self._unique("device")

    def _unique(self, attribute: str) -> Any:
        """The one dtype / device of the parameters and own floating-point buffers (``anchor``)."""
        buffers = [b for b in self.buffers(recurse=False) if b.is_floating_point()]
        values = {getattr(tensor, attribute) for tensor in [*self.parameters(), *buffers]}
        if len(values) > 1:
            raise RuntimeError(f"The kernel's parameters have multiple {attribute}s: {values}.")
        return values.pop()

    def _funk_hecke(
        self, shape_fn: Callable[[torch.Tensor], torch.Tensor], max_degree: int
    ) -> torch.Tensor:
        """Funk-Hecke coefficients of a batched shape function: [*batch_shape, L + 1].

        ``shape_fn`` maps t [1, Q] to [*batch_shape, 1, Q]; each batch member goes through
        ``zonal.harmonics.funk_hecke`` (differentiable in the hyperparameters).
        """
        num_nodes = self.num_nodes or max(4 * max_degree, 500)
        dtype, device = self.dtype, self.device
        batch_shape = self.batch_shape
        size = batch_shape.numel()

        def member(index: int) -> Callable[[torch.Tensor], torch.Tensor]:
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
        r""":math:`\lambda_0, \dots, \lambda_L` on :math:`\mathbb{S}^{d-1}`, shape
        [*batch_shape, L + 1] (:math:`L` defaults to max_degree).

        Cached per truncation; an entry is reused only while every parameter and buffer holds the
        value it had when the entry was made, on the same device, and the settings
        (``spectrum_settings``) agree. An entry that carries an autograd graph is dropped once a
        backward pass has gone through it (its graph is then freed), so the eigenvalues stay
        differentiable in the hyperparameters.
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
                a.shape == b.shape
                and a.dtype == b.dtype
                and a.device == b.device  # moved by .to(device): recompute there
                and torch.equal(a, b)
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
        r"""Truncated Mercer sum :math:`\sum_{n \le L} \lambda_n Z_n(t)` at cosines :math:`t`
        [..., N, M] (eq. 10)."""
        eigenvalues = self.eigenvalues(max_degree).to(dtype=t.dtype, device=t.device)
        # eigenvalues [*batch_shape, L + 1] -> coefficients [*batch_shape, 1, 1, L + 1]
        coeffs = eigenvalues.unsqueeze(-2).unsqueeze(-2)
        return mercer_sum(t, coeffs, self.ambient_dim)

    def evaluate_cosines(self, t: torch.Tensor) -> torch.Tensor:
        """Kernel values at cosines :math:`t` [..., N, M] (closed form or truncated Mercer sum)."""
        return self.shape(t) if self.uses_closed_form else self.mercer(t)

    def closed_form_map(self, dtype: torch.dtype, device: torch.device) -> CosineMap:
        """The shape :math:`s(t)` as a ``CosineMap`` for evaluation without autograd.

        The default wraps ``shape`` (kept eager); subclasses return a module-level function of the
        cosines and their hyperparameters, which large Gram matrices run compiled.
        """
        return CosineMap(self.shape, compilable=False)

    def cosine_map(self, dtype: torch.dtype, device: torch.device) -> CosineMap:
        r""":math:`t` [..., N, M] -> kernel values without autograd, for ``tiles.gram_no_grad``.

        The closed form (``closed_form_map``) or Clenshaw's sum of the truncated Mercer series with
        Gegenbauer coefficients :math:`\lambda_n (n + \alpha) / \alpha`, computed once here
        (seed 000 eq. 10).
        """
        if self.uses_closed_form:
            return self.closed_form_map(dtype, device)
        eigenvalues = self.eigenvalues().detach().to(dtype=dtype, device=device)
        # eigenvalues [*batch_shape, L + 1] -> Gegenbauer coefficients [*batch_shape, 1, 1, L + 1]
        coeffs = zonal_coefficients(eigenvalues, self.ambient_dim).unsqueeze(-2).unsqueeze(-2)
        return CosineMap(clenshaw_series, (coeffs, gegenbauer_alpha(self.ambient_dim)))

    def _unit_inputs(self, x1: torch.Tensor, x2: torch.Tensor) -> _UnitInputs:
        """Checked unit vectors [..., N, d], [..., M, d], the norms (homogeneous), x1 == x2."""
        equal = x1.shape == x2.shape and torch.equal(x1, x2)
        # K(x, x.detach()) is not symmetric in its derivative: symmetry needs one graph
        symmetric = equal and (x1 is x2 or not (x1.requires_grad or x2.requires_grad))
        if not self.homogeneous:
            check_unit_vectors(x1, self.ambient_dim, "x1")
            if not equal:
                check_unit_vectors(x2, self.ambient_dim, "x2")
            return _UnitInputs(x1, x2, None, None, equal, symmetric)
        for name, x in (("x1", x1), ("x2", x2)):
            if x.shape[-1] != self.ambient_dim:
                raise ValueError(
                    f"{name} must have last dimension ambient_dim={self.ambient_dim}, "
                    f"got shape {tuple(x.shape)}"
                )
            check_finite(x, name)
        norm1 = x1.norm(dim=-1)  # [..., N]
        norm2 = norm1 if symmetric else x2.norm(dim=-1)  # [..., M]
        if (norm1 == 0).any() or (norm2 == 0).any():
            raise ValueError("homogeneous zonal kernels need non-zero input vectors")
        unit1 = x1 / norm1.unsqueeze(-1)  # [..., N, d]
        unit2 = unit1 if symmetric else x2 / norm2.unsqueeze(-1)  # [..., M, d]
        return _UnitInputs(unit1, unit2, norm1, norm2, equal, symmetric)

    def _needs_graph(self, inputs: _UnitInputs) -> bool:
        """Whether the output must carry an autograd graph (to the inputs or hyperparameters)."""
        if not torch.is_grad_enabled():
            return False
        return (
            inputs.unit1.requires_grad
            or inputs.unit2.requires_grad
            or any(p.requires_grad for p in self.parameters())
        )

    def _diag(self, inputs: _UnitInputs) -> torch.Tensor:
        """k(x_i, x'_i) [..., N]."""
        unit1, unit2 = inputs.unit1, inputs.unit2
        if inputs.equal:  # k(x, x) = s(1): cosine exactly one; its derivative is 0 there
            t = torch.ones(unit1.shape[:-1], dtype=unit1.dtype, device=unit1.device)  # [..., N]
        else:
            t = (unit1 * unit2).sum(-1).clamp(-1, 1)  # [..., N]
        # t [..., N] -> [..., N, 1] so that hyperparameters [*batch, 1, 1] broadcast
        values = self.evaluate_cosines(t.unsqueeze(-1)).squeeze(-1)  # [..., N]
        if inputs.norm1 is None or inputs.norm2 is None:  # both or neither
            return values
        return values * (inputs.norm1 * inputs.norm2)

    def _gram_with_graph(self, inputs: _UnitInputs) -> torch.Tensor:
        """K [..., N, M] by whole-matrix autograd operations."""
        t = (inputs.unit1 @ inputs.unit2.mT).clamp(-1, 1)  # [..., N, M]
        if inputs.symmetric:  # exactly symmetric (matmul need not be)
            t = torch.triu(t) + torch.triu(t, 1).mT
        if inputs.equal:  # k(x, x) = s(1): cosine exactly one, derivative 0 (as in ``_diag``)
            ones = torch.ones(t.shape[:-1], dtype=t.dtype, device=t.device)  # [..., N]
            t = t.diagonal_scatter(ones, dim1=-2, dim2=-1)
        values = self.evaluate_cosines(t)  # [..., N, M]
        if inputs.norm1 is None or inputs.norm2 is None:  # both or neither
            return values
        return values * (inputs.norm1.unsqueeze(-1) * inputs.norm2.unsqueeze(-2))

    def forward(
        self,
        x1: torch.Tensor,
        x2: torch.Tensor,
        diag: bool = False,
        last_dim_is_batch: bool = False,
        **params: Any,
    ) -> torch.Tensor:
        """:math:`K(x_1, x_2)` [*B, N, M], or its diagonal [*B, N] with ``diag=True``.

        B broadcasts the inputs' batch shapes and the kernel's ``batch_shape``. Without a graph to
        build (no gradient needed) the matrix is assembled tile by tile (``tiles.gram_no_grad``).
        """
        if last_dim_is_batch:
            raise ValueError("zonal kernels act on whole vectors: last_dim_is_batch is unsupported")
        inputs = self._unit_inputs(x1, x2)
        if diag:
            values = self._diag(inputs)  # [..., N]
            batch = torch.broadcast_shapes(values.shape[:-1], self.batch_shape)
            return values.expand(*batch, values.shape[-1])
        if self._needs_graph(inputs):
            values = self._gram_with_graph(inputs)  # [..., N, M]
        else:
            values = gram_no_grad(
                inputs.unit1,
                inputs.unit2,
                self.cosine_map(inputs.unit1.dtype, inputs.unit1.device),
                same=inputs.symmetric,
                batch_shape=self.batch_shape,
                scale1=inputs.norm1,
                scale2=inputs.norm2,
            )  # [*B, N, M]
        batch = torch.broadcast_shapes(values.shape[:-2], self.batch_shape)
        return values.expand(*batch, *values.shape[-2:])
