"""Atomic writes, run folders and checkpoints."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from zonal._files import atomic_writer, to_jsonable, write_json_atomic
from zonal.experiments import CheckpointError, RunDirectory
from zonal.experiments import run_directory as run_directory_module


def _leftovers(folder):
    return sorted(path.name for path in folder.iterdir() if path.name.startswith("."))


def test_failure_while_writing_keeps_the_earlier_file(tmp_path):
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"value": 1})
    with pytest.raises(RuntimeError, match="disk on fire"), atomic_writer(path, "w") as handle:
        handle.write('{"value": ')
        raise RuntimeError("disk on fire")
    assert json.loads(path.read_text()) == {"value": 1}
    assert _leftovers(tmp_path) == []


def test_failure_to_replace_keeps_the_earlier_file(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"value": 1})

    def failing_replace(source, target):
        raise OSError("no space left")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="no space left"):
        write_json_atomic(path, {"value": 2})
    assert json.loads(path.read_text()) == {"value": 1}
    assert _leftovers(tmp_path) == []


def test_unserialisable_value_fails_before_touching_the_file(tmp_path):
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"value": 1})
    with pytest.raises(TypeError, match="object"):
        write_json_atomic(path, {"value": object()})
    assert json.loads(path.read_text()) == {"value": 1}


def test_to_jsonable_converts_tensors_arrays_and_paths(tmp_path):
    value = {
        "scalar": torch.tensor(2.5),
        "vector": torch.arange(3),
        "numpy": np.float64(0.5),
        "array": np.ones(2),
        "path": tmp_path,
        "pair": (1, 2),
        3: None,
    }
    assert to_jsonable(value) == {
        "scalar": 2.5,
        "vector": [0, 1, 2],
        "numpy": 0.5,
        "array": [1.0, 1.0],
        "path": str(tmp_path),
        "pair": [1, 2],
        "3": None,
    }


def test_run_folder_name_has_experiment_timestamp_and_id(tmp_path):
    run_dir = RunDirectory.create(tmp_path / "runs", "toy-regression")
    assert run_dir.path.parent == tmp_path / "runs"
    name, stamp, short = run_dir.name.rsplit("-", 2)
    assert name == "toy-regression"
    assert len(stamp) == 16 and stamp.endswith("Z") and stamp[8] == "T"
    assert len(short) == 6


def test_runs_in_the_same_second_get_separate_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(run_directory_module, "utc_timestamp", lambda: "20250101T000000Z")
    ids = iter(["aaaaaa", "aaaaaa", "bbbbbb"])  # the second run first draws a taken name
    monkeypatch.setattr(run_directory_module, "short_id", lambda: next(ids))
    first = RunDirectory.create(tmp_path, "toy")
    first.save_text("note.txt", "first")
    second = RunDirectory.create(tmp_path, "toy")
    assert first.name == "toy-20250101T000000Z-aaaaaa"
    assert second.name == "toy-20250101T000000Z-bbbbbb"
    assert (first.path / "note.txt").read_text() == "first"
    assert not (second.path / "note.txt").exists()


def test_file_names_stay_inside_the_run_folder(tmp_path):
    run_dir = RunDirectory.create(tmp_path, "toy")
    for name in ["../escape.txt", "sub/file.txt", "", ".."]:
        with pytest.raises(ValueError, match="plain file name"):
            run_dir.file(name)


def test_save_table_writes_csv(tmp_path):
    run_dir = RunDirectory.create(tmp_path, "toy")
    run_dir.save_table("t.csv", [{"a": 1, "b": 0.5}, {"a": 2, "b": 1.5}])
    assert run_dir.file("t.csv").read_text() == "a,b\n1,0.5\n2,1.5\n"


def test_checkpoint_round_trip(tmp_path):
    run_dir = RunDirectory.create(tmp_path, "toy")
    assert run_dir.load_checkpoint() is None
    generator = torch.Generator().manual_seed(3)
    state = {"step": 7, "weights": torch.randn(3, 2), "rng": generator.get_state(), "losses": [0.5]}
    run_dir.save_checkpoint(state)
    loaded = run_dir.load_checkpoint()
    assert loaded["step"] == 7 and loaded["losses"] == [0.5]
    assert torch.equal(loaded["weights"], state["weights"])
    assert torch.equal(loaded["rng"], state["rng"])


def test_failure_while_saving_a_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch):
    run_dir = RunDirectory.create(tmp_path, "toy")
    run_dir.save_checkpoint({"step": 1})

    def partial_save(obj, handle):
        handle.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", partial_save)
    with pytest.raises(KeyboardInterrupt):
        run_dir.save_checkpoint({"step": 2})
    monkeypatch.undo()
    assert run_dir.load_checkpoint() == {"step": 1}
    assert _leftovers(run_dir.path) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"this is not a checkpoint",
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: b"",
    ],
    ids=["garbage", "truncated", "empty"],
)
def test_corrupt_checkpoint_error_names_the_file(tmp_path, damage):
    run_dir = RunDirectory.create(tmp_path, "toy")
    run_dir.save_checkpoint({"step": 1, "weights": torch.randn(50)})
    path = run_dir.checkpoint_path
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CheckpointError, match="corrupt or unreadable") as error:
        run_dir.load_checkpoint()
    assert str(path) in str(error.value)


def test_checkpoint_with_arbitrary_objects_is_refused(tmp_path):
    run_dir = RunDirectory.create(tmp_path, "toy")
    torch.save({"step": 1, "thing": run_directory_module.RunDirectory}, run_dir.checkpoint_path)
    with pytest.raises(CheckpointError, match=str(run_dir.checkpoint_path)):
        run_dir.load_checkpoint()
