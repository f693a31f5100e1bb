"""Toy regression: a small tanh MLP fitted by Adam to noisy samples of a 1-D function.

It reproduces nothing from the seeds: it is the example experiment of the frame and the one its tests
run. It is written in the checkpoint style every long experiment should follow: all randomness comes
from explicit ``torch.Generator``s, and every ``checkpoint_every`` steps the model, the optimiser, the
minibatch generator and the losses so far are saved, so a resumed run ends with exactly the metrics
of an uninterrupted one.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

QUICK: dict[str, Any] = {
    "seed": 0,
    "num_train": 64,
    "num_test": 256,
    "noise_std": 0.1,
    "hidden_width": 32,
    "steps": 1000,
    "batch_size": 16,
    "learning_rate": 0.01,
    "checkpoint_every": 100,
}
FULL: dict[str, Any] = {"num_train": 1024, "hidden_width": 128, "steps": 5000, "batch_size": 64}


def target_function(x: torch.Tensor) -> torch.Tensor:
    """f(x) = sin(3x) + 0.3 cos(9x) on [-1, 1]: smooth, with a little high-frequency content."""
    return torch.sin(3 * x) + 0.3 * torch.cos(9 * x)


def make_data(config: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training inputs [N, 1] uniform on [-1, 1], noisy targets [N, 1], and a test grid [T, 1]."""
    generator = torch.Generator().manual_seed(config["seed"])
    x_train = 2 * torch.rand(config["num_train"], 1, generator=generator) - 1  # [N, 1]
    noise = config["noise_std"] * torch.randn(config["num_train"], 1, generator=generator)
    y_train = target_function(x_train) + noise  # [N, 1]
    x_test = torch.linspace(-1, 1, config["num_test"]).unsqueeze(-1)  # [T, 1]
    return x_train, y_train, x_test


def make_model(hidden_width: int, seed: int) -> nn.Module:
    """A 1 -> width -> width -> 1 tanh MLP, initialised from ``seed`` (global RNG left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(
            nn.Linear(1, hidden_width),
            nn.Tanh(),
            nn.Linear(hidden_width, hidden_width),
            nn.Tanh(),
            nn.Linear(hidden_width, 1),
        )


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    generator: torch.Generator,
) -> float:
    """One Adam step on a random minibatch (drawn with ``generator``); returns the minibatch MSE."""
    batch = torch.randperm(x.shape[0], generator=generator)[:batch_size]  # [B]
    optimizer.zero_grad()
    loss = torch.mean((model(x[batch]) - y[batch]) ** 2)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


@register_experiment(
    "toy-regression",
    summary="Small tanh MLP fitted by Adam to a noisy 1-D function (the frame's example; no paper)",
    quick=QUICK,
    full=FULL,
    headline=("test_rmse", "train_rmse"),
)
def run_toy_regression(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Fit the MLP for ``steps`` Adam steps, checkpointing, and measure its RMSE."""
    x_train, y_train, x_test = make_data(config)
    model = make_model(config["hidden_width"], config["seed"])
    optimizer = torch.optim.Adam(model.parameters(), lr=config["learning_rate"])
    batches = torch.Generator().manual_seed(config["seed"] + 1)
    losses: list[float] = []
    start = 0

    state = run_dir.load_checkpoint()
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        batches.set_state(state["batch_generator"])
        losses = list(state["losses"])
        start = state["step"]

    steps = config["steps"]
    for step in run_dir.progress(range(start, steps), total=steps, initial=start, unit="step"):
        losses.append(train_step(model, optimizer, x_train, y_train, config["batch_size"], batches))
        if (step + 1) % config["checkpoint_every"] == 0:
            run_dir.save_checkpoint(
                {
                    "step": step + 1,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "batch_generator": batches.get_state(),
                    "losses": losses,
                }
            )

    with torch.no_grad():
        train_prediction = model(x_train)  # [N, 1]
        test_prediction = model(x_test)  # [T, 1]
    test_target = target_function(x_test)  # [T, 1]
    run_dir.save_table("loss.csv", ({"step": i + 1, "loss": loss} for i, loss in enumerate(losses)))
    run_dir.save_table(
        "predictions.csv",
        (
            {"x": float(x), "target": float(t), "prediction": float(p)}
            for x, t, p in zip(x_test[:, 0], test_target[:, 0], test_prediction[:, 0], strict=True)
        ),
    )
    _plot_fit(run_dir, x_train, y_train, x_test, test_target, test_prediction)
    return {
        "test_rmse": math.sqrt(float(torch.mean((test_prediction - test_target) ** 2))),
        "train_rmse": math.sqrt(float(torch.mean((train_prediction - y_train) ** 2))),
        "noise_std": config["noise_std"],
        "final_minibatch_loss": losses[-1] if losses else None,
        "steps": steps,
    }


def _plot_fit(
    run_dir: RunDirectory,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_test: torch.Tensor,
    test_target: torch.Tensor,
    test_prediction: torch.Tensor,
) -> None:
    """``fit.png``: data, true function and the fit (skipped when matplotlib is not installed)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    figure = Figure(figsize=(5, 3.2))
    axes = figure.add_subplot()
    axes.plot(x_train[:, 0], y_train[:, 0], "k.", markersize=3, label="data")
    axes.plot(x_test[:, 0], test_target[:, 0], "C0-", label="f(x)")
    axes.plot(x_test[:, 0], test_prediction[:, 0], "C1--", label="MLP")
    axes.set_xlabel("x")
    axes.legend(frameon=False)
    run_dir.save_figure("fit.png", figure)
