"""The streamed SGPR fit (``zonal fit --chunk-size``): statistics, predictions, bad partitions,
resuming, and the command line."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import norm

from zonal.cli import main
from zonal.datasets import Standardizer
from zonal.tabular import streamed
from zonal.tabular.fitting import fit_data
from zonal.tabular.predict import predict_data
from zonal.tabular.recipes import UnsupportedLikelihoodError, build_sgpr
from zonal.tabular.saved import load_model
from zonal.tabular.streamed import (
    PartitionError,
    ResumeError,
    RunningMoments,
    held_out,
    passes,
    state_path_for,
    streamed_fit,
)
from zonal.tabular.streamed import fit as fit_module
from zonal.tabular.streamed import state as state_module
from zonal.tabular.tables import DataWarning, TableError, read_table, write_table

FAST = {"model": "sgpr", "kernel": "arccos", "num_inducing": 40, "steps": 15}
COLUMNS = ("x0", "x1", "x2")


def _data(num_rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_rows, len(COLUMNS))) * [1.0, 3.0, 0.5] + [0.0, 5.0, -2.0]
    y = 10 + 4 * np.sin(x[:, 0] + 0.3 * x[:, 1]) + 0.2 * rng.normal(size=num_rows)
    return x, y


def _write_partitions(folder: Path, x: np.ndarray, y: np.ndarray, sizes: list[int]) -> list[Path]:
    """CSV partitions part-0.csv, part-1.csv, ... of consecutive rows."""
    folder.mkdir(exist_ok=True)
    paths, start = [], 0
    for index, size in enumerate(sizes):
        rows = slice(start, start + size)
        columns = {name: x[rows, j] for j, name in enumerate(COLUMNS)} | {"y": y[rows]}
        paths.append(write_table(folder / f"part-{index}.csv", columns))
        start += size
    return paths


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """400 rows in three partitions of 150, 130 and 120 rows, and the streamed fit's model."""
    folder = tmp_path_factory.mktemp("streamed")
    x, y = _data(400)
    paths = _write_partitions(folder / "parts", x, y, [150, 130, 120])
    fitted = streamed_fit(paths, "y", output=folder / "model.pt", chunk_size=64, **FAST)
    return folder, paths, x, y, fitted


def test_running_moments_equal_standardizer_fit_in_any_chunking():
    rng = np.random.default_rng(3)
    values = np.stack([rng.normal(size=500) * 1e300, rng.normal(size=500) * 1e-300 + 1e-290,
                       np.full(500, 7.25), rng.normal(size=500) + 1e8], axis=1)  # fmt: skip
    values[:40, 0] /= 1e10  # the magnitude grows after the first chunks
    expected = Standardizer.fit(values)
    # both compute on v / max|v|: they agree to float64's resolution at the column's magnitude
    resolution = 1e-14 * np.abs(values).max(axis=0)
    for bounds in ([0, 500], [0, 7, 8, 100, 333, 500], list(range(0, 501, 50))):
        moments = RunningMoments(values.shape[1])
        for start, stop in itertools.pairwise(bounds):
            moments.update(values[start:stop])
        found = moments.standardizer()
        assert np.all(np.abs(found.mean - expected.mean) <= resolution)
        assert np.all(np.abs(found.std - expected.std) <= resolution)
        np.testing.assert_allclose(found.std[0], expected.std[0], rtol=1e-13)
        assert found.std[2] == 1.0 and found.mean[2] == 7.25  # the constant column


def test_validation_rows_are_a_seeded_hash_of_the_row_number():
    rows = np.arange(200_000)
    mask = held_out(rows, 5, 0.1)
    # the same rows whatever the chunking, another seed gives other rows
    assert np.array_equal(np.concatenate([held_out(rows[:777], 5, 0.1),
                                          held_out(rows[777:], 5, 0.1)]), mask)  # fmt: skip
    assert not np.array_equal(held_out(rows, 6, 0.1), mask)
    # Binomial(200000, 0.1): 5 standard deviations is 670 rows
    assert abs(mask.sum() - 20_000) < 670


def test_statistics_equal_the_in_memory_pass_on_the_same_standardised_rows(table):
    _, _, x, y, fitted = table
    train = ~held_out(np.arange(len(y)), 0, 0.1)
    expected_x = Standardizer.fit(x[train])
    np.testing.assert_allclose(fitted.x_scaler.mean, expected_x.mean, rtol=1e-13)
    np.testing.assert_allclose(fitted.x_scaler.std, expected_x.std, rtol=1e-13)
    np.testing.assert_allclose(fitted.y_scaler.std, Standardizer.fit(y[train]).std, rtol=1e-13)
    model = build_sgpr(fitted.spec)
    model.fit_statistics(torch.from_numpy(fitted.x_scaler.transform(x[train])),
                         torch.from_numpy(fitted.y_scaler.transform(y[train])))  # fmt: skip
    for name in model.STATISTICS:
        streamed_value = getattr(fitted.trained.model, name)
        scale = float(streamed_value.abs().max())
        torch.testing.assert_close(streamed_value, getattr(model, name), rtol=1e-10,
                                   atol=1e-10 * scale)  # fmt: skip
    assert int(fitted.trained.model.stat_count) == train.sum() == 400 - fitted.num_validation_rows


def test_predictions_and_validation_equal_the_in_memory_sgpr_on_the_same_rows(table):
    folder, _, x, y, fitted = table
    valid = held_out(np.arange(len(y)), 0, 0.1)
    memory = fit_data(x[~valid], y[~valid], feature_columns=COLUMNS, target_column="y",
                      validation_fraction=0.0, **FAST)  # fmt: skip
    saved = load_model(folder / "model.pt")  # what `zonal predict` reads
    queries = _data(50, seed=9)[0]
    expected = predict_data(memory, queries)
    for model in (fitted, saved):
        found = predict_data(model, queries)
        for key in ("mean", "variance"):
            np.testing.assert_allclose(found[key], expected[key], rtol=1e-6)
    # the validation metrics in the target's units, from the in-memory model's predictions
    held = predict_data(memory, x[valid])
    mse = np.mean((held["mean"] - y[valid]) ** 2)
    log_likelihood = np.mean(norm.logpdf(y[valid], held["mean"], np.sqrt(held["variance"])))
    assert fitted.num_validation_rows == valid.sum()
    np.testing.assert_allclose(saved.validation["mse"], mse, rtol=1e-6)
    np.testing.assert_allclose(saved.validation["log_likelihood"], log_likelihood, rtol=1e-6)


def test_auto_learns_input_scales_on_a_hash_subsample_then_sums_at_them(table, tmp_path,
                                                                        monkeypatch):  # fmt: skip
    _, paths, x, y, _ = table
    monkeypatch.setattr(passes, "ARD_SUBSAMPLE", 50)
    monkeypatch.setattr(fit_module, "ARD_SUBSAMPLE", 50)
    reader = streamed.PartitionReader(paths, "y", 64)
    first = streamed.first_pass(reader, validation_fraction=0.1, seed=0, ard=True)
    rows = np.flatnonzero(~held_out(np.arange(len(y)), 0, 0.1))
    smallest = rows[np.argsort(streamed.row_uniforms(rows, 0, 1))[:50]]  # bottom-k of all at once
    # the same rows; their values to the CSV parser's rounding (pandas before 3.0 parses CSV
    # floats to within a few ulps, not exactly: 3.1e-15 relative seen on a GPU machine's pandas;
    # the in-memory x came from float64 directly; distinct rows differ by far more)
    np.testing.assert_allclose(first["subsample"][0], x[smallest], rtol=1e-13, atol=0)
    output = tmp_path / "model.pt"
    options = {**FAST, "model": "auto"}
    fitted = streamed_fit(paths, "y", output=output, chunk_size=64, **options)
    model = fitted.trained.model
    assert fitted.spec["ard"] and not torch.allclose(model.input_map.input_scales,
                                                     torch.ones(3, dtype=torch.float64))  # fmt: skip
    memory = build_sgpr(fitted.spec)
    memory.load_state_dict(model.state_dict())
    memory.fit_statistics(torch.from_numpy(fitted.x_scaler.transform(x[rows])),
                          torch.from_numpy(fitted.y_scaler.transform(y[rows])))  # fmt: skip
    scale = float(model.stat_gram.abs().max())
    torch.testing.assert_close(model.stat_gram, memory.stat_gram, rtol=1e-10, atol=1e-10 * scale)
    queries = _data(20, seed=4)[0]
    np.testing.assert_array_equal(predict_data(load_model(output), queries)["mean"],
                                  predict_data(fitted, queries)["mean"])  # fmt: skip


def _corrupt(path: Path, data_row: int, replace) -> None:
    lines = path.read_text().splitlines()
    lines[data_row + 1] = replace(lines[data_row + 1])
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        (lambda line: line.replace(line.split(",")[1], "nan", 1), "missing values in column 'x1'"),
        (lambda line: line.replace(line.split(",")[2], "oops", 1), "non-numeric values"),
        (lambda line: line + ",3.5", "has 5 cells but the header has 4 columns"),
        (lambda line: line.rsplit(",", 1)[0], "has 3 cells but the header has 4 columns"),
        (lambda line: line.rsplit(",", 1)[0] + ",abc", "non-numeric values in column 'y'"),
    ],
    ids=["nan", "text", "extra-cell", "missing-cell", "target-text"],
)
def test_a_bad_row_in_partition_2_names_the_file_and_global_row_and_saves_nothing(
    tmp_path, replace, message
):
    x, y = _data(300)
    paths = _write_partitions(tmp_path / "parts", x, y, [100, 120, 80])
    _corrupt(paths[1], 70, replace)
    output = tmp_path / "model.pt"
    with pytest.raises(PartitionError) as error:
        streamed_fit(tmp_path / "parts", "y", output=output, chunk_size=32, **FAST)
    text = str(error.value)
    assert f"partition 2 of 3 ({paths[1]})" in text
    assert message in text
    assert "text labels" not in text  # one bad cell in a numeric target is not a classification
    assert "line 72 (global row 170)" in text
    if "cells but the header" not in message:  # the cells' problems: the chunk's, not a total
        assert "counted in the 32-row chunk from line 66 (global row 164)" in text
    assert not output.exists() and not state_path_for(output).exists()


def test_a_partition_whose_rows_all_have_an_extra_cell_is_named(tmp_path):
    """pandas would read the first cells as an index; the first chunk is checked by the header."""
    x, y = _data(200)
    paths = _write_partitions(tmp_path, x, y, [100, 100])
    lines = paths[1].read_text().splitlines()
    paths[1].write_text("\n".join([lines[0], *(line + ",1.0" for line in lines[1:])]) + "\n")
    with pytest.raises(PartitionError, match=r"part-1.csv\): line 2 \(global row 100\) has 5 "):
        streamed_fit(paths, "y", output=tmp_path / "m.pt", chunk_size=64, **FAST)


def test_a_parquet_partition_with_a_missing_value_names_its_row(tmp_path):
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    x, y = _data(200)
    paths = _write_partitions(tmp_path, x[:120], y[:120], [120])
    frame = pandas.DataFrame({name: x[120:, j] for j, name in enumerate(COLUMNS)} | {"y": y[120:]})
    frame.loc[33, "y"] = np.nan
    frame.to_parquet(tmp_path / "part-1.parquet")
    with pytest.raises(PartitionError, match=r"missing values in column 'y' at row 33 \(global "
                                             r"row 153\)"):  # fmt: skip
        streamed_fit([*paths, tmp_path / "part-1.parquet"], "y", output=tmp_path / "m.pt",
                     chunk_size=50, **FAST)  # fmt: skip
    frame.loc[33, "y"] = 1.0  # the mixed CSV / Parquet partitions then fit
    frame.to_parquet(tmp_path / "part-1.parquet")
    fitted = streamed_fit([*paths, tmp_path / "part-1.parquet"], "y", output=tmp_path / "m.pt",
                          chunk_size=50, **FAST)  # fmt: skip
    assert fitted.num_rows == 200


class _StopAfter:
    """``accumulate_chunk`` that raises ``error`` after ``count`` chunks; counts its calls."""

    def __init__(self, count: int | None, error: type[BaseException] = KeyboardInterrupt) -> None:
        self.count, self.error, self.calls = count, error, 0

    def __call__(self, *args, **kwargs):
        if self.count is not None and self.calls == self.count:
            raise self.error("stopped by the test")
        self.calls += 1
        return _ACCUMULATE(*args, **kwargs)


_ACCUMULATE = streamed.accumulate_chunk


@pytest.mark.parametrize(("error", "saved_chunks"), [(KeyboardInterrupt, 5), (RuntimeError, 4)])
def test_an_interrupted_pass_resumes_without_counting_a_row_twice(
    table, tmp_path, monkeypatch, error, saved_chunks
):
    """Ctrl-C saves the totals after the last chunk added (5); any other failure leaves the
    periodic save (every 2 chunks: 4); the resumed pass adds only the chunks after it."""
    _, paths, _, _, uninterrupted = table
    output = tmp_path / "model.pt"
    stop = _StopAfter(5, error)
    monkeypatch.setattr(passes, "accumulate_chunk", stop)
    with pytest.raises(error):
        streamed_fit(paths, "y", output=output, chunk_size=64, checkpoint_every=2, **FAST)
    assert stop.calls == 5 and not output.exists() and state_path_for(output).exists()
    resumed = _StopAfter(None)
    monkeypatch.setattr(passes, "accumulate_chunk", resumed)
    fitted = streamed_fit(paths, "y", output=output, chunk_size=64, checkpoint_every=2, **FAST)
    # 150, 130, 120 rows in chunks of 64: 3 + 3 + 2 chunks, each with training rows
    assert resumed.calls == 8 - saved_chunks
    for name in fitted.trained.model.STATISTICS:
        assert torch.equal(getattr(fitted.trained.model, name),
                           getattr(uninterrupted.trained.model, name))  # fmt: skip
    assert not state_path_for(output).exists()


def test_a_changed_input_or_setting_refuses_to_resume_and_restart_starts_again(
    table, tmp_path, monkeypatch
):
    _, _, x, y, uninterrupted = table
    copies = _write_partitions(tmp_path / "parts", x, y, [150, 130, 120])
    output = tmp_path / "model.pt"
    monkeypatch.setattr(passes, "accumulate_chunk", _StopAfter(3))
    with pytest.raises(KeyboardInterrupt):
        streamed_fit(copies, "y", output=output, chunk_size=64, **FAST)
    monkeypatch.setattr(passes, "accumulate_chunk", _ACCUMULATE)
    original, stat = copies[2].read_bytes(), copies[2].stat()
    with copies[2].open("a") as handle:
        handle.write("0.5,5.0,-2.0,11.0\n")
    with pytest.raises(ResumeError, match=f"the partition {copies[2].resolve()} changed"):
        streamed_fit(copies, "y", output=output, chunk_size=64, **FAST)
    copies[2].write_bytes(original)
    os.utime(copies[2], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(ResumeError, match="chunk_size 64 -> 32"):
        streamed_fit(copies, "y", output=output, chunk_size=32, **FAST)
    fitted = streamed_fit(copies, "y", output=output, chunk_size=32, restart=True, **FAST)
    expected = uninterrupted.trained.model.stat_gram  # summed in chunks of 64, not 32
    torch.testing.assert_close(fitted.trained.model.stat_gram, expected, rtol=1e-12,
                               atol=1e-12 * float(expected.abs().max()))  # fmt: skip


def test_classification_targets_and_other_models_are_refused(tmp_path):
    x, _ = _data(100)
    labels = (x[:, 0] > 0).astype(float)
    paths = _write_partitions(tmp_path, x, labels, [100])
    with pytest.raises(UnsupportedLikelihoodError, match="2 integer values: a classification"):
        streamed_fit(paths, "y", output=tmp_path / "m.pt", chunk_size=30, **FAST)
    with pytest.raises(ValueError, match="fits the one-pass SGPR"):
        streamed_fit(paths, "y", output=tmp_path / "m.pt", chunk_size=30, model="svgp")
    words = tmp_path / "words.csv"  # text labels: the note says why the pass refuses them
    rows = [f"{a},{b},{c},{'up' if a > 0 else 'down'}" for a, b, c in x.tolist()]
    words.write_text("x0,x1,x2,y\n" + "\n".join(rows) + "\n")
    with pytest.raises(PartitionError, match="the target holds text labels \\(classification\\)"):
        streamed_fit(words, "y", output=tmp_path / "m.pt", chunk_size=30, **FAST)
    assert not (tmp_path / "m.pt").exists()


def test_cli_fit_with_chunk_size_then_predict(tmp_path, capsys):
    x, y = _data(300)
    data = _write_partitions(tmp_path, x, y, [300])[0]
    options = ["--target", "y", "--model", "sgpr", "--kernel", "arccos", "--num-inducing", "40",
               "--steps", "15", "--quiet"]  # fmt: skip
    assert main(["fit", "--chunk-size", "100", str(data), *options]) == 0
    printed = capsys.readouterr()
    assert "read 100 rows at a time" in printed.out and "validation (" in printed.out
    # the task first, as the fit in memory says it
    assert printed.err.startswith("zonal: target 'y': regression, Gaussian likelihood")
    checkpoint = tmp_path / "part-0.zonal.pt"
    queries = tmp_path / "queries.csv"
    write_table(queries, {name: x[:20, j] for j, name in enumerate(COLUMNS)})
    assert main(["predict", str(checkpoint), str(queries)]) == 0
    written = read_table(tmp_path / "queries.predictions.csv").numeric(["mean", "variance"])
    expected = predict_data(load_model(checkpoint), x[:20])
    np.testing.assert_allclose(written[:, 0], expected["mean"], rtol=1e-12)
    np.testing.assert_allclose(written[:, 1], expected["variance"], rtol=1e-12)
    # the model fits the data: its predictions at the training inputs are near the targets
    assert np.sqrt(np.mean((expected["mean"] - y[:20]) ** 2)) < 0.3 * y.std()


def test_cli_chunk_size_errors_are_one_line(tmp_path, capsys):
    x, y = _data(60)
    data = _write_partitions(tmp_path, x, y, [60])[0]
    assert main(["fit", str(data), "--target", "y", "--chunk-size", "10", "--model", "adgp"]) == 1
    assert "fits the one-pass SGPR" in capsys.readouterr().err.strip().splitlines()[-1]
    assert main(["fit", str(data), str(data), "--target", "y"]) == 1
    assert "need --chunk-size" in capsys.readouterr().err
    assert main(["fit", str(data), str(data), "--target", "y", "--chunk-size", "10"]) == 1
    assert "listed twice" in capsys.readouterr().err


def test_cli_ctrl_c_saves_the_progress_and_the_same_command_resumes(tmp_path, capsys, monkeypatch):
    x, y = _data(300)
    data = _write_partitions(tmp_path, x, y, [300])[0]
    command = ["fit", str(data), "--target", "y", "--chunk-size", "50", "--model", "sgpr",
               "--kernel", "arccos", "--num-inducing", "40", "--steps", "15", "--quiet"]  # fmt: skip
    monkeypatch.setattr(passes, "accumulate_chunk", _StopAfter(2))
    assert main(command) == 130
    state = state_path_for(tmp_path / "part-0.zonal.pt")
    assert f"progress saved in {state}; run the same command to resume" in capsys.readouterr().err
    resumed = _StopAfter(None)
    monkeypatch.setattr(passes, "accumulate_chunk", resumed)
    assert main(command) == 0
    assert resumed.calls == 6 - 2 and not state.exists()  # 300 rows in chunks of 50


def test_a_flipped_bit_in_the_saved_state_is_refused_not_resumed(table, tmp_path, monkeypatch):
    _, paths, _, _, _ = table
    output = tmp_path / "model.pt"
    monkeypatch.setattr(passes, "accumulate_chunk", _StopAfter(3))
    with pytest.raises(KeyboardInterrupt):
        streamed_fit(paths, "y", output=output, chunk_size=64, **FAST)
    monkeypatch.setattr(passes, "accumulate_chunk", _ACCUMULATE)
    state = state_path_for(output)
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit somewhere in the tensors
    state.write_bytes(bytes(data))
    with pytest.raises(ResumeError, match="checksum does not match its contents"):
        streamed_fit(paths, "y", output=output, chunk_size=64, **FAST)


def test_ctrl_c_while_the_state_is_written_completes_the_write_then_stops(tmp_path, monkeypatch):
    import signal

    real_save = torch.save

    def save_then_interrupt(obj, handle):
        real_save(obj, handle)
        signal.raise_signal(signal.SIGINT)  # Ctrl-C arrives while the file is being written

    monkeypatch.setattr(torch, "save", save_then_interrupt)
    path = tmp_path / "state.pt"
    with pytest.raises(KeyboardInterrupt):
        state_module.save_state(path, {"totals": torch.arange(5.0)})
    monkeypatch.setattr(torch, "save", real_save)
    assert torch.equal(state_module.read_state(path)["totals"], torch.arange(5.0))


def test_an_interrupt_in_the_first_pass_does_not_promise_a_resume(tmp_path, capsys, monkeypatch):
    x, y = _data(200)
    data = _write_partitions(tmp_path, x, y, [200])[0]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fit_module, "first_pass", interrupted)
    code = main(["fit", str(data), "--target", "y", "--model", "sgpr", "--chunk-size", "50"])
    assert code == 130
    err = capsys.readouterr().err
    assert "nothing saved yet (the first pass had not finished)" in err
    assert "to resume" not in err


def test_a_one_value_target_and_constant_columns_are_treated_as_in_memory(tmp_path, capsys):
    """The streamed fit checks what the in-memory fit checks: a target of one value is a named
    one-line error before any pass 2 work; an input column of one value fits with a note."""
    x, y = _data(120)
    flat = _write_partitions(tmp_path / "flat", x, np.full(120, 2.5), [60, 60])
    with pytest.raises(TableError, match=r"the target 'y' holds a single value \(2\.5\)"):
        streamed_fit(flat, "y", output=tmp_path / "flat.pt", chunk_size=32, **FAST)
    assert not (tmp_path / "flat.pt").exists()
    x[:, 1] = 7.0
    steady = _write_partitions(tmp_path / "steady", x, y, [60, 60])
    with pytest.warns(DataWarning, match=r"1 input column\(s\) hold a single value .*'x1'"):
        streamed_fit(steady, "y", output=tmp_path / "steady.pt", chunk_size=32, **FAST)
    assert (tmp_path / "steady.pt").exists()
    code = main(["fit", str(tmp_path / "flat"), "--target", "y", "--chunk-size", "32",
                 "--model", "sgpr", "--quiet"])  # fmt: skip
    assert code == 1
    assert "holds a single value (2.5) on every row" in capsys.readouterr().err
