"""``streamed_fit``: the passes, the optimisation of the bound and the checkpoint of a streamed fit
(``zonal.tabular.streamed``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from zonal._files import check_new_output
from zonal.datasets import Standardizer
from zonal.models import SGPR
from zonal.models.training import TrainingControl
from zonal.tabular.metrics import in_target_units
from zonal.tabular.model import TabularModel, Trained
from zonal.tabular.options import DEFAULT_VALIDATION_FRACTION
from zonal.tabular.recipes import (
    ARD_ITERATIONS,
    ARD_SUBSAMPLE,
    UnsupportedLikelihoodError,
    build_sgpr,
    resolve_spec,
)
from zonal.tabular.recipes.parts import best_kernel_fit, kernel_names
from zonal.tabular.saved import save_model
from zonal.tabular.streamed.partitions import PartitionReader, list_partitions
from zonal.tabular.streamed.passes import CHECKPOINT_EVERY, first_pass, second_pass, third_pass
from zonal.tabular.streamed.state import (
    check_unchanged,
    fingerprint,
    initial_state,
    load_state,
    save_state,
    state_path_for,
)
from zonal.tabular.targets import (
    REGRESSION,
)


def streamed_fit(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    target: str,
    *,
    output: str | os.PathLike[str],
    chunk_size: int,
    features: Sequence[str] | None = None,
    model: str = "auto",
    likelihood: str | None = None,
    validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
    kernel: str = "auto",
    num_inducing: int | None = None,
    steps: int | None = None,
    learning_rate: float | None = None,
    ard: bool | None = None,
    seed: int = 0,
    progress: bool = False,
    restart: bool = False,
    force: bool = False,
    checkpoint_every: int = CHECKPOINT_EVERY,
) -> TabularModel:
    """Fit the SGPR to the partitions ``sources`` read ``chunk_size`` rows at a time (module
    docstring) and save the checkpoint ``output`` (``zonal.tabular.saved``, for ``zonal predict``);
    returns the fitted model.

    ``model`` is ``"sgpr"`` or ``"auto"`` (the SGPR, with ARD unless ``ard=False``, as under
    ``zonal fit --model auto``); the other options are those of ``zonal.tabular.fitting.fit_data``. An
    interrupted fit resumes from its state file ``state_path_for(output)`` when called again with
    the same inputs and settings (``restart`` discards it); the file is removed on success.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"the chunk size must be a positive number of rows, got {chunk_size!r}")
    if model not in ("auto", "sgpr"):
        raise ValueError(
            f"--chunk-size fits the one-pass SGPR (sgpr, or auto meaning sgpr), not {model!r}: its "
            "statistics are sums over rows; drop --chunk-size to train other models in memory"
        )
    if likelihood not in (None, "gaussian"):
        raise UnsupportedLikelihoodError(
            f"the streamed fit is the SGPR's collapsed bound of a Gaussian likelihood and cannot "
            f"train a {likelihood} likelihood (classification); drop --chunk-size"
        )
    if not (isinstance(validation_fraction, int | float) and 0 <= validation_fraction < 1):
        raise ValueError(f"the validation fraction must lie in [0, 1), got {validation_fraction!r}")
    output = check_new_output(output, force=force)
    started = time.perf_counter()
    partitions = list_partitions(sources)
    reader = PartitionReader(partitions, target, chunk_size, features)
    use_ard = ard is not False if model == "auto" else bool(ard)
    spec = resolve_spec(len(reader.features), model="sgpr", kernel=kernel,
                        num_inducing=num_inducing, steps=steps, learning_rate=learning_rate,
                        likelihood="gaussian", ard=use_ard, seed=seed)  # fmt: skip
    settings = {"features": list(reader.features), "target": target, "chunk_size": chunk_size,
                "validation_fraction": float(validation_fraction), "seed": int(seed),
                "likelihood": likelihood or "", "spec": spec}  # fmt: skip
    state_path = state_path_for(output)
    inputs = fingerprint(partitions)
    state = load_state(state_path, inputs, settings, restart)
    names = kernel_names(spec)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        models = {name: build_sgpr({**spec, "kernel": name}) for name in names}
    if state is None:
        first = first_pass(reader, validation_fraction=validation_fraction, seed=seed, ard=use_ard,
                           likelihood=likelihood, progress=progress)  # fmt: skip
        if first["subsample"] is not None:  # ARD: scales by the bound of the subsample
            x_sub = torch.from_numpy(first["x_scaler"].transform(first["subsample"][0]))
            y_sub = torch.from_numpy(first["y_scaler"].transform(first["subsample"][1]))
            for sgpr in models.values():
                sgpr.fit_input_scales(x_sub, y_sub, subsample_size=ARD_SUBSAMPLE,
                                      max_iter=ARD_ITERATIONS, seed=seed)  # fmt: skip
        state = initial_state(inputs, settings, first, models)
        save_state(state_path, state)
    else:
        for name, sgpr in models.items():
            sgpr.load_state_dict(state["models"][name])
    check_unchanged(state["inputs"], fingerprint(partitions), "during the fit; run it again")
    if not state["finished"]:
        state["totals"] = second_pass(reader, models, state, state_path,
                                      checkpoint_every=checkpoint_every, progress=progress)  # fmt: skip
        state["finished"] = True
        save_state(state_path, state)
    fitted = _optimise(models, state, spec, reader, partitions, started)
    if state["first_pass"]["num_validation_rows"]:
        check_unchanged(state["inputs"], fingerprint(partitions), "during the fit; run it again")
        metrics = third_pass(reader, fitted, seed=seed, validation_fraction=validation_fraction,
                             progress=progress)  # fmt: skip
        score = {"seconds": time.perf_counter() - started, "objective": fitted.trained.objective,
                 **metrics}  # fmt: skip
        fitted.scores = {"sgpr": in_target_units(score, REGRESSION, fitted.y_scaler)}
        fitted.validation = {key: value for key, value in fitted.scores["sgpr"].items()
                             if key not in ("seconds", "objective")}  # fmt: skip
    fitted.trained.seconds = time.perf_counter() - started
    save_model(fitted, output, force=force)
    state_path.unlink()
    return fitted


def _optimise(
    models: dict[str, SGPR],
    state: dict[str, Any],
    spec: dict[str, Any],
    reader: PartitionReader,
    partitions: list[Path],
    started: float,
) -> TabularModel:
    """Commit the totals, maximise each kernel's bound by L-BFGS and keep the larger bound (a
    kernel whose fit fails is skipped if another succeeds), as ``zonal.tabular.recipes.train_sgpr``."""

    def fit_one(name: str, deadline: float | None) -> tuple[SGPR, float]:
        sgpr = models[name]
        sgpr.commit_statistics(state["totals"][name])
        sgpr.fit(max_iter=spec["steps"], lr=spec["learning_rate"])
        with torch.no_grad():
            return sgpr, float(sgpr.elbo() / sgpr.stat_count)

    model, best, objective, objectives = best_kernel_fit(list(models), TrainingControl(), fit_one)
    first = state["first_pass"]
    trained = Trained({**spec, "kernel": best}, model, objective,
                      time.perf_counter() - started, objectives)  # fmt: skip
    source = str(partitions[0]) if len(partitions) == 1 else \
        f"{len(partitions)} partitions: {partitions[0]} ... {partitions[-1]}"  # fmt: skip
    return TabularModel(
        trained,
        reader.features,
        reader.target,
        Standardizer(mean=first["x_mean"].numpy(), std=first["x_std"].numpy()),
        Standardizer(mean=first["y_mean"].numpy(), std=first["y_std"].numpy()),
        first["num_rows"],
        source,
        REGRESSION,
        num_validation_rows=first["num_validation_rows"],
    )
