r"""Collapsed SGPR with spherical-harmonic features: one pass over the data, then steps free of
:math:`N`.

For a Gaussian likelihood the optimal :math:`q(u)` is available in closed form (Titsias, 2009).
With spherical-harmonic features :math:`K_{uf} = \Phi_r^\top` (rows :math:`r_i \phi(z_i)`,
:math:`r_i = \|[x_i, b]\|`, seed 000 sec. 4.1) and
:math:`K_{uu}^{-1} = \Lambda = \operatorname{diag}(\lambda_{n(m)})` (seed 002 eqs. 17-18), the
bound

.. math::

    \log \mathcal{N}(y \mid 0, \Phi_r \Lambda \Phi_r^\top + s^2 I)
    - (\operatorname{tr} K_{ff} - \operatorname{tr} Q_{ff}) / (2 s^2)

depends on the data only through the sufficient statistics

.. math::

    A = \Phi_r^\top \Phi_r \ [M, M], \qquad c = \Phi_r^\top y \ [M], \qquad y^\top y, \qquad N,
    \qquad \sum_i r_i^2,

because :math:`\operatorname{tr} K_{ff} = k(1) \sum_i r_i^2` (zonal kernels have a constant
diagonal) and :math:`\operatorname{tr} Q_{ff} = \operatorname{tr}(\Lambda A)`. With
:math:`B = I + \Lambda^{1/2} A \Lambda^{1/2} / s^2 = L_B L_B^\top` and
:math:`w = L_B^{-1} \Lambda^{1/2} c`:

.. math::

    \text{bound} = -\tfrac{N}{2} \log(2 \pi s^2) - \sum \log \operatorname{diag} L_B
    - y^\top y / (2 s^2) + \|w\|^2 / (2 s^4)
    - \big(k(1) \sum r^2 - \operatorname{tr}(\Lambda A)\big) / (2 s^2).

The statistics are accumulated in one streaming pass over chunks (:math:`N` may exceed memory);
each optimisation step then costs :math:`O(M^3)`, independent of :math:`N`. The posterior of
:math:`f` at :math:`X_\ast` (rows :math:`\psi_\ast = r_\ast \phi_\ast^\top \Lambda^{1/2}`,
:math:`P = L_B^{-1} \psi_\ast^\top`):

.. math::

    \text{mean} &= \psi_\ast L_B^{-\top} w / s^2, \\
    \text{cov} &= K_{\ast\ast} - \psi_\ast \psi_\ast^\top + P^\top P \qquad
    \text{(the diagonal: } r_\ast^2 k(1) - \lvert \psi_\ast \rvert^2 + \lvert P \rvert^2 \text{)}.

**Input scales (ARD).** With ``SphereEmbedding(input_scales=...)`` the rows are
:math:`r_i \phi(z_i)` of :math:`z_i = [s \odot x_i, b] / r_i`, :math:`r_i = \|[s \odot x_i, b]\|`,
so every statistic depends on :math:`s` and a step in :math:`s` invalidates the pass.
``fit_input_scales`` uses an alternating scheme:

1. maximise the collapsed bound of a random subsample of :math:`n` rows (all rows when
   :math:`N \le n`) over :math:`s`, the kernel hyperparameters and the noise; every evaluation
   recomputes the subsample's statistics with gradients (exactly the bound above for those rows):
   :math:`O(n M^2 + M^3)` time and :math:`O(n M)` memory per L-BFGS evaluation;
2. one pass over all :math:`N` rows at the learned :math:`s` (``fit_statistics``):
   :math:`O(N M^2)`;
3. ``fit``: the kernel hyperparameters and the noise on the full statistics, :math:`O(M^3)` per
   step.

With :math:`n \ge N` step 1 is "a pass per scale update" (the exact full-data bound in :math:`s`).
Until step 2 has run the stored statistics belong to other scales: ``elbo`` and the predictions
refuse them by name.

The model answers the contract of ``zonal.models.contract`` (``posterior`` with any batch shape,
``predict``, ``log_predictive_density``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from botorch.models.transforms.input import InputTransform
from botorch.models.transforms.outcome import OutcomeTransform
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import GaussianLikelihood
from linear_operator.operators import DiagLinearOperator, SumLinearOperator

from zonal.features import InducingFeatures
from zonal.features.base import base_zonal_kernel
from zonal.geometry import InputMap
from zonal.linalg import cholesky
from zonal.models.conditioning import conditioned_copy
from zonal.models.contract import ZonalModel
from zonal.models.hyperpriors import registered_log_prior
from zonal.models.lbfgs import maximise_by_lbfgs
from zonal.models.sgpr_statistics import StatisticsKernel, read_ahead
from zonal.models.svgp import resolve_input_map
from zonal.variational.root_difference import RootDifferenceLinearOperator


def _chunk_tensor(chunk: torch.Tensor | np.ndarray) -> torch.Tensor:
    """A chunk of rows as a tensor: tensors as they are (any device), arrays shared with torch; a
    read-only array (a memmap opened with mode "r") is copied, one chunk at a time, since torch
    cannot share memory it may not write."""
    if isinstance(chunk, torch.Tensor):
        return chunk
    array = np.asarray(chunk)
    return torch.as_tensor(array if array.flags.writeable else array.copy())


def _take_rows(values: torch.Tensor | np.ndarray, rows: np.ndarray) -> torch.Tensor:
    """values[rows] as a tensor (a numpy array, e.g. a memmap, is indexed before conversion)."""
    if isinstance(values, np.ndarray):
        return torch.as_tensor(np.asarray(values[rows]))
    return torch.as_tensor(values)[torch.from_numpy(rows)]


def add_statistics(
    totals: Sequence[torch.Tensor] | None, parts: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    """Running totals of the statistics (in the order of ``SGPR.STATISTICS``) plus one chunk's
    ``chunk_statistics``; None totals start the sum."""
    if totals is None:
        return list(parts)
    return [total + part for total, part in zip(totals, parts, strict=True)]


class SGPR(ZonalModel):
    """Sparse GP regression with a diagonal-:math:`K_{uu}` feature and sufficient statistics.

    Args:
        kernel: a ``ZonalKernel`` (optionally in a ``ScaleKernel``), homogeneous when an embedding
            is used (the data-space GP is the 1-homogeneous extension).
        features: features with a diagonal :math:`K_{uu}` (``SphericalHarmonicFeatures``, or
            ``SparseSphericalHarmonicFeatures`` with fixed phases).
        input_dim: :math:`D`, the data dimension.
        input_map: a ``SphereEmbedding`` with a fixed bias (the statistics depend on it; None: the
            default, bias 1), possibly with input scales (``fit_input_scales``), or ``OnSphere()``
            for inputs on the sphere.
        noise: initial Gaussian noise variance.
        input_transform, outcome_transform: BoTorch transforms (e.g. ``Normalize``,
            ``Standardize``), as ``SingleTaskGP`` takes them; learn them on the data with
            ``x, y = model.transform_training_data(x, y)`` before ``fit_statistics``.

    The features are used as they are (their parameters, e.g. learnable phases, are left to the
    caller: the statistics are computed for the features at the time of ``fit_statistics``).
    """

    # buffers: the sufficient statistics (``STATISTICS``) and the input scales they were taken at
    stat_gram: torch.Tensor
    stat_cross: torch.Tensor
    stat_yy: torch.Tensor
    stat_radius2: torch.Tensor
    stat_count: torch.Tensor
    stat_input_scales: torch.Tensor

    def __init__(
        self,
        kernel: Kernel,
        features: InducingFeatures,
        input_dim: int,
        *,
        input_map: InputMap | None = None,
        noise: float = 0.1,
        input_transform: InputTransform | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(features.kuu(kernel), DiagLinearOperator):
            raise ValueError(
                "SGPR's one-pass statistics need features with a diagonal Kuu "
                "(spherical-harmonic features); use SVGP for other features"
            )
        # float64 throughout (the likelihood's, the statistics' totals'): a GPyTorch ScaleKernel
        # built in float32 would otherwise set the dtype the rows are read in
        self.kernel = kernel.to(torch.float64)
        self.features = features
        self.input_dim = int(input_dim)
        self.input_map = resolve_input_map(input_map, features, self.input_dim, self.kernel)
        if getattr(self.input_map, "learn_bias", False):
            raise ValueError("SGPR needs a fixed embedding bias: the statistics depend on it")
        self.likelihood = GaussianLikelihood().to(torch.float64)
        self.likelihood.noise = torch.tensor(noise, dtype=torch.float64)
        self.reset_statistics()
        scales = self._input_scales()
        if scales is not None:  # the scales the statistics were computed at
            self.register_buffer("stat_input_scales", scales.detach().clone())
        self.set_transforms(input_transform, outcome_transform)

    def _input_scales(self) -> torch.Tensor | None:
        """The embedding's input scales s [D], or None without them."""
        return getattr(self.input_map, "input_scales", None)

    def _parameters_to_fit(self) -> list[torch.nn.Parameter]:
        """Kernel hyperparameters and the noise: the features stay as the statistics saw them."""
        return [*self.kernel.parameters(), *self.likelihood.parameters()]

    # ------------------------------------------------------------------ data
    def lift(self, x: torch.Tensor) -> torch.Tensor:
        """Check :math:`x` [..., N, D] and map it to the kernel's inputs."""
        return self.input_map.lift(self.check_inputs(x))

    def reset_statistics(self) -> None:
        """Forget the accumulated data."""
        size = self.features.num_inducing
        reference = self.likelihood.noise
        self.register_buffer("stat_gram", reference.new_zeros(size, size))
        self.register_buffer("stat_cross", reference.new_zeros(size))
        for name in ("stat_yy", "stat_radius2", "stat_count"):
            self.register_buffer(name, reference.new_zeros(()))

    STATISTICS = ("stat_gram", "stat_cross", "stat_yy", "stat_radius2", "stat_count")
    #: the dtype of the statistics pass's per-chunk work (``zonal.models.sgpr_statistics``): float64,
    #: or float32 with float64 running totals (the user's choice: set it on the model)
    statistics_dtype: torch.dtype = torch.float64

    def statistics_kernel(self, dtype: torch.dtype | None = None) -> StatisticsKernel:
        """The per-chunk work of the statistics pass (default dtype: ``statistics_dtype``), shared
        by the in-memory, streamed and Dask passes."""
        return StatisticsKernel(self, dtype)

    @torch.no_grad()
    def chunk_statistics(
        self, x: torch.Tensor, y: torch.Tensor, *, first_row: int = 0
    ) -> tuple[torch.Tensor, ...]:
        r"""The statistics (:math:`\Phi_r^\top \Phi_r`, :math:`\Phi_r^\top y`, :math:`y^\top y`,
        :math:`\sum r^2`, :math:`n`) of one chunk :math:`x` [n, D], :math:`y` [n], in the model's
        dtype; bad values are reported by their row in the whole data (``first_row`` +
        :math:`i`)."""
        kernel = self.statistics_kernel()
        totals = kernel.empty()
        kernel.add_(totals, *self._checked_rows(x, y, first_row))
        return kernel.finish(totals)

    def _checked_rows(
        self, x: torch.Tensor, y: torch.Tensor, first_row: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(x [n, D], y [n]) checked (shape, finite values named by their global row)."""
        x = torch.as_tensor(x)
        y = torch.as_tensor(y)
        if x.dim() != 2 or x.shape[-1] != self.input_dim:
            raise ValueError(f"inputs must have shape [N, {self.input_dim}], got {tuple(x.shape)}")
        y = y.reshape(-1)
        if len(y) != len(x):
            raise ValueError(f"x has {len(x)} rows but y has {len(y)} (rows from {first_row})")
        for values, name in ((x, "inputs"), (y.unsqueeze(-1), "targets")):
            bad = ~torch.isfinite(values).all(-1)  # [n]
            if bad.any():
                row = first_row + int(torch.nonzero(bad)[0])
                raise ValueError(
                    f"{name} contain NaN or infinite values ({int(bad.sum())} row(s) in this "
                    f"chunk, first at row {row})"
                )
        x = self.check_inputs(x)
        return x, y.to(x)

    def _statistics(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(Phi_r^T Phi_r [M, M], Phi_r^T y [M], y^T y, sum r^2, n) of checked x [n, D], y [n],
        differentiable in the input map's and the features' parameters."""
        lifted = self.input_map.lift(x)  # [n, ambient_dim]
        phi_r = self.features.kuf(self.kernel, lifted).mT  # [n, M], rows r_i phi(z_i)
        count = y.new_tensor(float(len(y)))
        return (phi_r.mT @ phi_r, phi_r.mT @ y, y @ y, self._squared_radius(lifted).sum(), count)

    @torch.no_grad()
    def accumulate(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Add a chunk (:math:`x` [n, D], :math:`y` [n]) to the sufficient statistics (all or
        nothing)."""
        parts = self.chunk_statistics(x, y, first_row=int(self.stat_count))
        for name, value in zip(self.STATISTICS, parts, strict=True):
            getattr(self, name).add_(value)

    def _squared_radius(self, lifted: torch.Tensor) -> torch.Tensor:
        """r^2 [...] of the kernel's inputs (1 where the kernel is not homogeneous)."""
        if self._homogeneous:
            return lifted.pow(2).sum(-1)
        return torch.ones_like(lifted[..., 0])

    def fit_statistics(
        self,
        x: torch.Tensor | np.ndarray | None = None,
        y: torch.Tensor | np.ndarray | None = None,
        *,
        chunks: Iterable[tuple[torch.Tensor | np.ndarray, torch.Tensor | np.ndarray]] | None = None,
        chunk_size: int = 4096,
        dtype: torch.dtype | None = None,
    ) -> None:
        """One streaming pass: from arrays :math:`(x, y)` (numpy memmaps are read chunk by chunk)
        or from an iterable of :math:`(x, y)` chunks, the next chunk read while the current one is
        added
        (``read_ahead``). The new statistics replace the old ones only when the whole pass
        succeeds; a bad value is reported by its row in the whole data. ``dtype``: the per-chunk
        work's dtype (default ``statistics_dtype``; the totals are float64 either way)."""
        if chunks is None:
            if x is None or y is None:
                raise ValueError("give x and y, or chunks")
            chunks = (
                (x[i : i + chunk_size], y[i : i + chunk_size]) for i in range(0, len(x), chunk_size)
            )
        kernel = self.statistics_kernel(dtype)
        totals = kernel.empty()
        rows = 0
        tensors = ((_chunk_tensor(xc), _chunk_tensor(yc)) for xc, yc in chunks)
        for x_chunk, y_chunk in read_ahead(tensors):
            kernel.add_(totals, *self._checked_rows(x_chunk, y_chunk, rows))
            rows += len(x_chunk)
        if rows == 0:
            raise ValueError("no data: the statistics are empty")
        self.commit_statistics(kernel.finish(totals))

    def commit_statistics(self, totals: Sequence[torch.Tensor]) -> None:
        """Replace the statistics by complete totals (in the order of ``STATISTICS``), summed over
        every row at the current input scales, which are recorded with them (a later change of
        the scales makes ``elbo`` refuse the stale statistics)."""
        for name, value in zip(self.STATISTICS, totals, strict=True):
            getattr(self, name).copy_(value)
        scales = self._input_scales()
        if scales is not None:
            self.stat_input_scales.copy_(scales.detach())

    def fit_input_scales(
        self,
        x: torch.Tensor | np.ndarray,
        y: torch.Tensor | np.ndarray,
        *,
        subsample_size: int = 2048,
        max_iter: int = 50,
        lr: float = 1.0,
        seed: int = 0,
    ) -> list[float]:
        r"""Step 1 of the alternating scheme (module docstring): L-BFGS on the collapsed bound of
        ``subsample_size`` random rows (all rows when :math:`N` is smaller) over the input scales,
        the kernel hyperparameters and the noise; returns the bound per row at each evaluation.

        Each evaluation costs :math:`O(n M^2 + M^3)` for
        :math:`n = \min(N, \mathtt{subsample\_size})`. The stored
        statistics are then stale: call ``fit_statistics`` (all rows) and ``fit`` next.
        """
        scales = self._input_scales()
        if scales is None or not self.input_map.learn_input_scales:
            raise ValueError(
                "fit_input_scales needs an input map with learnable input scales: "
                "SphereEmbedding(input_scales=..., learn_input_scales=True)"
            )
        if (
            isinstance(subsample_size, bool)
            or not isinstance(subsample_size, int)
            or (subsample_size < 1)
        ):
            raise ValueError(f"subsample_size must be a positive integer, got {subsample_size!r}")
        if len(x) != len(y):
            raise ValueError(f"x has {len(x)} rows but y has {len(y)}")
        if len(x) == 0:
            raise ValueError("no data: fit_input_scales needs rows")
        rows = np.arange(len(x))
        if len(x) > subsample_size:  # sorted, so that a memmap is read in order
            generator = np.random.default_rng(seed)
            rows = np.sort(generator.choice(len(x), size=subsample_size, replace=False))
        x_rows, y_rows = self._checked_rows(_take_rows(x, rows), _take_rows(y, rows), 0)
        parameters = [p for p in [*self.input_map.parameters(), *self._parameters_to_fit()]
                      if p.requires_grad]  # fmt: skip
        optimiser = torch.optim.LBFGS(
            parameters, lr=lr, max_iter=max_iter, line_search_fn="strong_wolfe"
        )
        trace: list[float] = []

        def closure() -> torch.Tensor:
            optimiser.zero_grad()
            statistics = self._statistics(x_rows, y_rows)
            loss = -self._bound(*statistics) / len(y_rows)
            loss.backward()
            trace.append(float(-loss.detach()))
            return loss

        optimiser.step(closure)
        return trace

    @property
    def _homogeneous(self) -> bool:
        return bool(getattr(base_zonal_kernel(self.kernel)[0], "homogeneous", False))

    # ------------------------------------------------------------------ bound
    def _kernel_diagonal(self) -> torch.Tensor:
        """k(1): the constant diagonal of the zonal kernel on the sphere."""
        ambient_dim = base_zonal_kernel(self.kernel)[0].ambient_dim
        unit = self.stat_gram.new_zeros(1, ambient_dim)
        unit[0, -1] = 1.0
        return self.kernel(unit, diag=True).reshape(())

    def _check_statistics(self) -> None:
        """Refuse empty statistics, or statistics computed at other input scales."""
        if self.stat_count == 0:
            raise ValueError("call fit_statistics first")
        scales = self._input_scales()
        if scales is not None and not torch.equal(scales.detach(), self.stat_input_scales):
            raise ValueError(
                "the input scales changed since the statistics were computed: call "
                "fit_statistics again (the alternating scheme of zonal.models.sgpr)"
            )

    def _posterior_terms(
        self, gram: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Lambda^{1/2} [M], L_B [M, M], noise variance s^2) for A = ``gram`` (default: the
        stored Phi_r^T Phi_r)."""
        gram = self._full_gram() if gram is None else gram  # [*b, M, M]
        eigenvalues = self.features.kuu(self.kernel).diagonal().reciprocal()  # [M] = Lambda
        root = eigenvalues.sqrt()  # [M]
        noise = self.likelihood.noise.reshape(())
        matrix = root[:, None] * gram * root[None, :] / noise  # [M, M]
        matrix = matrix + torch.eye(len(root), dtype=matrix.dtype, device=matrix.device)
        return root, cholesky(matrix, name="SGPR matrix B = I + L^1/2 A L^1/2 / s^2"), noise

    def whitened_posterior(self) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The implicit :math:`q(v)` of :math:`v = \Lambda^{1/2} u` (the Titsias optimum):
        (:math:`m_v` [M], :math:`L_B` [M, M]) with :math:`m_v = B^{-1} \Lambda^{1/2} c / s^2` and
        :math:`S_v = B^{-1} = (L_B L_B^\top)^{-1}`."""
        self._check_statistics()
        root, factor, noise = self._posterior_terms()
        scaled = (root * self.stat_cross / noise).unsqueeze(-1)  # Lambda^{1/2} c / s^2 [M, 1]
        return torch.cholesky_solve(scaled, factor).squeeze(-1), factor

    def elbo(self) -> torch.Tensor:
        r"""The collapsed bound on :math:`\log p(y)` (a scalar; [*F, *b] for a conditioned model),
        from the statistics alone."""
        self._check_statistics()
        statistics = [getattr(self, name) for name in self.STATISTICS]
        return self._bound(self._full_gram(), *statistics[1:])

    def _full_gram(self) -> torch.Tensor:
        """Phi_r^T Phi_r of every row [*b, M, M]: the stored statistic plus, for a conditioned
        model, its new rows (``_conditioned`` keeps them as rows, not as a Gram matrix)."""
        rows = getattr(self, "_new_rows", None)
        return self.stat_gram if rows is None else self.stat_gram + rows.mT @ rows

    def _bound(
        self,
        gram: torch.Tensor,
        cross: torch.Tensor,
        yy: torch.Tensor,
        radius2: torch.Tensor,
        count: torch.Tensor,
    ) -> torch.Tensor:
        """The collapsed bound (module docstring) from statistics A, c, y^T y, sum r^2, N."""
        root, factor, noise = self._posterior_terms(gram)
        w = torch.linalg.solve_triangular(
            factor, (root * cross).unsqueeze(-1), upper=False
        ).squeeze(-1)  # [M]
        trace_kff = self._kernel_diagonal() * radius2
        trace_qff = (root**2 * gram.diagonal()).sum()
        return (
            -0.5 * count * torch.log(2 * math.pi * noise)
            - factor.diagonal().log().sum()
            - 0.5 * yy / noise
            + 0.5 * (w @ w) / noise**2
            - 0.5 * (trace_kff - trace_qff) / noise
        )

    def fit(
        self, max_iter: int = 100, lr: float = 1.0, *, deadline: float | None = None
    ) -> list[float]:
        """Maximise the bound over kernel hyperparameters and noise by L-BFGS (strong Wolfe line
        search); returns the trace of the bound per evaluation (per row). GPyTorch priors
        registered on the kernel or the likelihood add their log densities
        (``registered_log_prior``), as GPyTorch's marginal likelihoods add them.

        With ``deadline`` (a ``time.monotonic()`` time) the first evaluation after it stops the
        run and the parameters return to the best bound evaluated (``zonal.models.lbfgs``): the
        overshoot is at most one :math:`O(M^3)` evaluation, and a run that converges before the
        deadline is the unbudgeted run.
        """
        return maximise_by_lbfgs(
            [p for p in self._parameters_to_fit() if p.requires_grad],
            lambda: (self.elbo() + registered_log_prior(self)) / self.stat_count,
            max_iter=max_iter,
            lr=lr,
            deadline=deadline,
        )

    # ------------------------------------------------------------------ predictions
    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        r""":math:`q(f(X))` [*b, q] for inputs :math:`X` [*b, q, D] (module docstring): the mean
        and a lazy covariance :math:`K_{\ast\ast} - \psi \psi^\top + P^\top P` whose diagonal
        costs :math:`O(q M)`.

        A conditioned model (``_conditioned``) adds its new rows by the Woodbury identity rather
        than a new factorisation: with :math:`U = \Lambda^{1/2} \Phi_n^\top / s` [*b_c, M, q'] the
        new rows, :math:`B' = B + U U^\top = L_B (I + V V^\top) L_B^\top`,
        :math:`V = L_B^{-1} U`, :math:`C = I + V^\top V = L_C L_C^\top`, so

        .. math::

            \text{mean} &= P^\top (r - V C^{-1} V^\top r) / s^2, \qquad
            r = L_B^{-1} \Lambda^{1/2} c', \\
            \text{cov} &= K_{\ast\ast} - \psi \psi^\top + P^\top P
            - (L_C^{-1} V^\top P)^\top (L_C^{-1} V^\top P),

        :math:`O(q' M^2)` per t-batch of new rows on top of the one factorisation of the stored
        :math:`B`; :math:`X`'s batch broadcasts against the model's [*F, *b_c].
        """
        self._check_statistics()
        lifted = self.input_map.lift(X)  # [*b, q, ambient_dim]
        root, factor, noise = self._posterior_terms(self.stat_gram)  # L_B [M, M] of stored rows
        scaled = self.features.kuf(self.kernel, lifted) * root.unsqueeze(-1)  # psi^T [*b, M, q]
        projected = torch.linalg.solve_triangular(factor, scaled, upper=False)  # P [*b, M, q]
        cross = (root * self.stat_cross).unsqueeze(-1)  # Lambda^{1/2} c [*F, *b_c, M, 1]
        target = torch.linalg.solve_triangular(factor, cross, upper=False)  # r [*F, *b_c, M, 1]
        subtracted = [scaled]
        rows = getattr(self, "_new_rows", None)  # [*b_c, q', M]
        if rows is not None:
            update = (rows * root).mT / noise.sqrt()  # U [*b_c, M, q']
            solved = torch.linalg.solve_triangular(factor, update, upper=False)  # V [*b_c, M, q']
            eye = torch.eye(solved.shape[-1], dtype=solved.dtype, device=solved.device)
            inner = cholesky(eye + solved.mT @ solved, name="I + V^T V (new rows)")  # L_C
            correction = torch.cholesky_solve(solved.mT @ target, inner)  # C^-1 V^T r
            target = target - solved @ correction  # [*F, *b_c, M, 1]
            subtracted.append(
                torch.linalg.solve_triangular(inner, solved.mT @ projected, upper=False)
            )
        mean = (projected.mT @ target).squeeze(-1) / noise  # [*B, q]
        batch_shape = torch.broadcast_shapes(mean.shape[:-1], *(m.shape[:-2] for m in subtracted))
        minus = torch.cat([m.expand(*batch_shape, *m.shape[-2:]) for m in subtracted], dim=-2)
        correction = RootDifferenceLinearOperator(projected, minus, batch_shape)  # P^T P - ...
        prior = self.kernel(lifted)
        prior = prior.expand(*batch_shape, *prior.shape[-2:])
        mean = mean.expand(*batch_shape, mean.shape[-1])
        return MultivariateNormal(mean, SumLinearOperator(prior, correction))

    # ------------------------------------------------------------------ conditioning
    def _conditioned(
        self, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None, *, per_component: bool
    ) -> SGPR:
        """Exact conditioning on new rows X [*b, q, D], Y [*F, *b, q] at the current
        hyperparameters (no refit): the result is the SGPR fitted on all rows (``elbo``
        included). The new rows' statistics Phi_r^T y [*F, *b, M], y^T y, sum r^2 and q are added
        to the stored ones; Phi_r^T Phi_r is kept as the rows Phi_r [*b, q, M] themselves, shared
        by the fantasies, so that the posterior adds them in O(q M^2) (``latent_distribution``)
        and no [*b, M, M] matrix is formed. Noise variances n_i of the new rows weight them by
        w_i = s^2 / n_i (rows sqrt(w_i) phi_r, targets sqrt(w_i) y_i): the posterior is then
        exactly that of N(y_i | f_i, n_i). A conditioned model can be conditioned again.
        """
        self._check_statistics()
        weights = None if noise is None else self.likelihood.noise.reshape(()) / noise
        rows, *parts = self._row_statistics(X, Y, weights)
        model = conditioned_copy(self)
        for name, part in zip(self.STATISTICS[1:], parts, strict=True):
            setattr(model, name, getattr(model, name) + part)
        previous = getattr(self, "_new_rows", None)
        if previous is not None:
            batch = torch.broadcast_shapes(previous.shape[:-2], rows.shape[:-2])
            rows = torch.cat(
                [
                    previous.expand(*batch, *previous.shape[-2:]),
                    rows.expand(*batch, *rows.shape[-2:]),
                ],
                dim=-2,
            )  # [*b, q_1 + q_2, M]
        model._new_rows = rows
        model._conditioned_batch = torch.broadcast_shapes(
            model.stat_cross.shape[:-1], rows.shape[:-2]
        )
        return model

    def _row_statistics(
        self, X: torch.Tensor, Y: torch.Tensor, weights: torch.Tensor | None
    ) -> tuple[torch.Tensor, ...]:
        """The statistics of ``chunk_statistics`` for batched rows X [*b, q, D], Y [*F, *b, q]
        with optional row weights [*b, q], differentiable, the Gram part as its rows: W^{1/2}
        Phi_r [*b, q, M] (Phi_r^T W Phi_r = their Gram matrix), Phi_r^T W y [*F, *b, M],
        y^T W y [*F, *b], sum w r^2 [*b], q."""
        lifted = self.input_map.lift(X)  # [*b, q, ambient_dim]
        phi_r = self.features.kuf(self.kernel, lifted).mT  # [*b, q, M]
        radius2 = self._squared_radius(lifted)  # [*b, q]
        if weights is not None:
            phi_r = phi_r * weights.sqrt().unsqueeze(-1)
            Y = Y * weights.sqrt()
            radius2 = radius2 * weights
        cross = (phi_r.mT @ Y.unsqueeze(-1)).squeeze(-1)  # [*F, *b, M]
        count = Y.new_tensor(float(X.shape[-2]))
        return (phi_r, cross, Y.pow(2).sum(-1), radius2.sum(-1), count)
