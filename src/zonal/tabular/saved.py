"""The checkpoint file of ``zonal fit``: save atomically, load with checks that name the file.

A checkpoint is a ``torch.save`` of a plain dict (tensors, numbers, strings, lists, dicts only, so
``torch.load(path, weights_only=True)`` reads it)::

    format            "zonal.tabular-model"
    format_version    3
    zonal_version     the version that wrote it
    spec              the resolved model options (``zonal.tabular.recipes.resolve_spec``, concrete kernel),
                      or for a stacked mixture {"model": "stacked", "input_dim", "likelihood",
                      "num_classes", "components": [component specs], "weights": [floats]}
    feature_columns   input column names, in order
    target_column     the target's name
    x_mean, x_std     [D] float64 input standardisation (training rows)
    y_mean, y_std     [] float64 target standardisation (0 and 1 for classification)
    target            {"likelihood": "gaussian" | "bernoulli" | "softmax", "classes": [labels]}
    model_state       ``model.state_dict()`` (the likelihood is the model's own)
    state_sha256      sha256 of the model state's names, dtypes, shapes and bytes (checked on load)
    training          {"rows", "validation_rows", "seconds", "objective", "candidates", "source",
                       "validation" (the chosen model's metrics), "scores" (every candidate's),
                       "interrupted" (Ctrl-C kept the best model so far), "constant_columns"
                       (input columns of one value on the training rows)}

Loading rebuilds the model from ``spec`` (``zonal.tabular.model.build_model``) and loads the state dict
strictly, so a file from another program, another format version or a damaged one is refused with
a ``ModelFileError`` that names it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

import zonal
from zonal._files import write_new_file
from zonal.datasets import Standardizer
from zonal.tabular.model import STACKED, TabularModel, Trained, build_model
from zonal.tabular.options import LIKELIHOODS
from zonal.tabular.recipes import RECIPES
from zonal.tabular.tables import READ_SUFFIXES
from zonal.tabular.targets import Target

FORMAT = "zonal.tabular-model"
FORMAT_VERSION = 3
_REQUIRED = {
    "spec": dict,
    "feature_columns": list,
    "target_column": str,
    "x_mean": torch.Tensor,
    "x_std": torch.Tensor,
    "y_mean": torch.Tensor,
    "y_std": torch.Tensor,
    "model_state": dict,
    "state_sha256": str,
    "target": dict,
    "training": dict,
}


class ModelFileError(ValueError):
    """A checkpoint cannot be read or is not one that ``zonal fit`` wrote; names the file."""


def checkpoint_state(fitted: TabularModel) -> dict[str, Any]:
    """The plain dict saved for ``fitted`` (see the module docstring)."""
    trained = fitted.trained
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "zonal_version": zonal.__version__,
        "spec": dict(trained.spec),
        "feature_columns": list(fitted.feature_columns),
        "target_column": fitted.target_column,
        "x_mean": torch.as_tensor(np.asarray(fitted.x_scaler.mean, dtype=np.float64)),
        "x_std": torch.as_tensor(np.asarray(fitted.x_scaler.std, dtype=np.float64)),
        "y_mean": torch.as_tensor(np.asarray(fitted.y_scaler.mean, dtype=np.float64)),
        "y_std": torch.as_tensor(np.asarray(fitted.y_scaler.std, dtype=np.float64)),
        "model_state": trained.model.state_dict(),
        "state_sha256": state_digest(trained.model.state_dict()),
        "target": {
            "likelihood": fitted.target.likelihood,
            "classes": list(fitted.target.classes),
        },
        "training": {
            "rows": fitted.num_rows,
            "validation_rows": fitted.num_validation_rows,
            "scoring_rows": fitted.num_scoring_rows,
            "seconds": trained.seconds,
            "objective": trained.objective,
            "candidates": dict(trained.candidates),
            "source": fitted.source,
            "validation": dict(fitted.validation),
            "scores": {name: dict(score) for name, score in fitted.scores.items()},
            "interrupted": fitted.interrupted,
            "constant_columns": list(fitted.constant_columns),
        },
    }


def save_model(fitted: TabularModel, path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write the checkpoint atomically; an existing file is replaced only with ``force``."""
    state = checkpoint_state(fitted)
    return write_new_file(path, lambda handle: torch.save(state, handle), force=force)


def _unreadable(path: Path, error: Exception) -> ModelFileError:
    """The named error for a checkpoint ``torch.load`` could not read safely."""
    with open(path, "rb") as handle:  # torch.save writes a zip archive (a legacy one: a pickle)
        head = handle.read(4)
    if head != b"PK\x03\x04" and head[:1] != b"\x80":  # e.g. a table renamed .pt
        return ModelFileError(
            f"{path} is not a zonal model file: not a PyTorch checkpoint at all (a zonal model "
            "file is what `zonal fit -o MODEL.pt` writes)"
        )
    if isinstance(error, pickle.UnpicklingError):  # torch's message advises an unsafe reload
        return ModelFileError(
            f"checkpoint {path} holds Python objects that a safe (weights-only) load refuses: it "
            "is not a zonal model file, and zonal will not execute code from it"
        )
    reason = (str(error).strip().splitlines() or [""])[0][:200]  # torch raises many types
    return ModelFileError(
        f"checkpoint {path} is corrupt or not a zonal model file ({type(error).__name__}: {reason})"
    )


def load_model(path: str | os.PathLike[str]) -> TabularModel:
    """Read a checkpoint written by ``save_model`` and rebuild the model, ready to predict."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        if path.suffix.lower() in READ_SUFFIXES:  # a table's name: predict's arguments swapped
            raise ModelFileError(
                f"checkpoint {path} is a table, not a model file: the checkpoint comes first "
                "(zonal predict CHECKPOINT DATA)"
            ) from error
        raise _unreadable(path, error) from error
    _check_layout(path, state)
    if state_digest(state["model_state"]) != state["state_sha256"]:
        raise ModelFileError(
            f"checkpoint {path} is damaged: its model state does not match the checksum written "
            "with it"
        )
    spec = state["spec"]
    try:
        model = build_model(spec)
        model.load_state_dict(state["model_state"])
        if (
            spec["model"] == STACKED
            and cast(torch.Tensor, model.weights).tolist() != spec["weights"]
        ):
            raise ValueError(f"its weights {spec['weights']} differ from the state's")
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        reason = (str(error).strip().splitlines() or [""])[0][:200]
        raise ModelFileError(
            f"checkpoint {path} does not match the model it describes "
            f"({type(error).__name__}: {reason})"
        ) from error
    training = state["training"]
    trained = Trained(
        dict(spec),
        model,
        float(training.get("objective", float("nan"))),
        float(training.get("seconds", float("nan"))),
        dict(training.get("candidates", {})),
    )
    x_scaler = Standardizer(mean=state["x_mean"].numpy(), std=state["x_std"].numpy())
    y_scaler = Standardizer(mean=state["y_mean"].numpy(), std=state["y_std"].numpy())
    return TabularModel(
        trained,
        tuple(state["feature_columns"]),
        state["target_column"],
        x_scaler,
        y_scaler,
        int(training.get("rows", 0)),
        str(training.get("source", "")),
        Target(state["target"]["likelihood"], tuple(state["target"]["classes"])),
        dict(training.get("validation", {})),
        {name: dict(score) for name, score in training.get("scores", {}).items()},
        int(training.get("validation_rows", 0)),
        bool(training.get("interrupted", False)),
        int(training.get("scoring_rows", 0)),
        tuple(training.get("constant_columns", ())),
    )


def state_digest(state: dict[str, Any]) -> str:
    """sha256 over a state dict's names, dtypes, shapes and raw bytes, in key order."""
    digest = hashlib.sha256()
    for name in sorted(state):
        value = state[name]
        if not isinstance(value, torch.Tensor):
            digest.update(f"{name}={value!r};".encode())
            continue
        tensor = value.detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _check_layout(path: Path, state: object) -> None:
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ModelFileError(
            f"{path} is not a model file written by `zonal fit` (no {FORMAT!r} format tag)"
        )
    version = state.get("format_version")
    if version != FORMAT_VERSION:
        raise ModelFileError(
            f"{path} has model-file format version {version!r}; this zonal "
            f"({zonal.__version__}) reads version {FORMAT_VERSION}"
        )
    wrong = [key for key, kind in _REQUIRED.items() if not isinstance(state.get(key), kind)]
    if wrong:
        raise ModelFileError(f"{path} is damaged: missing or malformed entries {', '.join(wrong)}")
    spec = state["spec"]
    if not _known_spec(spec):
        raise ModelFileError(f"{path} is damaged: unknown model spec {spec!r}")
    target = state["target"]
    classes = target.get("classes")
    if (
        target.get("likelihood") not in LIKELIHOODS
        or target.get("likelihood") != spec.get("likelihood")
        or not isinstance(classes, list)
        or not all(isinstance(label, str) for label in classes)
        or len(classes) != spec.get("num_classes")
    ):
        raise ModelFileError(f"{path} is damaged: malformed target {target!r}")
    width = len(state["feature_columns"])
    if width != spec["input_dim"] or state["x_mean"].shape != (width,):
        raise ModelFileError(
            f"{path} is damaged: {width} input columns but a model for {spec['input_dim']}"
        )


def _known_spec(spec: object) -> bool:
    """Whether ``spec`` names a recipe (or is a stacked mixture of such specs, with one weight
    each and its likelihood) and an integer input dimension."""
    if not isinstance(spec, dict) or not isinstance(spec.get("input_dim"), int):
        return False
    if spec.get("model") != STACKED:
        return spec.get("model") in RECIPES
    components, weights = spec.get("components"), spec.get("weights")
    return (
        isinstance(components, list)
        and isinstance(weights, list)
        and len(components) == len(weights) > 0
        and all(isinstance(weight, float) for weight in weights)
        and all(_known_component(component) for component in components)
        and all(component["input_dim"] == spec["input_dim"] for component in components)
        and all(component.get("likelihood") == spec.get("likelihood") for component in components)
    )


def _known_component(spec: object) -> bool:
    """Whether ``spec`` is a known recipe spec (a stacked mixture has no stacked component)."""
    return isinstance(spec, dict) and spec.get("model") != STACKED and _known_spec(spec)
