"""Bad input to ``zonal fit`` and the scikit-learn estimators (issue 27): a target of one class
or one value, text labels, a table with more input columns than rows and an input column of a
single value, each a named error or a sensible fit with a note. (A class that only the table
given to ``zonal predict`` holds is named by ``tests/test_classification.py::
test_a_class_the_model_never_saw_is_named``.)"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from zonal.cli import main
from zonal.tabular import DataWarning, TableError, fitting
from zonal.tabular.sklearn import ZonalClassifier, ZonalRegressor

TINY = ["--model", "svgp-activated", "--num-inducing", "8", "--steps", "5", "--quiet"]
TINY_OPTIONS = {"model": "svgp-activated", "num_inducing": 8, "steps": 5}


def write_csv(path: Path, columns: list[str], rows: list[list[object]]) -> Path:
    path.write_text(",".join(columns) + "\n" + "\n".join(",".join(map(str, r)) for r in rows))
    return path


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("zonal: error: ") and "Traceback" not in "\n".join(lines)
    return lines[-1]


def test_a_target_of_one_class_is_a_named_error(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = [[a, b, "cat"] for a, b in rng.normal(size=(30, 2))]
    data = write_csv(tmp_path / "one.csv", ["a", "b", "y"], rows)
    assert main(["fit", str(data), "--target", "y", *TINY]) == 1
    assert "the target 'y' has a single class ('cat')" in error_line(capsys)
    with pytest.raises(ValueError, match="single class"):
        ZonalClassifier(**TINY_OPTIONS).fit(rng.normal(size=(30, 2)), ["cat"] * 30)


def test_a_target_of_one_value_is_a_named_error(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = [[a, b, 2.5] for a, b in rng.normal(size=(30, 2))]
    data = write_csv(tmp_path / "flat.csv", ["a", "b", "y"], rows)
    assert main(["fit", str(data), "--target", "y", *TINY]) == 1
    line = error_line(capsys)
    assert "the target 'y' holds a single value (2.5) on every row: there is nothing to fit" in line
    with pytest.raises(TableError, match="holds a single value"):
        ZonalRegressor(**TINY_OPTIONS).fit(rng.normal(size=(30, 2)), np.full(30, 2.5))


def test_text_labels_are_classes_in_the_estimator_too():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2))
    labels = np.where(x[:, 0] > 0, "right", "left")
    classifier = ZonalClassifier(**TINY_OPTIONS).fit(x, labels)
    assert list(classifier.classes_) == ["left", "right"]
    assert set(classifier.predict(x)) <= {"left", "right"}
    assert classifier.predict_proba(x).shape == (60, 2)


def test_more_columns_than_rows_fits_with_a_note_naming_the_shape(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(25, 40))
    y = x[:, 0] + 0.1 * rng.normal(size=25)
    columns = [f"c{i}" for i in range(40)]
    data = write_csv(tmp_path / "wide.csv", [*columns, "y"], np.column_stack([x, y]).tolist())
    assert main(["fit", str(data), "--target", "y", *TINY]) == 0
    err = capsys.readouterr().err
    assert "zonal: note: " in err and "25 rows x 40 input columns: more columns than rows" in err
    assert main(["predict", str(tmp_path / "wide.zonal.pt"), str(data)]) == 0
    predictions = np.genfromtxt(tmp_path / "wide.predictions.csv", delimiter=",", names=True)
    assert np.isfinite(predictions["mean"]).all() and (predictions["variance"] > 0).all()
    with pytest.warns(DataWarning, match="25 rows x 40 input columns"):
        regressor = ZonalRegressor(**TINY_OPTIONS).fit(x, y)
    assert np.isfinite(regressor.predict(x)).all()


def test_a_column_of_one_value_is_kept_with_a_note_and_never_gives_nan(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a = rng.normal(size=60)
    y = 2 * a + 0.1 * rng.normal(size=60)
    data = write_csv(
        tmp_path / "flat.csv", ["a", "k", "y"], [[p, 7, q] for p, q in zip(a, y, strict=True)]
    )
    assert main(["fit", str(data), "--target", "y", *TINY]) == 0
    assert "zonal: note: " in capsys.readouterr().err
    # at prediction the column may vary: the model never saw it vary, so it is read at its
    # training value (a note names it), and the predictions are those of k = 7
    other = write_csv(tmp_path / "new.csv", ["a", "k"], [[p, 7 + 50 * p] for p in a[:10]])
    same = write_csv(tmp_path / "same.csv", ["a", "k"], [[p, 7] for p in a[:10]])
    assert main(["predict", str(tmp_path / "flat.zonal.pt"), str(same)]) == 0
    assert "zonal: note: " not in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "flat.zonal.pt"), str(other)]) == 0
    assert (
        "zonal: note: 1 input column(s) held one value on the training rows and differ "
        "here: 'k' (trained at 7); read at the training value" in capsys.readouterr().err
    )
    predictions = np.genfromtxt(tmp_path / "new.predictions.csv", delimiter=",", names=True)
    expected = np.genfromtxt(tmp_path / "same.predictions.csv", delimiter=",", names=True)
    for column in ("mean", "variance"):
        np.testing.assert_array_equal(predictions[column], expected[column])
    x = np.column_stack([a, np.full(60, 7.0)])
    with pytest.warns(DataWarning, match=r"1 input column\(s\) hold a single value"):
        regressor = ZonalRegressor(**TINY_OPTIONS).fit(x, y)
    assert np.isfinite(regressor.predict(x)).all()
    with pytest.warns(DataWarning, match="'x1' \\(trained at 7\\)"):
        moved = regressor.predict(np.column_stack([a, np.full(60, 9.0)]))
    np.testing.assert_array_equal(moved, regressor.predict(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)  # a table without these defects: no note
        ZonalRegressor(**TINY_OPTIONS).fit(x[:, :1], y)


def test_a_column_that_counts_the_rows_gets_a_note(tmp_path, capsys):
    """An ID column (consecutive integers in the file's order) is fitted like any input, with a
    note saying how to leave it out; integers out of order, or a real-valued column, get none."""
    rng = np.random.default_rng(4)
    a = rng.normal(size=40)
    y = np.sin(a)
    data = write_csv(tmp_path / "ids.csv", ["id", "a", "y"],
                     [[1001 + i, p, q] for i, (p, q) in enumerate(zip(a, y, strict=True))])  # fmt: skip
    assert main(["fit", str(data), "--target", "y", *TINY]) == 0
    err = capsys.readouterr().err
    assert (
        "input column(s) 'id' count the rows" in err
        and "leave them out (zonal fit --features" in err
    )
    shuffled = np.column_stack([rng.permutation(40).astype(float), a])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        ZonalRegressor(**TINY_OPTIONS).fit(shuffled, y)
    with pytest.warns(DataWarning, match=r"'x0' count the rows"):
        ZonalRegressor(**TINY_OPTIONS).fit(np.column_stack([np.arange(40.0), a]), y)


class TrainingReachedError(Exception):
    """Raised in place of training: the notes before it are what a test looks at."""


@pytest.mark.parametrize(
    "rows, classes, noted",
    [(20, False, True), (10, False, True), (40, False, False), (20, True, False)],
)
def test_auto_notes_a_regression_whose_candidates_one_validation_row_scores(
    rows, classes, noted, monkeypatch
):
    """10-20 rows: 1 validation row scores auto's 3 regression candidates (fewer than their 2
    free stacking weights), and the note says so before anything trains, naming the exact GP's
    flags; 40 rows (2 scoring rows) and a classifier (posterior weights) have no such note."""

    def never(*args, **kwargs):
        raise TrainingReachedError

    monkeypatch.setattr(fitting, "train_candidates", never)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 3))
    y = np.where(x[:, 0] > 0, "up", "down") if classes else x[:, 0] + 0.1 * rng.normal(size=rows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TrainingReachedError):
            fitting.fit_data(x, y, feature_columns=list("abc"), source="t.csv")
    notes = [str(w.message) for w in caught if issubclass(w.category, DataWarning)]
    expected = ("t.csv: 1 validation row scores the 3 candidates of --model auto (sgpr, exact, "
                "adgp): too few to weigh them, so the choice rests on that row; --model exact "
                "--hyperpriors --ard-by-bic")  # fmt: skip
    assert any(note.startswith(expected) for note in notes) is noted
