"""A fitted table model: the trained model on the standardised scale and what it needs to read
and answer a user's table (``TabularModel``), and the model a resolved spec describes
(``build_model``; a ``stacked`` spec is a mixture of its components).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from zonal.datasets import Standardizer
from zonal.models import ZonalModel
from zonal.models.stacking import StackedModel
from zonal.tabular.recipes import (
    STACKED_KERNELS,
    get_recipe,
)
from zonal.tabular.targets import (
    REGRESSION,
    Target,
)

#: the model name of a stacked mixture of ``auto``'s candidates (``stack_fits``)
STACKED = "stacked"


@dataclass
class Trained:
    """A trained model on the standardised scale and how it got there."""

    spec: dict[str, Any]
    model: ZonalModel
    objective: float  # the bound (SGPR) or the ELBO (SVGP, DGP) per data point at the end
    seconds: float
    candidates: dict[str, float] = field(default_factory=dict)  # kernel -> bound, for "auto"


@dataclass
class TabularModel:
    """A trained model with what it needs to read and answer a user's table.

    ``validation`` holds the chosen model's validation metrics in the target's units
    (``log_likelihood`` per row, and ``mse`` or ``accuracy``); ``scores`` every candidate's, with
    its training ``seconds``, over the ``num_scoring_rows`` validation rows that scored them.
    """

    trained: Trained
    feature_columns: tuple[str, ...]
    target_column: str
    x_scaler: Standardizer
    y_scaler: Standardizer
    num_rows: int
    source: str = ""
    target: Target = REGRESSION
    validation: dict[str, float] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    num_validation_rows: int = 0
    interrupted: bool = False
    #: the validation rows that scored (and stacked) the candidates; 0: all of them
    num_scoring_rows: int = 0
    #: the input columns that held one value on the training rows: the model never saw them
    #: vary, so ``predict_data`` reads them at that value (with a note where they differ)
    constant_columns: tuple[str, ...] = ()

    @property
    def scoring_rows(self) -> int:
        """The validation rows the candidates' scores are over (all of them unless ``auto`` split
        them into watching and scoring rows)."""
        return self.num_scoring_rows or self.num_validation_rows

    @property
    def spec(self) -> dict[str, Any]:
        """The resolved options (concrete kernel)."""
        return self.trained.spec

    def describe(self) -> str:
        """One line: model, kernel, number of features (and layers for deep models), whether it
        learned input scales and was fitted by MAP; for a stacked model its weights and
        components."""
        return describe_model(self.spec, self.trained.model)


def describe_model(spec: dict[str, Any], model: ZonalModel) -> str:
    """``TabularModel.describe`` for a resolved ``spec`` and its model."""
    if spec["model"] == STACKED:
        members = cast(list[ZonalModel], model.components)
        parts = [f"{weight:.2f} {describe_model(component, member)}" for weight, component, member
                 in zip(spec["weights"], spec["components"], members, strict=True)]  # fmt: skip
        return f"stacked ({' + '.join(parts)})"
    if spec.get("kernel") == STACKED_KERNELS:  # an exact GP stacked over kernels
        members = cast(list[ZonalModel], model.components)
        kernels = " + ".join(f"{weight:.2f} {kernel}" for weight, kernel
                             in zip(spec["kernel_weights"], spec["kernels"], strict=True))  # fmt: skip
        count = len(cast(Any, members[0]).train_y)
        return (
            f"{spec['model']} (stacked {kernels} kernels, {count} training rows{fit_notes(spec)})"
        )
    features = getattr(model, "features", None)
    rows = getattr(model, "train_y", None)  # the exact GP: its training rows
    size = (
        len(rows) if rows is not None else getattr(features, "num_inducing", spec["num_inducing"])
    )
    kind = get_recipe(spec["model"]).feature_kind
    layers = getattr(model, "layers", None)
    depth = f", {len(layers)} layers" if layers is not None else ""
    return f"{spec['model']} ({spec['kernel']} kernel, {size} {kind}{depth}{fit_notes(spec)})"


def fit_notes(spec: dict[str, Any]) -> str:
    """``describe_model``'s notes on how a resolved ``spec`` was fitted: learned input scales
    (``ard``) and type-II MAP (``hyperpriors``), each after a comma; empty for neither."""
    return ", input scales" * bool(spec.get("ard")) + ", MAP" * bool(spec.get("hyperpriors"))


def build_model(spec: dict[str, Any]) -> ZonalModel:
    """The untrained model a resolved ``spec`` describes (a recipe's ``build``, or a
    ``StackedModel`` of its components for a ``stacked`` spec), for loading a state dict into."""
    if spec["model"] == STACKED:
        return StackedModel([build_model(component) for component in spec["components"]],
                            spec["weights"])  # fmt: skip
    return get_recipe(spec["model"]).build(spec, None)
