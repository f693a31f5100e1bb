"""Seed 002 table 1 on a stand-in: binary classification of MAGIC gamma-telescope events with
sparse against complete spherical-harmonic features and a 5-layer network.

Seed 002 sec. 6.1 classifies SUSY (5 million events, 8 kinematic inputs; not obtainable here) and
reports the test AUC of an SVGP with sparse harmonic features (7 frequencies x at most 100 phases,
about 500 features; 0.870), of complete harmonics (5 frequencies, about 500 features; 0.864) and of
Baldi et al.'s 5-layer network (0.867), and that the sparse features reached the complete ones'
AUC "in half the iterations". MAGIC (19,020 events, 10 image parameters, gamma vs hadron; the
registry's ``magic``) stands in for SUSY: the numbers sit beside the seed's as a stand-in, not as a
reproduction.

Protocol. The test set is a random ``test_fraction`` (10%) of the rows, fixed by ``data_seed`` (the
seed's "last 10%" of SUSY's unordered file; MAGIC's file is sorted by class); inputs are
standardised with the training rows' statistics. Both GPs are SVGPs with a Bernoulli (probit)
likelihood, whitened q(u) with a full covariance, the homogeneous continuous-depth kernel (seed 002
eq. 15, truncated at ``kernel_degree``, beta starting at ``initial_beta`` (default d, the ReLU
NTK's decay; ``seed002_common.continuous_depth_kernel``) and learned by the ELBO with the output
scale), on the sphere embedding [x, 1] / ||[x, 1]||. Sparse features: degrees 0..6 with at most 100
learned phases each (1 + 11 + 65 + 4 x 100 = 477 features in d = 11); complete features: every
harmonic of degrees 0..``complete_frequencies``-1 (4 frequencies, 352 features: five would be 1,287
in d = 11; the seed's five in d = 9 are 660). Adam (``learning_rate``) on minibatches of
``batch_size`` for ``steps`` steps. The network (Baldi et al. 2014): ``network_layers`` hidden tanh
layers of width ``network_width``, trained by the probit cross-entropy (so that its output f gives
p = Phi(f), the GP's link) with Adam. With ``network_validation_fraction`` > 0 (not the seed's
protocol) a seeded share of the training rows is held out of the network's training, and the
network keeps its state of best validation AUC among those checked every ``eval_every`` steps.

Metrics on the test set: AUC (Mann-Whitney) of p(y = 1 | x) and the test log likelihood per
event, mean log p(y_i | x_i). The GPs' test AUC is traced every ``eval_every`` steps (off the
clock); ``steps_to_complete_auc`` is the first traced step at which the sparse model reaches the
complete model's final AUC (beside the complete model's own ``steps`` total).

Outputs: ``results.csv`` (one row per model and repeat), ``traces.csv`` and ``auc_trace.png`` (test
AUC against steps), a checkpoint after every fit; a resumed run skips the fits it has.
"""

from __future__ import annotations

import functools
import statistics
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

if TYPE_CHECKING:
    from zonal.experiments._dgp_common import Stopwatch
    from zonal.models import SVGP

MODELS = ("sparse", "complete", "network")
QUICK: dict[str, Any] = {
    "seed": 0,
    "dataset": "magic",  # or "synthetic" (a small made-up problem, for tests)
    "data_seed": 0,
    "test_fraction": 0.1,
    "models": list(MODELS),
    "repeats": 1,
    "sparse_frequencies": 7,
    "max_phases": 100,
    "complete_frequencies": 4,
    "kernel_degree": 10,
    "initial_beta": None,  # None: d, the ReLU NTK's decay
    "input_scales": False,  # True: the GPs learn one scale per input (ARD; not the seed's)
    "steps": 400,
    "batch_size": 1024,
    "learning_rate": 0.01,
    "eval_every": 50,
    "network_layers": 5,
    "network_width": 300,
    "network_steps": 800,
    "network_learning_rate": 0.001,
    # > 0: the network trains on the other training rows and keeps its state of best AUC on this
    # share of them, checked every eval_every steps (early stopping; the seed's network has none)
    "network_validation_fraction": 0.0,
}
# To convergence on one core in about two hours (estimated from the quick preset's 268 s): 3
# repeats, 3000 SVGP steps (about 180 epochs of MAGIC's 17,118 training rows), 6000 network steps.
CONVERGED: dict[str, Any] = {
    "repeats": 3,
    "steps": 3000,
    "eval_every": 250,
    "network_steps": 6000,
}
FULL: dict[str, Any] = {
    "repeats": 3,
    "steps": 10000,
    "eval_every": 250,
    "network_steps": 20000,
}
PAPER: dict[str, dict[str, Any]] = {
    "seed 002 table 1 (SUSY; MAGIC here is a stand-in)": {
        "sparse.auc": 0.870,
        "complete.auc": 0.864,
        "network.auc": 0.867,
    }
}


# ---------------------------------------------------------------------------------------- data
def load_data(config: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """(x_train, y_train, x_test, y_test): standardised inputs float64, labels 0/1 float64."""
    from zonal.datasets import Standardizer, load_dataset, train_test_split

    if config["dataset"] == "synthetic":
        generator = np.random.default_rng(config["data_seed"])
        x = generator.standard_normal((400, 10))
        y = (np.sin(2 * x[:, 0]) + x[:, 1] * x[:, 2] > 0).astype(np.int64)
    else:
        data = load_dataset(config["dataset"])
        x, y = data.X, data.y
    train, test = train_test_split(len(x), config["test_fraction"], config["data_seed"])
    scaler = Standardizer.fit(x[train])
    return tuple(
        torch.as_tensor(array, dtype=torch.float64)
        for array in (scaler.transform(x[train]), y[train], scaler.transform(x[test]), y[test])
    )


# ---------------------------------------------------------------------------------------- models
def build_gp(kind: str, input_dim: int, config: dict[str, Any], seed: int) -> SVGP:
    """The SVGP with ``kind`` features, the continuous-depth kernel and a Bernoulli likelihood."""
    from gpytorch.likelihoods import BernoulliLikelihood

    from zonal.experiments.seed002_common import continuous_depth_kernel, harmonic_features
    from zonal.geometry import SphereEmbedding
    from zonal.models import SVGP

    ambient_dim = input_dim + 1
    kernel = continuous_depth_kernel(ambient_dim, config["kernel_degree"], config["initial_beta"])
    frequencies = config[f"{kind}_frequencies"]
    features = harmonic_features(kind, ambient_dim, frequencies, config["max_phases"], seed)
    embedding = None
    if config["input_scales"]:  # [s * x, 1] / ||.|| with one learned s per input
        scales = torch.ones(input_dim, dtype=torch.float64)
        embedding = SphereEmbedding(input_scales=scales, learn_input_scales=True)
    return SVGP(kernel, features, input_dim, likelihood=BernoulliLikelihood(),
                input_map=embedding)  # fmt: skip


def build_network(input_dim: int, config: dict[str, Any]) -> torch.nn.Module:
    """``network_layers`` tanh layers of ``network_width`` units and a linear output f [N]."""
    layers: list[torch.nn.Module] = []
    width = input_dim
    for _ in range(config["network_layers"]):
        layers += [torch.nn.Linear(width, config["network_width"]), torch.nn.Tanh()]
        width = config["network_width"]
    layers += [torch.nn.Linear(width, 1), torch.nn.Flatten(0)]
    return torch.nn.Sequential(*layers).double()


@torch.no_grad()
def gp_scores(model: SVGP, x: torch.Tensor, y: torch.Tensor) -> tuple[np.ndarray, float]:
    """(p(y = 1 | x) [T], mean test log likelihood) of a Bernoulli SVGP."""
    model.eval()
    probability = model.likelihood(model.latent_distribution(x)).probs  # [T]
    density = model.log_predictive_density(x, y)  # [T]
    model.train()
    return probability.numpy(), float(density.mean())


@torch.no_grad()
def network_scores(network: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple:
    """(Phi(f(x)) [T], mean log Phi((2y - 1) f(x)))."""
    output = network(x)  # [T]
    density = torch.special.log_ndtr((2 * y - 1) * output)  # [T]
    return torch.special.ndtr(output).numpy(), float(density.mean())


def fit_one(
    model_name: str, data: tuple[torch.Tensor, ...], config: dict[str, Any], seed: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Train one model; (its test metrics, its AUC trace)."""
    from zonal.experiments._convergence import curve_summary
    from zonal.experiments._dgp_common import Stopwatch
    from zonal.experiments.seed002_common import roc_auc
    from zonal.models import fit_svgp

    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)
    clock = Stopwatch()
    trace: list[dict[str, Any]] = []
    if model_name == "network":
        return fit_network(data, config, seed, clock)[0], trace
    model = build_gp(model_name, x_train.shape[1], config, seed)

    def evaluate() -> float:
        return roc_auc(gp_scores(model, x_test, y_test)[0], y_test)

    losses = timed_adam(
        fit_svgp, model, (x_train, y_train), config["steps"], config["learning_rate"],
        config, seed, clock, evaluate,
        lambda step, seconds, value: trace.append({"step": step, "seconds": seconds, "auc": value}),
    )  # fmt: skip
    probability, tll = gp_scores(model, x_test, y_test)
    return {
        "auc": roc_auc(probability, y_test),
        "tll": tll,
        "num_inducing": model.features.num_inducing,
        "beta": float(model.covar_module.base_kernel.beta.detach().reshape(())),
        "train_seconds": clock.read(),
        **curve_summary(losses),
    }, trace


def timed_adam(
    fit: Callable[..., list[float]],
    module: torch.nn.Module,
    data: tuple[torch.Tensor, torch.Tensor],
    steps: int,
    learning_rate: float,
    config: dict[str, Any],
    seed: int,
    clock: Stopwatch,
    evaluate: Callable[[], float] | None,
    on_evaluate: Callable[[int, float, float], None] | None,
) -> list[float]:
    """``fit(module, x, y, ...)`` (``fit_svgp`` or ``train_network``) for ``steps`` Adam steps on
    minibatches of ``batch_size`` on ``clock``, ``evaluate`` off the clock every ``eval_every``
    steps (``zonal.experiments._dgp_common.timed``); the losses."""
    from zonal.experiments._dgp_common import timed

    return timed(
        lambda callback: fit(module, *data, num_steps=steps, batch_size=config["batch_size"],
                             lr=learning_rate, seed=seed, callback=callback),
        steps, clock=clock, evaluate=evaluate, every=config["eval_every"], on_evaluate=on_evaluate,
    )  # fmt: skip


def fit_network(
    data: tuple[torch.Tensor, ...], config: dict[str, Any], seed: int, clock: Stopwatch
) -> tuple[dict[str, Any], torch.nn.Module]:
    """Train the network (early-stopped on a held-out share of the training rows when
    ``network_validation_fraction`` > 0, drawn by ``train_test_split`` with ``seed``); (its test
    metrics with the step and validation AUC of the state it keeps, the network)."""
    import copy

    from zonal.datasets import train_test_split
    from zonal.experiments._convergence import curve_summary
    from zonal.experiments.seed002_common import roc_auc
    from zonal.models import train_network

    x_train, y_train, x_test, y_test = data
    network = build_network(x_train.shape[1], config)
    fraction = config["network_validation_fraction"]
    best: dict[str, Any] = {"auc": -1.0, "state": None, "step": 0}
    evaluate = on_evaluate = None
    if fraction > 0:
        fit_rows, valid_rows = train_test_split(len(x_train), fraction, seed)
        x_valid, y_valid = x_train[valid_rows], y_train[valid_rows]  # [V, D], [V]
        x_train, y_train = x_train[fit_rows], y_train[fit_rows]

        def evaluate() -> float:
            with torch.no_grad():
                return roc_auc(torch.special.ndtr(network(x_valid)).numpy(), y_valid)

        def on_evaluate(step: int, seconds: float, auc: float) -> None:
            if auc > best["auc"]:
                best.update(auc=auc, state=copy.deepcopy(network.state_dict()), step=step)

    losses = timed_adam(
        functools.partial(train_network, loss="bce"), network, (x_train, y_train),
        config["network_steps"], config["network_learning_rate"], config, seed, clock, evaluate,
        on_evaluate,
    )  # fmt: skip
    if best["state"] is not None:
        network.load_state_dict(best["state"])
    with torch.no_grad():
        probability, tll = network_scores(network, x_test, y_test)
    return {
        "auc": roc_auc(probability, y_test),
        "tll": tll,
        "num_inducing": 0,
        "beta": float("nan"),
        "train_seconds": clock.read(),
        "best_step": best["step"] if fraction > 0 else config["network_steps"],
        "validation_auc": best["auc"] if fraction > 0 else float("nan"),
        **curve_summary(losses),
    }, network


# ---------------------------------------------------------------------------------------- run
def unit_seed(config: dict[str, Any], model: str, repeat: int) -> int:
    return zlib.crc32(f"{config['seed']}/{model}/{repeat}".encode())


def fit_unit(
    item: tuple[dict[str, Any], tuple[str, int]],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One (model, repeat) of the run with ``config``: its test metrics and AUC trace.
    Module-level and self-contained (it loads its own data), so that ``--jobs`` workers can run it."""
    config, (model, repeat) = item
    return fit_one(model, load_data(config), config, unit_seed(config, model, repeat))


def steps_to_complete_auc(
    rows: list[dict[str, Any]], traces: list[dict[str, Any]]
) -> dict[tuple[str, int], int | None]:
    """Per (GP model, repeat): the first traced step at which its test AUC reached the complete
    features' final AUC of the same repeat (seed 002: the sparse features got there "in half the
    iterations"); None where it never did."""
    from zonal.experiments.seed002_common import first_step_reaching

    found: dict[tuple[str, int], int | None] = {}
    for row in rows:
        if row["model"] != "complete":
            continue
        for model in ("sparse", "complete"):
            trace = [t for t in traces if (t["model"], t["repeat"]) == (model, row["repeat"])]
            if trace:
                found[model, row["repeat"]] = first_step_reaching(trace, "auc", row["auc"])
    return found


def summarise(
    rows: list[dict[str, Any]], traces: list[dict[str, Any]], config: dict[str, Any]
) -> dict[str, Any]:
    """Mean (std) AUC and TLL per model; steps for the GPs to reach complete's final AUC."""
    metrics: dict[str, Any] = {}
    for model in config["models"]:
        found = [r for r in rows if r["model"] == model]
        if not found:
            continue
        entry: dict[str, Any] = {"repeats": len(found), "num_inducing": found[0]["num_inducing"]}
        for key in ("auc", "tll", "train_seconds"):
            values = [r[key] for r in found]
            entry[key] = statistics.fmean(values)
            entry[f"{key}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        metrics[model] = entry
    reached = steps_to_complete_auc(rows, traces)
    if any(model == "sparse" for model, _ in reached):
        metrics["steps_to_complete_auc"] = {
            model: [
                reached[model, repeat] if reached[model, repeat] is not None else "not reached"
                for repeat in range(config["repeats"])
                if (model, repeat) in reached
            ]
            for model in ("sparse", "complete")
        }
    return metrics


def _check_config(config: dict[str, Any]) -> None:
    """A ``ValueError`` naming an unknown model, before the run's folder is made."""
    unknown = sorted(set(config["models"]) - set(MODELS))
    if unknown:
        raise ValueError(f"unknown models {unknown}; choose from {MODELS}")


@register_experiment(
    "sparse-phases-magic",
    validate=_check_config,
    summary="seed 002 table 1 on MAGIC (stand-in for SUSY): sparse vs complete harmonic features "
    "(continuous-depth kernel, Bernoulli SVGP) vs a 5-layer network; AUC, TLL, steps to the "
    "complete features' AUC",
    quick=QUICK,
    converged=CONVERGED,
    full=FULL,
    differences={
        "converged": "stand-in data: MAGIC for SUSY; reduced: 3 repeats, 3000 SVGP steps "
        "(about 180 epochs), 6000 network steps",
        "quick": "stand-in data: MAGIC (19,020 rows, 10 inputs) for SUSY; reduced: 1 repeat, 400 "
        "steps (not converged)",
        "full": "stand-in data: MAGIC for SUSY (5 million rows, not obtainable here)",
    },
    paper=PAPER,
    headline=("sparse.auc", "complete.auc", "network.auc"),
    cpu_hours={"converged": 0.9},  # measured: 1,583 s wall with --jobs 2 on 2 cores
)
def run_seed002_magic(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Fit every (model, repeat), checkpointing after each; then the table, traces and figure."""
    _check_config(config)
    todo = [(model, repeat) for repeat in range(config["repeats"]) for model in config["models"]]
    state = run_dir.load_checkpoint() or {"rows": [], "traces": []}
    rows, traces = list(state["rows"]), list(state["traces"])
    done = {(r["model"], r["repeat"]) for r in rows}
    pending = [(config, unit) for unit in todo if unit not in done]
    for (_, (model, repeat)), (result, trace) in run_dir.map_units(
        fit_unit, pending, finished=len(todo) - len(pending), unit="fit"
    ):
        rows.append({"model": model, "repeat": repeat, **result})
        traces += [{"model": model, "repeat": repeat, **point} for point in trace]
        run_dir.save_checkpoint({"rows": rows, "traces": traces})
    # In the units' order, whatever order ``--jobs`` workers finished them in.
    order = {unit: position for position, unit in enumerate(todo)}
    rows.sort(key=lambda r: order[r["model"], r["repeat"]])
    traces.sort(key=lambda t: (order[t["model"], t["repeat"]], t["step"]))
    reached = steps_to_complete_auc(rows, traces)
    for row in rows:  # "" where never reached (or not a GP)
        step = reached.get((row["model"], row["repeat"]))
        row["steps_to_complete_auc"] = "" if step is None else step
    run_dir.save_table("results.csv", rows)
    if traces:
        run_dir.save_table("traces.csv", traces)
        _plot(run_dir, traces)
    return summarise(rows, traces, config)


def _plot(run_dir: RunDirectory, traces: list[dict[str, Any]]) -> None:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    figure = Figure(figsize=(4.5, 3.2))
    axis = figure.subplots()
    for model, repeat in sorted({(t["model"], t["repeat"]) for t in traces}):
        points = [t for t in traces if (t["model"], t["repeat"]) == (model, repeat)]
        colour = "C0" if model == "sparse" else "C1"
        axis.plot(
            [p["step"] for p in points],
            [p["auc"] for p in points],
            color=colour,
            label=model if repeat == 0 else None,
        )
    axis.set_xlabel("Adam steps")
    axis.set_ylabel("test AUC")
    axis.legend(frameon=False, fontsize=7)
    figure.suptitle("MAGIC (stand-in for SUSY, seed 002 table 1)", fontsize=8)
    run_dir.save_figure("auc_trace.png", figure)


__all__ = ["FULL", "MODELS", "PAPER", "QUICK", "run_seed002_magic", "summarise"]
