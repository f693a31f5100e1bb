"""``benchmarks/statistics_pass.py`` on a device, in tiny configurations: the rows drawn chunk by
chunk on the device (the same rows on every call), the whole pass being ``SGPR.fit_statistics``
over them in float64 and with the float32 option (on a GPU, against the CPU's pass over the same
rows), the JSON written atomically, the recurrence's block size put back, the devices refused."""

from __future__ import annotations

import json
import math
import sys

import pytest
import torch

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("statistics_pass")


@pytest.mark.parametrize("device", DEVICES)
def test_device_chunks_are_the_same_rows_on_every_call(bench, device):
    where = bench.resolve_device(device)
    chunks = list(bench.device_chunks(1000, 300, where, seed=3))
    assert [len(x) for x, _ in chunks] == [300, 300, 300, 100]
    for x, y in chunks:
        assert x.shape[1:] == (bench.INPUT_DIM,) and y.shape == x.shape[:1]
        assert x.device.type == where.type and x.dtype == torch.float64
    again = list(bench.device_chunks(1000, 300, where, seed=3))
    for (x, y), (x2, y2) in zip(chunks, again, strict=True):
        assert torch.equal(x, x2) and torch.equal(y, y2)
    other = next(bench.device_chunks(1000, 300, where, seed=4))
    assert not torch.equal(other[0], chunks[0][0])


@pytest.mark.parametrize("device", DEVICES)
def test_the_whole_pass_is_fit_statistics_over_the_drawn_rows(bench, device):
    where = bench.resolve_device(device)
    result = bench.measure_pass(1500, 512, where)
    assert result["chunks"] == 3
    for name in ("float64", "float32"):
        part = result[name]
        assert part["counted_rows"] == 1500
        assert part["seconds"] > 0 and part["rows_per_s"] == pytest.approx(1500 / part["seconds"])
        assert math.isfinite(part["elbo"]) and "elbo_error" not in part
        if where.type == "cuda":
            assert part["peak_memory_bytes"] > 0
        else:
            assert part["peak_memory_bytes"] is None
    compared = result["float32_vs_float64"]
    assert 0 < compared["gram_relative_frobenius"] < 1e-5
    assert 0 < compared["cross_relative_frobenius"] < 1e-5
    assert abs(compared["elbo_relative_difference"]) < 1e-3
    # the same rows through the CPU's float64 pass give the same bound
    rows = list(bench.device_chunks(1500, 512, where))
    x = torch.cat([x for x, _ in rows]).cpu()
    y = torch.cat([y for _, y in rows]).cpu()
    model = bench.make_model()
    model.fit_statistics(x, y, chunk_size=700)
    with torch.no_grad():
        assert result["float64"]["elbo"] == pytest.approx(float(model.elbo()), rel=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_main_writes_the_table_and_the_passes_atomically(bench, device, tmp_path, monkeypatch):
    output = tmp_path / "results" / "statistics_pass.json"
    arguments = ["--device", device, "--rows", "256", "--repeats", "1", "--threads", "1"]
    arguments += ["--pass-rows", "600", "--recurrence-rows", "512", "--output", str(output)]
    monkeypatch.setattr(sys, "argv", ["statistics_pass.py", *arguments])
    threads = torch.get_num_threads()
    try:
        bench.main()
    finally:
        torch.set_num_threads(threads)
    assert [path.name for path in output.parent.iterdir()] == [output.name]
    results = json.loads(output.read_text())
    assert "errors" not in results
    assert results["environment"]["device"].startswith(device)
    (entry,) = results["by_threads"].values()
    assert entry["float64"]["pass_rows_per_s"] == pytest.approx(256 / entry["float64"]["pass_s"])
    expected = {"cpu": 256, "cuda": 65536}[device]  # the library's blocks on that device
    assert results["pass"]["recurrence_rows"] == expected
    assert results["pass_recurrence_rows"]["recurrence_rows"] == 512
    assert results["pass_recurrence_rows"]["float64"]["elbo"] == pytest.approx(
        results["pass"]["float64"]["elbo"], rel=1e-12
    )
    if device == "cuda":
        assert results["environment"]["device_name"]


def test_a_failed_write_keeps_the_old_json_and_leaves_no_temporary_file(
    bench, tmp_path, monkeypatch
):
    import zonal._files

    output = tmp_path / "statistics_pass.json"
    bench.write_json(output, {"rows": 1})
    with pytest.raises(TypeError):  # a value JSON cannot hold: refused before any file opens
        bench.write_json(output, {"rows": object()})
    assert json.loads(output.read_text()) == {"rows": 1}

    def full_disk(source, target):  # the new text is written and synced, then the move fails
        raise OSError("no space left on device")

    monkeypatch.setattr(zonal._files.os, "replace", full_disk)
    with pytest.raises(OSError, match="no space"):
        bench.write_json(output, {"rows": 2})
    assert json.loads(output.read_text()) == {"rows": 1}
    assert [path.name for path in tmp_path.iterdir()] == [output.name]


def test_the_recurrence_block_size_is_put_back(bench):
    from zonal.features import zonal_basis

    before = zonal_basis.RECURRENCE_ROWS
    with pytest.raises(RuntimeError), bench.overridden_recurrence_rows(before * 4):
        assert before * 4 == zonal_basis.RECURRENCE_ROWS
        raise RuntimeError
    assert before == zonal_basis.RECURRENCE_ROWS
    with bench.overridden_recurrence_rows(0):
        assert before == zonal_basis.RECURRENCE_ROWS


def test_devices_that_cannot_be_timed_are_refused(bench):
    with pytest.raises(ValueError, match="only cpu and cuda"):
        bench.resolve_device("meta")
    if torch.cuda.is_available():
        assert bench.resolve_device("cuda").index is not None
    else:
        with pytest.raises(ValueError, match="CUDA is not available"):
            bench.resolve_device("cuda")


def test_a_failed_stage_is_recorded_and_the_others_kept(bench, tmp_path, monkeypatch):
    output = tmp_path / "statistics_pass.json"
    arguments = ["--rows", "256", "--repeats", "1", "--threads", "1", "--pass-rows", "300"]
    monkeypatch.setattr(sys, "argv", ["statistics_pass.py", *arguments, "--output", str(output)])

    def broken(*arguments, **options):
        raise RuntimeError("no pass today")

    monkeypatch.setattr(bench, "measure_pass", broken)
    threads = torch.get_num_threads()
    try:
        with pytest.raises(SystemExit) as stopped:
            bench.main()
    finally:
        torch.set_num_threads(threads)
    assert stopped.value.code == 1
    results = json.loads(output.read_text())
    assert "no pass today" in results["errors"]["pass"] and "table" not in results["errors"]
    assert results["by_threads"]["1"]["float64"]["pass_s"] > 0
