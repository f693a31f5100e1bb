"""Residual deep GPs on an irregular function on S^2, against depth and data (seed 004 sec. 3.2,
figs. 3.4 and 3.5).

The target. The seed does not print its function; ours has square-root cusps at the four vertices
c_k of a regular tetrahedron, where every directional derivative blows up:

    f(x) = sum_{k=1}^{4} a_k ||x - c_k||^{1/2},   a = (1, -1, 1, -1),
    c_k = (1, 1, 1) / sqrt 3, (1, -1, -1) / sqrt 3, (-1, 1, -1) / sqrt 3, (-1, -1, 1) / sqrt 3,

observed with Gaussian noise of standard deviation ``noise_std`` (train and test).

Protocol (seed 004 sec. 3.2 and app. A.1). Training inputs: N points of the Fibonacci spiral (a
near-uniform grid); test inputs: ``num_test`` uniform points (one set for the run). The residual
DGP (``zonal.models.residual_dgp.residual_dgp``) has 0-4 hidden layers of projected vector fields
(eq. 3.1) and every layer uses the Matérn-5/2 kernel of the sphere (lengthscale 1, output scale 1
to start, all learned) with ``num_inducing`` inducing points fixed on a Fibonacci grid; the hidden
layers start near the identity (prior variances sharing ``hidden_variance``, q at
``hidden_scale`` times the prior). Adam, ``steps`` full-batch steps at ``learning_rate``,
``train_samples`` samples through the layers per step, the noise variance starting at
``initial_noise``. The seed gives neither the rate nor the initial noise of this experiment; at
0.01 its 1000 steps are far from converged here (N = 800, two hidden layers: TLL 1.31 at 0.01,
1.97 at 0.03; the shallow GP: 1.28 and 1.94), so the rate is 0.03. The seed's output-scale Gamma prior is not
specified there (app. A.1 breaks off) and is not used. The baseline of eq. 3.5
(``hybrid_dgp``: a GP on the sphere into R^3, then a Euclidean DGP with identity means, every
layer's inducing locations at k-means centres of the training inputs and learned) runs at
``baseline_num_train`` points with ``baseline_repeats`` repeats. Each (model, N, depth, repeat) is
seeded on its own; repeats differ in the models' random streams (and the baseline's k-means), the
data are fixed, as in the seed ("stochasticity in training and inference").

Metrics on the test set: the joint log predictive density per test point, LPD = (1/n) log p(y | X)
(seed 004 eqs. 3.9-3.11: ``lpd_samples`` pathwise draws of the hidden vector fields, the output
layer's joint Gaussian exactly, ``zonal.sampling.joint_log_predictive_density``), as in the seed's
fig. 3.4; from ``eval_samples`` Monte Carlo samples of the hidden layers the test log likelihood
per point TLL = (1/n) sum_i log (1/S) sum_s N(y_i | mu_s, v_s + noise) and the MSE of the mixture
mean.

Outputs: ``results.csv`` (one row per fit), ``summary.csv`` (median and quartiles per cell),
``figure_3_4.png`` (joint LPD against hidden layers, one panel per N), ``figure_3_5.png`` (LPD
and MSE, residual DGP against the baseline), a checkpoint after every fit (a resumed run skips the
fits it has).
"""

from __future__ import annotations

import math
import statistics
import zlib
from typing import TYPE_CHECKING, Any

import torch

from zonal.experiments._convergence import curve_rows, save_curve_panels, without_curve
from zonal.experiments.registry import register_experiment
from zonal.experiments.run_directory import RunDirectory

if TYPE_CHECKING:
    from zonal.models import DGP

QUICK: dict[str, Any] = {
    "seed": 0,
    "num_train": [100, 400],
    "hidden_layers": [0, 1, 2],
    "repeats": 2,
    "baseline_hidden_layers": [1, 2],
    "baseline_num_train": 400,
    "baseline_repeats": 2,
    "num_test": 2000,
    "num_inducing": 60,
    "noise_std": 0.01,
    "steps": 300,
    "learning_rate": 0.03,
    "initial_noise": 0.01,  # Gaussian noise variance at the start
    "train_samples": 2,
    "eval_samples": 32,
    "lpd_samples": 16,
    "hidden_variance": 0.01,
    "hidden_scale": 0.01,
    "baseline_inner_scale": 1e-5,
    "baseline_learn_inducing": True,  # False: the baseline's inducing locations stay at k-means
    "curve_points": 50,  # points of each fit's saved training curve
}
# At most about two hours of one core: every cell of fig. 3.4 but the fifth depth, 3 repeats, four
# times the seed's steps (at 2000 steps 3 of the first 4 fits failed the plateau rule of
# ``zonal.experiments._convergence``: the noise was still falling); the largest N first.
CONVERGED: dict[str, Any] = {
    "num_train": [800, 400, 200, 100],
    "hidden_layers": [0, 1, 2, 3],
    "repeats": 3,
    "baseline_hidden_layers": [1, 2, 3],
    "baseline_num_train": 800,
    "baseline_repeats": 3,
    "steps": 4000,
    "eval_samples": 64,
    "lpd_samples": 128,
}
DIFFERENCES = {
    "quick": "reduced: N 100 and 400, 0-2 hidden layers, 2 repeats, 300 steps (not converged)",
    "converged": "reduced: 3 repeats (seed: 5; baseline 15), 0-3 hidden layers (seed: 0-4), 4000 "
    "Adam steps at rate 0.03 (seed: 1000 steps, rate not given); 60 inducing points fixed on a "
    "Fibonacci grid (seed: 'initialised uniformly'); no output-scale prior (seed: unspecified "
    "Gamma); stand-in target: the seed does not give its function, ours has square-root cusps at "
    "the 4 vertices of a tetrahedron",
    "full": "stand-in target (the seed does not give its function); rate 0.03; fixed inducing grid",
}
FULL: dict[str, Any] = {
    "lpd_samples": 128,
    "num_train": [100, 200, 400, 800],
    "hidden_layers": [0, 1, 2, 3, 4],
    "repeats": 5,
    "baseline_hidden_layers": [1, 2, 3, 4],
    "baseline_num_train": 800,
    "baseline_repeats": 15,
    "steps": 1000,
}
# Seed 004 sec. 3.2, the medians of fig. 3.4 quoted in its text (joint LPD per point).
PAPER: dict[str, dict[str, Any]] = {
    "seed 004 fig. 3.4": {
        "residual.n400.hidden0.lpd_median": 1.50,
        "residual.n400.hidden1.lpd_median": 1.80,
        "residual.n400.hidden4.lpd_median": 1.75,
        "residual.n800.hidden0.lpd_median": 1.50,
        "residual.n800.hidden3.lpd_median": 2.03,
    },
    "seed 004 fig. 3.5": {},
}
CUSPS = (
    (1.0, 1.0, 1.0),
    (1.0, -1.0, -1.0),
    (-1.0, 1.0, -1.0),
    (-1.0, -1.0, 1.0),
)
CUSP_WEIGHTS = (1.0, -1.0, 1.0, -1.0)


# ---------------------------------------------------------------------------------------- data
def cusp_target(x: torch.Tensor) -> torch.Tensor:
    """f(x) = sum_k a_k ||x - c_k||^{1/2} [N] at x [N, 3] (see the module docstring)."""
    centres = torch.tensor(CUSPS, dtype=x.dtype, device=x.device) / math.sqrt(3)  # [4, 3]
    weights = torch.tensor(CUSP_WEIGHTS, dtype=x.dtype, device=x.device)  # [4]
    distance = (x.unsqueeze(-2) - centres).norm(dim=-1)  # [N, 4]
    return (distance.sqrt() * weights).sum(-1)


def fibonacci_sphere(count: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``count`` near-uniform points on S^2 [count, 3]: the Fibonacci (golden-angle) spiral,
    height 1 - (2 i + 1) / n and azimuth i pi (3 - sqrt 5) for i = 0..n-1."""
    index = torch.arange(count, dtype=dtype)
    height = 1 - (2 * index + 1) / count  # [n]
    azimuth = index * math.pi * (3 - math.sqrt(5))  # [n]
    ring = torch.sqrt(1 - height**2)  # [n]
    return torch.stack([ring * torch.cos(azimuth), ring * torch.sin(azimuth), height], dim=-1)


def uniform_sphere(count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` uniform points on S^2 [count, 3] (normalised standard normals)."""
    x = torch.randn(count, 3, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def make_data(
    config: dict[str, Any], num_train: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x_train [N, 3] on the Fibonacci grid, y_train [N], x_test [T, 3] uniform, y_test [T]),
    noisy observations of ``cusp_target``; the same for every model and repeat."""
    generator = torch.Generator().manual_seed(config["seed"])
    x_test = uniform_sphere(config["num_test"], generator)
    y_test = cusp_target(x_test) + config["noise_std"] * torch.randn(
        len(x_test), generator=generator, dtype=torch.float64
    )
    generator = torch.Generator().manual_seed(
        zlib.crc32(f"{config['seed']}/train/{num_train}".encode())
    )
    x_train = fibonacci_sphere(num_train)
    y_train = cusp_target(x_train) + config["noise_std"] * torch.randn(
        num_train, generator=generator, dtype=torch.float64
    )
    return x_train, y_train, x_test, y_test


# ---------------------------------------------------------------------------------------- one fit
def unit_seed(config: dict[str, Any], model: str, num_train: int, hidden: int, repeat: int) -> int:
    """A seed of its own for each fit, stable across runs and resumes."""
    return zlib.crc32(f"{config['seed']}/{model}/{num_train}/{hidden}/{repeat}".encode())


def build_model(
    model: str, hidden: int, x_train: torch.Tensor, config: dict[str, Any], seed: int
) -> DGP:
    """The residual DGP with ``hidden`` vector fields, or the eq. 3.5 baseline with ``hidden``
    hidden layers (the sphere GP counted)."""
    from zonal.geometry import OnSphere
    from zonal.models.residual_dgp import hybrid_dgp, residual_dgp

    if model == "residual":
        return residual_dgp(
            3,
            hidden,
            fibonacci_sphere(config["num_inducing"]),
            input_map=OnSphere(),
            hidden_variance=config["hidden_variance"],
            hidden_scale=config["hidden_scale"],
        )
    return hybrid_dgp(
        x_train,
        hidden,
        num_inducing=config["num_inducing"],
        inner_scale=config["baseline_inner_scale"],
        generator=torch.Generator().manual_seed(seed),
        learn_inducing=config["baseline_learn_inducing"],
    )


def fit_one(
    model_name: str,
    hidden: int,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    config: dict[str, Any],
    seed: int,
) -> dict[str, Any]:
    """Train one model on one data set; its test metrics."""
    import time

    from zonal.experiments._convergence import curve_summary, thin_curve
    from zonal.experiments._dgp_common import regression_metrics
    from zonal.models import fit_dgp
    from zonal.sampling import joint_log_predictive_density

    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)  # the layers' reparametrised samples use the global stream
    model = build_model(model_name, hidden, x_train, config, seed)
    model.likelihood.noise = config["initial_noise"]
    started = time.perf_counter()
    losses = fit_dgp(
        model,
        x_train,
        y_train,
        num_steps=config["steps"],
        batch_size=len(x_train),
        lr=config["learning_rate"],
        num_samples=config["train_samples"],
        seed=seed,
    )
    seconds = time.perf_counter() - started
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        metrics = regression_metrics(model, x_test, y_test, config["eval_samples"])
        model.eval()
        joint = joint_log_predictive_density(
            model, x_test, y_test, num_samples=config["lpd_samples"]
        )
    return {
        "lpd": float(joint) / len(x_test),
        "tll": metrics["tll"],
        "mse": metrics["mse"],
        "final_loss": losses[-1],
        "noise": float(model.likelihood.noise.detach()),
        "train_seconds": seconds,
        **curve_summary(losses),
        "curve": thin_curve(losses, config["curve_points"]),
    }


def fit_unit(task: tuple[dict[str, Any], tuple[str, int, int, int]]) -> dict[str, Any]:
    """``fit_one`` of one (config, (model, N, hidden layers, repeat)): its data and seed are made
    from the config alone, so units run in any order or process and give the same rows."""
    config, (model, num_train, hidden, repeat) = task
    seed = unit_seed(config, model, num_train, hidden, repeat)
    return fit_one(model, hidden, make_data(config, num_train), config, seed)


# ---------------------------------------------------------------------------------------- summary
def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile), linear interpolation (one value: itself)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    first, median, third = statistics.quantiles(values, n=4, method="inclusive")
    return first, median, third


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median and quartiles of LPD, TLL and MSE per (model, N, hidden layers)."""
    cells = sorted({(r["model"], r["num_train"], r["hidden_layers"]) for r in rows})
    summary = []
    for model, num_train, hidden in cells:
        found = [
            r
            for r in rows
            if (r["model"], r["num_train"], r["hidden_layers"]) == (model, num_train, hidden)
        ]
        entry: dict[str, Any] = {
            "model": model,
            "num_train": num_train,
            "hidden_layers": hidden,
            "repeats": len(found),
        }
        for metric in ("lpd", "tll", "mse"):
            low, median, high = quartiles([r[metric] for r in found])
            entry.update({f"{metric}_q1": low, f"{metric}_median": median, f"{metric}_q3": high})
        entry["train_seconds"] = statistics.fmean(r["train_seconds"] for r in found)
        summary.append(entry)
    return summary


def units(config: dict[str, Any]) -> list[tuple[str, int, int, int]]:
    """Every (model, N, hidden layers, repeat) of the run, in order."""
    residual = [
        ("residual", n, hidden, repeat)
        for n in config["num_train"]
        for hidden in config["hidden_layers"]
        for repeat in range(config["repeats"])
    ]
    baseline = [
        ("baseline", config["baseline_num_train"], hidden, repeat)
        for hidden in config["baseline_hidden_layers"]
        for repeat in range(config["baseline_repeats"])
    ]
    return residual + baseline


def _check_config(config: dict[str, Any]) -> None:
    if min(config["hidden_layers"], default=0) < 0 or min(config["num_train"], default=1) < 1:
        raise ValueError("hidden_layers must be >= 0 and num_train >= 1")
    if min(config["baseline_hidden_layers"], default=1) < 1:
        raise ValueError("the baseline needs baseline_hidden_layers >= 1")
    if config["baseline_hidden_layers"] and config["num_inducing"] > config["baseline_num_train"]:
        raise ValueError("the baseline's k-means needs num_inducing <= baseline_num_train")


@register_experiment(
    "residual-dgp-sphere",
    validate=_check_config,
    summary="residual deep GPs (projected vector fields + exp) on an irregular function on S^2: "
    "joint LPD, TLL and MSE against depth and N, beside the eq. 3.5 baseline (seed 004 "
    "figs. 3.4-3.5)",
    quick=QUICK,
    converged=CONVERGED,
    full=FULL,
    differences=DIFFERENCES,
    paper=PAPER,
    headline=("residual.n400.hidden0.lpd_median", "residual.n400.hidden1.lpd_median"),
    cpu_hours={"converged": 4.5},  # measured: 3.8 CPU-hours of training (57 fits) + evaluation
)
def run_residual_dgp_sphere(config: dict[str, Any], run_dir: RunDirectory) -> dict[str, Any]:
    """Fit every (model, N, depth, repeat), checkpointing after each, then summarise and plot."""
    _check_config(config)
    todo = units(config)
    state = run_dir.load_checkpoint()
    rows: list[dict[str, Any]] = [] if state is None else list(state["rows"])
    done = {(r["model"], r["num_train"], r["hidden_layers"], r["repeat"]) for r in rows}
    # Repeat by repeat (every cell's repeat 0, then repeat 1, ...), so that a run cut short has
    # every cell; each fit seeds itself, so the order changes nothing in the results.
    pending = [
        (config, unit) for unit in sorted(todo, key=lambda unit: unit[3]) if unit not in done
    ]
    for (_, unit), row in run_dir.map_units(
        fit_unit, pending, finished=len(todo) - len(pending), unit="fit"
    ):
        model, num_train, hidden, repeat = unit
        key = {"model": model, "num_train": num_train, "hidden_layers": hidden, "repeat": repeat}
        rows.append({**key, **row})
        run_dir.save_checkpoint({"rows": rows})

    summary = summarise(rows)
    run_dir.save_table("results.csv", [without_curve(r) for r in rows])
    run_dir.save_table("summary.csv", summary)
    keys = ("model", "num_train", "hidden_layers", "repeat")
    run_dir.save_table("curves.csv", curve_rows(rows, keys))
    _plot(run_dir, rows, config)
    save_curve_panels(
        run_dir,
        rows,
        ("model", "num_train"),
        lambda r: f"{r['hidden_layers']} hidden, rep {r['repeat']}",
        symlog=True,
    )
    metrics: dict[str, Any] = {}
    for entry in summary:
        cell = metrics.setdefault(entry["model"], {}).setdefault(f"n{entry['num_train']}", {})
        cell[f"hidden{entry['hidden_layers']}"] = {
            "lpd_median": entry["lpd_median"],
            "tll_median": entry["tll_median"],
            "mse_median": entry["mse_median"],
            "repeats": entry["repeats"],
        }
    metrics["num_fits"] = len(rows)
    metrics["converged_fits"] = sum(bool(r.get("converged", False)) for r in rows)
    return metrics


# ---------------------------------------------------------------------------------------- figures
def _plot(run_dir: RunDirectory, rows: list[dict[str, Any]], config: dict[str, Any]) -> None:
    """``figure_3_4.png`` and ``figure_3_5.png`` (box plots over repeats)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    from zonal.experiments._plots import paired_boxplots

    residual = [r for r in rows if r["model"] == "residual"]
    sizes = sorted({r["num_train"] for r in residual})
    if sizes:
        figure = Figure(figsize=(3.2 * len(sizes), 3.2))
        axes = figure.subplots(1, len(sizes), squeeze=False, sharey=True)[0]
        for axis, size in zip(axes, sizes, strict=True):
            depths = sorted({r["hidden_layers"] for r in residual if r["num_train"] == size})
            values = [
                [r["lpd"] for r in residual if (r["num_train"], r["hidden_layers"]) == (size, h)]
                for h in depths
            ]
            axis.boxplot(values, orientation="horizontal", tick_labels=[str(h) for h in depths])
            shallow = [
                r["lpd"] for r in residual if (r["num_train"], r["hidden_layers"]) == (size, 0)
            ]
            if shallow:
                axis.axvline(statistics.median(shallow), color="grey", linestyle=":")
            axis.set_title(f"{size} training points")
            axis.set_xlabel("joint LPD per test point")
        axes[0].set_ylabel("hidden layers")
        figure.suptitle("residual DGP on S^2 (seed 004 fig. 3.4)", fontsize=8)
        run_dir.save_figure("figure_3_4.png", figure)

    size = config["baseline_num_train"]
    compared = [r for r in rows if r["num_train"] == size and r["hidden_layers"] > 0]
    if not any(r["model"] == "baseline" for r in compared):
        return
    figure = Figure(figsize=(7.5, 3.2))
    axes = figure.subplots(1, 2)
    for axis, metric in zip(axes, ("lpd", "mse"), strict=True):
        series = []
        for model, colour in (("residual", "C0"), ("baseline", "C1")):
            by_depth: dict[int, list[float]] = {}
            for r in compared:
                if r["model"] == model:
                    by_depth.setdefault(r["hidden_layers"], []).append(r[metric])
            series.append((model, colour, by_depth))
        paired_boxplots(axis, series)
        axis.set_xlabel("hidden layers")
        axis.set_ylabel("joint LPD per test point" if metric == "lpd" else "MSE")
        axis.set_xticks(sorted({r["hidden_layers"] for r in compared}))
        if metric == "mse":
            axis.set_yscale("log")
    axes[0].legend(frameon=False, fontsize=7)
    figure.suptitle(f"residual DGP vs eq. 3.5 baseline, {size} training points", fontsize=8)
    run_dir.save_figure("figure_3_5.png", figure)


__all__ = [
    "CONVERGED",
    "FULL",
    "PAPER",
    "QUICK",
    "cusp_target",
    "fibonacci_sphere",
    "make_data",
    "run_residual_dgp_sphere",
    "summarise",
]
