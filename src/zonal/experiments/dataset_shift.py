"""Activated DGP heads on convolutional features under dataset shift (seed 001 sec. 4.2, after
Ovadia et al., 2019).

Models, all on the same architecture of extractor (``zonal.models.conv_head.ConvFeatures``: two
conv 5x5 + ReLU + max-pool 2 blocks, then a linear map to ``feature_dim`` features) and a head of
two layers of ``num_inducing`` units / inducing functions (``hidden_width`` outputs between them):

* ``network``: the plain network (extractor + the activated network that the ADGP head is),
  trained by cross-entropy;
* ``dropout``: the same with dropout p = ``dropout`` before each head layer, at train and test
  time, ``dropout_passes`` passes (Gal and Ghahramani);
* ``ensemble``: ``ensemble_size`` networks from different seeds, the plain network the first;
* ``adgp``: the plain network copied into the activated DGP head (its posterior mean is then the
  network: ``copy_error`` records max |DGP mean - network logits| on the test set; every layer's
  arc-cosine variance ``head_kernel_variance``, q(u) scale ``head_initial_scale``), the head
  trained by the ELBO on the frozen features (``elbo_epochs``), optionally all jointly
  (``joint_epochs``);
* ``dgp``: seed 000's DGP with inducing points (arc-cosine, first-layer points at training
  features) on the plain network's frozen features, trained by the ELBO for ``elbo_epochs``.

Shifts (``zonal.shifts``): the test images of each ``rotation_datasets`` entry rotated by every
angle of ``rotation_angles``; those of ``corruption_dataset`` under each of ``corruptions`` at
``intensities`` (level 0: clean; ``corruption_dataset=""`` skips the corruptions). The report's
CIFAR-10-C cannot be obtained here (no internet, no registry ships it): the four corruptions on
Fashion-MNIST stand in for it.

Metrics (``zonal.calibration``) per (dataset, repeat, model, shift, level): accuracy, test log
likelihood, ECE (15 bins), mean predictive entropy. Summaries average over the shift levels of a
family and give the standard error over ``repeats`` (a repeat re-draws the training subset and
every seed). Speed: test images per second of each model on the clean test set (ratio to the
plain network, same thread count) and the memory of its head's parameters.

Training to convergence (``validation_share`` > 0, the converged protocol): that share of the
training images is held out, every network trains until its validation log likelihood has not
improved for ``patience`` epochs (at most ``network_epochs``) and keeps its best epoch
(``zonal.models.classifier_training``); with ``elbo_until_plateau`` the heads' ELBO stages stop
at the first epoch end where the plateau rule of ``zonal.experiments._convergence`` holds (at most
``elbo_epochs``). The metrics count the networks that early stopping ended before the cap
(``networks_stopped_early``) and the ELBO stages on their plateau (``elbo_stages_converged``: true
by construction for a stage the rule stopped, so only stages that reached the cap can fail it),
and ``curves.csv`` holds every network's validation curve.

Outputs: ``results.csv`` (one row per model, shift and level), ``level_means.csv`` (per repeat,
each metric averaged over a shift family's levels), ``summary.csv``, ``speed.csv``,
``reliability.csv`` (bins of the reliability diagrams, first repeat), ``shift_<dataset>_<family>
.png`` (metric against shift level, one line per model, standard errors over repeats),
``reliability_<dataset>.png``; a checkpoint after every (dataset, repeat).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import torch

from zonal.experiments._shift_figures import plot_shift_figures
from zonal.experiments._shift_models import head_bytes, hold_out, train_models, unit_seed
from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

MODELS = ("network", "dropout", "ensemble", "adgp", "dgp")
METRICS = ("accuracy", "tll", "ece", "entropy")
#: the shift name of the averages over every corruption family (``level_means``)
CORRUPTIONS_FAMILY = "corruptions"
QUICK: dict[str, Any] = {
    "seed": 0,
    "repeats": 1,
    "rotation_datasets": ["mnist"],
    "rotation_angles": [0, 60, 120, 180],
    "corruption_dataset": "fashion-mnist",
    "corruptions": ["gaussian-noise", "contrast"],
    "intensities": [1, 3, 5],
    "num_train": 2000,
    "num_test": 300,
    "channels": [8, 16],
    "feature_dim": 32,
    "hidden_width": 8,
    "num_inducing": 128,
    "truncation_level": 20,
    "network_epochs": 4,
    "elbo_epochs": 3,
    "joint_epochs": 0,
    "batch_size": 128,
    "network_lr": 3e-3,
    "elbo_lr": 1e-2,
    "elbo_samples": 3,
    "head_kernel_variance": 1e-3,
    "head_initial_scale": 1e-2,
    "dropout": 0.1,
    "dropout_passes": 100,
    "ensemble_size": 3,
    "posterior_samples": 8,
    "softmax_samples": 16,
    "models": list(MODELS),
    "validation_share": 0.0,  # > 0: that share of the training images for early stopping
    "patience": 3,  # epochs without a better validation log likelihood before a network stops
    "elbo_until_plateau": False,  # True: elbo_epochs is a cap; stop when the plateau rule holds
}
FULL: dict[str, Any] = {
    "repeats": 3,
    "rotation_datasets": ["mnist", "fashion-mnist"],
    "rotation_angles": list(range(0, 181, 15)),
    "corruptions": ["gaussian-noise", "gaussian-blur", "contrast", "impulse-noise"],
    "intensities": [1, 2, 3, 4, 5],
    "num_train": None,
    "num_test": None,
    "channels": [32, 64],
    "feature_dim": 64,
    "hidden_width": 16,
    "network_epochs": 10,
    "elbo_epochs": 5,
    "ensemble_size": 5,
    "posterior_samples": 16,
}
# MNIST rotations and Fashion-MNIST corruptions (claim 4 of docs/reproductions.md), every network
# trained until its validation log likelihood stops improving and every ELBO stage to its plateau,
# on a third of the training images. Measured on 5,400 training images (one core, load 2-4): the
# networks stop after 7-15 epochs (about 7 s per epoch); the ADGP head's ELBO stage needs far more than
# the full preset's 5 epochs at 0.01 (loss 56.8 -> 45.7 nats per point, still falling 2.5 per
# epoch; at 0.03 it reaches 0.37 after 40 epochs). About 30 CPU-minutes per (dataset, repeat),
# 6 of them: about 3 CPU-hours estimated before the run; measured 6,871 s wall with --jobs 2.
CONVERGED: dict[str, Any] = {
    "repeats": 3,
    "rotation_datasets": ["mnist"],
    "rotation_angles": list(range(0, 181, 15)),
    "corruption_dataset": "fashion-mnist",
    "corruptions": ["gaussian-noise", "gaussian-blur", "contrast", "impulse-noise"],
    "intensities": [1, 2, 3, 4, 5],
    "num_train": 20000,
    "num_test": None,
    "channels": [32, 64],
    "feature_dim": 64,
    "hidden_width": 16,
    "network_epochs": 40,
    "validation_share": 0.1,
    "patience": 3,
    "elbo_epochs": 60,
    "elbo_lr": 0.03,
    "elbo_until_plateau": True,
    "ensemble_size": 5,
    "posterior_samples": 16,
}
DIFFERENCES = {
    "quick": "reduced: 2,000 training and 300 test images, 4 network and 3 ELBO epochs (not "
    "converged), 4 angles, 2 corruptions at 3 levels; stand-in: Fashion-MNIST corruptions for "
    "CIFAR-10-C",
    "converged": "reduced: 20,000 of the 60,000 training images (10% of them held out for early "
    "stopping), 3 repeats, MNIST rotations and Fashion-MNIST corruptions only (seed: also "
    "Fashion-MNIST rotations); ELBO rate 0.03 (seed: not given); stand-in: Fashion-MNIST "
    "corruptions for CIFAR-10-C",
    "full": "10 network and 5 ELBO epochs, fixed (seed: not given); stand-in: Fashion-MNIST "
    "corruptions for CIFAR-10-C",
}
# The seed's tables print "??": the comparison is against the baselines run here.
PAPER: dict[str, dict[str, Any]] = {"seed 001 sec. 4.2 (image classification)": {}}


# ---------------------------------------------------------------------------------------- data
def load_images(
    name: str, config: dict[str, Any], seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(train images [N, 1, 28, 28] float32, labels [N], test images, labels): the predefined
    splits, ``num_train`` / ``num_test`` rows drawn at random from them (None: all)."""
    from zonal.datasets import load_dataset

    data = load_dataset(name)
    if data.image_shape is None:
        raise ValueError(f"{name!r} is not an image dataset")
    shape = (1, *data.image_shape)
    generator = torch.Generator().manual_seed(seed)
    parts = []
    for split, count in (("train", config["num_train"]), ("test", config["num_test"])):
        x, y = data.split(split)
        order = torch.randperm(len(x), generator=generator)[: count or len(x)]
        images = torch.as_tensor(x, dtype=torch.float32)[order].reshape(-1, *shape)
        parts += [images, torch.as_tensor(y)[order].long()]
    return parts[0], parts[1], parts[2], parts[3]


def shifted_sets(
    dataset: str, images: torch.Tensor, config: dict[str, Any], seed: int
) -> list[tuple[str, float, torch.Tensor]]:
    """[(family, level, images)] of the test images: rotations and / or corruptions (level 0 is
    the clean set, evaluated once and reported under every family)."""
    from zonal.shifts import corrupt, rotate

    sets: list[tuple[str, float, torch.Tensor]] = [("clean", 0.0, images)]
    if dataset in config["rotation_datasets"]:
        sets += [("rotation", float(a), rotate(images, a)) for a in config["rotation_angles"] if a]
    if dataset == config["corruption_dataset"]:
        for name in config["corruptions"]:
            sets += [
                (name, float(level), corrupt(images, name, level, seed=seed))
                for level in config["intensities"]
            ]
    return sets


def families(dataset: str, config: dict[str, Any]) -> list[str]:
    """The shift families evaluated on ``dataset``."""
    found = ["rotation"] if dataset in config["rotation_datasets"] else []
    if dataset == config["corruption_dataset"]:
        found += list(config["corruptions"])
    return found


def datasets(config: dict[str, Any]) -> list[str]:
    """Every dataset of the run, each trained on once per repeat."""
    names = list(config["rotation_datasets"])
    if config["corruption_dataset"] and config["corruption_dataset"] not in names:
        names.append(config["corruption_dataset"])
    return names


# ---------------------------------------------------------------------------------------- one unit
def run_unit(item: tuple[dict[str, Any], str, int]) -> dict[str, Any]:
    """Train every model on one (dataset, repeat) of the run with ``config``, evaluate every
    shift: rows, speed, bins, training info and validation curves. Module-level, so that
    ``--jobs`` workers can run it."""
    from zonal.calibration import classification_metrics, reliability_diagram

    config, dataset, repeat = item
    seed = unit_seed(config, dataset, repeat)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        images, labels, test, test_labels = load_images(dataset, config, seed)
        images, labels, validation = hold_out(
            images, labels, config["validation_share"], unit_seed(config, dataset, repeat, "val")
        )
        models, info, curves = train_models(config, images, labels, test, seed, validation)
        sets = shifted_sets(dataset, test, config, seed)
        rows, speed, bins = [], [], []
        for name, model in models.items():
            started = time.perf_counter()
            for family, level, shifted in sets:
                probabilities = model.predict_proba(shifted)
                if family == "clean":
                    seconds = time.perf_counter() - started
                    speed.append({"model": name, "images_per_second": len(shifted) / seconds,
                                  "head_bytes": head_bytes(name, model)})  # fmt: skip
                metrics = classification_metrics(probabilities, test_labels)
                targets = families(dataset, config) if family == "clean" else [family]
                for target in targets:
                    rows.append({"dataset": dataset, "repeat": repeat, "model": name,
                                 "shift": target, "level": level, **metrics})  # fmt: skip
                if repeat == 0 and (family == "clean" or level == _strongest(sets, family)):
                    diagram = reliability_diagram(probabilities, test_labels)
                    for index in range(len(diagram.counts)):
                        bins.append({
                            "dataset": dataset, "model": name, "shift": family, "level": level,
                            "bin": index, "count": int(diagram.counts[index]),
                            "accuracy": float(diagram.accuracy[index]),
                            "confidence": float(diagram.confidence[index]),
                        })  # fmt: skip
    return {"rows": rows, "speed": speed, "bins": bins, "info": info, "curves": curves}


def _strongest(sets: list[tuple[str, float, torch.Tensor]], family: str) -> float:
    return max(level for name, level, _ in sets if name == family)


# ---------------------------------------------------------------------------------------- summary
def mean_and_error(values: list[float]) -> tuple[float, float]:
    """(mean, standard error) over repeats (NaN error for one repeat)."""
    mean = statistics.fmean(values)
    error = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return mean, error


def level_means(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (dataset, repeat, shift, model): each metric averaged over the shift's levels (clean
    included), and under the shift ``"corruptions"`` over every corruption family's rows together
    (where there are any): one row per repeat, what a claim's mean and standard error are taken
    over."""
    cells: dict[tuple[str, int, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["dataset"], row["repeat"], row["shift"], row["model"])
        cells.setdefault(key, []).append(row)
        if row["shift"] != "rotation":
            cells.setdefault((*key[:2], CORRUPTIONS_FAMILY, key[3]), []).append(row)
    return [
        {
            "dataset": dataset,
            "repeat": repeat,
            "shift": shift,
            "model": model,
            **{metric: statistics.fmean(r[metric] for r in found) for metric in METRICS},
        }
        for (dataset, repeat, shift, model), found in sorted(cells.items())
    ]


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (dataset, shift, model): each metric averaged over the shift's levels (clean
    included; ``level_means``), mean and standard error over repeats."""
    cells: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for mean in level_means(rows):
        cells.setdefault((mean["dataset"], mean["shift"], mean["model"]), []).append(mean)
    summary = []
    for (dataset, shift, model), found in sorted(cells.items()):
        entry: dict[str, Any] = {"dataset": dataset, "shift": shift, "model": model}
        for metric in METRICS:
            entry[metric], entry[f"{metric}_se"] = mean_and_error([r[metric] for r in found])
        entry["repeats"] = len(found)
        summary.append(entry)
    return summary


def verdicts(rows: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """For each (dataset, shift) and baseline: the ADGP's advantage in TLL, ECE and accuracy
    averaged over the shift levels, mean +- standard error over repeats (paired by repeat)."""
    found: dict[str, dict[str, str]] = {}
    cells = sorted({(r["dataset"], r["shift"]) for r in rows})
    for dataset, shift in cells:
        subset = [r for r in rows if (r["dataset"], r["shift"]) == (dataset, shift)]
        models = {r["model"] for r in subset}
        if "adgp" not in models:
            continue
        repeats = sorted({r["repeat"] for r in subset})

        for baseline in sorted(models - {"adgp"}):
            parts = []
            for metric, sign in (("tll", 1), ("ece", -1), ("accuracy", 1)):
                gains = [
                    sign
                    * (
                        _level_mean(subset, "adgp", k, metric)
                        - _level_mean(subset, baseline, k, metric)
                    )
                    for k in repeats
                ]
                mean, error = mean_and_error(gains)
                if mean == 0:
                    parts.append(f"{metric} equal")
                    continue
                word = "better" if mean > 0 else "worse"
                spread = f" +- {error:.3g}" if math.isfinite(error) else ""
                parts.append(f"{metric} {word} by {abs(mean):.3g}{spread}")
            found.setdefault(f"{dataset}.{shift}", {})[f"vs_{baseline}"] = "; ".join(parts)
    return found


def _level_mean(rows: list[dict[str, Any]], model: str, repeat: int, metric: str) -> float:
    return statistics.fmean(r[metric] for r in rows if (r["model"], r["repeat"]) == (model, repeat))


def _check_config(config: dict[str, Any]) -> None:
    from zonal.shifts import CORRUPTIONS, MAX_INTENSITY

    unknown = sorted(set(config["models"]) - set(MODELS))
    if unknown:
        raise ValueError(f"unknown models {unknown}; use some of {list(MODELS)}")
    bad = sorted(set(config["corruptions"]) - set(CORRUPTIONS))
    if bad:
        raise ValueError(f"unknown corruptions {bad}; use some of {sorted(CORRUPTIONS)}")
    if any(not 1 <= level <= MAX_INTENSITY for level in config["intensities"]):
        raise ValueError(f"intensities must lie in 1..{MAX_INTENSITY}, got {config['intensities']}")
    if not datasets(config):
        raise ValueError("give rotation_datasets and / or a corruption_dataset")
    if config["ensemble_size"] < 1 or config["repeats"] < 1:
        raise ValueError("ensemble_size and repeats must be >= 1")
    if not 0 <= config["validation_share"] < 1:
        raise ValueError(
            f"validation_share must lie in [0, 1) (0: no early stopping), "
            f"got {config['validation_share']}"
        )


MNIST_ONLY = {"rotation_datasets": ["mnist"], "corruption_dataset": ""}
FASHION_ONLY = {"rotation_datasets": ["fashion-mnist"], "corruption_dataset": "fashion-mnist"}
MODELS_SUMMARY = (
    "activated DGP head on convolutional features vs network, MC dropout, deep ensemble and "
    "inducing-point DGP (seed 001 sec. 4.2): accuracy, TLL, ECE, entropy"
)


@register_experiment(
    "shift-mnist",
    validate=_check_config,
    summary=f"{MODELS_SUMMARY}, under rotations of MNIST",
    quick={**QUICK, **MNIST_ONLY},
    full={**FULL, **MNIST_ONLY},
    paper=PAPER,
    headline=("adgp_copy_error_max", "verdicts.mnist.rotation.vs_network"),
)
@register_experiment(
    "shift-fashion",
    validate=_check_config,
    summary=f"{MODELS_SUMMARY}, under rotations and corruptions of Fashion-MNIST (standing in "
    "for CIFAR-10-C)",
    quick={**QUICK, **FASHION_ONLY},
    full={**FULL, **FASHION_ONLY},
    paper=PAPER,
    headline=(
        "adgp_copy_error_max",
        "verdicts.fashion-mnist.rotation.vs_network",
        "verdicts.fashion-mnist.gaussian-noise.vs_network",
    ),
)
@register_experiment(
    "dataset-shift",
    validate=_check_config,
    summary=f"{MODELS_SUMMARY}, under rotations (MNIST; Fashion-MNIST in --full) and corruptions "
    "(Fashion-MNIST standing in for CIFAR-10-C)",
    quick=QUICK,
    converged=CONVERGED,
    full=FULL,
    differences=DIFFERENCES,
    paper=PAPER,
    headline=(
        "adgp_copy_error_max",
        "verdicts.mnist.rotation.vs_network",
        "verdicts.fashion-mnist.gaussian-noise.vs_network",
    ),
    cpu_hours={"converged": 3.8},  # measured: 6,871 s wall with --jobs 2 on 2 cores
)
def run_dataset_shift(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Train and evaluate every (dataset, repeat), checkpointing after each; summarise, plot."""
    _check_config(config)
    todo = [
        (dataset, repeat) for dataset in datasets(config) for repeat in range(config["repeats"])
    ]
    state = run_dir.load_checkpoint() or {"units": {}}
    units: dict[str, dict[str, Any]] = dict(state["units"])
    pending = [(config, *unit) for unit in todo if f"{unit[0]}/{unit[1]}" not in units]
    for (_, dataset, repeat), result in run_dir.map_units(
        run_unit, pending, finished=len(todo) - len(pending), unit="fit"
    ):
        units[f"{dataset}/{repeat}"] = result
        run_dir.save_checkpoint({"units": units})
    rows = [row for key, _ in _ordered(units, todo) for row in units[key]["rows"]]
    summary = summarise(rows)
    speed = speed_table(units, todo)
    run_dir.save_table("results.csv", rows)
    run_dir.save_table("summary.csv", summary)
    run_dir.save_table("level_means.csv", level_means(rows))
    run_dir.save_table("speed.csv", speed)
    bins = [b for key, _ in _ordered(units, todo) for b in units[key]["bins"]]
    run_dir.save_table("reliability.csv", bins)
    curves = [
        {"dataset": key.split("/")[0], "repeat": repeat, **point}
        for key, repeat in _ordered(units, todo)
        for point in units[key].get("curves", [])
    ]
    if curves:
        run_dir.save_table("curves.csv", curves)
    plot_shift_figures(run_dir, rows, bins)
    metrics: dict[str, Any] = {}
    for entry in summary:
        cell = metrics.setdefault(entry["dataset"], {}).setdefault(entry["shift"], {})
        cell[entry["model"]] = {m: entry[m] for m in METRICS}
    metrics["speed"] = {e["model"]: {k: v for k, v in e.items() if k != "model"} for e in speed}
    copy_errors = [
        u["info"]["adgp_copy_error"] for u in units.values() if "adgp_copy_error" in u["info"]
    ]
    if copy_errors:
        metrics["adgp_copy_error_max"] = max(copy_errors)
    metrics["verdicts"] = verdicts(rows)
    metrics.update(convergence_counts(units))
    return metrics


def convergence_counts(units: dict[str, Any]) -> dict[str, str]:
    """How many trainings met their stopping rule: networks that early stopping ended before
    ``network_epochs`` (only with a validation set) and head ELBO stages on their plateau."""
    infos = [unit["info"] for unit in units.values()]
    counts = {}
    for name, suffix in (("networks_stopped_early", "_stopped_early"),
                         ("elbo_stages_converged", "_elbo_converged")):  # fmt: skip
        flags = [value for info in infos for key, value in info.items() if key.endswith(suffix)]
        if flags:
            counts[name] = f"{int(sum(flags))} of {len(flags)}"
    return counts


def _ordered(units: dict[str, Any], todo: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return [(f"{d}/{r}", r) for d, r in todo if f"{d}/{r}" in units]


def speed_table(units: dict[str, Any], todo: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """Per model: mean test images per second over units, ratio to the plain network (None when
    the network is not run), head bytes and training seconds."""
    entries: dict[str, list[dict[str, Any]]] = {}
    for key, _ in _ordered(units, todo):
        for entry in units[key]["speed"]:
            entries.setdefault(entry["model"], []).append(entry)
    table = []
    reference = entries.get("network")
    base = statistics.fmean(e["images_per_second"] for e in reference) if reference else None
    for model, found in entries.items():
        rate = statistics.fmean(e["images_per_second"] for e in found)
        seconds = [u["info"].get(f"{model}_train_seconds") for u in units.values()]
        seconds = [s for s in seconds if s is not None]
        table.append({
            "model": model,
            "images_per_second": rate,
            "ratio_to_network": rate / base if base else None,
            "head_bytes": found[0]["head_bytes"],
            "train_seconds": statistics.fmean(seconds) if seconds else None,
        })  # fmt: skip
    return table


__all__ = [
    "FULL",
    "MODELS",
    "QUICK",
    "run_dataset_shift",
    "shifted_sets",
    "summarise",
    "verdicts",
]
