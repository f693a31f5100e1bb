"""Training one configuration of the DKM experiments (``zonal.experiments.dkm_mnist``) in a
worker process: its data (loaded once per process), its device, and its training state between
epochs in a file of its own in the run folder (``in_progress/``), so that ``--jobs`` workers and
resumed runs continue each configuration where its last epoch ended."""

from __future__ import annotations

import functools
import hashlib
import json
import time
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import torch

from zonal._files import atomic_writer
from zonal.dkm.training import TrainingDivergedError
from zonal.experiments._dkm_mnist_data import (
    augmentation,
    load_images,
    prepare_inputs,
    targets_for,
)
from zonal.experiments._dkm_mnist_models import build_model, evaluate
from zonal.experiments._dkm_mnist_sweeps import DTYPES, Configuration, check_device

#: the run folder's subfolder of the training states of the configurations in progress
IN_PROGRESS_DIR = "in_progress"
#: the training state of a configuration not started
FRESH_PROGRESS: dict[str, Any] = {"training": None, "epochs": [], "seconds": 0.0}


class TrainingUnit(NamedTuple):
    """One configuration to train in a worker: the run's config, the configuration and the run
    folder (where its training state is kept while it is in progress)."""

    config: dict[str, Any]
    configuration: Configuration
    run_path: str


def in_progress_path(unit: TrainingUnit) -> Path:
    """The file that holds a configuration's training state between its epochs."""
    digest = hashlib.sha256(unit.configuration.key.encode()).hexdigest()[:16]
    return Path(unit.run_path) / IN_PROGRESS_DIR / f"{digest}.pt"


@functools.lru_cache(maxsize=1)
def run_images(config_json: str) -> tuple[Any, ...]:
    """The training and test rows of a run's config (one copy per worker process)."""
    config = json.loads(config_json)
    pixels_train, y_train, pixels_test, y_test, image_shape = load_images(config)
    x_train, x_test = prepare_inputs(config, pixels_train, pixels_test)
    return x_train, y_train, x_test, y_test, tuple(image_shape)


def training_device(config: dict[str, Any]) -> torch.device:
    """``check_device``; on CUDA, TF32 is switched off so that float32 means float32 (cuDNN
    convolutions default to TF32, ten mantissa bits)."""
    device = check_device(config)
    if device.type == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    return device


def train_unit(unit: TrainingUnit) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Train one configuration on ``config["device"]`` (resuming its training state if it was in
    progress), evaluate it on the test set: (test metrics, seconds per epoch and the precision it
    trained in; epoch log).

    A float32 configuration whose training diverges (``TrainingDivergedError``) is trained again
    from its initialisation in float64, seed 003's precision, with a warning; its row says so
    (``dtype``), and a resumed run continues it in float64. A float64 divergence is raised with
    the configuration named."""
    configuration = unit.configuration
    state_path = in_progress_path(unit)
    device = training_device(unit.config)
    progress = load_progress(state_path, device)
    dtype = progress.get("dtype", unit.config["dtype"])  # a retried configuration: float64
    try:
        return _train(unit, dtype, progress, device, state_path)
    except TrainingDivergedError as error:
        if dtype == "float64":
            error.add_note(f"while training {configuration.key} in float64")
            raise
        warnings.warn(
            f"{configuration.key}: {error} in {dtype}; training it again in float64 (seed 003's "
            "precision)",
            stacklevel=2,
        )
        state_path.unlink(missing_ok=True)
        return _train(unit, "float64", {**FRESH_PROGRESS, "dtype": "float64"}, device, state_path)


def _train(
    unit: TrainingUnit,
    dtype_name: str,
    progress: dict[str, Any],
    device: torch.device,
    state_path: Path,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``train_unit`` in the precision ``dtype_name``, from ``progress`` (``load_progress``), on
    ``device`` (``training_device``), saving its state after every epoch to ``state_path``."""
    from zonal.dkm import fit_dkm

    configuration = unit.configuration
    config = {**unit.config, "seed": unit.config["seed"] + configuration.repeat}
    dtype = DTYPES[dtype_name]
    *data, image_shape = run_images(json.dumps(unit.config, sort_keys=True))
    # built on the CPU (the same initial model on every device), then moved
    model = build_model(data[0].to(dtype), configuration, config, image_shape).to(device, dtype)
    x_train, y_train, x_test, y_test = (
        tensor.to(device, dtype) if tensor.is_floating_point() else tensor.to(device)
        for tensor in data
    )
    resume = progress["training"]
    epoch_log: list[dict[str, Any]] = list(progress["epochs"])
    monitor_rows = config["batch_size"]
    started = time.monotonic()

    def training_seconds() -> float:
        """Seconds of training so far, over every session of this configuration."""
        return progress["seconds"] + time.monotonic() - started

    def save(training: dict[str, Any]) -> None:
        state_path.parent.mkdir(exist_ok=True)
        with atomic_writer(state_path, "wb") as handle:
            torch.save(
                {"training": training, "epochs": epoch_log, "seconds": training_seconds(),
                 "device": device.type, "dtype": dtype_name},
                handle,
            )  # fmt: skip

    def record(epoch: int, objective: float) -> dict[str, float]:
        """Log the epoch; the progress bar shows the accuracy on one batch of training images
        (evaluated without touching the random streams of training or of the final test)."""
        epoch_log.append({"epoch": epoch + 1, "objective": objective})
        model.eval()
        with torch.random.fork_rng(devices=[]):
            monitored = evaluate(model, x_train[:monitor_rows], y_train[:monitor_rows], config)
        model.train()
        return {"train accuracy %": monitored["accuracy_percent"]}

    fit_dkm(
        model,
        x_train,
        targets_for(y_train, configuration.likelihood),
        **fit_options(config, image_shape),
        progress=True,
        epoch_callback=record,
        checkpoint=save,
        resume=resume,
    )
    seconds = training_seconds() / max(config["epochs"], 1)  # training, not evaluation
    metrics = {**evaluate(model, x_test, y_test, config), "seconds_per_epoch": seconds}
    return {**metrics, "dtype": dtype_name}, epoch_log


def fit_options(config: dict[str, Any], image_shape: tuple[int, ...]) -> dict[str, Any]:
    """The ``fit_dkm`` schedule of a configuration's training: epochs, batches, rate, milestones,
    its seed (``config["seed"]``: the run's seed plus the repeat) and its crops."""
    return {
        "epochs": config["epochs"],
        "batch_size": config["batch_size"],
        "lr": config["learning_rate"],
        "milestones": config["milestones"],
        "seed": config["seed"],
        "augment": augmentation(config, image_shape),
    }


def load_progress(path: Path, device: torch.device) -> dict[str, Any]:
    """A configuration's training state saved after its last epoch, or a fresh one. A state
    saved on another kind of device is set aside with a warning: its random streams (a CUDA
    generator's state is not a CPU generator's) cannot continue here, so the configuration
    restarts."""
    fresh = dict(FRESH_PROGRESS)
    if not path.exists():
        return fresh
    progress = torch.load(path, map_location="cpu", weights_only=True)
    saved_on = progress.get("device", "cpu")
    if saved_on != device.type:
        warnings.warn(
            f"{path}: saved on a {saved_on} device, resumed on {device.type}: this configuration "
            "restarts from its first epoch",
            stacklevel=2,
        )
        return fresh
    return {**fresh, **progress}


__all__ = [
    "IN_PROGRESS_DIR",
    "TrainingUnit",
    "fit_options",
    "in_progress_path",
    "load_progress",
    "run_images",
    "train_unit",
    "training_device",
]
