"""One fit of the ``uci-dgp`` experiment: its data (a UCI dataset or a made-up one, split 90/10 and
standardised), its seed, and the training of one model (the ADGP by the two-stage recipe, the
inducing-point DGP by the ELBO) with its test metrics and trace."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

import torch

from zonal.experiments._convergence import curve_summary, thin_curve
from zonal.experiments._uci_dgp_presets import QUICK

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpytorch.likelihoods import GaussianLikelihood

    from zonal.experiments._dgp_common import Schedule, Stopwatch
    from zonal.models import ActivatedDGP


# ---------------------------------------------------------------------------------------- data
def synthetic_regression(num_points: int = 80, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A small made-up regression problem for tests: x ~ N(0, I_3), y = sin(2 x_1) + x_2 x_3 / 2
    + 0.1 noise: (x [N, 3], y [N])."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, 3, generator=generator, dtype=torch.float64)
    noise = 0.1 * torch.randn(num_points, generator=generator, dtype=torch.float64)
    return x, torch.sin(2 * x[:, 0]) + 0.5 * x[:, 1] * x[:, 2] + noise


def load_regression(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(x [N, D], y [N]) float64 of a UCI dataset, or of ``"synthetic"``."""
    if name == "synthetic":
        return synthetic_regression()
    from zonal.datasets import load_dataset

    data = load_dataset(name)
    if data.task != "regression" or data.y.ndim != 1:
        raise ValueError(f"{name!r} is not a single-target regression dataset")
    return torch.as_tensor(data.X, dtype=torch.float64), torch.as_tensor(data.y)


def split_data(
    x: torch.Tensor, y: torch.Tensor, split: int, config: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Split ``split`` of ``random_splits`` (90/10), inputs and outputs standardised with the
    training rows: (x_train [N, D], y_train [N], x_test [T, D], y_test [T])."""
    from zonal.datasets import Standardizer, random_splits

    splits = random_splits(
        len(x), config["num_splits"], test_fraction=config["test_fraction"], seed=config["seed"]
    )
    for _ in range(split):
        next(splits)
    train, test = (torch.as_tensor(index) for index in next(splits))
    x_scaler, y_scaler = Standardizer.fit(x[train]), Standardizer.fit(y[train])
    return (
        x_scaler.transform(x[train]),
        y_scaler.transform(y[train]),
        x_scaler.transform(x[test]),
        y_scaler.transform(y[test]),
    )


# ---------------------------------------------------------------------------------------- one fit
def unit_seed(config: dict[str, Any], dataset: str, split: int, model: str) -> int:
    """A seed of its own for each (dataset, split, model), stable across runs and resumes."""
    return zlib.crc32(f"{config['seed']}/{dataset}/{split}/{model}".encode())


def trace_options(
    trace: list[dict[str, Any]] | None, stage: str, evaluate: Callable[[], float], every: int
) -> dict[str, Any]:
    """``timed`` keyword arguments that append ``{stage, step, seconds, test_mse}`` rows to
    ``trace`` (none when ``trace`` is None: the model is not traced)."""
    if trace is None:
        return {}

    def on_evaluate(step: int, seconds: float, value: float) -> None:
        trace.append({"stage": stage, "step": step, "seconds": seconds, "test_mse": value})

    return {"evaluate": evaluate, "every": every, "on_evaluate": on_evaluate}


def fit_model(
    name: str,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    config: dict[str, Any],
    seed: int,
    trace: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """Build and train one model on one split; its test metrics (and trace rows appended to
    ``trace`` when given)."""
    from gpytorch.likelihoods import GaussianLikelihood

    from zonal.experiments._dgp_common import (
        Schedule,
        Stopwatch,
        build_inducing_point_dgp,
        parse_model_name,
        predictive_mse,
        regression_metrics,
        train_elbo,
    )

    x_train, y_train, x_test, y_test = data
    activated, num_layers = parse_model_name(name)
    torch.manual_seed(seed)  # the layers' samples (reparametrisation) use the global stream
    generator = torch.Generator().manual_seed(seed)
    schedule = Schedule.from_config(config)
    clock = Stopwatch()
    likelihood = GaussianLikelihood().to(torch.float64)
    row: dict[str, Any] = {}
    if activated:
        model, row["network_mse"], losses = fit_activated(
            num_layers, likelihood, data, config, seed, schedule, generator, clock, trace
        )
        steps = config["network_steps"] + config["elbo_steps"]
    else:
        model = build_inducing_point_dgp(
            x_train,
            num_layers,
            likelihood,
            num_inducing=config["num_inducing"],
            hidden_width=config["hidden_width"],
            mean=config["mean"],
            seed=seed,
            inner_scale=config["dgp_inner_scale"],
        )
        evaluate = lambda: predictive_mse(model, x_test, y_test, config["trace_samples"])  # noqa: E731
        losses = train_elbo(
            model,
            x_train,
            y_train,
            config["dgp_steps"],
            schedule,
            generator,
            num_samples=config["train_samples"],
            clock=clock,
            **trace_options(trace, "elbo", evaluate, config["trace_every"]),
        )
        steps = config["dgp_steps"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        row.update(regression_metrics(model, x_test, y_test, config["eval_samples"]))
    with torch.no_grad():
        row["posterior_mean_mse"] = float(torch.mean((model.posterior_mean(x_test) - y_test) ** 2))
    row.update(
        {"noise": float(likelihood.noise.detach()), "train_seconds": clock.seconds, "steps": steps}
    )
    row.update(curve_summary(losses))  # the ELBO stage's plateau (zonal.experiments._convergence)
    row["curve"] = thin_curve(losses, config.get("curve_points", QUICK["curve_points"]))
    return row


def fit_activated(
    num_layers: int,
    likelihood: GaussianLikelihood,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    config: dict[str, Any],
    seed: int,
    schedule: Schedule,
    generator: torch.Generator,
    clock: Stopwatch,
    trace: list[dict[str, Any]] | None,
) -> tuple[ActivatedDGP, float, list[float]]:
    """ADGP: the network by MSE, copied into the DGP, then the ELBO; (model, network test MSE, the
    ELBO stage's losses)."""
    from zonal.experiments._dgp_common import (
        build_activated_dgp,
        predictive_mse,
        train_elbo,
        train_network_stage,
    )
    from zonal.models.activated_dgp import noise_from_network

    x_train, y_train, x_test, y_test = data
    model = build_activated_dgp(
        x_train.shape[-1],
        num_layers,
        likelihood,
        num_inducing=config["num_inducing"],
        hidden_width=config["hidden_width"],
        truncation_level=config["truncation_level"],
        mean=config["mean"],
        seed=seed,
    )
    network = model.network_like(seed)

    @torch.no_grad()
    def network_mse() -> float:
        return float(torch.mean((network(x_test) - y_test) ** 2))

    train_network_stage(
        network,
        x_train,
        y_train,
        "mse",
        config["network_steps"],
        schedule,
        generator,
        clock=clock,
        **trace_options(trace, "network", network_mse, config["trace_every"]),
    )
    clock.start()
    model.from_torch_module(
        network,
        kernel_variance=config["adgp_kernel_variance"],
        variational_scale=config["adgp_initial_scale"],
    )
    noise_from_network(likelihood, network, x_train, y_train)
    clock.stop()
    test_mse = network_mse()
    evaluate = lambda: predictive_mse(model, x_test, y_test, config["trace_samples"])  # noqa: E731
    losses = train_elbo(
        model,
        x_train,
        y_train,
        config["elbo_steps"],
        schedule,
        generator,
        num_samples=config["train_samples"],
        clock=clock,
        **trace_options(trace, "elbo", evaluate, config["trace_every"]),
    )
    return model, test_mse, losses
