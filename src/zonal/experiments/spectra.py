"""Eigenvalue spectra of zonal kernels: seed 002 figure 1 and seed 000 figure 8.

Figure 1 of seed 002 (``spectra_ntk_decay.png``): eigenvalues lambda_l / lambda_1 of the ReLU NTK of
increasing depth (Funk-Hecke quadrature of ``relu_ntk_shape``) against the continuous-depth kernel
l^{-beta} (seed 002 eq. 15), in d = 3 and d = 10. For every depth the matching beta is fitted by least
squares of log(lambda_l / lambda_1) on log l over the even levels 2..L (odd levels >= 3 of the
one-hidden-layer NTK vanish), and drawn beside it.

Figure 8 of seed 000 (``spectra_levels.png``): |lambda_n| of the chordal Matérn-5/2 kernel (rho = 1)
and the first-order arc-cosine kernel, and |sigma_n| of the ReLU (closed form, eqs. C.19-C.20) and
the rescaled Softplus t -> log(1 + exp(5 t)) / 5 (seed 000 footnote 1), on S^1 (d = 2, the setting
of the sec. 5.3 experiment) and S^2; crosses mark zero coefficients (|c| < 1e-12 max |c|, the seed
zeroes below 1e-9).

Run: ``python -m zonal.experiments.spectra OUTDIR [--full]`` (``--full``: NTK depths up to 8 and
levels up to 40 for figure 1; figure 8 is the same in both presets).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import torch

QUICK: dict[str, Any] = {"ntk_depths": (1, 2, 3, 4), "decay_levels": 20, "num_nodes": 2000}
FULL: dict[str, Any] = {"ntk_depths": (1, 2, 3, 4, 6, 8), "decay_levels": 40, "num_nodes": 4000}
# Figure 8 stays at levels 0..20 with 500 nodes in both presets: further out the Softplus
# coefficients (decaying like exp(-pi n / 5)) fall under the quadrature round-off (~1e-13 in d = 3)
# and could no longer be told from the exact zeros.
PATTERN_LEVELS = 20
PATTERN_NODES = 500
DECAY_DIMS = (3, 10)
PATTERN_DIMS = (2, 3)
ZERO_TOLERANCE = 1e-12
SOFTPLUS_SHARPNESS = 5.0


def ntk_eigenvalues(ambient_dim: int, depth: int, max_degree: int, num_nodes: int) -> torch.Tensor:
    """lambda_0..lambda_L of the depth-``depth`` ReLU NTK on S^{d-1} by Funk-Hecke: [L + 1]."""
    from zonal.kernels import ReLUNTKernel

    kernel = ReLUNTKernel(ambient_dim, depth=depth, num_nodes=num_nodes)
    with torch.no_grad():
        return kernel.eigenvalues(max_degree)


def fit_beta(relative: torch.Tensor) -> float:
    """Least-squares beta in log(lambda_l / lambda_1) = -beta log l over even l >= 2."""
    levels = torch.arange(2, relative.numel(), 2, dtype=torch.float64)  # [K]
    values = relative[2::2]  # [K]
    log_l, log_v = torch.log(levels), torch.log(values)
    return float(-(log_l * log_v).sum() / (log_l * log_l).sum())


def zero_levels(values: torch.Tensor) -> list[int]:
    """Levels whose coefficient is zero up to ZERO_TOLERANCE relative to the largest."""
    threshold = ZERO_TOLERANCE * float(values.abs().max())
    return [n for n, v in enumerate(values.tolist()) if abs(v) <= threshold]


def describe_zeros(levels: list[int], max_degree: int) -> str:
    """'none', 'odd levels >= 3', or the list of zero levels."""
    if not levels:
        return "none"
    if levels == list(range(3, max_degree + 1, 2)):
        return "odd levels >= 3"
    return ", ".join(map(str, levels))


def softplus(t: torch.Tensor) -> torch.Tensor:
    """The rescaled Softplus of seed 000 (footnote 1): log(1 + exp(5 t)) / 5."""
    return torch.nn.functional.softplus(t, beta=SOFTPLUS_SHARPNESS)


def level_spectra(ambient_dim: int, max_degree: int, num_nodes: int) -> dict[str, torch.Tensor]:
    """Coefficients by level of the four functions of seed 000 figure 8, each [L + 1]."""
    from zonal.harmonics import funk_hecke, relu_coefficients
    from zonal.kernels import ArcCosineKernel, ChordalMaternKernel

    matern = ChordalMaternKernel(ambient_dim, nu=2.5, num_nodes=num_nodes)
    matern.lengthscale = 1.0
    with torch.no_grad():
        return {
            "matern52": matern.eigenvalues(max_degree),
            "arccos": ArcCosineKernel(ambient_dim, order=1).eigenvalues(max_degree),
            "softplus": funk_hecke(softplus, ambient_dim, max_degree, num_nodes=num_nodes),
            "relu": relu_coefficients(ambient_dim, max_degree),
        }


def _plot_decay(path: Path, decay: dict[int, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(decay), figsize=(5.2 * len(decay), 4.0))
    for axis, (ambient_dim, entry) in zip(axes, decay.items(), strict=True):
        colours = plt.cm.viridis(torch.linspace(0, 0.9, len(entry["depths"])).numpy())
        for colour, depth in zip(colours, entry["depths"], strict=True):
            relative = entry["relative"][depth]  # [L + 1]
            levels = torch.arange(1, relative.numel())
            keep = relative[1:] > ZERO_TOLERANCE
            axis.semilogy(
                levels[keep],
                relative[1:][keep],
                "o",
                ms=3.5,
                color=colour,
                label=f"NTK depth {depth}",
            )
            beta = entry["beta"][depth]
            axis.semilogy(
                levels,
                levels.double() ** -beta,
                "-",
                lw=1.0,
                color=colour,
                label=f"$\\ell^{{-\\beta}}$, $\\beta$={beta:.2f}",
            )
        axis.set_title(f"d = {ambient_dim} (S$^{{{ambient_dim - 1}}}$)")
        axis.set_xlabel("level $\\ell$")
        axis.set_ylabel("$\\lambda_\\ell / \\lambda_1$")
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=7, ncol=2)
    figure.suptitle("Continuous-depth kernel vs ReLU NTK depth (seed 002, fig. 1)")
    figure.tight_layout()
    figure.savefig(path, dpi=150)
    plt.close(figure)


def _plot_levels(path: Path, patterns: dict[int, dict[str, torch.Tensor]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {
        "matern52": "Matérn-5/2 $\\lambda_n$",
        "arccos": "arc-cosine $\\lambda_n$",
        "softplus": "Softplus $\\sigma_n$",
        "relu": "ReLU $\\sigma_n$",
    }
    figure, axes = plt.subplots(1, len(patterns), figsize=(5.2 * len(patterns), 4.0))
    for axis, (ambient_dim, spectra) in zip(axes, patterns.items(), strict=True):
        floor = min(
            float(v.abs()[v.abs() > ZERO_TOLERANCE * v.abs().max()].min()) for v in spectra.values()
        )
        for index, (name, values) in enumerate(spectra.items()):
            magnitude = values.abs()
            levels = torch.arange(magnitude.numel())
            zeros = torch.tensor(zero_levels(values), dtype=torch.long)
            nonzero = torch.ones_like(magnitude, dtype=torch.bool)
            nonzero[zeros] = False
            (line,) = axis.semilogy(
                levels[nonzero], magnitude[nonzero], "o-", ms=3.5, lw=0.8, label=labels[name]
            )
            if zeros.numel():
                axis.semilogy(
                    zeros,
                    torch.full((zeros.numel(),), floor / 10 ** (1 + 0.5 * index)),
                    "x",
                    color=line.get_color(),
                )
        axis.set_title(f"d = {ambient_dim} (S$^{{{ambient_dim - 1}}}$); x: zero coefficient")
        axis.set_xlabel("level $n$")
        axis.set_ylabel("|coefficient|")
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=8)
    figure.suptitle("Spectra of kernels and activations (seed 000, fig. 8)")
    figure.tight_layout()
    figure.savefig(path, dpi=150)
    plt.close(figure)


def run_spectra(output_dir: Path, full: bool = False) -> dict[str, Any]:
    """Compute both figures' spectra, write the PNGs and ``spectra.json`` into ``output_dir``.

    Returns metrics (checked against the seeds' statements) and the file names written.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    config = FULL if full else QUICK
    num_nodes = config["num_nodes"]

    decay: dict[int, dict[str, Any]] = {}
    for ambient_dim in DECAY_DIMS:
        entry: dict[str, Any] = {"depths": config["ntk_depths"], "relative": {}, "beta": {}}
        for depth in config["ntk_depths"]:
            values = ntk_eigenvalues(ambient_dim, depth, config["decay_levels"], num_nodes)
            relative = values / values[1]  # [L + 1]
            entry["relative"][depth] = relative
            entry["beta"][depth] = fit_beta(relative)
            # quadrature check: the same eigenvalues with twice the nodes
            finer = ntk_eigenvalues(ambient_dim, depth, config["decay_levels"], 2 * num_nodes)
            entry.setdefault("quadrature_change", []).append(
                float(((finer / finer[1] - relative)[2::2].abs() / relative[2::2]).max())
            )
        decay[ambient_dim] = entry

    patterns = {d: level_spectra(d, PATTERN_LEVELS, PATTERN_NODES) for d in PATTERN_DIMS}

    decay_png = output_dir / "spectra_ntk_decay.png"
    levels_png = output_dir / "spectra_levels.png"
    _plot_decay(decay_png, decay)
    _plot_levels(levels_png, patterns)

    depths = config["ntk_depths"]
    betas = {d: [decay[d]["beta"][depth] for depth in depths] for d in DECAY_DIMS}
    level10_d10 = max(float(decay[10]["relative"][depth][10]) for depth in depths)
    zeros = {
        (d, name): describe_zeros(zero_levels(values), PATTERN_LEVELS)
        for d, spectra in patterns.items()
        for name, values in spectra.items()
    }

    def agreed(name: str) -> str:
        found = {zeros[(d, name)] for d in PATTERN_DIMS}
        return found.pop() if len(found) == 1 else "; ".join(sorted(found))

    metrics: dict[str, Any] = {
        "ntk_depths": list(depths),
        "fitted_beta_d3": [round(b, 4) for b in betas[3]],
        "fitted_beta_d10": [round(b, 4) for b in betas[10]],
        "ntk_deeper_decays_slower": all(
            all(a > b for a, b in zip(betas[d], betas[d][1:], strict=False)) for d in DECAY_DIMS
        ),
        "ntk_d10_level10_relative_eigenvalue": level10_d10,
        "ntk_quadrature_max_relative_change": max(
            max(decay[d]["quadrature_change"]) for d in DECAY_DIMS
        ),
        "matern52_zero_levels": agreed("matern52"),
        "arccos_zero_levels": agreed("arccos"),
        "relu_zero_levels": agreed("relu"),
        "softplus_zero_levels": agreed("softplus"),
        "figures": [decay_png.name, levels_png.name],
        "data": "spectra.json",
    }
    data = {
        "ntk_relative_eigenvalues": {
            str(d): {str(depth): decay[d]["relative"][depth].tolist() for depth in depths}
            for d in DECAY_DIMS
        },
        "fitted_beta": {str(d): dict(zip(map(str, depths), betas[d], strict=True)) for d in betas},
        "level_coefficients": {
            str(d): {name: values.tolist() for name, values in spectra.items()}
            for d, spectra in patterns.items()
        },
        "metrics": metrics,
    }
    (output_dir / "spectra.json").write_text(json.dumps(data, indent=1))
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", type=Path, help="folder for the PNGs and spectra.json")
    parser.add_argument("--full", action="store_true", help="more depths and levels")
    args = parser.parse_args(argv)
    metrics = run_spectra(args.output_dir, full=args.full)
    print(json.dumps(metrics, indent=1, default=lambda v: v if math.isfinite(v) else str(v)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
