"""The target column of a user's table: regression or classification, and its class labels.

A target of text labels, or of at most ``MAX_AUTO_CLASSES`` integer values with at least
``MIN_ROWS_PER_AUTO_CLASS`` rows per value, is a classification target: two classes train a
Bernoulli (probit) likelihood, more a softmax over one latent GP per class; any other numeric
target is regression (Gaussian likelihood). ``likelihood=`` overrides the detection. Labels are
kept as text (``"3"`` for the number 3.0) in a fixed order (numeric labels by value, text labels
alphabetically): class c is the c-th label.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from zonal.tabular.options import LIKELIHOODS
from zonal.tabular.tables import MISSING_TOKENS, TableError

#: a numeric target with at most this many distinct integer values is read as class labels
MAX_AUTO_CLASSES = 10
#: ... and with at least this many rows per class
MIN_ROWS_PER_AUTO_CLASS = 5


class LabelError(TableError):
    """A classification target that cannot be used: a single class, a class the model never saw,
    missing labels, or a likelihood that does not fit the labels."""


@dataclass(frozen=True)
class Target:
    """What the target column is: ``likelihood`` (``zonal.tabular.recipes.LIKELIHOODS``) and, for
    classification, the class labels as text in class order."""

    likelihood: str
    classes: tuple[str, ...] = ()
    #: why this likelihood: "as asked", "text labels", "N distinct integer values ..." (not saved)
    reason: str = field(default="", compare=False)
    #: True when a numeric column was read as class labels: the user may have meant regression
    ambiguous: bool = field(default=False, compare=False)

    @property
    def is_classification(self) -> bool:
        """True for a Bernoulli or softmax likelihood."""
        return self.likelihood != "gaussian"

    def describe(self) -> str:
        """E.g. ``regression`` or ``classification (3 classes: a, b, c)``."""
        if not self.is_classification:
            return "regression"
        shown = ", ".join(self.classes[:6]) + (", ..." if len(self.classes) > 6 else "")
        return f"classification ({len(self.classes)} classes: {shown})"

    def announce(self, column: str, switch: Callable[[str], str]) -> str:
        """The line that says which likelihood a fit of ``column`` uses, why, and how to change
        it: ``switch(likelihood)`` names the option (``--likelihood gaussian``, say)."""
        likelihood = {"gaussian": "Gaussian", "bernoulli": "Bernoulli (probit)",
                      "softmax": "softmax"}[self.likelihood]  # fmt: skip
        line = f"target {column!r}: {self.describe()}, {likelihood} likelihood"
        if self.reason:
            line += f" ({self.reason})"
        if self.ambiguous:
            line += f"; for regression use {switch('gaussian')}"
        elif self.reason.startswith("integer values"):
            line += f"; for classification use {switch('softmax')}"
        return line


#: the target of a regression (Gaussian likelihood, no classes)
REGRESSION = Target("gaussian")


def label_texts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(labels as text [N], 0-based rows of missing cells): numbers are written without a
    trailing ``.0`` when integer-valued (3.0 -> ``"3"``), text is stripped. A text column whose
    every present cell is a number is written the same way (``"1"``, ``"1.0"`` and ``" 1 "`` are
    one class ``"1"``, as a numeric column of the same values gives, whatever format the table
    came in), unless a cell reads as a code a number would change: leading zeros (``"007"``)
    or an integer beyond float64's exact ones (an ID above 2^53)."""
    values = np.asarray(values)
    if values.dtype.kind in "biuf":
        numbers = values.astype(np.float64)
        missing = np.flatnonzero(np.isnan(numbers))
        written = [_number_text(value) for value in numbers]
        return np.array(written, dtype=object), missing
    texts = np.array([str(cell).strip() for cell in values.reshape(-1)], dtype=object)
    is_missing = np.array([text.lower() in MISSING_TOKENS for text in texts], dtype=bool)
    present = texts[~is_missing].tolist()
    parsed = [_as_number(text) for text in present]
    exact = [value for value in parsed if value is not None and _is_plain_value(value)]
    if exact and len(exact) == len(parsed) and not any(map(_has_leading_zero, present)):
        texts[~is_missing] = [_number_text(value) for value in exact]
    return texts, np.flatnonzero(is_missing)


def _is_plain_value(value: float) -> bool:
    """A finite number that float64 holds exactly where integers are (|x| < 2^53): larger
    integer texts (IDs) would collapse into one another."""
    return math.isfinite(value) and abs(value) < 2**53


def _has_leading_zero(text: str) -> bool:
    """``"007"``, ``"-01"``: a code whose zeros a number would drop (``"0"``, ``"0.5"`` are not)."""
    digits = text.lstrip("+-")
    return len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()


def _number_text(value: float) -> str:
    if math.isfinite(value) and value == round(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _as_number(text: str) -> float | None:
    if "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def detect_target(labels: np.ndarray, likelihood: str | None, name: str = "target") -> Target:
    """The task of a target column (module docstring, step 1) from its cells (``label_texts``
    of the non-missing rows); ``likelihood`` forces it. ``LabelError`` for a classification
    target with a single class, or a Bernoulli likelihood asked for more than two."""
    if likelihood is not None and likelihood not in LIKELIHOODS:
        raise ValueError(
            f"unknown likelihood {likelihood!r}; choose one of {', '.join(LIKELIHOODS)}"
        )
    distinct = sorted(set(labels.tolist()))
    numbers = {text: _as_number(text) for text in distinct}
    numeric = all(value is not None and math.isfinite(value) for value in numbers.values())
    reason, ambiguous = "as asked", False
    if likelihood is None:
        if not numeric:
            share = np.mean([numbers[text] is not None for text in labels.tolist()])
            if share > 0.5:  # a numeric column with some bad cells: regression reports them
                return Target("gaussian", reason="numeric values")
            _check_text_classes(labels, name)
            reason = "text labels"
        elif not _looks_like_classes(labels, numbers):
            return Target("gaussian", reason=_numeric_reason(labels, numbers))
        else:
            finite = [value for value in numbers.values() if value is not None]
            low, high = min(finite), max(finite)
            reason = (
                f"{len(distinct)} distinct integer values from {_number_text(low)} to "
                f"{_number_text(high)}, each on at least {MIN_ROWS_PER_AUTO_CLASS} rows, read as "
                "class labels"
            )
            ambiguous = True
        likelihood = "bernoulli" if len(distinct) == 2 else "softmax"
    if likelihood == "gaussian":
        return Target("gaussian", reason=reason)
    if numeric:
        distinct.sort(key=lambda text: float(numbers[text] or 0.0))
    if len(distinct) < 2:
        shown = f" ({distinct[0]!r})" if distinct else ""
        raise LabelError(
            f"the {name} has a single class{shown}: classification needs at least two classes"
        )
    if likelihood == "bernoulli" and len(distinct) != 2:
        raise LabelError(
            f"a Bernoulli likelihood needs two classes but the {name} has {len(distinct)}; "
            "use the softmax likelihood"
        )
    return Target(likelihood, tuple(distinct), reason=reason, ambiguous=ambiguous)


def _check_text_classes(labels: np.ndarray, name: str) -> None:
    """A ``LabelError`` for text that reads as numbers written with separators, a decimal comma or
    a unit (``"6,885.0"``, ``"0,12"``, ``"4082 EUR"``: text to the reader), not class labels: more
    distinct values than half the rows, most of them holding a digit. Labels of many classes with
    few rows each, or of a small table, pass (``"a"``, ``"b"``, ``"c"`` hold no digit)."""
    found = np.unique(labels.astype(str))
    digits = sum(any(character.isdigit() for character in text) for text in found)
    if len(found) <= len(labels) / 2 or digits <= len(found) / 2:
        return
    first = list(dict.fromkeys(labels.tolist()))  # in row order
    examples = ", ".join(map(repr, first[:3])) + (", ..." if len(first) > 3 else "")
    raise LabelError(
        f"the {name} holds text with {len(found)} distinct values on {len(labels)} rows "
        f"({examples}): numbers written as text, not class labels. Write them plainly (a '.' "
        "decimal mark, no thousands separators or units, e.g. 6885.0), or pass --likelihood "
        "softmax (likelihood='softmax') to fit them as classes"
    )


def _numeric_reason(labels: np.ndarray, numbers: dict[str, float | None]) -> str:
    """Why a numeric column is regression: "numeric values", or, for a column of integers that
    could be labels, why it was not read as classes."""
    values = [value for value in numbers.values() if value is not None]
    if len(values) < 2 or any(value != round(value) for value in values):
        return "numeric values"
    if len(values) > MAX_AUTO_CLASSES:
        return (
            f"integer values, {len(values)} distinct: more than the {MAX_AUTO_CLASSES} a "
            "classification target may have"
        )
    label, count = _rarest(labels)
    return (
        f"integer values, {len(values)} distinct, but {label} on {count} row(s) only: a "
        f"classification target needs at least {MIN_ROWS_PER_AUTO_CLASS} rows of each class"
    )


def _looks_like_classes(labels: np.ndarray, numbers: dict[str, float | None]) -> bool:
    """Whether a numeric column reads as class labels: 2 to ``MAX_AUTO_CLASSES`` integer values,
    each on at least ``MIN_ROWS_PER_AUTO_CLASS`` rows."""
    values = [value for value in numbers.values() if value is not None]
    integral = all(value == round(value) for value in values)
    if not (integral and 2 <= len(values) <= MAX_AUTO_CLASSES):
        return False
    return _rarest(labels)[1] >= MIN_ROWS_PER_AUTO_CLASS


def _rarest(labels: np.ndarray) -> tuple[str, int]:
    """(the label on the fewest rows, its row count)."""
    found, counts = np.unique(labels.astype(str), return_counts=True)
    rarest = int(np.argmin(counts))
    return str(found[rarest]), int(counts[rarest])


def encode_labels(target: Target, labels: np.ndarray, where: str) -> np.ndarray:
    """Class indices [N] (int64) of text labels; a ``LabelError`` naming the labels the model
    never saw (``where`` says whose labels they are)."""
    index = {label: position for position, label in enumerate(target.classes)}
    for position, label in enumerate(target.classes):  # a model saved before labels were
        number = _as_number(label)  # normalised (``label_texts``) knows "1.0" as "1" too
        if number is not None and math.isfinite(number):
            index.setdefault(_number_text(number), position)
    unknown = sorted({label for label in labels.tolist() if label not in index})
    if unknown:
        shown = ", ".join(map(repr, unknown[:5])) + (" ..." if len(unknown) > 5 else "")
        raise LabelError(
            f"{where} has classes the model never saw: {shown}; it knows "
            f"{', '.join(map(repr, target.classes))}"
        )
    return np.array([index[label] for label in labels.tolist()], dtype=np.int64)
