"""Fitting a user's table: standardise, train a recipe (``zonal.recipes``), predict in its units.

``fit_table`` reads the input and target columns, standardises both with the training statistics,
and trains the recipe named by ``model`` (``zonal.recipes.RECIPES``: sgpr, svgp, svgp-activated,
adgp, dgp); ``predict_table`` answers a table through the model contract (``predict``) and maps the
moments back to the target's units. The resolved options (``zonal.recipes.resolve_spec``) are a
plain dict: the same dict rebuilds the model (``Recipe.build``) when a checkpoint is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import torch

from zonal.datasets import Standardizer
from zonal.models import ZonalModel
from zonal.recipes import get_recipe, resolve_spec, train
from zonal.tabular import Table, TableError


@dataclass
class Trained:
    """A trained model on the standardised scale and how it got there."""

    spec: dict[str, Any]
    model: ZonalModel
    objective: float  # the bound (SGPR) or the ELBO (SVGP, DGP) per data point at the end
    seconds: float
    candidates: dict[str, float] = field(default_factory=dict)  # kernel -> bound, for "auto"


# ------------------------------------------------------------------------------------ tables


@dataclass
class TabularModel:
    """A trained model with what it needs to read and answer a user's table."""

    trained: Trained
    feature_columns: tuple[str, ...]
    target_column: str
    x_scaler: Standardizer
    y_scaler: Standardizer
    num_rows: int
    source: str = ""

    @property
    def spec(self) -> dict[str, Any]:
        """The resolved options (concrete kernel)."""
        return self.trained.spec

    def describe(self) -> str:
        """One line: model, kernel, number of features (and layers for deep models)."""
        spec = self.spec
        features = getattr(self.trained.model, "features", None)
        size = getattr(features, "num_inducing", spec["num_inducing"])
        kind = get_recipe(spec["model"]).feature_kind
        layers = getattr(self.trained.model, "layers", None)
        depth = f", {len(layers)} layers" if layers is not None else ""
        return f"{spec['model']} ({spec['kernel']} kernel, {size} {kind}{depth})"


def select_columns(
    table: Table, target: str, features: Sequence[str] | None = None
) -> tuple[str, ...]:
    """The input columns: ``features`` if given, else every column but ``target``."""
    table.require([target], "target")
    if features is None:
        columns = tuple(name for name in table.columns if name != target)
    else:
        columns = tuple(features)
        if target in columns:
            raise TableError(f"the target column {target!r} is also listed as an input column")
        if len(set(columns)) != len(columns):
            raise TableError(f"input columns listed twice: {', '.join(columns)}")
        table.require(columns, "input")
    if not columns:
        raise TableError(f"{table.path}: no input columns besides the target {target!r}")
    return columns


def fit_table(
    table: Table, target: str, *, features: Sequence[str] | None = None, **options: Any
) -> TabularModel:
    """Standardise the table's inputs and target (training statistics) and train a model.

    ``options`` are those of ``resolve_spec`` (model, kernel, num_inducing, steps, seed, ...).
    """
    columns = select_columns(table, target, features)
    values = table.numeric([*columns, target])  # [N, D + 1]: one report for every bad cell
    x, y = values[:, :-1], values[:, -1]  # [N, D], [N]
    if table.num_rows < 2:
        raise TableError(f"{table.path}: {table.num_rows} row; fitting needs at least 2")
    spec = resolve_spec(len(columns), **options)
    x_scaler, y_scaler = Standardizer.fit(x), Standardizer.fit(y)
    with np.errstate(over="ignore"):
        variance_scale = np.asarray(y_scaler.std, dtype=np.float64) ** 2
    if not np.isfinite(variance_scale).all():
        raise TableError(
            f"{table.path}: the target {target!r} spreads over {float(y_scaler.std):.3g} units: "
            "its predictive variances would overflow float64; rescale the column"
        )
    fit, seconds = train(
        spec,
        torch.from_numpy(x_scaler.transform(x)),
        torch.from_numpy(y_scaler.transform(y)),
    )
    trained = Trained(fit.spec, fit.model, fit.objective, seconds, fit.candidates)
    return TabularModel(trained, columns, target, x_scaler, y_scaler, table.num_rows,
                        str(table.path))  # fmt: skip


def predict_table(
    fitted: TabularModel,
    table: Table,
    *,
    include_noise: bool = True,
    level: float = 0.95,
    samples: int | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Columns ``mean``, ``variance``, ``lower``, ``upper`` in the target's units, one row per row.

    The variance is that of a new observation (``include_noise``) or of the latent function; the
    interval is the central ``level`` interval of the Gaussian predictive (mean +- 1.96 sd). A deep
    model averages ``samples`` draws of its inner layers (default: its own number) from ``seed``.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    model = fitted.trained.model
    if model._is_ensemble:  # a deep model: its inner-layer draws
        model.posterior_seed = seed
        if samples is not None:
            if samples < 1:
                raise TableError(f"--samples must be a positive integer, got {samples}")
            model.num_posterior_samples = samples
    elif samples is not None:
        raise TableError(f"{fitted.spec['model']} draws no samples: drop --samples")
    missing = [name for name in fitted.feature_columns if name not in table.cells]
    if missing:
        raise TableError(
            f"{table.path}: the model was fitted on columns "
            f"{', '.join(map(repr, fitted.feature_columns))} but this table lacks "
            f"{', '.join(map(repr, missing))}; its columns are {', '.join(map(repr, table.columns))}"
        )
    x = torch.from_numpy(fitted.x_scaler.transform(table.numeric(fitted.feature_columns)))
    mean, variance = model.predict(x, include_noise=include_noise)
    mean = fitted.y_scaler.inverse_transform(mean.cpu().numpy())
    variance = fitted.y_scaler.inverse_transform_variance(variance.cpu().numpy())
    half_width = NormalDist().inv_cdf(0.5 + level / 2) * np.sqrt(variance)
    return {"mean": mean, "variance": variance, "lower": mean - half_width,
            "upper": mean + half_width}  # fmt: skip
