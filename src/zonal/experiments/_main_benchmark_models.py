"""The four models of the main benchmark (``zonal.experiments.main_benchmark``): their names and
labels, the models of seed 000 table 1 that ours stand for, and the training and scoring of each on
one split."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    #: (x_train [N, D], y_train [N], x_test [T, D], y_test [T])
    Split = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]

#: depth of the deep models (seed 000 table 1's three-layer models)
NUM_LAYERS = 3
MODELS = ("adgp", "dgp", "gpytorch-svgp", "gpytorch-dgp")
MODEL_LABELS = {
    "adgp": f"zonal ADGP-{NUM_LAYERS} (activated; network, then ELBO)",
    "dgp": f"zonal DGP-{NUM_LAYERS} (inducing points, arc-cosine)",
    "gpytorch-svgp": "GPyTorch SVGP (inducing points, RBF-ARD)",
    "gpytorch-dgp": f"GPyTorch DeepGP-{NUM_LAYERS} (inducing points, RBF-ARD)",
}
#: our models that stand for a model of seed 000 table 1
SEED_COUNTERPART = {"adgp": f"ADGP-{NUM_LAYERS}", "dgp": f"DGP-{NUM_LAYERS}"}


def fit_and_score(
    model: str,
    data: tuple[Any, Any, Any, Any],
    config: Mapping[str, Any],
    seed: int,
    trace: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Train ``model`` on standardised (x_train [N, D], y_train [N], x_test [T, D], y_test [T])
    under ``seed``; its test MSE and TLL (through the model contract), training seconds and
    steps. Test-MSE evaluations ``{stage, step, seconds, test_mse}`` are appended to ``trace``
    (None: no evaluations during training)."""
    x_train, _, x_test, _ = data
    if model in SEED_COUNTERPART:
        from zonal.experiments.uci_dgp import fit_model

        row = fit_model(SEED_COUNTERPART[model], data, dict(config), seed, trace)
        scored = {"mse": row["mse"], "tll": row["tll"], "seconds": row["train_seconds"],
                  "steps": row["steps"], "num_inducing": config["num_inducing"]}  # fmt: skip
    elif model == "gpytorch-dgp":
        scored = _fit_gpytorch_dgp(data, config, seed, trace)
    else:
        scored = _fit_gpytorch_svgp(data, config, seed, trace)
    return {"num_train": len(x_train), "num_test": len(x_test), **scored}


def _fit_gpytorch_dgp(
    data: Split, config: Mapping[str, Any], seed: int, trace: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """GPyTorch's DeepGP, started as zonal's DGP-3 and trained by the same ELBO loop."""
    import torch

    from zonal.experiments._baselines import gpytorch_deep_gp
    from zonal.experiments._dgp_common import (
        Schedule,
        Stopwatch,
        predictive_mse,
        regression_metrics,
        train_elbo,
    )
    from zonal.experiments.uci_dgp import trace_options

    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)  # the layers' samples use the global stream
    generator = torch.Generator().manual_seed(seed)
    model = gpytorch_deep_gp(x_train, NUM_LAYERS, hidden_width=config["hidden_width"],
                             num_inducing=config["num_inducing"], seed=seed,
                             inner_scale=config["dgp_inner_scale"])  # fmt: skip
    clock = Stopwatch()  # training only, as for zonal's models (uci-dgp's fit_model)
    evaluate = lambda: predictive_mse(model, x_test, y_test, config["trace_samples"])  # noqa: E731
    train_elbo(model, x_train, y_train, config["dgp_steps"], Schedule.from_config(dict(config)),
               generator, num_samples=config["train_samples"], clock=clock,
               **trace_options(trace, "elbo", evaluate, config["trace_every"]))  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        scores = regression_metrics(model, x_test, y_test, config["eval_samples"])
    return {**scores, "seconds": clock.seconds, "steps": config["dgp_steps"],
            "num_inducing": config["num_inducing"]}  # fmt: skip


def _fit_gpytorch_svgp(
    data: Split, config: Mapping[str, Any], seed: int, trace: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """GPyTorch's SVGP with RBF-ARD, inducing points at random training inputs, Adam on the
    minibatch ELBO with plateau cuts."""
    import torch

    from zonal.experiments._baselines import inducing_point_model
    from zonal.experiments._dgp_common import Schedule, Stopwatch, timed
    from zonal.experiments.uci_dgp import trace_options
    from zonal.models import fit_svgp

    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    size = min(config["svgp_num_inducing"], len(x_train))
    points = x_train[torch.randperm(len(x_train), generator=generator)[:size]]  # [M, D]
    model = inducing_point_model("rbf", points)
    clock = Stopwatch()
    schedule = Schedule(
        batch_size=config["svgp_batch_size"],
        learning_rate=config["svgp_learning_rate"],
        plateau_factor=config["plateau_factor"],
        plateau_patience=config["plateau_patience"],
    )

    def evaluate() -> float:
        try:
            mean, _ = model.predict(x_test)  # in eval mode, where GPyTorch caches Kzz's root
        finally:
            model.train()  # train mode again, which clears those caches before the next step
        return float(torch.mean((mean - y_test) ** 2))

    steps = config["svgp_steps"]
    options = schedule.options(generator)
    timed(
        lambda callback: fit_svgp(
            model, x_train, y_train, num_steps=steps, callback=callback, **options
        ),
        steps,
        clock=clock,
        **trace_options(trace, "elbo", evaluate, config["trace_every"]),
    )
    mean, _ = model.predict(x_test)
    tll = float(torch.mean(model.log_predictive_density(x_test, y_test)))
    return {"mse": float(torch.mean((mean - y_test) ** 2)), "tll": tll, "seconds": clock.seconds,
            "steps": steps, "num_inducing": size}  # fmt: skip
