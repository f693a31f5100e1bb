"""Deep kernel machines on MNIST: the model-selection ablations of seed 003 tables 1, 2 and 4-9
with zonal's sparse fully connected DKM (``dkm-mnist`` quick) or convolutional DKM (``cdkm-mnist``,
``cdkm-fashion``, ``dkm-mnist --full``).

Seed 003's numbers are those of its *convolutional* DKM (a ResNet20-like stack of Gram layers).
The quick ``dkm-mnist`` preset runs the fully connected DKM (``zonal.dkm.SparseDKM``,
``architecture = "fc"``) on flattened images, so the seed's column is the reference a fully
connected model is expected to fall short of, and the comparison is between the trends in nu: the
NNGP limit (nu = inf, no representation learning) below the learned representations (nu = 1),
which the seed finds best for the test log likelihood. The convolutional DKM (``zonal.dkm.ConvDKM``,
``architecture = "conv"``) is the seed's: ResNet20-like stack with ``conv_inducing`` inducing points
per stage, batch normalisation and rescaling, global average pooling or a linear top, ZCA-whitened
images, random crops of the images zero-padded by ``crop_padding`` pixels, no flips (digits are not
mirror-symmetric); ``--protocol converged`` runs every ablation on all 60,000 training images with
the quick preset's narrow stack in float32 and 3 seeds (``CONV_CONVERGED``); ``--full`` is the
seed's protocol (meant for a GPU). The seed does not give its crop size; 2 pixels is ours. Its
first layer is an NNGP layer (nu = inf) whenever it has more inducing patches than a 3x3 patch has
values (its linear kernel's K_ii is then singular; ``ConvDKM``).

Sweeps (``sweep``: one of ``SWEEPS`` or ``"all"``). Seed 003 sec. 5 varies one choice at a time
from a base model: nu = 1 in every layer, "Batch / Batch" normalisation and "Batch / Batch"
rescaling (inducing / train-test, app. C), global average pooling, a categorical likelihood. Here
the base takes its top, likelihood and inducing counts from the config (``top``, ``likelihood``,
``conv_inducing``: the quick and converged presets' base has the linear top, which learns at their
size) and nu = 1.

* ``nu``: nu in ``nus`` (tables 1 and 4);
* ``normalisation``: the seed's five inducing / train-test normalisations (tables 1 and 5);
* ``rescaling``: its six inducing / train-test rescalings (tables 1 and 6);
* ``top``: global average pooling and linear (tables 1 and 7; the seed's "mixup" tops are not
  reproduced);
* ``likelihood``: Gaussian on one-hot labels and categorical (table 1; table 8 has train
  accuracies only, and the seed calls the test log likelihoods of the two incomparable: ours scores
  the softmax of the Gaussian outputs);
* ``inducing``: the inducing counts per stage in ``inducing_sweep``, at nu = 10^-2 (the seed's
  choice for table 2; tables 2 and 9; the seed trains these 200 epochs, ours ``epochs``).

Every setting is trained ``repeats`` times, with the seeds ``seed``, ``seed + 1``, ...: one row of
``results.csv`` per seed, the metrics are the means over the seeds (with the standard error of the
mean accuracy when there are several). ``dtype`` is that of the model and the data (``float32``
about halves a step on a CPU; the seed uses float64). A configuration that several sweeps share (the
base) is trained once per seed. Each finished configuration
is kept in the run's checkpoint (and every epoch of the one in progress), so a resumed run skips
it. The fully connected DKM has no normalisation, top or convolutional inducing counts: it runs
the ``nu`` and ``likelihood`` sweeps only.

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

Outputs: ``results.csv`` (one row per sweep and setting: the configuration, accuracy, test log
likelihood, seconds per epoch), ``training.csv`` (mean objective per epoch of every configuration),
``accuracy_by_nu.png`` (with the ``nu`` sweep); the report sets each sweep's accuracies and test log
likelihoods beside the seed's table.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

if TYPE_CHECKING:
    from zonal.dkm import DeepKernelMachine

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
    "sweep": "nu",  # one of SWEEPS, or "all"
    "nus": ["inf", "1"],  # text, so that inf can be given
    "inducing_sweep": [[16, 32, 64], [32, 64, 128]],  # conv_inducing of the inducing sweep
    "likelihood": "categorical",  # or "gaussian" (one-hot labels)
    "epochs": 8,
    "batch_size": 256,
    "learning_rate": 0.01,
    "milestones": [],  # epochs after which the rate is divided by 10
    "train_samples": 100,
    "eval_samples": 1000,
    "repeats": 1,  # seeds per configuration: seed, seed + 1, ...
    "dtype": "float64",  # of the model and the data; "float32" halves a step on a CPU
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
    if any(len(counts) != 3 for counts in config["inducing_sweep"]) or not config["inducing_sweep"]:
        raise ValueError(
            f"inducing_sweep must list inducing counts of the three stages, e.g. [[16, 32, 64]], "
            f"got {config['inducing_sweep']!r}"
        )
    if sweep != "all":
        return (sweep,)
    return tuple(name for name in SWEEPS if convolutional or name not in CONV_SWEEPS)


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


def load_images(config: dict[str, Any]) -> tuple[Any, ...]:
    """(x_train [N, D], y_train [N], x_test [T, D], y_test [T], image (H, W)): pixels in [0, 1]."""
    if config["dataset"] == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        pixels = torch.as_tensor(digits.data, dtype=torch.float64) / 16
        labels = torch.as_tensor(digits.target)
        order = torch.randperm(len(pixels), generator=torch.Generator().manual_seed(config["seed"]))
        train, test = order[: len(order) // 2], order[len(order) // 2 :]
        image_shape: tuple[int, ...] = (8, 8)
    elif config["dataset"] in ("mnist", "fashion-mnist"):
        from zonal.datasets import load_dataset

        data = load_dataset(config["dataset"])
        pixels = torch.as_tensor(data.X)
        labels = torch.as_tensor(data.y)
        train = torch.as_tensor(data.splits["train"])
        test = torch.as_tensor(data.splits["test"])
        if data.image_shape is None:
            raise ValueError(f"{config['dataset']!r} is not an image dataset")
        image_shape = data.image_shape
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
        train, test = (
            torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype, device=x.device)], 1)
            for x in (train, test)
        )
        return train, test
    if config["architecture"] != "conv":
        raise ValueError(f"architecture must be 'fc' or 'conv', got {config['architecture']!r}")
    mean = train.mean(0)
    values, vectors = torch.linalg.eigh((train - mean).mT @ (train - mean) / len(train))
    scale = (values.clamp_min(0) + config["zca_epsilon"] * values.clamp_min(0).mean()).rsqrt()
    whitening = vectors @ torch.diag(scale) @ vectors.mT  # [D, D]
    # a pixel constant over the training set (MNIST's blank border) is 0 after centring, but eigh
    # leaves ~1e-13 of the other pixels in it; local normalisation (seed 003 eq. 71e) would scale
    # that noise up to unit norm (in float32 Local/Local gives NaN within its first steps), so such
    # pixels neither give nor take anything
    constant = (train == train[:1]).all(0)  # [D]
    whitening[constant] = 0
    whitening[:, constant] = 0
    return (train - mean) @ whitening, (test - mean) @ whitening


def random_patches(
    images: torch.Tensor, count: int, generator: torch.Generator, candidates: int = 20
) -> torch.Tensor:
    """``count`` random 3x3 patches [M_0, C, 3, 3] of images [N, C, H, W] (seed 003 sec. 5), drawn
    among ``candidates * count`` random ones with at least 1% of their mean energy (sum of squares).

    A blank patch (MNIST's empty border, 0 after whitening) would make the first layer's K_ii
    singular: condition numbers of 1e28 and gradients of 1e11 for the patches when that layer's
    Gram is learned (nu_1 < inf), and a unit-norm noise direction under local normalisation."""
    draws = candidates * count
    chosen = torch.randint(len(images), (draws,), generator=generator)
    rows = torch.randint(images.shape[-2] - 2, (draws,), generator=generator)
    cols = torch.randint(images.shape[-1] - 2, (draws,), generator=generator)
    patches = torch.stack(
        [images[i, :, r : r + 3, c : c + 3] for i, r, c in zip(chosen, rows, cols, strict=True)]
    )  # [count * candidates, C, 3, 3]
    energy = patches.square().sum((1, 2, 3))  # [count * candidates]
    kept = patches[energy >= 0.01 * energy.mean()]
    if len(kept) < count:
        raise ValueError(f"fewer than {count} of {draws} random patches are not blank")
    return kept[:count]


def build_model(
    x_train: torch.Tensor,
    configuration: Configuration,
    config: dict[str, Any],
    image_shape: tuple,
) -> DeepKernelMachine:
    """The sparse DKM (fully connected or convolutional) of ``configuration``, its inducing inputs
    at random training images (fully connected) or random 3x3 patches of them (convolutional)."""
    from gpytorch.likelihoods import MultitaskGaussianLikelihood, SoftmaxLikelihood

    from zonal.dkm import ConvDKM, SparseDKM, resnet_layers

    if configuration.likelihood == "categorical":
        likelihood = SoftmaxLikelihood(num_classes=10, mixing_weights=False)
    else:
        likelihood = MultitaskGaussianLikelihood(num_tasks=10, rank=0, has_task_noise=False)
    nu = parse_nu(configuration.nu)
    generator = torch.Generator().manual_seed(config["seed"])
    if config["architecture"] == "conv":
        layers = resnet_layers(configuration.inducing, config["conv_blocks"])
        count = layers[0].num_inducing
        patches = random_patches(x_train.reshape(-1, 1, *image_shape), count, generator)
        first = math.inf if count > 9 else nu
        inducing_norm, train_test_norm = configuration.normalisation
        inducing_scale, train_test_scale = configuration.rescaling
        return ConvDKM(
            (1, *image_shape),
            layers,
            likelihood,
            inducing_patches=patches,
            nu=[first] + [nu] * (len(layers) - 1),
            top=configuration.top,
            normalisation={
                "inducing": inducing_norm,
                "train_test": train_test_norm,
                "inducing_scale": inducing_scale,
                "train_test_scale": train_test_scale,
            },
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


def evaluate(
    model: DeepKernelMachine, x_test: torch.Tensor, y_test: torch.Tensor, config: dict[str, Any]
) -> dict[str, float]:
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


def augmentation(
    config: dict[str, Any], image_shape: tuple[int, ...]
) -> Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None:
    """Random crops of the (whitened) image rows for the convolutional DKM, or None."""
    if config["architecture"] != "conv" or config["crop_padding"] == 0:
        return None
    from zonal.dkm.augmentation import random_crops

    def crop(rows: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        images = rows.reshape(-1, 1, *image_shape)
        return random_crops(images, config["crop_padding"], generator).flatten(1)

    return crop


def targets_for(y: torch.Tensor, likelihood: str) -> torch.Tensor:
    """Labels (categorical) or one-hot rows (Gaussian)."""
    if likelihood == "gaussian":
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
#: the convolutional DKM's ablations on a subset, each configuration in well under a minute on one
#: CPU thread: 1000 images, 4 epochs at a larger rate, a narrow 8/16/32 stack of one block per
#: stage (the global-average-pooling top learns slowly at this size: the base has the linear top)
CONV_QUICK: dict[str, Any] = {
    "num_train": 1000,
    "num_test": 500,
    "architecture": "conv",
    "conv_inducing": [8, 16, 32],
    "conv_blocks": 1,
    "top": "linear",
    "sweep": "all",
    "nus": ["inf", "10000", "100", "1", "0.01", "0"],
    "inducing_sweep": [[4, 8, 16], [8, 16, 32]],
    "epochs": 4,
    "batch_size": 50,
    "learning_rate": 0.05,
    "train_samples": 10,
    "eval_samples": 200,
}
#: the seed's protocol (sec. 5) for the convolutional experiments, whatever the quick preset sets
CONV_FULL: dict[str, Any] = {
    **FULL,
    "conv_blocks": 3,
    "top": "gap",
    "sweep": "all",
    "inducing_sweep": [[16, 32, 64], [32, 64, 128]],
    "batch_size": 256,
    "learning_rate": 0.01,
    "train_samples": 100,
    "eval_samples": 1000,
    "repeats": 4,  # seed 003 sec. 5: 4 random seeds
}
#: one CPU core, about two hours per sweep: every ablation on all 60,000 training images (the seed's
#: P, which weights the KL terms of eq. 76 by 1/P: the quick preset's 1000 images weight them 60
#: times as much, and GAP, Local/Local and None/None then fall to the constant output; here their
#: first 400 steps reach 72%, 94% and 88% on 1000 test images, the base 90%), the quick
#: preset's narrow stack in float32, 2 epochs of batches of 50, 3 seeds. Seconds per epoch on one
#: thread beside other jobs (load 6), from the median of the first steps: 185 at nu = inf, 250-260
#: with learned Gram blocks (float64: about twice that), so 8-9 minutes per configuration with the
#: test set and 25-30 minutes per setting of a sweep with its 3 seeds
CONV_CONVERGED: dict[str, Any] = {
    "num_train": 60000,
    "num_test": 10000,
    "architecture": "conv",
    "conv_inducing": [8, 16, 32],
    "conv_blocks": 1,
    "top": "linear",
    "sweep": "all",
    "nus": ["inf", "100", "1", "0.01"],
    "inducing_sweep": [[4, 8, 16], [8, 16, 32]],
    "epochs": 2,
    "milestones": [1],
    "batch_size": 50,
    "learning_rate": 0.05,
    "train_samples": 100,
    "eval_samples": 1000,
    "repeats": 3,
    "dtype": "float32",
}
CONV_DIFFERENCES = {
    "quick": "reduced: 1000 training and 500 test images (the KL terms then weigh 60 times the "
    "seed's), an 8/16/32 stack of one block per stage (seed: 128/256/512, three blocks), 4 epochs "
    "(seed: 100), rate 0.05 (seed: 0.01), batches of 50 (seed: 256), 10 / 200 Monte Carlo draws, "
    "one seed (seed: 4), no crops; the base has the linear top (seed: GAP), which learns at this "
    "size; GAP, Local/Local, None/None and nu = 10^4 fall to the constant output (objective "
    "-log 10): at P = 1000 the KL terms weigh 60 times the seed's",
    "converged": "reduced: the seed's 60,000 training and 10,000 test images, but an 8/16/32 stack "
    "of one block per stage (seed: 128/256/512, three blocks per stage) in float32 (seed: float64), "
    "2 epochs of batches of 50, rate 0.05 then 0.005 (seed: 100 epochs of 256, rate 0.01 divided "
    "by 10 at 40 and 80), 3 seeds (seed: 4), no crops (seed: random crops); nu in inf / 100 / 1 / "
    "0.01 (seed: 7 values); the base has the linear top (seed: GAP); inducing sweep 4/8/16 and "
    "8/16/32 (seed: 16/32/64 to 512/1024/2048). 185-260 s per epoch on one thread (load 6), 8-9 "
    "minutes per configuration: about 50 minutes per sweep of top, likelihood or inducing counts, "
    "1.7 h (nu), 2.1 h (normalisation), 2.6 h (rescaling); 48 configurations, about 7 h, for all",
    "full": "the seed's protocol (ResNet20 stack, 128/256/512, 100 epochs, 4 seeds, float64), for a "
    "GPU; crops of 2 pixels (the seed does not give its crop size); no flips (digits)",
}
QUICK_INDUCING = {"inducing": [inducing_label(counts) for counts in CONV_QUICK["inducing_sweep"]]}


@register_experiment(
    "dkm-digits",
    summary="Fully connected deep kernel machine on the 8x8 digits, the nu sweep end to end "
    "(seed 003)",
    quick={**QUICK, **DIGITS},
    full={**QUICK, **DIGITS},
    paper={},
    headline=("accuracy_percent.nu=0.01", "accuracy_percent.nu=1", "accuracy_percent.nu=inf"),
    validate=check_config,
)
@register_experiment(
    "cdkm-mnist",
    summary="Convolutional deep kernel machine on MNIST: the seed 003 ablations (nu, "
    "normalisation, rescaling, top, likelihood, inducing counts; tables 1, 2, 4-9; quick: a subset "
    "and a narrow stack; --full: the seed's protocol, for a GPU)",
    quick={**QUICK, **CONV_QUICK},
    converged=CONV_CONVERGED,
    full=CONV_FULL,
    differences=CONV_DIFFERENCES,
    paper=seed_paper(SWEEPS, QUICK_INDUCING),
    headline=("accuracy_percent.nu=1", "test_log_likelihood.nu=1"),
    validate=check_config,
    cpu_hours={"converged": 7.0},  # estimated from the first steps' times
)
@register_experiment(
    "cdkm-fashion",
    summary="Convolutional deep kernel machine on Fashion-MNIST (the harder set obtainable here; "
    "CIFAR-10 is not), the seed 003 ablations: quick a subset and a narrow stack, --full the "
    "seed's protocol",
    quick={**QUICK, **CONV_QUICK, "dataset": "fashion-mnist"},
    full={**CONV_FULL, "dataset": "fashion-mnist", "num_train": 60000},
    paper={},
    headline=("accuracy_percent.nu=1", "test_log_likelihood.nu=1"),
    validate=check_config,
)
@register_experiment(
    "dkm-mnist",
    summary="Deep kernel machines on MNIST, fully connected (quick) or convolutional (--full): "
    "the nu sweep of seed 003 tables 1 and 4",
    quick=QUICK,
    full=FULL,
    paper=seed_paper(("nu",)),
    headline=("accuracy_percent.nu=1", "test_log_likelihood.nu=1", "accuracy_percent.nu=inf"),
    validate=check_config,
)
def run_dkm_mnist(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Train and evaluate every configuration of the sweeps (each kept in the checkpoint when it
    is done, the one in progress after every epoch), then tabulate them per sweep."""
    planned = sweep_configurations(config)  # refuse bad settings before any work
    pixels_train, y_train, pixels_test, y_test, image_shape = load_images(config)
    x_train, x_test = prepare_inputs(config, pixels_train, pixels_test)
    data = (x_train, y_train, x_test, y_test)
    state = run_dir.load_checkpoint() or {"done": {}, "epochs": {}, "current": None}
    configurations = list({conf.key: conf for *_, conf in planned}.values())
    for configuration in configurations:
        if configuration.key not in state["done"]:
            train_configuration(configuration, config, state, run_dir, data, image_shape)

    rows = [
        {
            "sweep": sweep,
            "setting": setting,
            "nu": configuration.nu,
            "normalisation": "/".join(configuration.normalisation),
            "rescaling": "/".join(configuration.rescaling),
            "top": configuration.top,
            "likelihood": configuration.likelihood,
            "inducing": inducing_label(configuration.inducing),
            "seed": config["seed"] + configuration.repeat,
            **state["done"][configuration.key],
        }
        for sweep, setting, configuration in planned
    ]
    run_dir.save_table("results.csv", rows)
    run_dir.save_table(
        "training.csv",
        (
            {"configuration": configuration.key, **entry}
            for configuration in configurations
            for entry in state["epochs"].get(configuration.key, [])
        ),
    )
    nu_rows = [row for row in rows if row["sweep"] == "nu"]
    if nu_rows:
        _plot_accuracy(run_dir, nu_rows, f"{config['architecture']} DKM (zonal)")
    metrics: dict[str, Any] = {
        "accuracy_percent": {},
        "test_log_likelihood": {},
        "seconds_per_epoch": {},
    }
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(f"{row['sweep']}={row['setting']}", []).append(row)
    for name, group in groups.items():  # means over the repeats
        for key in metrics:
            metrics[key][name] = sum(row[key] for row in group) / len(group)
    if config["repeats"] > 1:  # the standard error of the mean accuracy over the repeats
        metrics["accuracy_percent_standard_error"] = {
            name: statistics.stdev(row["accuracy_percent"] for row in group) / len(group) ** 0.5
            for name, group in groups.items()
        }
    metrics["model"] = (
        "fully connected DKM (the seed's numbers: convolutional DKM)"
        if config["architecture"] == "fc"
        else "convolutional DKM"
    )
    return metrics


def train_configuration(
    configuration: Configuration,
    config: dict[str, Any],
    state: dict[str, Any],
    run_dir: RunDirectory,
    data: tuple[torch.Tensor, ...],
    image_shape: tuple,
) -> None:
    """Train one configuration (resuming it from ``state["current"]`` if it was in progress),
    evaluate it on the test set and record it in ``state["done"]`` and the checkpoint."""
    from zonal.dkm import fit_dkm

    config = {**config, "seed": config["seed"] + configuration.repeat}
    dtype = DTYPES[config["dtype"]]
    x_train, y_train, x_test, y_test = (
        tensor.to(dtype) if tensor.is_floating_point() else tensor for tensor in data
    )
    key = configuration.key
    model = build_model(x_train, configuration, config, image_shape).to(dtype)
    resume = state["current"][1] if state["current"] and state["current"][0] == key else None
    epoch_log: list[dict[str, Any]] = list(state["epochs"].get(key, []))
    monitor_rows = config["batch_size"]
    started = time.monotonic()

    def save(training: dict[str, Any]) -> None:
        state["current"] = (key, training)
        state["epochs"][key] = epoch_log
        run_dir.save_checkpoint(state)

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
        epochs=config["epochs"],
        batch_size=config["batch_size"],
        lr=config["learning_rate"],
        milestones=config["milestones"],
        seed=config["seed"],
        progress=True,
        epoch_callback=record,
        checkpoint=save,
        resume=resume,
        augment=augmentation(config, image_shape),
    )
    trained_epochs = config["epochs"] - (0 if resume is None else resume["epoch"])
    seconds = (time.monotonic() - started) / max(trained_epochs, 1)  # training, not evaluation
    state["done"][key] = {**evaluate(model, x_test, y_test, config), "seconds_per_epoch": seconds}
    state["current"] = None
    run_dir.save_checkpoint(state)


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
    seed = [math.nan if (value := SEED_ACCURACY.get(label)) is None else value for label in labels]
    axes.plot(positions, seed, "C1s--", label="conv DKM (seed 003)")
    axes.set_xticks(list(positions), labels)
    axes.set_xlabel("nu")
    axes.set_ylabel("test accuracy (%)")
    axes.legend(frameon=False)
    run_dir.save_figure("accuracy_by_nu.png", figure)
