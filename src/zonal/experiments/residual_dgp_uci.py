"""Residual deep GPs with spherical-harmonic features on UCI regression (seed 004 sec. 5.2, fig. 5.1).

Protocol (seed 004 ch. 5). Inputs are standardised and mapped to S^D once, z = [x, 1] / ||[x, 1]||
(eq. 5.4, b = 1), and the prediction is carried back by the 1-homogeneous extension (mean times r,
variance times r^2; ``zonal.models.residual_dgp``). Every layer of the residual DGP (0-4 hidden
projected vector fields, then the output GP) uses spherical-harmonic features of the complete
levels within M (294 for yacht, 210 concrete, 336 power, 119 boston: these budgets are exactly
complete levels on S^6, S^8, S^4 and S^13) and the sphere's RBF, the heat kernel (``nu`` = inf;
the seed's ch. 5 uses the RBF kernel). It is compared with a Euclidean DGP of the same depth and
M: zonal's ``inducing_point_dgp`` (seed 000's DGP-L: inducing points in the lifted space, arc-cosine
kernels, hidden width D, constant means). Adam at ``learning_rate`` on minibatches of
``batch_size`` for ``epochs`` epochs (the seed: 1000, down from Salimbeni and Deisenroth's
10000), one sample through the layers per step, the noise variance starting at ``initial_noise``
(the seed gives neither; the rate is 0.03 as in ``residual-dgp-sphere``). 90/10 splits,
``num_splits`` of them; TLL (mean over test points of log (1/S) sum_s N(y | mu_s, v_s + noise))
and MSE on the standardised scale.

Energy and kin8nm, in the seed's fig. 5.1, cannot be obtained here (no verified source in
``zonal.datasets``) and are left out. The seed prints no numbers for fig. 5.1, only its trends:
the residual DGP improves with depth on power and concrete (and kin8nm), changes little on
boston (its 3-layer model is worse), and gets worse with depth on yacht; the Euclidean DGPs are
better at 1-3 layers and collapse at 4-5 (except on power).

Outputs: ``results.csv`` (one row per dataset, split, model, depth), ``summary.csv`` (median and
quartiles over splits), ``figure_5_1.png`` (TLL box plots against depth, one panel per dataset),
``curves.csv`` and ``training_curves.png`` (the loss per point of every fit, judged by the plateau
rule of ``zonal.experiments._convergence``), a checkpoint after every fit. Each row also says how
much the model uses its hidden layers (``layer_diagnostics``).
"""

from __future__ import annotations

import math
import statistics
import zlib
from typing import TYPE_CHECKING, Any, cast

import torch

from zonal.experiments._convergence import curve_rows, save_curve_panels, without_curve
from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

if TYPE_CHECKING:
    from zonal.models import DGP

FEATURE_BUDGET = {"yacht": 294, "concrete": 210, "power": 336, "boston": 119}
"""M of seed 004 sec. 5.2 (after Dutordoir et al. 2020) for the datasets obtainable here."""
MODELS = ("residual", "euclidean")

QUICK: dict[str, Any] = {
    "seed": 0,
    "datasets": ["yacht"],  # or "synthetic" (a small made-up problem, for tests)
    "depths": [1, 2, 3],
    "models": list(MODELS),
    "num_splits": 2,
    "test_fraction": 0.1,
    "synthetic_budget": 16,  # M for "synthetic"
    "nu": math.inf,
    "lengthscale": 1.0,
    "batch_size": 1024,
    "learning_rate": 0.03,
    "initial_noise": 0.1,  # Gaussian noise variance at the start (standardised targets)
    "epochs": 200,
    "train_samples": 1,
    "eval_samples": 32,
    "hidden_variance": 0.01,
    "hidden_scale": 0.01,
    "euclidean_inner_scale": 0.01,
    "curve_points": 50,  # points of each fit's saved training curve
}
# yacht and concrete, depths 1-3, 3 splits, 1000 epochs (the seed's): estimated 2-3 CPU-hours.
CONVERGED: dict[str, Any] = {
    "datasets": ["yacht", "concrete"],
    "depths": [1, 2, 3],
    "num_splits": 3,
    "epochs": 1000,
}
FULL: dict[str, Any] = {
    "datasets": ["yacht", "concrete", "power", "boston"],
    "depths": [1, 2, 3, 4, 5],
    "num_splits": 5,
    "epochs": 1000,
}
PAPER: dict[str, dict[str, Any]] = {"seed 004 fig. 5.1": {}}


def feature_budget(dataset: str, config: dict[str, Any]) -> int:
    """M per layer for ``dataset``."""
    return config["synthetic_budget"] if dataset == "synthetic" else FEATURE_BUDGET[dataset]


def unit_seed(config: dict[str, Any], dataset: str, split: int, model: str, depth: int) -> int:
    """A seed of its own for each fit, stable across runs and resumes."""
    return zlib.crc32(f"{config['seed']}/{dataset}/{split}/{model}/{depth}".encode())


def fit_unit(item: tuple[dict[str, Any], tuple[str, int, str, int]]) -> dict[str, Any]:
    """One (dataset, split, model, depth) of the run with ``config``: its result row. Module-level
    and self-contained (it reads its own split), so that ``--jobs`` workers can run it."""
    from zonal.experiments.uci_dgp import load_regression, split_data

    config, (dataset, split, model, depth) = item
    data = split_data(*load_regression(dataset), split, config)
    seed = unit_seed(config, dataset, split, model, depth)
    return fit_one(model, depth, data, feature_budget(dataset, config), config, seed)


def build_model(
    model: str, depth: int, x_train: torch.Tensor, budget: int, config: dict[str, Any], seed: int
) -> DGP:
    """The residual DGP (depth - 1 vector fields) or the Euclidean DGP of ``depth`` layers."""
    from gpytorch.likelihoods import GaussianLikelihood

    from zonal.geometry import SphereEmbedding
    from zonal.models import inducing_point_dgp
    from zonal.models.residual_dgp import residual_dgp

    likelihood = GaussianLikelihood().to(torch.float64)
    likelihood.noise = config["initial_noise"]
    input_dim = x_train.shape[-1]
    if model == "residual":
        return residual_dgp(
            input_dim,
            depth - 1,
            budget,
            input_map=SphereEmbedding(1.0),
            nu=config["nu"],
            lengthscale=config["lengthscale"],
            hidden_variance=config["hidden_variance"],
            hidden_scale=config["hidden_scale"],
            likelihood=likelihood,
        )
    return inducing_point_dgp(
        x_train,
        [input_dim] * depth + [1],
        likelihood,
        num_inducing=budget,
        mean="constant",
        seed=seed,
        inner_scale=config["euclidean_inner_scale"],
    )


def fit_one(
    model_name: str,
    depth: int,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    budget: int,
    config: dict[str, Any],
    seed: int,
) -> dict[str, Any]:
    """Train one model on one split; its test metrics."""
    import time

    from zonal.experiments._convergence import curve_summary, thin_curve
    from zonal.experiments._dgp_common import regression_metrics
    from zonal.models import fit_dgp

    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)
    model = build_model(model_name, depth, x_train, budget, config, seed)
    steps = config["epochs"] * math.ceil(len(x_train) / config["batch_size"])
    started = time.perf_counter()
    losses = fit_dgp(
        model,
        x_train,
        y_train,
        num_steps=steps,
        batch_size=config["batch_size"],
        lr=config["learning_rate"],
        num_samples=config["train_samples"],
        seed=seed,
    )
    seconds = time.perf_counter() - started
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        metrics = regression_metrics(model, x_test, y_test, config["eval_samples"])
    return {
        **metrics,
        "final_loss": losses[-1],
        "noise": float(model.likelihood.noise.detach()),
        "num_inducing": budget,
        "steps": steps,
        "train_seconds": seconds,
        **layer_diagnostics(model, x_train),
        **curve_summary(losses),
        "curve": thin_curve(losses, config["curve_points"]),
    }


def layer_diagnostics(model: DGP, x_train: torch.Tensor) -> dict[str, float]:
    """How much a trained model uses its hidden layers, at the training inputs x_train [N, D].

    ``hidden_kl`` and ``output_kl``: KL(q(u) || p(u)) per training point of the hidden layers
    (summed) and of the output layer, the ELBO's price for each. For a residual DGP also
    ``hidden_shift``, the RMS geodesic length |E v^l(h)| of the hidden fields' mean vectors along
    the mean path h_{l+1} = exp_{h_l}(E v^l(h_l)) (how far the layers move points from the
    identity), and ``hidden_spread``, the RMS of sqrt(E|v^l(h) - E v^l(h)|^2) =
    sqrt(sum_p sigma_p^2(h) |A_p(h)|^2) (the noise they add), both averaged over layers
    (0 without hidden layers)."""
    from zonal.geometry import exp_map
    from zonal.models.residual_dgp import ResidualDGP

    count = len(x_train)
    with torch.no_grad():
        kls = [
            float(cast(Any, layer.variational_strategy).kl_divergence().sum()) / count
            for layer in model.layers
        ]
        found = {"hidden_kl": sum(kls[:-1]), "output_kl": kls[-1]}
        if not isinstance(model, ResidualDGP):
            return found
        h, _ = model.to_sphere(model.check_inputs(x_train))  # [N, d]
        shifts, spreads = [], []
        for field in model.fields:
            components = field.component_distribution(h)  # [N, P]
            basis = field.tangent_basis(h)  # [N, d, P]
            mean = (basis @ components.mean.unsqueeze(-1)).squeeze(-1)  # [N, d]
            spread = (basis.pow(2).sum(-2) * components.variance).sum(-1)  # [N]
            shifts.append(float(mean.pow(2).sum(-1).mean().sqrt()))
            spreads.append(float(spread.mean().sqrt()))
            h = exp_map(h, mean)
    found["hidden_shift"] = statistics.fmean(shifts) if shifts else 0.0
    found["hidden_spread"] = statistics.fmean(spreads) if spreads else 0.0
    return found


def summarise(rows: list[dict[str, Any]], config: dict[str, Any]) -> list[dict[str, Any]]:
    """Median and quartiles over splits of TLL and MSE per (dataset, model, depth)."""
    from zonal.experiments.residual_dgp_sphere import quartiles

    summary = []
    for dataset in config["datasets"]:
        for model in config["models"]:
            for depth in config["depths"]:
                found = [
                    r
                    for r in rows
                    if (r["dataset"], r["model"], r["depth"]) == (dataset, model, depth)
                ]
                if not found:
                    continue
                entry: dict[str, Any] = {
                    "dataset": dataset,
                    "model": model,
                    "depth": depth,
                    "splits": len(found),
                }
                for metric in ("tll", "mse"):
                    low, median, high = quartiles([r[metric] for r in found])
                    entry.update(
                        {f"{metric}_q1": low, f"{metric}_median": median, f"{metric}_q3": high}
                    )
                entry["train_seconds"] = statistics.fmean(r["train_seconds"] for r in found)
                summary.append(entry)
    return summary


def _check_config(config: dict[str, Any]) -> None:
    unknown = [d for d in config["datasets"] if d != "synthetic" and d not in FEATURE_BUDGET]
    if unknown:
        raise ValueError(
            f"datasets {unknown} are not among {sorted(FEATURE_BUDGET)} (nor 'synthetic'); "
            "energy and kin8nm cannot be obtained here"
        )
    bad = [m for m in config["models"] if m not in MODELS]
    if bad or min(config["depths"], default=1) < 1:
        raise ValueError(f"models must be among {MODELS} and depths >= 1")


@register_experiment(
    "residual-dgp-uci",
    validate=_check_config,
    summary="UCI regression: residual deep GPs with spherical-harmonic features in every layer vs "
    "Euclidean DGPs at the same M, depths 1-5, TLL box plots (seed 004 fig. 5.1)",
    quick=QUICK,
    converged=CONVERGED,
    full=FULL,
    differences={
        "converged": "reduced: yacht and concrete (seed: also power, boston, energy, "
        "kin8nm), depths 1-3 (seed: 1-5), 3 splits (seed: 5)",
        "quick": "reduced: yacht only, 2 splits, depths 1-3 (not converged)",
        "full": "reduced: the seed's datasets that are obtainable here (yacht, concrete, power, "
        "boston; energy and kin8nm are not)",
    },
    paper=PAPER,
    headline=("yacht.residual.depth1.tll_median", "yacht.residual.depth2.tll_median"),
    cpu_hours={"converged": 2.5},  # estimated
)
def run_residual_dgp_uci(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Fit every (dataset, split, model, depth), checkpointing after each, then summarise and plot."""
    _check_config(config)
    todo = [
        (dataset, split, model, depth)
        for dataset in config["datasets"]
        for split in range(config["num_splits"])
        for model in config["models"]
        for depth in config["depths"]
    ]
    state = run_dir.load_checkpoint()
    rows: list[dict[str, Any]] = [] if state is None else list(state["rows"])
    done = {(r["dataset"], r["split"], r["model"], r["depth"]) for r in rows}
    pending = [(config, unit) for unit in todo if unit not in done]
    for (_, (dataset, split, model, depth)), row in run_dir.map_units(
        fit_unit, pending, finished=len(todo) - len(pending), unit="fit"
    ):
        rows.append({"dataset": dataset, "split": split, "model": model, "depth": depth, **row})
        run_dir.save_checkpoint({"rows": rows})
    # In the units' order, whatever order ``--jobs`` workers finished them in.
    order = {unit: position for position, unit in enumerate(todo)}
    rows.sort(key=lambda r: order[r["dataset"], r["split"], r["model"], r["depth"]])

    summary = summarise(rows, config)
    run_dir.save_table("results.csv", [without_curve(r) for r in rows])
    run_dir.save_table("summary.csv", summary)
    keys = ("dataset", "split", "model", "depth")
    run_dir.save_table("curves.csv", curve_rows(rows, keys))
    _plot(run_dir, rows, config)
    save_curve_panels(
        run_dir, rows, ("dataset", "model"), lambda r: f"depth {r['depth']}, split {r['split']}"
    )
    metrics: dict[str, Any] = {}
    for entry in summary:
        cell = metrics.setdefault(entry["dataset"], {}).setdefault(entry["model"], {})
        cell[f"depth{entry['depth']}"] = {
            "tll_median": entry["tll_median"],
            "mse_median": entry["mse_median"],
        }
    metrics["num_fits"] = len(rows)
    metrics["converged_fits"] = sum(bool(r.get("converged", False)) for r in rows)
    return metrics


def _plot(run_dir: RunDirectory, rows: list[dict[str, Any]], config: dict[str, Any]) -> None:
    """``figure_5_1.png``: TLL over splits against depth, residual and Euclidean side by side."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    from zonal.experiments._plots import paired_boxplots

    datasets = [d for d in config["datasets"] if any(r["dataset"] == d for r in rows)]
    if not datasets:
        return
    figure = Figure(figsize=(3.4 * len(datasets), 3.2))
    axes = figure.subplots(1, len(datasets), squeeze=False)[0]
    for axis, dataset in zip(axes, datasets, strict=True):
        series = []
        for model, colour in (("residual", "C0"), ("euclidean", "C1")):
            by_depth: dict[int, list[float]] = {}
            for r in rows:
                if (r["dataset"], r["model"]) == (dataset, model):
                    by_depth.setdefault(r["depth"], []).append(r["tll"])
            series.append((model, colour, by_depth))
        paired_boxplots(axis, series)
        axis.set_xticks(sorted({r["depth"] for r in rows if r["dataset"] == dataset}))
        axis.set_xlabel("layers")
        axis.set_title(dataset)
    axes[0].set_ylabel("test log likelihood (standardised)")
    axes[0].legend(frameon=False, fontsize=7)
    run_dir.save_figure("figure_5_1.png", figure)


__all__ = ["FEATURE_BUDGET", "FULL", "PAPER", "QUICK", "run_residual_dgp_uci", "summarise"]
