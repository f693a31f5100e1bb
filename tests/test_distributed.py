"""zonal.scale.dask_statistics: the SGPR's statistics as a Dask map-reduce equal the in-memory pass, on the
threaded scheduler and on a two-process LocalCluster, from arrays and DataFrames; a bad partition
is named and leaves the model as it was."""

from __future__ import annotations

import pytest
import torch
from gpytorch.kernels import ScaleKernel

from zonal.features import SparseSphericalHarmonicFeatures, SphericalHarmonicFeatures
from zonal.kernels import PolynomialDecayKernel
from zonal.models import SGPR

da = pytest.importorskip("dask.array")
from zonal.scale.dask_statistics import (  # noqa: E402
    PartitionError,
    fit_statistics_distributed,
    statistics_map_reduce,
)

INPUT_DIM = 3
NUM_POINTS = 1000
CHUNK = 128  # 8 partitions, the last one short


def data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = 2 * torch.randn(NUM_POINTS, INPUT_DIM, dtype=torch.float64, generator=generator)
    noise = torch.randn(NUM_POINTS, dtype=torch.float64, generator=generator)
    return x, torch.sin(x[:, 0]) * x[:, 1] + 0.1 * noise


def dataframe_modules():
    """dask.dataframe (which needs pyarrow) and pandas, or a skip."""
    return pytest.importorskip("dask.dataframe"), pytest.importorskip("pandas")


def make_model(sparse: bool = False) -> SGPR:
    kernel = ScaleKernel(PolynomialDecayKernel(INPUT_DIM + 1, max_degree=8, homogeneous=True))
    kernel = kernel.double()
    if sparse:
        features = SparseSphericalHarmonicFeatures(INPUT_DIM + 1, 6, 5, learn_phases=False)
    else:
        features = SphericalHarmonicFeatures(INPUT_DIM + 1, 4)
    return SGPR(kernel, features, INPUT_DIM)


def assert_statistics_equal(model: SGPR, reference: SGPR) -> None:
    """Every statistic to 1e-10 relative to its scale (sums of N = 1000 float64 terms, added in
    another order)."""
    for name in SGPR.STATISTICS:
        ours, theirs = getattr(model, name), getattr(reference, name)
        scale = float(theirs.abs().max())
        assert scale > 0
        assert float((ours - theirs).abs().max()) <= 1e-10 * scale, name


@pytest.fixture(scope="module")
def reference() -> tuple[SGPR, SGPR]:
    """The in-memory pass (``fit_statistics``) for complete and phase-truncated features."""
    x, y = data()
    models = (make_model(), make_model(sparse=True))
    for model in models:
        model.fit_statistics(x, y, chunk_size=300)
    return models


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("split_every", [2, 8])
def test_dask_array_statistics_equal_the_in_memory_pass(reference, sparse, split_every) -> None:
    x, y = data()
    model = make_model(sparse)
    fit_statistics_distributed(
        model,
        da.from_array(x.numpy(), chunks=(CHUNK, 2)),  # column chunks are merged into whole rows
        da.from_array(y.numpy(), chunks=CHUNK),
        split_every=split_every,
        scheduler="threads",
    )
    assert_statistics_equal(model, reference[int(sparse)])
    # the bound and the predictions then follow from the statistics alone
    with torch.no_grad():
        assert float(model.elbo()) == pytest.approx(float(reference[int(sparse)].elbo()), rel=1e-9)


def test_dask_dataframe_statistics_equal_the_in_memory_pass(reference) -> None:
    dd, pd = dataframe_modules()
    x, y = data()
    frame = pd.DataFrame(x.numpy(), columns=["a", "b", "c"]).assign(target=y.numpy())
    model = make_model()
    fit_statistics_distributed(
        model, dd.from_pandas(frame, npartitions=5), target="target", scheduler="sync"
    )
    assert_statistics_equal(model, reference[0])


def test_dataframe_columns_named_by_features_in_their_order(reference) -> None:
    """``features`` picks and orders the input columns (an extra column is ignored)."""
    dd, pd = dataframe_modules()
    x, y = data()
    frame = pd.DataFrame({"c": x[:, 2], "noise": 0.0, "a": x[:, 0], "b": x[:, 1], "t": y})
    model = make_model()
    fit_statistics_distributed(
        model,
        dd.from_pandas(frame, npartitions=3),
        target="t",
        features=["a", "b", "c"],
        scheduler="sync",
    )
    assert_statistics_equal(model, reference[0])


@pytest.mark.parametrize(
    "processes", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["threads", "processes"]
)
def test_local_cluster_with_two_workers(reference, processes) -> None:
    """The same totals when the partitions are computed by two workers of a dask.distributed
    LocalCluster (as processes, the model is shipped to them by pickle: about 20 s to start)."""
    distributed = pytest.importorskip("distributed")
    x, y = data()
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=processes,
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        model = make_model()
        fit_statistics_distributed(
            model,
            da.from_array(x.numpy(), chunks=(CHUNK, INPUT_DIM)),
            da.from_array(y.numpy(), chunks=CHUNK),
            scheduler=client,
        )
    assert_statistics_equal(model, reference[0])


def test_a_nan_partition_is_named_and_leaves_the_model_unchanged(reference) -> None:
    """Row 517 (partition 4 of 128-row chunks) holds a NaN: the pass fails naming the partition
    and the row, statistics committed earlier stay exactly as they were, and a restart counts
    every row once."""
    x, y = data()
    x[517, 1] = float("nan")
    model = make_model()
    model.fit_statistics(*data())
    before = {name: getattr(model, name).clone() for name in SGPR.STATISTICS}
    with pytest.raises(PartitionError, match=r"partition 4 .*first at row 517"):
        fit_statistics_distributed(
            model,
            da.from_array(x.numpy(), chunks=(CHUNK, INPUT_DIM)),
            da.from_array(y.numpy(), chunks=CHUNK),
            scheduler="threads",
        )
    for name, value in before.items():
        assert torch.equal(getattr(model, name), value), name
    # restarted on repaired data, the pass counts every row once (nothing left from the failure)
    x[517, 1] = data()[0][517, 1]
    fit_statistics_distributed(
        model,
        da.from_array(x.numpy(), chunks=(CHUNK, INPUT_DIM)),
        da.from_array(y.numpy(), chunks=CHUNK),
        scheduler="threads",
    )
    assert_statistics_equal(model, reference[0])
    assert int(model.stat_count) == NUM_POINTS


def test_a_dataframe_partition_with_a_nan_target_or_a_missing_column_is_named() -> None:
    dd, pd = dataframe_modules()
    x, y = data()
    y[260] = float("inf")
    frame = pd.DataFrame(x.numpy(), columns=["a", "b", "c"]).assign(target=y.numpy())
    parts = dd.from_pandas(frame, npartitions=4)  # 250 rows each: row 260 is row 10 of part 1
    with pytest.raises(PartitionError, match=r"partition 1 .*targets .*first at row 10"):
        statistics_map_reduce(make_model(), parts, target="target", scheduler="sync")
    with pytest.raises(PartitionError, match=r"partition \d: no column\(s\) \['d'\]"):
        statistics_map_reduce(
            make_model(), parts, target="target", features=["a", "d"], scheduler="sync"
        )
    # a text cell in a feature column (read as text, e.g. dd.read_csv(..., dtype=str)) is named
    texts = frame.astype(str)
    texts.loc[260, "target"] = "1.0"  # the infinite target above made finite
    texts.loc[600, "b"] = "abc"  # row 100 of partition 2
    with pytest.raises(PartitionError, match=r"partition 2 .*could not convert string .*'abc'"):
        statistics_map_reduce(
            make_model(), dd.from_pandas(texts, npartitions=4), target="target", scheduler="sync"
        )


def test_wrong_column_count_is_named_with_its_partition() -> None:
    x, y = data()
    wide = torch.cat([x, x[:, :1]], dim=-1)  # D + 1 columns
    with pytest.raises(
        PartitionError, match=r"partition \d+ \(rows counted from \d+ .*shape \[N, 3\]"
    ):
        statistics_map_reduce(
            make_model(),
            da.from_array(wide.numpy(), chunks=(CHUNK, 4)),
            da.from_array(y.numpy(), chunks=CHUNK),
            scheduler="sync",
        )
    with pytest.raises(ValueError, match="y must have shape"):
        statistics_map_reduce(
            make_model(), da.from_array(x.numpy(), chunks=(CHUNK, 3)), y[:10], scheduler="sync"
        )


def test_missing_dask_is_a_named_error(monkeypatch) -> None:
    """Without Dask the pass says which extra to install (not a bare ImportError deep inside)."""
    import importlib

    from zonal.scale import dask_statistics as module

    real_import = importlib.import_module

    def no_dask(name, *args):
        if name == "dask":
            raise ImportError("No module named 'dask'")
        return real_import(name, *args)

    monkeypatch.setattr(module.importlib, "import_module", no_dask)
    x, y = data()
    with pytest.raises(module.DistributedExtraMissingError, match=r"zonal\[scale\]"):
        statistics_map_reduce(make_model(), x, y)


def test_statistics_at_learned_input_scales_are_committed_with_those_scales() -> None:
    """After ``fit_input_scales`` (ARD), the map-reduce's statistics are recorded at the new
    scales: the collapsed bound accepts them and equals the in-memory pass's bound."""
    from zonal.geometry import SphereEmbedding

    x, y = data()
    scales = torch.tensor([1.5, 0.5, 0.2], dtype=torch.float64)
    models = []
    for _ in range(2):
        kernel = ScaleKernel(PolynomialDecayKernel(INPUT_DIM + 1, max_degree=8, homogeneous=True))
        embedding = SphereEmbedding(1.0, input_scales=torch.ones(INPUT_DIM), input_dim=INPUT_DIM)
        model = SGPR(kernel.double(), SphericalHarmonicFeatures(INPUT_DIM + 1, 4), INPUT_DIM,
                     input_map=embedding.double())  # fmt: skip
        with torch.no_grad():  # as fit_input_scales leaves them: learned after the last pass
            embedding.raw_input_scales.copy_(
                embedding.input_scales_constraint.inverse_transform(scales)
            )
        models.append(model)
    models[0].fit_statistics(x, y)
    fit_statistics_distributed(
        models[1], da.from_array(x.numpy(), chunks=(CHUNK, INPUT_DIM)),
        da.from_array(y.numpy(), chunks=CHUNK), scheduler="threads",
    )  # fmt: skip
    assert_statistics_equal(models[1], models[0])
    torch.testing.assert_close(models[1].elbo(), models[0].elbo(), rtol=1e-10, atol=0)
