"""
``zonal fit`` and the scikit-learn estimator in a pipeline
==========================================================

``zonal fit`` reads a table, detects the task from the target, holds out a validation split and
trains a model within a time budget; ``zonal predict`` writes predictions with their uncertainty.
The same fitting code is available as scikit-learn estimators, which work in pipelines, grid
searches and cross-validation. Both use the concrete compressive-strength table here (1030 rows,
8 inputs), with small budgets so that the page builds quickly.
"""

# %%
import contextlib
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from zonal.cli import main as zonal
from zonal.datasets import load_dataset

data = load_dataset("concrete")
columns = [f"x{i}" for i in range(data.X.shape[1])]
table = pd.DataFrame(data.X, columns=columns).assign(strength=data.y.reshape(-1))
rng = np.random.default_rng(0)
test_rows = rng.permutation(len(table))[:100]
train_table, test_table = table.drop(index=test_rows), table.iloc[test_rows]

# %%
# The command line (here called in-process; in a shell it is ``zonal fit train.csv --target
# strength --model sgpr --budget 10 -o model.pt``). The one-pass SGPR is the quickest recipe. The
# files go to a fresh folder, which the commands run in.
folder = Path(tempfile.mkdtemp())
train_table.to_csv(folder / "train.csv", index=False)
test_table.drop(columns="strength").to_csv(folder / "new.csv", index=False)
fit = ["fit", "train.csv", "--target", "strength", "--model", "sgpr", "--budget", "10"]
with contextlib.chdir(folder):
    zonal([*fit, "--quiet", "-o", "model.pt"])
    zonal(["predict", "model.pt", "new.csv", "-o", "predictions.csv"])
predictions = pd.read_csv(folder / "predictions.csv")
print(predictions.head())

# %%
# The scikit-learn estimator inside a pipeline, with its own preprocessing step.
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import QuantileTransformer  # noqa: E402

from zonal.tabular.sklearn import ZonalRegressor  # noqa: E402

pipeline = make_pipeline(
    QuantileTransformer(n_quantiles=200, output_distribution="normal"),
    ZonalRegressor(model="sgpr", budget=10),
)
pipeline.fit(train_table[columns].to_numpy(), train_table["strength"].to_numpy())
mean, std = pipeline.predict(test_table[columns].to_numpy(), return_std=True)
print(
    f"pipeline R^2 on 100 held-out rows: "
    f"{pipeline.score(test_table[columns].to_numpy(), test_table['strength'].to_numpy()):.3f}"
)

# %%
# Predictions with 95% intervals from both routes.
observed = test_table["strength"].to_numpy()
fig, ax = plt.subplots(figsize=(4.5, 4.5))
ax.errorbar(
    observed,
    predictions["mean"],
    yerr=predictions["mean"] - predictions["lower"],
    fmt="o",
    alpha=0.5,
    label="zonal fit / predict",
)
ax.errorbar(observed, mean, yerr=1.96 * std, fmt="s", alpha=0.5, label="pipeline")
ax.plot([observed.min(), observed.max()], [observed.min(), observed.max()], "k--", lw=1)
ax.set_xlabel("observed strength")
ax.set_ylabel("predicted (95% interval)")
ax.legend(fontsize=8)
fig.tight_layout()
