"""Banana: a network and the activated DGP it initialises, 1 and 3 layers (seed 000 sec. 5.1, fig. 5).

Seed 000 fig. 5 (and seed 001 ch. 4): single- and three-layer activated DGPs with the first-order
arc-cosine kernel, Softplus inducing features (N-tilde = 10) and 100 inducing variables per layer,
whose posterior mean is a network with 100 hidden units per layer. Stage 1 trains that network by
binary cross-entropy; stage 2 copies it into the DGP (``ActivatedDGP.from_torch_module``) and trains
every parameter by the ELBO. The seed's claim: the networks are very confident far from the data
(p(y | x) close to 0 or 1), the DGPs less so (p close to 0.5 away from the data).

The link. GPyTorch's ``BernoulliLikelihood`` is the probit, p = Phi(f) (under q(f) = N(mu, s^2):
p = Phi(mu / sqrt(1 + s^2))). Stage 1 therefore minimises the *probit* cross-entropy
-y log Phi(f) - (1 - y) log Phi(-f) of the network output f, and the network's probability is
Phi(f): the network and the copied DGP then predict the same p where the DGP's variance vanishes,
and any difference in the maps is what the ELBO stage did (a logistic network copied into a probit
DGP would be sharper by a factor of about 1.7 from the start).

Protocol here. Inputs are standardised with the training rows; the maps span the data's bounding
box widened by ``grid_margin`` (standardised units) on each side. The hidden GP layers of the
three-layer model have ``hidden_width`` outputs (the seed does not say; 5 as in its sec. 5.2). The
arc-cosine variance of every layer starts at ``kernel_variance`` (1, GPyTorch's default and the
prior's own scale; ``uci_dgp`` starts it at 0.01 so that the copied DGP predicts like its network,
which here would leave the DGP as confident as the network for hundreds of steps: with the mean
fixed, the KL term falls as 1 / variance, so the ELBO raises it, slowly, at lr 0.01) and the
whitened q(v) at N(m, initial_scale^2 I) after the copy. In d = 3 the 100 first-layer
features span at most the 69 harmonics of levels {0, 1, 2, 4, 6, 8, 10}, so that layer's Kuu is
singular and factorised with jitter (as in the seed's software); the copy is exact all the same.

Metric: "far from the data" is the ring of grid points at least ``ring_margin`` (standardised
units) outside the data's bounding box; ``far_confidence`` is the mean |p - 0.5| there (0: no
opinion, 0.5: certain). Test accuracy and log likelihood are on held-out rows. Outputs:
``banana_dgp.png`` (the four p(y = 1 | x) maps), ``confidence.csv``, a checkpoint after every
trained model (network-1, DGP-1, network-3, DGP-3), so an interrupted run resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

if TYPE_CHECKING:
    from zonal.models import ActivatedDGP

QUICK: dict[str, Any] = {
    "seed": 0,
    "dataset": "banana",  # or "synthetic" (two moons, for tests)
    "num_train": 400,
    "num_test": 1000,
    "depths": [1, 3],
    "num_inducing": 100,
    "hidden_width": 5,
    "truncation_level": 10,  # N-tilde
    "batch_size": 1024,
    "learning_rate": 0.01,
    "plateau_factor": 0.9,
    "plateau_patience": 10,
    "network_steps": 1500,
    "elbo_steps": 500,
    "train_samples": 1,
    "eval_samples": 32,
    "kernel_variance": 1.0,
    "initial_scale": 0.01,
    "grid_size": 60,
    "grid_margin": 3.0,  # the maps extend this far beyond the data's bounding box
    "ring_margin": 1.0,  # "far from the data": at least this far outside the bounding box
}
FULL: dict[str, Any] = {
    "num_train": 4800,
    "num_test": 500,
    "network_steps": 5000,
    "elbo_steps": 5000,
    "eval_samples": 64,
    "grid_size": 120,
}
PAPER: dict[str, dict[str, Any]] = {
    "seed 000 figure 5": {
        # "the neural networks make very confident decisions, even far away from the data ...
        # [the ELBO] leads, in both situations, to a more calibrated model" (sec. 5.1)
        "dgp_less_confident_far.1": True,
        "dgp_less_confident_far.3": True,
    },
}


# ---------------------------------------------------------------------------------------- data
def load_classification(config: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """(x [N, 2] float64, y [N] float64 in {0, 1}) of banana or of two moons (``"synthetic"``)."""
    if config["dataset"] == "synthetic":
        from zonal.datasets import two_moons

        data = two_moons(config["num_train"] + config["num_test"], noise=0.15, seed=config["seed"])
    else:
        from zonal.datasets import load_dataset

        data = load_dataset(config["dataset"])
    return torch.as_tensor(data.X, dtype=torch.float64), torch.as_tensor(data.y).to(torch.float64)


def split_data(
    config: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Disjoint random train and test rows, standardised with the training rows' statistics:
    (x_train [N, 2], y_train [N], x_test [T, 2], y_test [T])."""
    from zonal.datasets import Standardizer

    x, y = load_classification(config)
    num_train, num_test = config["num_train"], config["num_test"]
    if num_train < 1 or num_test < 1 or num_train + num_test > len(x):
        raise ValueError(
            f"num_train + num_test must be positive and at most {len(x)}, got "
            f"{num_train} + {num_test}"
        )
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(config["seed"]))
    train, test = order[:num_train], order[num_train : num_train + num_test]
    scaler = Standardizer.fit(x[train])
    return scaler.transform(x[train]), y[train], scaler.transform(x[test]), y[test]


def make_grid(
    x_train: torch.Tensor, config: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The map's grid: (axis_0 [G], axis_1 [G], points [G^2, 2], far [G^2] bool), points in the
    data's bounding box widened by ``grid_margin``; ``far`` marks the ring at least
    ``ring_margin`` outside the box (distance to the box, standardised units)."""
    low, high = x_train.min(0).values, x_train.max(0).values  # [2]
    margin, size = config["grid_margin"], config["grid_size"]
    axis_0 = torch.linspace(float(low[0]) - margin, float(high[0]) + margin, size)
    axis_1 = torch.linspace(float(low[1]) - margin, float(high[1]) + margin, size)
    mesh_0, mesh_1 = torch.meshgrid(axis_0.double(), axis_1.double(), indexing="xy")  # [G, G]
    points = torch.stack([mesh_0.reshape(-1), mesh_1.reshape(-1)], dim=-1)  # [G^2, 2]
    outside = (low - points).clamp(min=0) + (points - high).clamp(min=0)  # [G^2, 2]
    far = outside.norm(dim=-1) >= config["ring_margin"]  # [G^2]
    return axis_0.double(), axis_1.double(), points, far


# ---------------------------------------------------------------------------------------- models
def build_model(depth: int, config: dict[str, Any]) -> ActivatedDGP:
    """The ``depth``-layer activated DGP with a Bernoulli (probit) likelihood."""
    from gpytorch.likelihoods import BernoulliLikelihood

    from zonal.experiments._dgp_common import build_activated_dgp

    return build_activated_dgp(
        2,
        depth,
        BernoulliLikelihood(),
        num_inducing=config["num_inducing"],
        hidden_width=config["hidden_width"],
        truncation_level=config["truncation_level"],
        mean="constant",
        seed=config["seed"] + depth,
    )


def fit_depth(
    depth: int,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    config: dict[str, Any],
    state: dict[str, Any],
    save: Any,
) -> tuple[torch.nn.Module, Any]:
    """Stage 1 (network, probit cross-entropy) and stage 2 (ELBO) for one depth; each stage is
    skipped if ``state`` already holds its result, and ``save()`` is called after each."""
    from zonal.experiments._dgp_common import Schedule, train_elbo, train_network_stage

    x_train, y_train, _, _ = data
    schedule = Schedule.from_config(config)
    model = build_model(depth, config)
    network = model.network_like(config["seed"] + depth)
    network_key, dgp_key = f"network-{depth}", f"dgp-{depth}"
    if network_key in state:
        network.load_state_dict(state[network_key])
    else:
        generator = torch.Generator().manual_seed(config["seed"] * 100 + depth)
        losses = train_network_stage(
            network, x_train, y_train, "bce", config["network_steps"], schedule, generator
        )
        state[network_key] = {k: v.detach().clone() for k, v in network.state_dict().items()}
        state[f"{network_key}-loss"] = losses[-1]
        save()
    if dgp_key in state:
        model.load_state_dict(state[dgp_key])
    else:
        model.from_torch_module(
            network,
            kernel_variance=config["kernel_variance"],
            variational_scale=config["initial_scale"],
        )
        torch.manual_seed(config["seed"] * 100 + depth)  # the layers' samples
        generator = torch.Generator().manual_seed(config["seed"] * 100 + depth + 50)
        losses = train_elbo(
            model,
            x_train,
            y_train,
            config["elbo_steps"],
            schedule,
            generator,
            num_samples=config["train_samples"],
        )
        state[dgp_key] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        state[f"{dgp_key}-loss"] = losses[-1]
        save()
    return network, model


def evaluate(probability: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Accuracy and mean log likelihood of p(y = 1 | x) [N] against labels [N] in {0, 1}."""
    correct = ((probability > 0.5).to(labels.dtype) == labels).double().mean()
    likelihood = torch.where(labels == 1, probability, 1 - probability).clamp_min(1e-12).log()
    return {"accuracy": float(correct), "log_likelihood": float(likelihood.mean())}


# ---------------------------------------------------------------------------------------- run
@register_experiment(
    "banana-dgp",
    summary="Banana: Softplus networks (probit cross-entropy) vs the activated DGPs they "
    "initialise (then ELBO), 1 and 3 layers; confidence far from the data (seed 000 fig. 5)",
    quick=QUICK,
    full=FULL,
    paper=PAPER,
    headline=(
        "far_confidence.network-1",
        "far_confidence.dgp-1",
        "far_confidence.network-3",
        "far_confidence.dgp-3",
    ),
)
def run_banana_dgp(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Train the networks and DGPs (checkpoint after each), map p(y = 1 | x), measure confidence."""
    from zonal.experiments._dgp_common import class_probability

    depths = [int(depth) for depth in config["depths"]]
    if not depths or any(depth < 1 for depth in depths):
        raise ValueError(f"depths must be positive integers, got {depths}")
    data = split_data(config)
    x_train, y_train, x_test, y_test = data
    axis_0, axis_1, grid, far = make_grid(x_train, config)
    state = run_dir.load_checkpoint() or {}

    def save() -> None:
        run_dir.save_checkpoint(state)

    maps: dict[str, torch.Tensor] = {}
    rows: list[dict[str, Any]] = []
    for depth in run_dir.progress(depths, unit="depth"):
        network, model = fit_depth(depth, data, config, state, save)
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(config["seed"] + 7)
            probabilities = {
                f"network-{depth}": (
                    torch.special.ndtr(network(grid)),
                    torch.special.ndtr(network(x_test)),
                ),
                f"dgp-{depth}": (
                    class_probability(model, grid, config["eval_samples"]),
                    class_probability(model, x_test, config["eval_samples"]),
                ),
            }
        for name, (on_grid, on_test) in probabilities.items():
            maps[name] = on_grid
            confidence = (on_grid - 0.5).abs()  # [G^2]
            rows.append(
                {
                    "model": name,
                    "depth": depth,
                    "far_confidence": float(confidence[far].mean()),
                    "near_confidence": float(confidence[~far].mean()),
                    "far_max_confidence": float(confidence[far].max()),
                    **{f"test_{k}": v for k, v in evaluate(on_test, y_test).items()},
                    "final_loss": state[f"{name}-loss"],
                }
            )
        rows[-1]["kernel_variances"] = ", ".join(
            f"{float(layer.covar_module.outputscale.detach()):.3g}" for layer in model.layers
        )

    run_dir.save_table("confidence.csv", rows)
    _plot(run_dir, axis_0, axis_1, maps, far, x_train, y_train, depths)
    by_name = {row["model"]: row for row in rows}
    return {
        "far_confidence": {name: row["far_confidence"] for name, row in by_name.items()},
        "near_confidence": {name: row["near_confidence"] for name, row in by_name.items()},
        "test_accuracy": {name: row["test_accuracy"] for name, row in by_name.items()},
        "test_log_likelihood": {name: row["test_log_likelihood"] for name, row in by_name.items()},
        "dgp_less_confident_far": {
            str(depth): by_name[f"dgp-{depth}"]["far_confidence"]
            < by_name[f"network-{depth}"]["far_confidence"]
            for depth in depths
        },
        "num_far_points": int(far.sum()),
        "num_train": len(x_train),
    }


def _plot(
    run_dir: RunDirectory,
    axis_0: torch.Tensor,
    axis_1: torch.Tensor,
    maps: dict[str, torch.Tensor],
    far: torch.Tensor,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    depths: list[int],
) -> None:
    """``banana_dgp.png``: p(y = 1 | x) in grey, one row per depth, network left and DGP right;
    the data in two colours, the 0.5 contour, and the inner edge of the far ring dashed."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    size = len(axis_0)
    figure = Figure(figsize=(8.4, 4.0 * len(depths)))
    axes = figure.subplots(len(depths), 2, squeeze=False)
    labels = (y_train == 1).numpy()
    raw = x_train.numpy()
    mesh_0, mesh_1 = (m.numpy() for m in torch.meshgrid(axis_0, axis_1, indexing="xy"))
    far_map = far.reshape(size, size).double().numpy()
    image = None
    for row, depth in enumerate(depths):
        for column, kind in enumerate(("network", "dgp")):
            axis = axes[row][column]
            name = f"{kind}-{depth}"
            probability = maps[name].reshape(size, size).numpy()
            image = axis.contourf(
                mesh_0, mesh_1, probability, levels=21, cmap="Greys", vmin=0, vmax=1
            )
            axis.contour(mesh_0, mesh_1, probability, levels=[0.5], colors="C3", linewidths=1)
            axis.contour(
                mesh_0,
                mesh_1,
                far_map,
                levels=[0.5],
                colors="C2",
                linewidths=0.8,
                linestyles="--",
            )
            axis.scatter(raw[~labels, 0], raw[~labels, 1], s=2, c="C0", alpha=0.5)
            axis.scatter(raw[labels, 0], raw[labels, 1], s=2, c="C1", alpha=0.5)
            confidence = float((maps[name] - 0.5).abs()[far].mean())
            title = "network (probit BCE)" if kind == "network" else "activated DGP (ELBO)"
            layers = "1 layer" if depth == 1 else f"{depth} layers"
            axis.set_title(f"{title}, {layers}\nfar mean |p - 0.5| = {confidence:.3f}", fontsize=9)
            axis.set_aspect("equal")
            axis.set_xticks([])
            axis.set_yticks([])
    assert image is not None  # at least one panel was drawn
    figure.colorbar(image, ax=axes.ravel().tolist(), shrink=0.7, label="p(y = 1 | x)")
    run_dir.save_figure("banana_dgp.png", figure)


__all__ = ["FULL", "PAPER", "QUICK", "run_banana_dgp"]
