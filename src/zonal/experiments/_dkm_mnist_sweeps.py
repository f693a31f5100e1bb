"""The sweeps of the DKM experiments (``zonal.experiments.dkm_mnist``): seed 003's ablations, the
configuration each of their settings trains, and the checks of the settings a config asks for."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

DTYPES = {"float64": torch.float64, "float32": torch.float32}
SWEEPS = ("nu", "normalisation", "rescaling", "top", "likelihood", "inducing")
#: the sweeps of the convolutional DKM's choices (the fully connected DKM has none of them)
CONV_SWEEPS = ("normalisation", "rescaling", "top", "inducing")
#: seed 003 sec. 5: the base model's nu, and the nu of the inducing-count runs (table 2)
BASE_NU, INDUCING_NU = "1", "0.01"
#: (inducing, train-test) normalisations and rescalings of seed 003 table 1 (app. C, F.2)
NORMALISATIONS = (("batch", "batch"), ("batch", "location"), ("local", "image"),
                  ("local", "local"), ("none", "none"))  # fmt: skip
RESCALINGS = (("batch", "batch"), ("batch", "location"), ("local", "batch"),
              ("local", "location"), ("local", "none"), ("none", "none"))  # fmt: skip


@dataclass(frozen=True)
class Configuration:
    """One trained model of a sweep: nu (text) in every layer, the (inducing, train-test)
    normalisation and rescaling, the top, the likelihood and the inducing counts per stage."""

    nu: str
    normalisation: tuple[str, str]
    rescaling: tuple[str, str]
    top: str
    likelihood: str
    inducing: tuple[int, ...]
    repeat: int = 0  # trained with the random seed ``seed + repeat``

    @property
    def key(self) -> str:
        """A name unique to the configuration (its checkpoint entry)."""
        key = (
            f"nu={self.nu} norm={'/'.join(self.normalisation)} "
            f"scale={'/'.join(self.rescaling)} top={self.top} likelihood={self.likelihood} "
            f"M={'/'.join(map(str, self.inducing))}"
        )
        return f"{key} repeat={self.repeat}" if self.repeat else key


def inducing_label(counts: Sequence[int]) -> str:
    """16/32/64 for the counts (16, 32, 64)."""
    return "/".join(str(int(count)) for count in counts)


def check_config(config: dict[str, Any]) -> tuple[str, ...]:
    """The sweeps to run, after checking ``sweep``, ``nus`` and the architecture's choices."""
    sweep = config["sweep"]
    if sweep != "all" and sweep not in SWEEPS:
        raise ValueError(f"unknown sweep {sweep!r}; choose one of {SWEEPS} or 'all'")
    if config["architecture"] not in ("fc", "conv"):
        raise ValueError(f"architecture must be 'fc' or 'conv', got {config['architecture']!r}")
    if config["likelihood"] not in ("categorical", "gaussian"):
        raise ValueError(
            f"likelihood must be 'categorical' or 'gaussian', got {config['likelihood']!r}"
        )
    for text in config["nus"]:
        parse_nu(text)
    convolutional = config["architecture"] == "conv"
    if sweep in CONV_SWEEPS and not convolutional:
        raise ValueError(f"the {sweep} sweep needs architecture 'conv' (the convolutional DKM)")
    if isinstance(config["repeats"], bool) or not isinstance(config["repeats"], int):
        raise ValueError(f"repeats must be an integer >= 1, got {config['repeats']!r}")
    if config["repeats"] < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {config['repeats']!r}")
    if config["dtype"] not in DTYPES:
        raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {config['dtype']!r}")
    check_device(config)
    if any(len(counts) != 3 for counts in config["inducing_sweep"]) or not config["inducing_sweep"]:
        raise ValueError(
            f"inducing_sweep must list inducing counts of the three stages, e.g. [[16, 32, 64]], "
            f"got {config['inducing_sweep']!r}"
        )
    if sweep != "all":
        return (sweep,)
    return tuple(name for name in SWEEPS if convolutional or name not in CONV_SWEEPS)


def check_device(config: dict[str, Any]) -> torch.device:
    """The torch device of ``config["device"]`` ("cpu" or "cuda[:i]"), refused with the reason if
    it is not one or this machine lacks it."""
    try:
        device = torch.device(config["device"])
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {config['device']!r}") from error
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {config['device']!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device {config['device']!r}: this machine has no CUDA device; set device to 'cpu' "
            "in the run folder's config.json to resume it here (configurations in progress then "
            "restart from their first epoch: their random streams belong to the other device)"
        )
    return device


def sweep_configurations(config: dict[str, Any]) -> list[tuple[str, str, Configuration]]:
    """(sweep, setting, configuration) of every sweep the config asks for (``check_config``), each
    setting ``repeats`` times (repeat r trains with the seed ``seed + r``)."""
    base = Configuration(
        BASE_NU,
        ("batch", "batch"),
        ("batch", "batch"),
        config["top"],
        config["likelihood"],
        tuple(config["conv_inducing"]),
    )
    settings = {
        "nu": [(text, {"nu": text}) for text in config["nus"]],
        "normalisation": [("/".join(pair), {"normalisation": pair}) for pair in NORMALISATIONS],
        "rescaling": [("/".join(pair), {"rescaling": pair}) for pair in RESCALINGS],
        "top": [(top, {"top": top}) for top in ("gap", "linear")],
        "likelihood": [(name, {"likelihood": name}) for name in ("gaussian", "categorical")],
        "inducing": [
            (inducing_label(counts), {"inducing": tuple(counts), "nu": INDUCING_NU})
            for counts in config["inducing_sweep"]
        ],
    }
    return [
        (sweep, setting, replace(base, **changes, repeat=repeat))
        for sweep in check_config(config)
        for setting, changes in settings[sweep]
        for repeat in range(config["repeats"])
    ]


def parse_nu(text: str) -> float:
    """A regularisation strength from its text ("inf", "1", "0.01"); >= 0."""
    try:
        value = float(text)
    except ValueError as error:
        raise ValueError(f"nu must be a number >= 0 or 'inf', got {text!r}") from error
    if math.isnan(value) or value < 0:
        raise ValueError(f"nu must be a number >= 0 or 'inf', got {text!r}")
    return value
