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
about halves a step on a CPU; the seed uses float64); a float32 configuration whose training
diverges (a non-finite objective or Gram matrix) is trained again from its initialisation in
float64, with a warning, and its row's ``dtype`` says so. A configuration that several sweeps share (the
base) is trained once per seed. ``--jobs N`` trains N configurations at once (processes), on
``device`` (``"cuda"``: several processes share the GPU; TF32 is switched off). Each finished
configuration is kept in the run's checkpoint, and after every epoch the training state of each in
progress in ``in_progress/`` of the run folder, so a resumed run skips the finished ones and
continues the others. The fully connected DKM has no normalisation, top or convolutional inducing
counts: it runs the ``nu`` and ``likelihood`` sweeps only.

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

import shutil
import statistics
from typing import Any

from zonal.experiments._dkm_mnist_data import prepare_inputs
from zonal.experiments._dkm_mnist_models import build_model
from zonal.experiments._dkm_mnist_paper import plot_accuracy, seed_paper
from zonal.experiments._dkm_mnist_sweeps import (
    SWEEPS,
    Configuration,
    check_config,
    inducing_label,
    sweep_configurations,
)
from zonal.experiments._dkm_mnist_training import (
    IN_PROGRESS_DIR,
    TrainingUnit,
    run_images,
    train_unit,
)
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
    "device": "cpu",  # of the model and the data: "cpu", "cuda", "cuda:1", ...
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
    "of one block per stage (seed: 128/256/512, three blocks per stage) in float32 (seed: float64; "
    "a configuration that diverges in float32 is trained again in float64), "
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
    """Train and evaluate every configuration of the sweeps (``--jobs`` of them at once, each kept
    in the checkpoint when it is done, the ones in progress in files of their own after every
    epoch), then tabulate them per sweep."""
    planned = sweep_configurations(config)  # refuse bad settings (the device too) before any work
    state = run_dir.load_checkpoint() or {"done": {}, "epochs": {}}
    configurations = list({conf.key: conf for *_, conf in planned}.values())
    units = [
        TrainingUnit(config, configuration, str(run_dir.path)) for configuration in configurations
    ]
    pending = [unit for unit in units if unit.configuration.key not in state["done"]]
    try:
        for unit, (result, epochs) in run_dir.map_units(
            train_unit, pending, finished=len(units) - len(pending), unit="model"
        ):
            state["done"][unit.configuration.key] = result
            state["epochs"][unit.configuration.key] = epochs
            state["rows"] = result_rows(config, planned, state["done"])  # the report's, so far
            run_dir.save_checkpoint(state)
    finally:
        run_images.cache_clear()  # the images of this process (jobs = 1), not kept past the run
    shutil.rmtree(run_dir.path / IN_PROGRESS_DIR, ignore_errors=True)  # every configuration done

    rows = result_rows(config, planned, state["done"])
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
        plot_accuracy(run_dir, nu_rows, f"{config['architecture']} DKM (zonal)")
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


def result_rows(
    config: dict[str, Any],
    planned: list[tuple[str, str, Configuration]],
    done: dict[str, dict[str, Any]],
) -> list[dict[str, Any]]:
    """One row per planned (sweep, setting, configuration) whose configuration is ``done``: the
    configuration, its seed, its test metrics and the precision it trained in (``results.csv``;
    ``train_unit`` retrains a diverged float32 configuration in float64)."""
    return [
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
            "dtype": config["dtype"],
            **done[configuration.key],
        }
        for sweep, setting, configuration in planned
        if configuration.key in done
    ]


__all__ = [
    "CONV_CONVERGED",
    "CONV_FULL",
    "CONV_QUICK",
    "DIGITS",
    "FULL",
    "QUICK",
    "Configuration",
    "build_model",
    "prepare_inputs",
    "result_rows",
    "run_dkm_mnist",
]
