"""The network stage of the ``adgp`` recipe (seed 000 sec. 5): a network of the activated DGP's
architecture trained by the likelihood's own loss, then copied into the DGP, whose posterior mean
it then is.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from typing import Any

import torch

from zonal.models import ActivatedDGP
from zonal.models.activated_dgp import LOSSES, noise_from_network, train_network
from zonal.models.training import TrainingControl
from zonal.tabular.recipes.parts import SCHEDULE
from zonal.tabular.recipes.registry import Fit, TrainingInterrupted

#: arc-cosine variance of the activated DGP's layers when the network is copied in (``uci-dgp``)
ADGP_KERNEL_VARIANCE = 1e-3
#: arc-cosine variance of a classifier's last layer when the network is copied in: the prior's
#: unit scale on the latent (probit or softmax) axis. A classifier has no noise to carry its
#: predictive variance, and at ``ADGP_KERNEL_VARIANCE`` its latent variance stayed near 0 (the
#: ELBO stage kept its start under ``zonal fit``'s budget): on ionosphere split 1 (316 rows),
#: latent variance 0.007, test log likelihood -41 per row where the activated SVGP had -0.32
ADGP_CLASSIFIER_OUTPUT_VARIANCE = 1.0
#: q(u) covariance scale of the activated DGP's layers when the network is copied in
ADGP_INITIAL_SCALE = 1e-2
#: share of an activated DGP's time budget that its network stage may use (the rest goes to
#: the ELBO stage, whose steps cost about ten times a network step). Under ``zonal fit``'s budget
#: the network decides the predictive mean: on airfoil (45 s) a share of 3/4 reached validation
#: log likelihood -0.13 where 1/3 reached -0.21 (the ELBO stage then kept its starting state);
#: a network that stops improving ends its stage early and leaves the time to the ELBO
NETWORK_SHARE = 0.8
#: the network loss of the activated DGP's first stage under each likelihood: MSE, the probit
#: cross-entropy of GPyTorch's BernoulliLikelihood, the softmax cross-entropy
NETWORK_LOSSES = {"gaussian": "mse", "bernoulli": "bce", "softmax": "ce"}
#: the dtype the network stage trains in: a network's Adam steps, not a harmonic, an eigenvalue
#: or a Cholesky factor (the DGP it is copied into, its ELBO stage and its predictions stay in the
#: inputs' float64). A float32 step took 0.60-0.63 of a float64 one on one thread
#: (``benchmarks/network_dtype.py``); the network's outputs agree with float64's to about 1e-6
#: of their scale
NETWORK_DTYPE = torch.float32


def copy_variances(num_layers: int, loss: str) -> list[float]:
    """The layers' arc-cosine variances at the copy, first to last: ``ADGP_KERNEL_VARIANCE``, and
    for a classifier (a loss other than MSE) ``ADGP_CLASSIFIER_OUTPUT_VARIANCE`` in the last
    layer."""
    last = ADGP_KERNEL_VARIANCE if loss == "mse" else ADGP_CLASSIFIER_OUTPUT_VARIANCE
    return [ADGP_KERNEL_VARIANCE] * (num_layers - 1) + [last]


def network_stage(
    model: ActivatedDGP,
    spec: Mapping[str, Any],
    x: torch.Tensor,
    y: torch.Tensor,
    control: TrainingControl,
) -> None:
    """Train a network of the activated DGP's architecture in ``NETWORK_DTYPE`` (``steps`` Adam
    steps on the loss of ``NETWORK_LOSSES`` in the phases of ``SCHEDULE``: the learning rate, then
    1/5 and 1/25 of it, each phase starting from the previous phase's best validation state and
    keeping its own), then copy its weights, in the inputs' dtype, in: the DGP's posterior mean
    is then the network (``ActivatedDGP.from_torch_module``), its layers' arc-cosine variances
    ``copy_variances`` and q covariances ``ADGP_INITIAL_SCALE``^2 I, and a Gaussian noise the
    network's training MSE. The phases together may use ``NETWORK_SHARE`` of the time left,
    each its fraction of the network's time left. Ctrl-C copies the best network so far in and
    raises ``TrainingInterrupted``.

    The phases: at the full rate the validation loss plateaus and early stopping ends the stage
    (airfoil and compactiv at 60 s ended there whatever the share); the lower rates go on from the
    best state (validation log likelihood -1.99 against -2.02 on airfoil, -2.28 against -2.29 on
    compactiv, in target units, ``benchmarks/fit_default.py`` split 0). With
    ``network_early_stopping`` False in the spec the first phase runs to the end of its share (its
    best validated state kept): a network that must find a few relevant inputs among many can sit
    on a plateau for longer than the patience before its validation loss falls again."""
    loss = NETWORK_LOSSES[spec.get("likelihood", "gaussian")]
    copied = model.network_like(spec["seed"])  # in the inputs' dtype: what is copied in
    network = copy.deepcopy(copied).to(NETWORK_DTYPE)  # what trains
    x_network, y_network = _in_network_dtype(x), _in_network_dtype(y)  # [N, D], [N]
    score = None
    if control.validation is not None:
        x_valid, y_valid = (_in_network_dtype(tensor) for tensor in control.validation)

        def score(module: torch.nn.Module) -> float:
            with torch.no_grad():
                return -float(LOSSES[loss](module(x_valid), y_valid))

    interrupted = None
    network_end = time.monotonic() + NETWORK_SHARE * control.remaining()  # inf: no deadline
    done = 0
    try:
        for phase, (fraction, factor) in enumerate(SCHEDULE):
            last = phase == len(SCHEDULE) - 1
            count = spec["steps"] - done if last else round(fraction * spec["steps"])
            if count <= 0:
                continue
            remaining = control.remaining()
            share = fraction / sum(later for later, _ in SCHEDULE[phase:])
            if math.isfinite(remaining) and remaining > 0:
                share *= max(0.0, min(1.0, (network_end - time.monotonic()) / remaining))
            early_stopping = phase > 0 or spec.get("network_early_stopping", True)
            with control.watch(network, count, stage=f"network {phase + 1}", share=share,
                               score=score, early_stopping=early_stopping) as watch:  # fmt: skip
                train_network(network, x_network, y_network, loss=loss, num_steps=count,
                              batch_size=spec["batch_size"], lr=spec["learning_rate"] * factor,
                              seed=spec["seed"] + phase, callback=watch)  # fmt: skip
            done += count
    except KeyboardInterrupt as error:
        interrupted = error
    with torch.no_grad():  # the trained weights; the activation's coefficients stay exact
        for target, trained in zip(copied.parameters(), network.parameters(), strict=True):
            target.copy_(trained)
    model.from_torch_module(
        copied,
        kernel_variance=copy_variances(len(model.layers), loss),
        variational_scale=ADGP_INITIAL_SCALE,
    )
    if loss == "mse":
        noise_from_network(model.likelihood, copied, x, y)
    if interrupted is not None:
        raise TrainingInterrupted(Fit(model, dict(spec), math.nan)) from interrupted


def _in_network_dtype(tensor: torch.Tensor) -> torch.Tensor:
    """A floating tensor (inputs, regression targets) in ``NETWORK_DTYPE``; class indices as
    they are."""
    return tensor.to(NETWORK_DTYPE) if tensor.is_floating_point() else tensor
