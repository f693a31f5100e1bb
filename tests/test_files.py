"""The one atomic-write helper (``zonal._files``) and the one cache root (``zonal.paths``)."""

from pathlib import Path

import pytest
import torch

from zonal import paths
from zonal._files import (
    OutputExistsError,
    atomic_writer,
    place_atomically,
    scratch_dir,
    write_bytes_atomic,
    write_new_file,
)


def _leftovers(folder):
    return sorted(path.name for path in folder.iterdir() if path.name.startswith("."))


def test_new_file_never_clobbers_unless_forced(tmp_path):
    path = tmp_path / "model.pt"
    write_new_file(path, lambda handle: torch.save({"a": 1}, handle))
    with pytest.raises(OutputExistsError, match="--force"):
        write_new_file(path, lambda handle: torch.save({"a": 2}, handle))
    assert torch.load(path)["a"] == 1
    write_new_file(path, lambda handle: torch.save({"a": 3}, handle), force=True)
    assert torch.load(path)["a"] == 3
    assert _leftovers(tmp_path) == []


def test_a_failing_payload_leaves_the_target_and_no_temporary_file(tmp_path):
    path = tmp_path / "table.csv"
    write_new_file(path, lambda handle: handle.write("x\n1\n"), mode="w")

    def failing(handle):
        handle.write("half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        write_new_file(path, failing, mode="w", force=True)
    assert path.read_text() == "x\n1\n"
    assert _leftovers(tmp_path) == []


def test_writer_without_overwrite_refuses_a_file_that_appeared(tmp_path):
    path = tmp_path / "out.bin"
    with pytest.raises(OutputExistsError), atomic_writer(path, "wb", overwrite=False) as handle:
        handle.write(b"new")
        path.write_bytes(b"someone else")  # appears while we write
    assert path.read_bytes() == b"someone else"
    assert _leftovers(tmp_path) == []


def test_bytes_replace_and_bad_mode(tmp_path):
    path = tmp_path / "blob"
    write_bytes_atomic(path, b"one")
    write_bytes_atomic(path, b"two")
    assert path.read_bytes() == b"two"
    with pytest.raises(ValueError, match="mode"), atomic_writer(path, "a"):
        pass


def test_download_is_placed_in_one_step(tmp_path):
    folder = tmp_path / "cache"
    with scratch_dir(folder) as scratch:
        made = Path(scratch) / "file.whl"
        made.write_bytes(b"wheel")
        place_atomically(made, folder / "file.whl")
    assert (folder / "file.whl").read_bytes() == b"wheel"
    assert _leftovers(folder) == []


def test_every_cache_lives_under_the_one_root(monkeypatch, tmp_path):
    from zonal.datasets.cache import datasets_dir
    from zonal.harmonics import load_fundamental_system

    monkeypatch.setenv("ZONAL_CACHE_DIR", str(tmp_path))
    assert paths.cache_root() == tmp_path
    assert datasets_dir() == tmp_path / "datasets"
    load_fundamental_system(21, 2, progress=False)  # d = 21 is not shipped: computed and cached
    assert [path.name for path in (tmp_path / "fundamental_systems").iterdir()] == ["d21_n2.npz"]
