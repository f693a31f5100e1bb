"""Seed 003's MNIST numbers, which the DKM experiments (``zonal.experiments.dkm_mnist``) are set
beside: the report's tables per sweep and the figure of test accuracy per nu."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zonal.experiments.run_directory import RunDirectory

#: Seed 003's MNIST column per sweep: setting -> (test accuracy %, test log likelihood), with the
#: tables they come from. Accuracies: table 1 (table 2 for the inducing counts); log likelihoods:
#: tables 4 (nu), 5 (normalisation), 6 (rescaling), 7 (top), 9 (inducing counts); the likelihood
#: sweep's log likelihoods are not comparable (sec. F.4), the categorical one is the base model's.
SEED_MNIST: dict[str, tuple[str, dict[str, tuple[float | None, float | None]]]] = {
    "nu": ("tables 1 and 4", {
        "inf": (72.19, -0.9026), "10000": (80.79, -0.6393), "100": (96.96, -0.0942),
        "1": (99.20, -0.0263), "0.01": (99.16, -0.0344), "0.0001": (99.14, -0.0371),
        "0": (99.16, -0.0359)}),
    "normalisation": ("tables 1 and 5", {
        "batch/batch": (99.20, -0.0263), "batch/location": (99.05, -0.0284),
        "local/image": (99.14, -0.0277), "local/local": (99.13, -0.0270),
        "none/none": (99.16, -0.0276)}),
    "rescaling": ("tables 1 and 6", {
        "batch/batch": (99.20, -0.0263), "batch/location": (99.07, -0.0276),
        "local/batch": (99.19, -0.0257), "local/location": (99.03, -0.0287),
        "local/none": (99.13, -0.0261), "none/none": (99.13, -0.0275)}),
    "top": ("tables 1 and 7", {"gap": (99.20, -0.0263), "linear": (99.13, -0.0275)}),
    "likelihood": ("table 1", {"gaussian": (99.05, None), "categorical": (99.20, -0.0263)}),
    "inducing": ("tables 2 and 9", {
        "16/32/64": (98.99, -0.0312), "32/64/128": (99.09, -0.0365),
        "64/128/256": (99.12, -0.0443), "128/256/512": (99.10, -0.0603),
        "256/512/1024": (99.16, -0.0659), "512/1024/2048": (99.26, -0.0676)}),
}  # fmt: skip
#: the seed's test accuracy per nu (table 1), for the figure
SEED_ACCURACY = {nu: values[0] for nu, values in SEED_MNIST["nu"][1].items()}


def seed_paper(sweeps: tuple[str, ...], extra: dict[str, list[str]] | None = None) -> dict:
    """The ``paper`` of an experiment: one report table per sweep, our accuracy and test log
    likelihood (``accuracy_percent.<sweep>=<setting>``) beside seed 003's MNIST column; ``extra``
    settings of a sweep (those of a quick preset) are listed with no seed value."""
    paper: dict[str, dict[str, Any]] = {}
    for sweep in sweeps:
        tables, values = SEED_MNIST[sweep]
        settings = {**values, **dict.fromkeys((extra or {}).get(sweep, []), (None, None))}
        paper[f"seed 003 {tables} (MNIST, convolutional DKM): {sweep} sweep"] = {
            f"{metric}.{sweep}={setting}": pair[index]
            for index, metric in enumerate(("accuracy_percent", "test_log_likelihood"))
            for setting, pair in settings.items()
        }
    return paper


def plot_accuracy(run_dir: RunDirectory, rows: list[dict[str, Any]], label: str) -> None:
    """``accuracy_by_nu.png``: ours and the seed's test accuracy per nu (needs matplotlib)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    figure = Figure(figsize=(5, 3.2))
    axes = figure.add_subplot()
    labels = [row["nu"] for row in rows]
    positions = range(len(rows))
    axes.plot(positions, [row["accuracy_percent"] for row in rows], "C0o-", label=label)
    seed = [math.nan if (value := SEED_ACCURACY.get(label)) is None else value for label in labels]
    axes.plot(positions, seed, "C1s--", label="conv DKM (seed 003)")
    axes.set_xticks(list(positions), labels)
    axes.set_xlabel("nu")
    axes.set_ylabel("test accuracy (%)")
    axes.legend(frameon=False)
    run_dir.save_figure("accuracy_by_nu.png", figure)
