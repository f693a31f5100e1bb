"""Deep kernel machines on MNIST: the nu sweep of seed 003 table 1 (and table 4's test log
likelihoods) with zonal's sparse fully connected DKM (quick) or convolutional DKM (``--full``).

Seed 003's numbers are those of its *convolutional* DKM (a ResNet20-like stack of Gram layers).
The quick preset runs the fully connected DKM (``zonal.dkm.SparseDKM``, ``architecture = "fc"``)
on flattened images, so the seed's column is the reference a fully connected model is expected to
fall short of, and the comparison is between the trends in nu: the NNGP limit (nu = inf, no
representation learning) below the learned representations (nu = 1), which the seed finds best
for the test log likelihood. ``--full`` runs the seed's protocol with the convolutional DKM
(``zonal.dkm.ConvDKM``, ``architecture = "conv"``: ResNet20-like stack with ``conv_inducing``
inducing points per stage, batch normalisation and rescaling, global average pooling, ZCA-whitened
images, random crops of the images zero-padded by ``crop_padding`` pixels, no flips (digits are
not mirror-symmetric); meant for a GPU). The seed does not give its crop size; 2 pixels is ours.
Its first layer is an NNGP layer (nu = inf) whenever it has more inducing patches than a 3x3 patch
has values (its linear kernel's K_ii is then singular; ``ConvDKM``).

Protocol (fully connected). Pixels in [0, 1] with a constant feature 1 appended (a bias: the ReLU
Gram kernel of [x, 1]); ``num_train`` training images (the first of MNIST's training split),
``num_test`` test images (of its test split), ``num_inducing`` inducing inputs initialised at
random training images (seed 003 sec. 5), ``num_layers`` Gram layers with the ReLU (first-order
arc-cosine) kernel, the same nu for every layer, a categorical likelihood (Monte Carlo,
``train_samples`` draws in training, ``eval_samples`` for the test metrics; seed 003 F.4 uses 1000)
or a Gaussian one on one-hot labels, Adam(0.8, 0.9) at ``learning_rate``, batches of
``batch_size``, the rate divided by 10 at the ``milestones`` epochs (seed 003 sec. 5: 100 epochs,
40 and 80). ``dataset = "digits"`` runs the 8x8 digits set (for tests). The fully connected DKM
sees [x, 1]; the convolutional one sees ZCA-whitened images, x -> U (S + epsilon mean(S))^{-1/2}
U^T (x - mean) with the training covariance U S U^T. A checkpoint after every epoch; an interrupted
run resumes.

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
    "dataset": "mnist",  # or "fashion-mnist", or "digits" (8x8)
    "num_train": 10000,
    "num_test": 2000,
    "num_inducing": 200,
    "num_layers": 2,
    "architecture": "fc",  # or "conv": the ResNet20-like convolutional DKM
    "conv_inducing": [16, 32, 64],  # M per stage of the convolutional stack
    "conv_blocks": 3,  # blocks per stage (3: ResNet20)
    "top": "gap",  # the convolutional top: "gap" or "linear"
    "zca_epsilon": 0.1,  # ZCA whitening of the images for the convolutional DKM (seed 003 sec. 5)
    "crop_padding": 0,  # random crops of the zero-padded images (convolutional DKM; 0: none)
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
    "architecture": "conv",
    "conv_inducing": [128, 256, 512],
    "crop_padding": 2,
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


def load_images(config: dict[str, Any]) -> tuple[Any, ...]:
    """(x_train [N, D], y_train [N], x_test [T, D], y_test [T], image (H, W)): pixels in [0, 1]."""
    if config["dataset"] == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        pixels = torch.as_tensor(digits.data, dtype=torch.float64) / 16
        labels = torch.as_tensor(digits.target)
        order = torch.randperm(len(pixels), generator=torch.Generator().manual_seed(config["seed"]))
        train, test = order[: len(order) // 2], order[len(order) // 2 :]
        image_shape = (8, 8)
    elif config["dataset"] in ("mnist", "fashion-mnist"):
        from zonal.datasets import load_dataset

        data = load_dataset(config["dataset"])
        pixels = torch.as_tensor(data.X)
        labels = torch.as_tensor(data.y)
        train = torch.as_tensor(data.splits["train"])
        test = torch.as_tensor(data.splits["test"])
        image_shape = tuple(data.image_shape)
        if config["num_train"] > len(train) and "validation" in data.splits:
            # MNIST's full protocol: training and validation splits
            train = torch.cat([train, torch.as_tensor(data.splits["validation"])])
    else:
        raise ValueError(
            f"dataset must be 'mnist', 'fashion-mnist' or 'digits', got {config['dataset']!r}"
        )
    if config["num_train"] > len(train) or config["num_test"] > len(test):
        raise ValueError(
            f"{config['dataset']} has {len(train)} training and {len(test)} test images; asked for "
            f"{config['num_train']} and {config['num_test']}"
        )
    train, test = train[: config["num_train"]], test[: config["num_test"]]
    return pixels[train], labels[train], pixels[test], labels[test], image_shape


def prepare_inputs(
    config: dict[str, Any], train: torch.Tensor, test: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's rows: [x, 1] (fully connected) or ZCA-whitened pixels (convolutional)."""
    if config["architecture"] == "fc":
        return tuple(torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], 1) for x in (train, test))
    if config["architecture"] != "conv":
        raise ValueError(f"architecture must be 'fc' or 'conv', got {config['architecture']!r}")
    mean = train.mean(0)
    values, vectors = torch.linalg.eigh((train - mean).mT @ (train - mean) / len(train))
    scale = (values.clamp_min(0) + config["zca_epsilon"] * values.clamp_min(0).mean()).rsqrt()
    whitening = vectors @ torch.diag(scale) @ vectors.mT  # [D, D]
    return (train - mean) @ whitening, (test - mean) @ whitening


def build_model(x_train: torch.Tensor, nu: float, config: dict[str, Any], image_shape: tuple):
    """The sparse DKM (fully connected or convolutional), its inducing inputs at random training
    images (fully connected) or random 3x3 patches of them (convolutional)."""
    from gpytorch.likelihoods import MultitaskGaussianLikelihood, SoftmaxLikelihood

    from zonal.dkm import ConvDKM, SparseDKM, resnet_layers

    if config["likelihood"] == "categorical":
        likelihood = SoftmaxLikelihood(num_classes=10, mixing_weights=False)
    elif config["likelihood"] == "gaussian":
        likelihood = MultitaskGaussianLikelihood(num_tasks=10, rank=0, has_task_noise=False)
    else:
        raise ValueError(
            f"likelihood must be 'categorical' or 'gaussian', got {config['likelihood']!r}"
        )
    generator = torch.Generator().manual_seed(config["seed"])
    if config["architecture"] == "conv":
        layers = resnet_layers(config["conv_inducing"], config["conv_blocks"])
        count = layers[0].num_inducing
        images = x_train.reshape(-1, 1, *image_shape)
        chosen = torch.randint(len(images), (count,), generator=generator)
        rows = torch.randint(image_shape[0] - 2, (count,), generator=generator)
        cols = torch.randint(image_shape[1] - 2, (count,), generator=generator)
        patches = torch.stack(
            [images[i, :, r : r + 3, c : c + 3] for i, r, c in zip(chosen, rows, cols, strict=True)]
        )  # [M_0, 1, 3, 3]
        first = math.inf if count > 9 else nu
        return ConvDKM(
            (1, *image_shape),
            layers,
            likelihood,
            inducing_patches=patches,
            nu=[first] + [nu] * (len(layers) - 1),
            top=config["top"],
            normalisation={},
            likelihood_samples=config["train_samples"],
            seed=config["seed"],
        )
    if config["num_inducing"] > len(x_train):
        raise ValueError(f"num_inducing {config['num_inducing']} exceeds num_train {len(x_train)}")
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
    chunk = config["batch_size"]  # batch statistics of the convolutional normalisation
    if is_categorical(model.likelihood):
        log_probabilities = model.class_log_probabilities(x_test, chunk_size=chunk)
        predicted = log_probabilities.argmax(-1)
        log_likelihood = log_probabilities.gather(-1, y_test.reshape(-1, 1)).mean()
    else:  # Gaussian on one-hot labels: classify by the mean, score the softmax of the outputs
        mean, variance = model.marginals(x_test, chunk_size=chunk)
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


def augmentation(config: dict[str, Any], image_shape: tuple):
    """Random crops of the (whitened) image rows for the convolutional DKM, or None."""
    if config["architecture"] != "conv" or config["crop_padding"] == 0:
        return None
    from zonal.dkm.augmentation import random_crops

    def crop(rows: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        images = rows.reshape(-1, 1, *image_shape)
        return random_crops(images, config["crop_padding"], generator).flatten(1)

    return crop


def targets_for(y: torch.Tensor, config: dict[str, Any]) -> torch.Tensor:
    """Labels (categorical) or one-hot rows (Gaussian)."""
    if config["likelihood"] == "gaussian":
        return torch.nn.functional.one_hot(y, 10).to(torch.float64)
    return y


#: the 8x8 digits end to end in minutes (half the set for training, half for testing)
DIGITS = {
    "dataset": "digits",
    "num_train": 898,
    "num_test": 899,
    "num_inducing": 200,
    "nus": ["inf", "1", "0.01"],
    "epochs": 60,
    "batch_size": 128,
}
#: the convolutional DKM on a subset in minutes on a CPU (quick), the seed's protocol with --full
#: (the global-average-pooling top does not learn at this size: the quick preset uses the linear top)
CONV_QUICK = {
    "num_train": 2000,
    "num_test": 500,
    "architecture": "conv",
    "conv_inducing": [8, 16, 32],
    "conv_blocks": 1,
    "top": "linear",
    "nus": ["1"],
    "epochs": 10,
    "batch_size": 64,
}


@register_experiment(
    "dkm-digits",
    summary="Fully connected deep kernel machine on the 8x8 digits, the nu sweep end to end "
    "(seed 003)",
    quick={**QUICK, **DIGITS},
    full={**QUICK, **DIGITS},
    paper={},
    headline=("accuracy_percent.nu=0.01", "accuracy_percent.nu=1", "accuracy_percent.nu=inf"),
)
@register_experiment(
    "cdkm-mnist",
    summary="Convolutional deep kernel machine on MNIST: the seed 003 table 1 and 4 nu sweep "
    "(quick: a subset and a narrow stack; --full: the seed's protocol, for a GPU)",
    quick={**QUICK, **CONV_QUICK},
    full=FULL,
    paper=PAPER,
    headline=("accuracy_percent.nu=1", "test_log_likelihood.nu=1"),
)
@register_experiment(
    "cdkm-fashion",
    summary="Convolutional deep kernel machine on Fashion-MNIST (the harder set obtainable here; "
    "CIFAR-10 is not): quick a subset and a narrow stack, --full the seed's protocol",
    quick={**QUICK, **CONV_QUICK, "dataset": "fashion-mnist"},
    full={**FULL, "dataset": "fashion-mnist", "num_train": 60000},
    paper={},
    headline=("accuracy_percent.nu=1", "test_log_likelihood.nu=1"),
)
@register_experiment(
    "dkm-mnist",
    summary="Deep kernel machines on MNIST, fully connected (quick) or convolutional (--full): "
    "the nu sweep of seed 003 tables 1 and 4",
    quick=QUICK,
    full=FULL,
    paper=PAPER,
    headline=("accuracy_percent.nu=1", "test_log_likelihood.nu=1", "accuracy_percent.nu=inf"),
)
def run_dkm_mnist(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Train one DKM per nu (resumable, a checkpoint per epoch) and evaluate it on the test set."""
    from zonal.dkm import fit_dkm

    nus = [parse_nu(text) for text in config["nus"]]  # refuse bad values before any work
    pixels_train, y_train, pixels_test, y_test, image_shape = load_images(config)
    x_train, x_test = prepare_inputs(config, pixels_train, pixels_test)
    state = run_dir.load_checkpoint() or {"done": {}, "epochs": {}, "current": None}

    for text, nu in zip(config["nus"], nus, strict=True):
        if text in state["done"]:
            continue
        model = build_model(x_train, nu, config, image_shape)
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
            augment=augmentation(config, image_shape),
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
    _plot_accuracy(run_dir, rows, f"{config['architecture']} DKM (zonal)")
    metrics: dict[str, Any] = {
        "accuracy_percent": {},
        "test_log_likelihood": {},
        "seconds_per_epoch": {},
    }
    for row in rows:
        for key in metrics:
            metrics[key][f"nu={row['nu']}"] = row[key]
    metrics["model"] = (
        "fully connected DKM (the seed's numbers: convolutional DKM)"
        if config["architecture"] == "fc"
        else "convolutional DKM"
    )
    return metrics


def _plot_accuracy(run_dir: RunDirectory, rows: list[dict[str, Any]], label: str) -> None:
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
    seed = [SEED_ACCURACY.get(label, math.nan) for label in labels]
    axes.plot(positions, seed, "C1s--", label="conv DKM (seed 003)")
    axes.set_xticks(list(positions), labels)
    axes.set_xlabel("nu")
    axes.set_ylabel("test accuracy (%)")
    axes.legend(frameon=False)
    run_dir.save_figure("accuracy_by_nu.png", figure)
