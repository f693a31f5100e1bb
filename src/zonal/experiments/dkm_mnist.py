"""Fully connected deep kernel machines on MNIST: the nu sweep of seed 003 table 1 (and table 4's
test log likelihoods) with zonal's sparse fully connected DKM.

Seed 003's numbers are those of its *convolutional* DKM (a ResNet20-like stack of Gram layers);
this experiment runs the fully connected DKM (``zonal.dkm.SparseDKM``) on flattened images, so the
seed's column is the reference a fully connected model is expected to fall short of, and the
comparison is between the trends in nu: the NNGP limit (nu = inf, no representation learning) well
below the learned representations (nu = 1), which the seed finds best for the test log likelihood.

Protocol. Pixels in [0, 1] with a constant feature 1 appended (a bias: the ReLU Gram kernel of
[x, 1]); ``num_train`` training images (the first of MNIST's training split), ``num_test`` test
images (of its test split), ``num_inducing`` inducing inputs initialised at random training images
(seed 003 sec. 5), ``num_layers`` Gram layers with the ReLU (first-order arc-cosine) kernel, the
same nu for every layer, a categorical likelihood (Monte Carlo, ``train_samples`` draws in
training, ``eval_samples`` for the test metrics; seed 003 F.4 uses 1000) or a Gaussian one on
one-hot labels, Adam(0.8, 0.9) at ``learning_rate``, batches of ``batch_size``, the rate divided by
10 at the ``milestones`` epochs (seed 003 sec. 5: 100 epochs, 40 and 80). ``dataset = "digits"``
runs the 8x8 digits set (for tests). A checkpoint after every epoch; an interrupted run resumes.

Outputs: ``results.csv`` (one row per nu: accuracy, test log likelihood, seconds per epoch),
``training.csv`` (mean objective per epoch), ``accuracy_by_nu.png``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

QUICK: dict[str, Any] = {
    "seed": 0,
    "dataset": "mnist",  # or "digits" (8x8, for tests)
    "num_train": 10000,
    "num_test": 2000,
    "num_inducing": 200,
    "num_layers": 2,
    "nus": ["inf", "1"],  # text, so that inf can be given
    "likelihood": "categorical",  # or "gaussian" (one-hot labels)
    "epochs": 8,
    "batch_size": 256,
    "learning_rate": 0.01,
    "milestones": [],  # epochs after which the rate is divided by 10
    "train_samples": 100,
    "eval_samples": 1000,
}
FULL: dict[str, Any] = {
    "num_train": 60000,
    "num_test": 10000,
    "num_inducing": 1000,
    "nus": ["inf", "10000", "100", "1", "0.01", "0.0001", "0"],
    "epochs": 100,
    "milestones": [40, 80],
}
SEED_ACCURACY = {"inf": 72.19, "10000": 80.79, "100": 96.96, "1": 99.20, "0.01": 99.16,
                 "0.0001": 99.14, "0": 99.16}  # fmt: skip
SEED_TEST_LL = {"inf": -0.9026, "10000": -0.6393, "100": -0.0942, "1": -0.0263, "0.01": -0.0344,
                "0.0001": -0.0371, "0": -0.0359}  # fmt: skip
PAPER: dict[str, dict[str, Any]] = {
    "seed 003 table 1 (MNIST test accuracy %, convolutional DKM)": {
        f"accuracy_percent.nu={nu}": value for nu, value in SEED_ACCURACY.items()
    },
    "seed 003 table 4 (MNIST test log likelihood, convolutional DKM)": {
        f"test_log_likelihood.nu={nu}": value for nu, value in SEED_TEST_LL.items()
    },
}


def parse_nu(text: str) -> float:
    """A regularisation strength from its text ("inf", "1", "0.01"); >= 0."""
    try:
        value = float(text)
    except ValueError as error:
        raise ValueError(f"nu must be a number >= 0 or 'inf', got {text!r}") from error
    if math.isnan(value) or value < 0:
        raise ValueError(f"nu must be a number >= 0 or 'inf', got {text!r}")
    return value


def load_images(config: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """(x_train [N, D + 1], y_train [N], x_test [T, D + 1], y_test [T]): pixels in [0, 1] and a
    constant 1."""
    if config["dataset"] == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        pixels = torch.as_tensor(digits.data, dtype=torch.float64) / 16
        labels = torch.as_tensor(digits.target)
        order = torch.randperm(len(pixels), generator=torch.Generator().manual_seed(config["seed"]))
        train, test = order[: len(order) // 2], order[len(order) // 2 :]
    elif config["dataset"] == "mnist":
        from zonal.datasets import load_dataset

        data = load_dataset("mnist")
        pixels = torch.as_tensor(data.X)
        labels = torch.as_tensor(data.y)
        train = torch.as_tensor(data.splits["train"])
        test = torch.as_tensor(data.splits["test"])
        if config["num_train"] > len(train):  # the full protocol: training and validation splits
            train = torch.cat([train, torch.as_tensor(data.splits["validation"])])
    else:
        raise ValueError(f"dataset must be 'mnist' or 'digits', got {config['dataset']!r}")
    if config["num_train"] > len(train) or config["num_test"] > len(test):
        raise ValueError(
            f"{config['dataset']} has {len(train)} training and {len(test)} test images; asked for "
            f"{config['num_train']} and {config['num_test']}"
        )
    train, test = train[: config["num_train"]], test[: config["num_test"]]
    features = torch.cat([pixels, torch.ones(len(pixels), 1, dtype=pixels.dtype)], 1)
    return features[train], labels[train], features[test], labels[test]


def build_model(x_train: torch.Tensor, nu: float, config: dict[str, Any]):
    """The sparse fully connected DKM with inducing inputs at random training images."""
    from gpytorch.likelihoods import MultitaskGaussianLikelihood, SoftmaxLikelihood

    from zonal.dkm import SparseDKM

    if config["likelihood"] == "categorical":
        likelihood = SoftmaxLikelihood(num_classes=10, mixing_weights=False)
    elif config["likelihood"] == "gaussian":
        likelihood = MultitaskGaussianLikelihood(num_tasks=10, rank=0, has_task_noise=False)
    else:
        raise ValueError(
            f"likelihood must be 'categorical' or 'gaussian', got {config['likelihood']!r}"
        )
    if config["num_inducing"] > len(x_train):
        raise ValueError(f"num_inducing {config['num_inducing']} exceeds num_train {len(x_train)}")
    generator = torch.Generator().manual_seed(config["seed"])
    chosen = torch.randperm(len(x_train), generator=generator)[: config["num_inducing"]]
    return SparseDKM(
        x_train[chosen],
        config["num_layers"],
        likelihood,
        nu=nu,
        likelihood_samples=config["train_samples"],
        seed=config["seed"],
    )


def evaluate(model, x_test: torch.Tensor, y_test: torch.Tensor, config: dict[str, Any]) -> dict:
    """Test accuracy (%) and mean test log likelihood log p(y | x) of the labels."""
    from zonal.dkm.likelihoods import categorical_log_probabilities, is_categorical

    model.likelihood_samples = config["eval_samples"]
    if is_categorical(model.likelihood):
        log_probabilities = model.class_log_probabilities(x_test)
        predicted = log_probabilities.argmax(-1)
        log_likelihood = log_probabilities.gather(-1, y_test.reshape(-1, 1)).mean()
    else:  # Gaussian on one-hot labels: classify by the mean, score the softmax of the outputs
        mean, variance = model.marginals(x_test)
        predicted = mean.argmax(-1)
        generator = torch.Generator().manual_seed(config["seed"])
        log_probabilities = categorical_log_probabilities(
            mean, variance, config["eval_samples"], generator
        )
        log_likelihood = log_probabilities.gather(-1, y_test.reshape(-1, 1)).mean()
    model.likelihood_samples = config["train_samples"]
    return {
        "accuracy_percent": 100 * float((predicted == y_test).double().mean()),
        "test_log_likelihood": float(log_likelihood),
    }


def targets_for(y: torch.Tensor, config: dict[str, Any]) -> torch.Tensor:
    """Labels (categorical) or one-hot rows (Gaussian)."""
    if config["likelihood"] == "gaussian":
        return torch.nn.functional.one_hot(y, 10).to(torch.float64)
    return y


@register_experiment(
    "dkm-mnist",
    summary="Fully connected deep kernel machines on MNIST: the nu sweep of seed 003 tables 1 and 4",
    quick=QUICK,
    full=FULL,
    paper=PAPER,
    headline=("accuracy_percent.nu=1", "test_log_likelihood.nu=1", "accuracy_percent.nu=inf"),
)
def run_dkm_mnist(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Train one DKM per nu (resumable, a checkpoint per epoch) and evaluate it on the test set."""
    from zonal.dkm import fit_dkm

    nus = [parse_nu(text) for text in config["nus"]]  # refuse bad values before any work
    x_train, y_train, x_test, y_test = load_images(config)
    state = run_dir.load_checkpoint() or {"done": {}, "epochs": {}, "current": None}

    for text, nu in zip(config["nus"], nus, strict=True):
        if text in state["done"]:
            continue
        model = build_model(x_train, nu, config)
        resume = state["current"] if state["current"] and state["current"][0] == text else None
        epoch_log: list[dict[str, Any]] = list(state["epochs"].get(text, []))
        started = time.monotonic()

        def save(training: dict[str, Any], text: str = text, log: list = epoch_log) -> None:
            state["current"] = (text, training)
            state["epochs"][text] = log
            run_dir.save_checkpoint(state)

        def record(epoch: int, objective: float, log: list = epoch_log) -> None:
            log.append({"epoch": epoch + 1, "objective": objective})

        fit_dkm(
            model,
            x_train,
            targets_for(y_train, config),
            epochs=config["epochs"],
            batch_size=config["batch_size"],
            lr=config["learning_rate"],
            milestones=config["milestones"],
            seed=config["seed"],
            progress=True,
            epoch_callback=record,
            checkpoint=save,
            resume=None if resume is None else resume[1],
        )
        trained_epochs = config["epochs"] - (0 if resume is None else resume[1]["epoch"])
        seconds = (time.monotonic() - started) / max(trained_epochs, 1)
        state["done"][text] = {
            **evaluate(model, x_test, y_test, config),
            "seconds_per_epoch": seconds,
        }
        state["current"] = None
        run_dir.save_checkpoint(state)

    rows = [{"nu": text, **state["done"][text]} for text in config["nus"]]
    run_dir.save_table("results.csv", rows)
    run_dir.save_table(
        "training.csv",
        (
            {"nu": text, **entry}
            for text in config["nus"]
            for entry in state["epochs"].get(text, [])
        ),
    )
    _plot_accuracy(run_dir, rows)
    metrics: dict[str, Any] = {
        "accuracy_percent": {},
        "test_log_likelihood": {},
        "seconds_per_epoch": {},
    }
    for row in rows:
        for key in metrics:
            metrics[key][f"nu={row['nu']}"] = row[key]
    metrics["model"] = "fully connected DKM (the seed's numbers: convolutional DKM)"
    return metrics


def _plot_accuracy(run_dir: RunDirectory, rows: list[dict[str, Any]]) -> None:
    """``accuracy_by_nu.png``: ours and the seed's test accuracy per nu (needs matplotlib)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    figure = Figure(figsize=(5, 3.2))
    axes = figure.add_subplot()
    labels = [row["nu"] for row in rows]
    positions = range(len(rows))
    axes.plot(positions, [row["accuracy_percent"] for row in rows], "C0o-", label="FC DKM (ours)")
    seed = [SEED_ACCURACY.get(label, math.nan) for label in labels]
    axes.plot(positions, seed, "C1s--", label="conv DKM (seed 003)")
    axes.set_xticks(list(positions), labels)
    axes.set_xlabel("nu")
    axes.set_ylabel("test accuracy (%)")
    axes.legend(frameon=False)
    run_dir.save_figure("accuracy_by_nu.png", figure)
