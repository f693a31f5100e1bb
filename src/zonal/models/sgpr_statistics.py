r"""The SGPR's statistics pass: one kernel of work for the in-memory, streamed and Dask passes.

The collapsed bound (``zonal.models.sgpr``) sees the rows only through

.. math::

    A = \Phi_r^\top \Phi_r \ [M, M], \qquad c = \Phi_r^\top y \ [M], \qquad y^\top y, \qquad
    \sum_i r_i^2, \qquad N,

with rows :math:`\phi_r(x_i) = r_i \phi(z_i)`. The harmonic features factor as
:math:`\phi(z) = F Z(z)`, :math:`Z` the zonal functions :math:`Z_{n(m)}(\eta_m \cdot z)` and
:math:`F = \operatorname{blockdiag}(F_n)` one small matrix per level
(``zonal.features.zonal_basis``), so every sum is taken in the zonal basis and transformed once:

.. math::

    A = F \Big(\sum_i r_i^2 Z(z_i) Z(z_i)^\top\Big) F^\top, \qquad
    c = F \sum_i r_i Z(z_i) y_i.

Per chunk of :math:`n` rows the work is the zonal functions (one :math:`n \times d \times M`
product and one fused recurrence, a few passes over :math:`n \times M`) and one triangle of
:math:`Z_r^\top Z_r` (``add_upper_gram_``: panels of ``PANEL`` rows, about
:math:`(1 + 1 / P) / 2` of the full product's flops for :math:`P` panels); the level factors
(:math:`\sum_n N_n^2` per row, as much as half the Gram product) leave the per-row work entirely.

Precision: the per-chunk products run in the compute dtype (float64 by default; float32 is the
user's choice, ``SGPR.statistics_dtype``) and are added to float64 running totals; ``finish``
mirrors the triangle and applies :math:`F` in float64, then casts to the model's dtype.

Features without the factored form (no ``zonal_basis`` / ``basis_factors``) use their ``kuf`` rows
with :math:`F = I`. ``read_ahead`` overlaps reading the next chunk with the work on the current one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

import torch

from zonal.features.base import unit_and_radius

if TYPE_CHECKING:
    from zonal.models.sgpr import SGPR

#: rows of Z^T Z per panel of the triangular product: (1 + 1 / P) / 2 of the flops for P panels
PANEL = 128
#: the dtypes the per-chunk work may run in (the totals are float64 either way)
COMPUTE_DTYPES = (torch.float64, torch.float32)

Item = TypeVar("Item")


def add_upper_gram_(total: torch.Tensor, z: torch.Tensor, panel: int = PANEL) -> None:
    """total[i, j] += sum_r z[r, i] z[r, j] for i <= j (the upper triangle and diagonal, which is
    all ``mirror_upper`` reads; the square diagonal panels also add to a few entries below the
    diagonal): total [M, M] float64, z [n, M] in the compute dtype.

    Panel p (rows i in [p P, (p + 1) P)) is one product z[:, rows]^T z[:, p P:], so the M x M
    product costs M (M + P) n instead of 2 M^2 n flops."""
    size = z.shape[-1]
    for start in range(0, size, panel):
        stop = min(start + panel, size)
        block = z[:, start:stop].mT @ z[:, start:]  # [P, M - start]
        total[start:stop, start:].add_(block)


def mirror_upper(total: torch.Tensor) -> torch.Tensor:
    """The symmetric matrix [M, M] whose upper triangle and diagonal are ``total``'s."""
    upper = total.triu()  # [M, M]
    return upper + upper.triu(1).mT


@runtime_checkable
class _FactoredFeatures(Protocol):
    """Features in the factored form phi = F Z (the harmonic features)."""

    def zonal_basis(self, x: torch.Tensor, **options: torch.Tensor | None) -> torch.Tensor: ...

    def basis_factors(self) -> list[torch.Tensor]: ...


class _End:
    """The end of ``read_ahead``'s items (an object no item can be)."""


def read_ahead(chunks: Iterable[Item]) -> Iterator[Item]:
    """The items of ``chunks``, each read (``next``) in a background thread while the caller works
    on the one before: reading a file (numpy, pandas, pyarrow) and torch's kernels release the GIL,
    so the two overlap. Errors surface where the item would have been; closing the iterator early
    waits for at most the one item being read."""
    iterator = iter(chunks)
    end = _End()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="zonal-read-ahead") as pool:
        pending = pool.submit(next, iterator, end)
        while True:
            item = pending.result()
            if isinstance(item, _End):
                return
            pending = pool.submit(next, iterator, end)
            yield item


class StatisticsKernel:
    r"""The per-chunk work of the statistics pass of one model, in one compute dtype.

    Totals are a list in the order of ``SGPR.STATISTICS``, float64, on the model's device: the
    zonal-basis triangle :math:`\sum r^2 Z Z^\top` [M, M] (upper part), :math:`\sum r Z y` [M],
    :math:`y^\top y`, :math:`\sum r^2`, :math:`N`. Add them with ``add_`` (one chunk) or
    ``zonal.models.sgpr.add_statistics`` (partial passes); ``finish`` turns them into the model's
    statistics. A buffer for the chunk's :math:`Z` [n, M] is kept from chunk to chunk.
    """

    def __init__(self, model: SGPR, dtype: torch.dtype | None = None) -> None:
        dtype = model.statistics_dtype if dtype is None else dtype
        if dtype not in COMPUTE_DTYPES:
            raise ValueError(f"the statistics compute in float64 or float32, not {dtype}")
        self.model = model
        self.dtype = dtype
        features = model.features
        # the features in their factored form, or None (``kuf`` rows, F = I)
        self._factored: _FactoredFeatures | None = (
            features if isinstance(features, _FactoredFeatures) else None
        )
        self.factored = self._factored is not None
        self._buffer: torch.Tensor | None = None

    def empty(self) -> list[torch.Tensor]:
        """Zero totals (float64, on the model's device)."""
        size = self.model.features.num_inducing
        reference = self.model.stat_gram.new_zeros((), dtype=torch.float64)
        return [
            reference.new_zeros(size, size),
            reference.new_zeros(size),
            *(reference.new_zeros(()) for _ in range(3)),
        ]

    def _zonal_rows(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(Z_r [n, M] in the compute dtype, sum r^2) of checked inputs x [n, D]."""
        model = self.model
        lifted = model.input_map.lift(x)  # [n, ambient_dim]
        radius2 = model._squared_radius(lifted).sum().to(torch.float64)
        if self._factored is None:
            return model.features.kuf(model.kernel, lifted).mT.to(self.dtype), radius2  # [n, M]
        unit, radius = unit_and_radius(model.kernel, lifted)  # [n, d], [n] or None
        rows, size = len(unit), model.features.num_inducing
        buffer = self._buffer
        if buffer is None or len(buffer) < rows or buffer.device != unit.device:
            buffer = self._buffer = unit.new_empty(rows, size, dtype=self.dtype)
        zonal = self._factored.zonal_basis(
            unit.to(self.dtype), row_scale=radius, out=buffer[:rows]
        )  # [n, M], rows r_i Z(z_i)
        return zonal, radius2

    @torch.no_grad()
    def add_(self, totals: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> None:
        """Add the chunk (checked :math:`x` [n, D], :math:`y` [n]) to ``totals`` in place."""
        zonal, radius2 = self._zonal_rows(x)  # [n, M]
        add_upper_gram_(totals[0], zonal)
        totals[1].add_(zonal.mT @ y.to(self.dtype))  # [M]
        y64 = y.to(torch.float64)
        totals[2].add_(y64 @ y64)
        totals[3].add_(radius2)
        totals[4].add_(float(len(y)))

    @torch.no_grad()
    def finish(self, totals: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        r"""The statistics (:math:`\Phi_r^\top \Phi_r` [M, M] symmetric, :math:`\Phi_r^\top y` [M],
        :math:`y^\top y`, :math:`\sum r^2`, :math:`N`) in the model's dtype and device: the
        triangle mirrored, then :math:`A = F G F^\top`, :math:`c = F s` (float64)."""
        gram = mirror_upper(totals[0].to(torch.float64))  # [M, M]
        cross = totals[1].to(torch.float64)  # [M]
        if self._factored is not None:
            factors = [f.to(gram) for f in self._factored.basis_factors()]  # each [m, m]
            sizes = [len(factor) for factor in factors]
            gram = torch.cat(
                [f @ rows for f, rows in zip(factors, gram.split(sizes), strict=True)]
            )  # F G [M, M]
            gram = torch.cat(
                [cols @ f.mT for f, cols in zip(factors, gram.split(sizes, dim=1), strict=True)],
                dim=1,
            )  # F G F^T [M, M]
            gram = 0.5 * (gram + gram.mT)
            cross = torch.cat(
                [f @ part for f, part in zip(factors, cross.split(sizes), strict=True)]
            )  # [M]
        target = self.model.stat_gram
        return tuple(
            value.to(dtype=target.dtype, device=target.device)
            for value in (gram, cross, *totals[2:])
        )
