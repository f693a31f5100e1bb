"""``zonal fit`` / ``zonal predict`` on a user's table, through ``zonal.cli.main([...])``."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from zonal.cli import main
from zonal.tabular.fitting import fit_data, fit_table
from zonal.tabular.predict import predict_data, predict_table
from zonal.tabular.saved import FORMAT, load_model, save_model
from zonal.tabular.tables import TableError, read_table, write_table

FAST = ["--num-inducing", "40", "--steps", "30"]
TARGET_SHIFT, TARGET_SCALE = 10.0, 3.0


def synthetic(num_rows: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_rows, 2))
    y = TARGET_SHIFT + TARGET_SCALE * (np.sin(2 * x[:, 0]) + 0.5 * x[:, 1])
    return x, y + 0.05 * rng.standard_normal(num_rows)


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def table_csv(tmp_path: Path) -> Path:
    x, y = synthetic()
    rows = [
        [f"id{i}", a, b, t] for i, (a, b, t) in enumerate(zip(x[:, 0], x[:, 1], y, strict=True))
    ]
    return write_csv(tmp_path / "train.csv", ["name", "a", "b", "y"], rows)


def read_predictions(path: Path) -> dict[str, np.ndarray]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {key: np.array([float(row[key]) for row in rows]) for key in rows[0]}


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("zonal: error: ") and "Traceback" not in "\n".join(err)
    return err[-1]


def no_temporary_files(folder: Path) -> bool:
    return not [path for path in folder.iterdir() if path.name.endswith(".tmp")]


# ---------------------------------------------------------------------------------- round trips


def test_fit_then_predict_round_trip_on_csv(table_csv, tmp_path, capsys):
    checkpoint, output = tmp_path / "model.pt", tmp_path / "pred.csv"
    fit = ["fit", str(table_csv), "--target", "y", "--features", "a,b", "-o", str(checkpoint)]
    assert main([*fit, *FAST]) == 0
    assert str(checkpoint) in capsys.readouterr().out
    state = torch.load(checkpoint, weights_only=True)  # plain tensors and containers only
    assert state["format"] == FORMAT and state["feature_columns"] == ["a", "b"]
    assert main(["predict", str(checkpoint), str(table_csv), "--output", str(output)]) == 0
    predictions = read_predictions(output)
    assert list(predictions) == ["mean", "variance", "lower", "upper"]
    _, y = synthetic()
    assert len(predictions["mean"]) == len(y)
    # original units: the fit explains most of the target's variance around its shifted mean
    assert np.mean((predictions["mean"] - y) ** 2) < 0.1 * np.var(y)
    assert (predictions["variance"] > 0).all()
    half_width = 1.959963984540054 * np.sqrt(predictions["variance"])
    np.testing.assert_allclose(predictions["upper"] - predictions["mean"], half_width, rtol=1e-9)
    np.testing.assert_allclose(predictions["mean"] - predictions["lower"], half_width, rtol=1e-9)
    assert no_temporary_files(tmp_path)


def test_saved_model_predicts_exactly_like_the_fitted_one(table_csv, tmp_path):
    table = read_table(table_csv)
    fitted = fit_table(table, "y", features=["a", "b"], num_inducing=40, steps=20)
    save_model(fitted, tmp_path / "model.pt")
    loaded = load_model(tmp_path / "model.pt")
    before, after = predict_table(fitted, table), predict_table(loaded, table)
    for key in before:
        np.testing.assert_allclose(after[key], before[key], rtol=1e-12, atol=1e-12)
    latent = predict_table(loaded, table, include_noise=False)
    assert (latent["variance"] < before["variance"]).all()  # the noise is left out


@pytest.mark.parametrize("model", ["svgp", "svgp-activated"])
def test_svgp_models_round_trip_on_npz(model, tmp_path, capsys):
    x, y = synthetic(40)
    data = tmp_path / "train.npz"
    np.savez(data, X=x, y=y, columns=np.array(["a", "b"]), target=np.array("target"))
    checkpoint = tmp_path / "model.pt"
    args = ["fit", str(data), "--target", "target", "--model", model, "-o", str(checkpoint)]
    assert main([*args, "--num-inducing", "12", "--steps", "10"]) == 0
    # the one-array-per-column layout, with an extra column that prediction ignores
    other = tmp_path / "new.npz"
    np.savez(other, b=x[:5, 1], a=x[:5, 0], note=np.arange(5))
    output = tmp_path / "pred.npz"
    assert main(["predict", str(checkpoint), str(other), "-o", str(output)]) == 0
    with np.load(output) as predictions:
        assert sorted(predictions.files) == ["lower", "mean", "upper", "variance"]
        assert predictions["mean"].shape == (5,)
        assert np.isfinite(predictions["mean"]).all() and (predictions["variance"] > 0).all()
        # the columns were read by name (b before a in the file): the fitted model's predictions
        expected = predict_data(load_model(checkpoint), x[:5])
        np.testing.assert_allclose(predictions["mean"], expected["mean"], rtol=1e-12)
        np.testing.assert_allclose(predictions["variance"], expected["variance"], rtol=1e-12)
    assert "5 predictions" in capsys.readouterr().out


# ---------------------------------------------------------------------------------- errors


def test_missing_target_lists_the_columns(table_csv, capsys):
    assert main(["fit", str(table_csv), "--target", "price"]) == 1
    line = one_line_error(capsys)
    assert str(table_csv) in line and "'price'" in line
    assert "'name', 'a', 'b', 'y'" in line


def test_missing_and_non_numeric_values_name_rows_and_columns(tmp_path, capsys):
    rows = [[1.0, 2.0, 3.0], [1.5, "", 2.0], [0.5, 1.0, "NA"], [2.0, "abc", 1.0]]
    data = write_csv(tmp_path / "bad.csv", ["a", "b", "y"], rows)
    assert main(["fit", str(data), "--target", "y", "-o", str(tmp_path / "m.pt")]) == 1
    line = one_line_error(capsys)
    assert str(data) in line
    assert "missing values in column 'b' at line 3; column 'y' at line 4" in line
    assert "non-numeric values in column 'b' at line 5 ('abc')" in line
    assert not (tmp_path / "m.pt").exists()


def test_an_npz_of_python_objects_is_named_as_such(tmp_path):
    """An object array (text saved from a list of str objects) needs unpickling, which zonal
    refuses: the message says so and how to save text (it said "a damaged array")."""
    x, _ = synthetic(4)
    np.savez(tmp_path / "objects.npz", a=x[:, 0], label=np.array(["u", "v", "u", "v"], object))
    with pytest.raises(TableError, match=r"Python objects \(dtype=object\).*as strings"):
        read_table(tmp_path / "objects.npz")


def test_npz_missing_values_name_rows(tmp_path):
    x, y = synthetic(10)
    x[7, 1] = np.nan
    path = tmp_path / "data.npz"
    np.savez(path, X=x, y=y)
    table = read_table(path)
    with pytest.raises(TableError, match=r"missing values in column 'x1' at row 7"):
        table.numeric(["x0", "x1"])


class _Payload:
    """A pickled Python object: what a weights-only load must refuse."""


@pytest.mark.parametrize("damage", ["truncated", "foreign", "text", "bit-flip", "pickle"])
def test_corrupted_or_foreign_checkpoint_is_named(damage, table_csv, tmp_path, capsys):
    checkpoint = tmp_path / "model.pt"
    fit = ["fit", str(table_csv), "--target", "y", "--features", "a,b", "-o", str(checkpoint)]
    assert main([*fit, *FAST]) == 0
    expected = {"foreign": "not a model file written by `zonal fit`", "bit-flip": "checksum",
                "pickle": "zonal will not execute code from it",
                "text": "not a PyTorch checkpoint at all"}.get(damage, "corrupt")  # fmt: skip
    if damage == "truncated":
        checkpoint.write_bytes(checkpoint.read_bytes()[:200])
    elif damage == "foreign":
        torch.save({"weights": torch.zeros(3)}, checkpoint)
    elif damage == "bit-flip":  # one bit of one tensor's data, the file still loads
        state = torch.load(checkpoint, weights_only=True)
        name = next(key for key, value in state["model_state"].items() if value.numel() > 4)
        flipped = state["model_state"][name].reshape(-1).view(torch.uint8)
        flipped[3] ^= 1
        torch.save(state, checkpoint)
    elif damage == "pickle":
        torch.save({"format": "zonal.tabular-model", "payload": _Payload()}, checkpoint)
    else:
        checkpoint.write_text("not a checkpoint\n")
    capsys.readouterr()
    output = tmp_path / "pred.csv"
    assert main(["predict", str(checkpoint), str(table_csv), "-o", str(output)]) == 1
    line = one_line_error(capsys)
    assert str(checkpoint) in line
    assert expected in line
    assert "weights_only=False" not in line
    assert not output.exists()


def test_a_table_given_as_the_checkpoint_is_named(table_csv, tmp_path, capsys):
    """``zonal predict DATA CHECKPOINT`` (the arguments swapped) says the order."""
    checkpoint = tmp_path / "model.pt"
    fit = ["fit", str(table_csv), "--target", "y", "--features", "a,b", "-o", str(checkpoint)]
    assert main([*fit, *FAST]) == 0
    capsys.readouterr()
    assert main(["predict", str(table_csv), str(checkpoint), "-o", str(tmp_path / "p.csv")]) == 1
    assert "is a table, not a model file: the checkpoint comes first" in one_line_error(capsys)
    named = tmp_path / "model.npz"  # a checkpoint saved under a table's suffix still loads
    save_model(load_model(checkpoint), named)
    assert load_model(named).feature_columns == ("a", "b")


def test_fit_refuses_to_overwrite_unless_forced(table_csv, tmp_path, capsys):
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"an earlier run")
    args = ["fit", str(table_csv), "--target", "y", "--features", "a,b", "-o", str(checkpoint)]
    args += FAST
    assert main(args) == 1
    line = one_line_error(capsys)
    assert str(checkpoint) in line and "already exists" in line and "--force" in line
    assert checkpoint.read_bytes() == b"an earlier run"
    assert main([*args, "--force"]) == 0
    assert load_model(checkpoint).feature_columns == ("a", "b")


def test_default_inputs_are_all_other_columns_and_must_be_numeric(table_csv, capsys):
    # without --features, the text column 'name' is an input: a clear error, not a crash
    assert main(["fit", str(table_csv), "--target", "y", *FAST]) == 1
    line = one_line_error(capsys)
    assert "non-numeric values in column 'name' at line 2, line 3" in line


def test_column_mismatch_between_fit_and_predict(table_csv, tmp_path, capsys):
    checkpoint = tmp_path / "model.pt"
    fit = ["fit", str(table_csv), "--target", "y", "--features", "a,b", "-o", str(checkpoint)]
    assert main([*fit, *FAST]) == 0
    other = write_csv(tmp_path / "new.csv", ["a", "c"], [[0.1, 0.2], [0.3, 0.4]])
    assert main(["predict", str(checkpoint), str(other), "-o", str(tmp_path / "p.csv")]) == 1
    line = one_line_error(capsys)
    assert str(other) in line and "lacks 1 of them ('b')" in line
    assert "its 2 columns are 'a', 'c'" in line


def test_failed_predict_leaves_an_existing_output_untouched(table_csv, tmp_path, capsys):
    checkpoint = tmp_path / "model.pt"
    fit = ["fit", str(table_csv), "--target", "y", "--features", "a,b", "-o", str(checkpoint)]
    assert main([*fit, *FAST]) == 0
    output = tmp_path / "pred.csv"
    output.write_text("earlier predictions\n")
    bad = write_csv(tmp_path / "bad.csv", ["a", "b"], [[0.1, 0.2], [0.3, "?"]])
    # refused without --force before anything is computed ...
    assert main(["predict", str(checkpoint), str(table_csv), "-o", str(output)]) == 1
    assert "already exists" in one_line_error(capsys)
    # ... and with --force a failure part way keeps the earlier file
    assert main(["predict", str(checkpoint), str(bad), "-o", str(output), "--force"]) == 1
    assert "missing values in column 'b' at line 3" in one_line_error(capsys)
    assert output.read_text() == "earlier predictions\n"
    assert no_temporary_files(tmp_path)


def test_tsv_and_parquet_tables_read_as_the_csv_does(tmp_path):
    """The same cells (a text column, a missing value) from CSV, TSV and Parquet give the same
    columns, numbers and named problems."""
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as parquet

    rows = [["1.5", "up", "3"], ["2", "down", ""], ["-4e-1", "up", "7"]]
    (tmp_path / "t.csv").write_text("a,label,y\n" + "\n".join(",".join(r) for r in rows) + "\n")
    (tmp_path / "t.tsv").write_text("a\tlabel\ty\n" + "\n".join("\t".join(r) for r in rows))
    columns = {"a": [1.5, 2.0, -0.4], "label": ["up", "down", "up"], "y": [3, None, 7]}
    parquet.write_table(pyarrow.table(columns), tmp_path / "t.parquet")
    tables = [read_table(tmp_path / name) for name in ("t.csv", "t.tsv", "t.parquet")]
    for table in tables:
        assert table.columns == ("a", "label", "y") and table.num_rows == 3
        np.testing.assert_array_equal(table.numeric(["a"])[:, 0], [1.5, 2.0, -0.4])
        assert [str(cell) for cell in table.cells["label"]] == ["up", "down", "up"]
        with pytest.raises(TableError, match=r"missing values in column 'y' at (line 3|row 1)"):
            table.numeric(["y"])
    # a Parquet name is kept as written, and found by its name without the spaces too (a CSV
    # header is stripped): " a " is the column "a" of the same table saved as CSV
    spaced = pyarrow.table({" a ": [1.0, 2.0], "label": ["x", "y"]})
    parquet.write_table(spaced, tmp_path / "spaced.parquet")
    table = read_table(tmp_path / "spaced.parquet")
    assert table.columns == (" a ", "label") and table.require(["a"], "input") == (" a ",)
    np.testing.assert_array_equal(table.numeric(["a"])[:, 0], [1.0, 2.0])
    assert table.column_named(" a ") == " a " and table.column_named("b") is None
    duplicated = pyarrow.table([[1.0], [2.0]], names=["a", "a"])
    parquet.write_table(duplicated, tmp_path / "twice.parquet")
    with pytest.raises(TableError, match="duplicated column names"):
        read_table(tmp_path / "twice.parquet")
    (tmp_path / "one.csv").write_text('"price, usd"\n1.5\n2.5\n')  # one quoted column: fine
    assert read_table(tmp_path / "one.csv").columns == ("price, usd",)
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(TableError, match="not a readable Parquet file"):
        read_table(tmp_path / "bad.parquet")


def test_table_format_errors(tmp_path):
    with pytest.raises(TableError, match=r"unknown table format '\.txt'"):
        read_table(tmp_path / "data.txt")
    with pytest.raises(TableError, match="no such file"):
        read_table(tmp_path / "absent.csv")
    header_only = write_csv(tmp_path / "empty.csv", ["a", "y"], [])
    with pytest.raises(TableError, match="no data rows"):
        read_table(header_only)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,y\n1,2\n3\n")
    with pytest.raises(TableError, match=r"line 3 \(1 cells\)"):
        read_table(ragged)
    no_header = tmp_path / "numbers.csv"
    no_header.write_text("1,2\n3,4\n")
    with pytest.raises(TableError, match="add a header row"):
        read_table(no_header)
    for mark, written in ((";", "a;y\n1;2\n"), ("\t", "a\ty\n1\t2\n")):
        other = tmp_path / "other.csv"
        other.write_text(written)
        with pytest.raises(TableError, match=re.escape(f"holding {mark!r}: a comma-separated")):
            read_table(other)
    not_npz = tmp_path / "fake.npz"
    not_npz.write_text("hello")
    with pytest.raises(TableError, match="not a readable NPZ archive"):
        read_table(not_npz)
    with pytest.raises(FileExistsError, match="already exists"):
        write_table(header_only, {"mean": np.zeros(2)})


@pytest.mark.parametrize("model", ["adgp", "dgp"])
def test_deep_models_round_trip(tmp_path, model):
    """``zonal fit --model adgp|dgp`` trains, saves, reloads and predicts: the reloaded model
    predicts exactly what the fitted one did (the inner-layer draws come from the posterior
    seed), the predictions are finite, and the mean explains part of the target's variance."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2))
    y = np.sin(2 * x[:, 0]) * x[:, 1]
    data = tmp_path / "deep.csv"
    data.write_text("a,b,y\n" + "\n".join(f"{p},{q},{r}" for (p, q), r in zip(x, y, strict=True)))
    table = read_table(data)
    fitted = fit_table(table, "y", model=model, steps=150, num_inducing=16, num_layers=2)
    checkpoint = tmp_path / f"{model}.pt"
    save_model(fitted, checkpoint)
    loaded = load_model(checkpoint)
    before, after = predict_table(fitted, table), predict_table(loaded, table)
    for key in before:
        assert np.isfinite(before[key]).all()
        np.testing.assert_allclose(after[key], before[key], rtol=1e-10, atol=1e-12)
    assert np.mean((before["mean"] - y) ** 2) < 0.8 * np.var(y)
    output = tmp_path / "pred.csv"
    assert main(["predict", str(checkpoint), str(data), "-o", str(output)]) == 0
    assert len(output.read_text().splitlines()) == 61
    again = tmp_path / "again.csv"
    assert main(["predict", str(checkpoint), str(data), "-o", str(again)]) == 0
    assert again.read_text() == output.read_text()  # seeded draws: the same numbers every run
    other = predict_table(loaded, table, samples=8, seed=5)
    assert not np.allclose(other["mean"], before["mean"])  # other draws, other Monte Carlo error


def test_a_cell_too_large_to_standardise_is_named_by_its_column_and_line(tmp_path):
    data = tmp_path / "huge.csv"
    rows = [f"{i * 0.1},{i * 0.2},{i * 0.3}" for i in range(12)]
    rows[4] = "0.4,1e300,1.2"  # line 6 of the file
    data.write_text("a,b,y\n" + "\n".join(rows))
    with pytest.raises(
        TableError, match=r"values too large \(\|x\| > 1e\+150\) in column 'b' at line 6"
    ):
        fit_table(read_table(data), "y", steps=2)


def test_a_width_mismatch_names_a_few_columns_not_all(table_csv, tmp_path):
    names = [f"x{i}" for i in range(2000)]
    table = read_table(write_csv(tmp_path / "wide.csv", names, [[0.0] * 2000]))
    with pytest.raises(TableError) as error:
        table.require(["y", "z"], "target")
    message = str(error.value)
    assert "no target column 'y', 'z'" in message
    assert "'x7' and 1992 more" in message and "'x8'" not in message


def test_targets_whose_variances_overflow_are_refused(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 2))
    y = rng.normal(size=30) * 1e300
    data = tmp_path / "huge.csv"
    data.write_text("a,b,y\n" + "\n".join(f"{p},{q},{r}" for (p, q), r in zip(x, y, strict=True)))
    with pytest.raises(TableError, match=r"values too large .* in column 'y' at line 2"):
        fit_table(read_table(data), "y", steps=2)  # a table names the cells
    with pytest.raises(TableError, match="overflow float64; rescale the column"):
        fit_data(x, y, feature_columns=["a", "b"], steps=2)  # arrays (the estimators) too


def test_cli_probe_small_defects(table_csv, tmp_path, capsys):
    """--layers on a one-layer model, a folder as DATA, -o naming the input, a non-zip .npz and a
    "1_000" cell: each is a one-line error, and no input file is touched."""
    fit = ["fit", str(table_csv), "--target", "y", "--features", "a,b"]
    assert main([*fit, "--model", "sgpr", "--layers", "3", *FAST]) == 1
    assert "--layers is for adgp and dgp" in one_line_error(capsys)
    assert main(["fit", str(tmp_path), "--target", "y"]) == 1
    assert "is a folder; give a .csv, .tsv, .npz or .parquet file, or stream" in one_line_error(
        capsys
    )
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    assert main(["fit", str(folder), "--target", "y"]) == 1
    assert "is a folder; give a .csv, .tsv, .npz or .parquet file" in one_line_error(capsys)
    original = table_csv.read_bytes()
    assert main([*fit, "-o", str(table_csv), "--force", *FAST]) == 1
    assert "is the input file" in one_line_error(capsys)
    assert table_csv.read_bytes() == original
    fake = tmp_path / "fake.npz"
    fake.write_text("a,b\n1,2\n")
    assert main(["fit", str(fake), "--target", "a"]) == 1
    line = one_line_error(capsys)
    assert "not a zip archive" in line and "allow_pickle" not in line
    underscored = tmp_path / "underscored.csv"
    underscored.write_text("a,y\n1_000,1\n2,2\n3,3\n")
    assert main(["fit", str(underscored), "--target", "y", *FAST]) == 1
    assert "'a'" in one_line_error(capsys)


def test_the_fit_line_counts_training_and_validation_rows_and_takes_a_spaced_target(
    table_csv, tmp_path, capsys
):
    """``--target ' y '`` names the column 'y' (the header's names and --features are stripped);
    the fit line gives the training and validation rows apart (60 rows: 54 + 6), not the
    training rows alone beside a model conditioned on all of them."""
    checkpoint = tmp_path / "m.pt"
    fit = ["fit", str(table_csv), "--target", " y ", "--features", "a,b", "-o", str(checkpoint)]
    assert main([*fit, *FAST, "--model", "sgpr"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "fitted" in line)
    assert "to 54 training + 6 validation rows x 2 input columns" in line


def test_an_objective_never_evaluated_is_left_out_of_the_fit_line():
    """A fit interrupted before its first evaluation has the objective NaN: not printed."""
    from zonal.cli.fit import _objective

    assert _objective({"model": "adgp"}, float("nan")) == ""
    assert _objective({"model": "adgp"}, -1.25) == " (ELBO per training row -1.25)"
