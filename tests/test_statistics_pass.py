"""The SGPR's statistics pass (zonal.models.sgpr_statistics): the fused recurrence, the factored
features, the triangular product and the float32 option against independent float64 truths (the
Gegenbauer stack, the dense Phi_r^T Phi_r of harmonics built from it), and the in-memory, streamed
and Dask passes against each other."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpytorch.kernels import ScaleKernel

from zonal.features import SparseSphericalHarmonicFeatures, SphericalHarmonicFeatures
from zonal.features.zonal_basis import apply_level_factors
from zonal.geometry import OnSphere
from zonal.harmonics.gegenbauer import zonal_harmonic
from zonal.harmonics.recurrence import zonal_by_level_
from zonal.kernels import PolynomialDecayKernel
from zonal.models import SGPR
from zonal.models.sgpr_statistics import add_upper_gram_, mirror_upper, read_ahead

INPUT_DIM = 3
NUM_POINTS = 700


def data(seed: int = 0, num_points: int = NUM_POINTS) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = 2 * torch.randn(num_points, INPUT_DIM, dtype=torch.float64, generator=generator)
    noise = torch.randn(num_points, dtype=torch.float64, generator=generator)
    return x, torch.sin(x[:, 0]) * x[:, 1] + 0.1 * noise


def make_model(features: str = "complete", homogeneous: bool = True) -> SGPR:
    ambient_dim = INPUT_DIM + 1
    kernel = ScaleKernel(PolynomialDecayKernel(ambient_dim, max_degree=8, homogeneous=homogeneous))
    kernel = kernel.double()
    if features == "sparse":
        chosen = SparseSphericalHarmonicFeatures(ambient_dim, 6, 5, learn_phases=False)
    else:
        chosen = SphericalHarmonicFeatures(ambient_dim, 4)
    input_dim = INPUT_DIM if homogeneous else ambient_dim
    input_map = None if homogeneous else OnSphere()
    return SGPR(kernel, chosen, input_dim, input_map=input_map)


def reference_rows(model: SGPR, x: torch.Tensor) -> torch.Tensor:
    """Phi_r [n, M] from first principles: Z_n(eta . z) by the out-of-place Gegenbauer stack, times
    the level factors, times r (float64)."""
    features = model.features
    lifted = model.input_map.lift(x)  # [n, d]
    if model._homogeneous:
        radius = lifted.norm(dim=-1)  # [n]
        unit = lifted / radius.unsqueeze(-1)
    else:
        radius, unit = torch.ones(len(x), dtype=x.dtype), lifted
    if isinstance(features, SphericalHarmonicFeatures):
        directions = features.harmonics.points[features.columns]  # [M, d]
    else:
        directions = features.directions
    cosines = (unit @ directions.mT).clamp(-1, 1)  # [n, M]
    degrees = features.levels  # [M]
    stack = zonal_harmonic(cosines, int(degrees.max()), features.ambient_dim)  # [n, M, L + 1]
    zonal = stack.gather(-1, degrees.expand(len(x), -1).unsqueeze(-1)).squeeze(-1)  # [n, M]
    return apply_level_factors(zonal, features.basis_factors()) * radius.unsqueeze(-1)


@pytest.mark.parametrize("ambient_dim", [2, 3, 5, 9])
def test_fused_recurrence_equals_the_gegenbauer_stack(ambient_dim):
    """zonal_by_level_ (one multiply-add per degree, in place) against Z_n of the out-of-place
    stack, with an empty (dropped) level among the blocks."""
    sizes = [1, 3, 0, 4, 2, 5, 3]
    generator = torch.Generator().manual_seed(1)
    t = 2 * torch.rand(11, sum(sizes), dtype=torch.float64, generator=generator) - 1  # [n, M]
    t[0, :] = 1.0  # Z_n(1) = N_n^d, the largest values
    degrees = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))  # [M]
    stack = zonal_harmonic(t, len(sizes) - 1, ambient_dim)  # [n, M, L + 1]
    expected = stack.gather(-1, degrees.expand(len(t), -1).unsqueeze(-1)).squeeze(-1)
    result = zonal_by_level_(t.clone(), sizes, ambient_dim)
    assert torch.allclose(result, expected, rtol=1e-12, atol=1e-12 * float(expected.abs().max()))


@pytest.mark.parametrize(("size", "panel"), [(50, 7), (300, 128), (130, 128)])
def test_upper_triangle_equals_the_dense_product(size, panel):
    """The panels' triangle (float64) is the triangle of z^T z, and mirrored it is z^T z."""
    z = torch.randn(97, size, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    total = torch.zeros(size, size, dtype=torch.float64)
    add_upper_gram_(total, z, panel)
    add_upper_gram_(total, z, panel)
    dense = 2 * z.mT @ z  # [M, M]
    assert torch.allclose(total.triu(), dense.triu(), rtol=1e-13, atol=1e-12)
    assert torch.allclose(mirror_upper(total), dense, rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize(
    ("features", "homogeneous"), [("complete", True), ("sparse", True), ("complete", False)]
)
def test_float64_pass_equals_the_dense_statistics(features, homogeneous):
    """Chunked pass (zonal basis, triangle, factors applied once) = Phi_r^T Phi_r etc. of the dense
    float64 rows, to 1e-10 relative to each statistic's scale."""
    model = make_model(features, homogeneous)
    x, y = data()
    if not homogeneous:
        x = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], -1)
        x = x / x.norm(dim=-1, keepdim=True)
    rows = reference_rows(model, x)  # [n, M]
    radius2 = model.input_map.lift(x).pow(2).sum() if homogeneous else torch.tensor(len(x) * 1.0)
    expected = (rows.mT @ rows, rows.mT @ y, y @ y, radius2, torch.tensor(float(len(y))))
    model.fit_statistics(x, y, chunk_size=128)
    for name, truth in zip(SGPR.STATISTICS, expected, strict=True):
        ours = getattr(model, name)
        assert ours.dtype == torch.float64
        scale = float(truth.abs().max())
        assert float((ours - truth.to(ours)).abs().max()) <= 1e-10 * scale, name
    assert torch.equal(model.stat_gram, model.stat_gram.mT)
    single = model.chunk_statistics(x[:200], y[:200])  # the public per-chunk interface
    assert torch.allclose(single[0], rows[:200].mT @ rows[:200], rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize("num_points", [1000, 700, 512])
def test_blocks_shared_among_threads_give_the_rows_of_one_thread(num_points):
    """With two torch threads the zonal columns' blocks are finished by two Python threads (a
    partial last block, an uneven share): every row equals the one-thread result, and the thread
    count is put back."""
    from zonal.features.zonal_basis import zonal_columns

    features = make_model().features
    x, _ = data(num_points=num_points)
    unit = x / x.norm(dim=-1, keepdim=True)
    unit = torch.cat([unit, torch.ones(len(x), 1, dtype=x.dtype)], -1) / 2**0.5  # [n, d]
    directions = features.harmonics.points[features.columns]  # [M, d]
    scale = torch.rand(len(x), dtype=x.dtype) + 0.5
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        serial = zonal_columns(unit, directions, features.level_sizes, 4, row_scale=scale)
        torch.set_num_threads(2)
        shared = zonal_columns(unit, directions, features.level_sizes, 4, row_scale=scale)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
    assert torch.allclose(shared, serial, rtol=1e-14, atol=1e-14)
    with torch.inference_mode():  # the workers run in the caller's inference mode
        torch.set_num_threads(2)
        try:
            inferred = zonal_columns(unit, directions, features.level_sizes, 4, row_scale=scale)
        finally:
            torch.set_num_threads(previous)
    assert torch.allclose(inferred, serial, rtol=1e-14, atol=1e-14)


def test_accelerators_finish_the_recurrence_in_blocks_of_their_own_size():
    """A CPU finishes cache-sized blocks of 256 rows; a GPU (any device not the CPU) blocks of
    65,536 rows, so that a chunk costs a few kernel launches instead of thousands."""
    from zonal.features.zonal_basis import recurrence_rows

    assert recurrence_rows(torch.device("cpu")) == 256
    assert recurrence_rows(torch.device("meta")) == 65536


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_columns_equal_the_cpu_columns():
    """The zonal columns of 70,000 rows (two GPU blocks, the second partial) on a GPU equal the
    CPU's to float64 rounding."""
    from zonal.features.zonal_basis import zonal_columns

    features = make_model().features
    x, _ = data(num_points=70000)
    unit = x / x.norm(dim=-1, keepdim=True)
    unit = torch.cat([unit, torch.ones(len(x), 1, dtype=x.dtype)], -1) / 2**0.5  # [n, d]
    directions = features.harmonics.points[features.columns]  # [M, d]
    scale = torch.rand(len(x), dtype=x.dtype) + 0.5
    on_cpu = zonal_columns(unit, directions, features.level_sizes, 4, row_scale=scale)
    on_gpu = zonal_columns(
        unit.cuda(), directions.cuda(), features.level_sizes, 4, row_scale=scale.cuda()
    )
    assert torch.allclose(on_gpu.cpu(), on_cpu, rtol=1e-12, atol=1e-12)


def test_float32_pass_is_within_its_stated_tolerance_and_keeps_float64_totals():
    """Per-chunk work in float32, float64 sums: every statistic within 1e-5 relative to its scale
    (float32 rounding, amplified by the level factors' conditioning), bound within 1e-4 per row."""
    x, y = data(num_points=2000)
    exact = make_model()
    exact.fit_statistics(x, y, chunk_size=512)
    fast = make_model()
    fast.fit_statistics(x, y, chunk_size=512, dtype=torch.float32)
    for name in SGPR.STATISTICS:
        ours, truth = getattr(fast, name), getattr(exact, name)
        assert ours.dtype == torch.float64
        assert float((ours - truth).abs().max()) <= 1e-5 * float(truth.abs().max()), name
    with torch.no_grad():
        gap = float((fast.elbo() - exact.elbo()).abs()) / len(y)
    assert gap <= 1e-4


def test_the_statistics_dtype_is_checked():
    model = make_model()
    with pytest.raises(ValueError, match="float64 or float32"):
        model.statistics_kernel(torch.float16)


def test_memmap_chunks_streamed_and_dask_passes_agree(tmp_path):
    """The in-memory pass, a pass over read-only memmaps (read ahead) and the Dask map-reduce give
    the same statistics to 1e-10 in float64."""
    x, y = data()
    reference = make_model()
    reference.fit_statistics(x, y, chunk_size=len(x))
    np.save(tmp_path / "x.npy", x.numpy())
    np.save(tmp_path / "y.npy", y.numpy())
    mapped = make_model()
    mapped.fit_statistics(
        np.load(tmp_path / "x.npy", mmap_mode="r"), np.load(tmp_path / "y.npy", mmap_mode="r"),
        chunk_size=100,
    )  # fmt: skip
    models = [mapped]
    dask_array = pytest.importorskip("dask.array")
    from zonal.scale.dask_statistics import fit_statistics_distributed

    distributed = make_model()
    fit_statistics_distributed(
        distributed, dask_array.from_array(x.numpy(), chunks=(150, INPUT_DIM)), y.numpy(),
        scheduler="sync",
    )  # fmt: skip
    models.append(distributed)
    for model in models:
        for name in SGPR.STATISTICS:
            ours, truth = getattr(model, name), getattr(reference, name)
            assert float((ours - truth).abs().max()) <= 1e-10 * float(truth.abs().max()), name


def test_read_ahead_keeps_order_and_raises_where_the_item_would_be():
    assert list(read_ahead(iter(range(5)))) == [0, 1, 2, 3, 4]

    def broken():
        yield 1
        raise OSError("disk gone")

    reader = read_ahead(broken())
    assert next(reader) == 1
    with pytest.raises(OSError, match="disk gone"):
        next(reader)
