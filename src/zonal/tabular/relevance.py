"""Where ``auto`` starts the input scales of its regression candidates: a relevance screen
(``zonal.tabular.candidates.screened_start``: for a regression of more than ``SCREEN_ROWS``
training rows, by the rules of docs/fit_evidence.md; classifiers and smaller tables start at 1).

The zonal models read the lifted point [s * x, b] / r (``zonal.geometry.SphereEmbedding``, b = 1)
and learn the scales s with their other hyperparameters, from a start. At s = 1 for every column
of standardised inputs the lifted point sits at radius ~ sqrt(D), where the 1-homogeneous kernel
r r' k(z . z') reads mostly the norm and the direction of x; on a table whose target depends on a
few of its D inputs the scales of the others then stay large (session 29: 2 relevant inputs of 32,
``benchmarks/few_relevant_inputs.py``, the SVGP with inducing points at test MSE 0.058 from s = 1,
0.012 from s = 1 / sqrt(D), the RBF-ARD SVGP's 0.012; the held-out table puma32h).

The screen reads the relevance off the table instead: an exact GP with the RBF-ARD kernel

    k(x, x') = sigma^2 exp(-sum_d (x_d - x'_d)^2 / (2 l_d^2)),

fitted by L-BFGS on the log marginal likelihood of at most ``SCREEN_ROWS`` training rows (a
classifier's one-hot class columns, centred, share the kernel and noise: sum over columns of
log N(y_c; 0, K + noise I)), has the posterior mean m(x) = sum_j k(x, x_j) alpha_j with
alpha = (K + noise I)^{-1} Y, whose slope along input d at a row,

    dm / dx_d (x_i) = -sum_j k(x_i, x_j) alpha_j (x_id - x_jd) / l_d^2,

measures how the target moves with d whether it bends along it (small l_d) or rises on a line
(large l_d: the lengthscale alone misses linear effects; the slope of the posterior mean is the
relevance of Paananen et al., AISTATS 2019). Let g_d be its root mean square over the rows (and
columns). Near the pole the angle between the lifted points of x and x' is
theta ~ ||s * (x - x')|| / b and a zonal kernel of variance v is v (1 - kappa theta^2 / 2 + ...)
(kappa = 1 for the first-order arc-cosine kernel; the chordal kernels learn their own length),
whose functions have mean squared slope v kappa s_d^2 / b^2 along d. With v the targets'
variance v_y (where a model of the standardised target starts) and kappa = 1, that is g_d^2 at

    s_d = b g_d / sqrt(v_y),   clamped to ``SCALE_RANGE``:

relevant inputs start at unit-order scales, irrelevant ones near zero, and the radius
||[s * x, b]|| of order one where the target varies over one standard deviation of its inputs.
"""

from __future__ import annotations

import math

import torch

from zonal.linalg import NotPositiveDefiniteError, cholesky
from zonal.models.lbfgs import maximise_by_lbfgs

#: the screen's exact GP reads at most this many training rows (a random subset)
SCREEN_ROWS = 500
#: its L-BFGS iterations (each a Cholesky of at most SCREEN_ROWS rows)
SCREEN_ITERATIONS = 100
#: the starts the screen gives: from a root-mean-square slope of 1% of the target's standard
#: deviation per standard deviation of the input (irrelevant: a scale that small leaves the
#: column out of the kernel, and its gradient can still raise it) to 10 of them
SCALE_RANGE = (0.01, 10.0)
#: the name errors give the screen's covariance
COVARIANCE = "the relevance screen's RBF-ARD covariance"


def input_slopes(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    max_rows: int = SCREEN_ROWS,
    iterations: int = SCREEN_ITERATIONS,
    seed: int = 0,
) -> tuple[torch.Tensor, float]:
    """(g [D], v_y): the root-mean-square slope g_d of the fitted posterior mean along each input
    over the screen's rows and target columns, and the targets' variance v_y (the mean of the
    columns' variances), for the exact RBF-ARD GP that maximises log p(Y | x) on at most
    ``max_rows`` rows of x [N, D] (drawn with ``seed``) and targets y [N] or [N, C] (columns
    centred, sharing the kernel and the noise). Float64; the fit starts at l_d = sqrt(D) (an RBF
    value of exp(-1) at the mean squared distance 2D of standardised rows), sigma^2 = v_y and
    noise v_y / 10 (``zonal.models.lbfgs.maximise_by_lbfgs``: the parameters end at the best
    evaluation). ``NotPositiveDefiniteError`` when K + noise I is not positive definite even with
    jitter at the start; a later trial point where it is not ends the fit at the best one."""
    if x.dim() != 2 or len(x) < 2:
        raise ValueError(f"the screen needs rows x [N >= 2, D], got shape {tuple(x.shape)}")
    targets = y.reshape(len(y), -1) if y.dim() <= 2 else None
    if targets is None or len(targets) != len(x):
        raise ValueError(
            f"y must be [N] or [N, C] with N = {len(x)} rows, got shape {tuple(y.shape)}"
        )
    generator = torch.Generator().manual_seed(int(seed))
    rows = torch.randperm(len(x), generator=generator)[:max_rows].to(x.device)
    inputs = x[rows].to(torch.float64)  # [n, D]
    outputs = targets[rows].to(torch.float64)  # [n, C]
    outputs = outputs - outputs.mean(0)
    variance = float(outputs.var(0).mean().clamp(min=1e-12))
    dim = inputs.shape[1]
    log_lengthscales = torch.full(
        (dim,), 0.5 * math.log(dim), dtype=torch.float64, device=x.device, requires_grad=True
    )
    log_variance = torch.tensor(math.log(variance), dtype=torch.float64, device=x.device,
                                requires_grad=True)  # fmt: skip
    log_noise = torch.tensor(math.log(0.1 * variance), dtype=torch.float64, device=x.device,
                             requires_grad=True)  # fmt: skip
    maximise_by_lbfgs(
        [log_lengthscales, log_variance, log_noise],
        lambda: -_negative_log_marginal(inputs, outputs, log_lengthscales, log_variance, log_noise),
        max_iter=iterations,
        stop_on=(NotPositiveDefiniteError,),
    )
    with torch.no_grad():
        slopes = _posterior_mean_slopes(
            inputs, outputs, log_lengthscales.exp(), log_variance.exp(), log_noise.exp()
        )  # [n, D, C]
    return slopes.pow(2).mean(dim=(0, 2)).sqrt(), variance


def _posterior_mean_slopes(
    x: torch.Tensor,
    y: torch.Tensor,
    lengthscales: torch.Tensor,
    variance: torch.Tensor,
    noise: torch.Tensor,
) -> torch.Tensor:
    """dm_c / dx_d at the rows x [n, D] of the RBF-ARD posterior mean given Y [n, C]: [n, D, C],
    -(x_id (K alpha)_ic - (K (x_d * alpha_c))_i) / l_d^2 with alpha = (K + noise I)^{-1} Y."""
    count, dim = x.shape
    kernel = _rbf(x, lengthscales, variance)  # [n, n]
    eye = torch.eye(count, dtype=x.dtype, device=x.device)
    alpha = torch.cholesky_solve(y, cholesky(kernel + noise * eye, name=COVARIANCE))  # [n, C]
    mean = kernel @ alpha  # [n, C]
    weighted = (kernel @ (x.unsqueeze(-1) * alpha.unsqueeze(1)).reshape(count, -1)).reshape(
        count, dim, -1
    )  # [n, D, C]: (K (x_d * alpha_c))_i
    return -(x.unsqueeze(-1) * mean.unsqueeze(1) - weighted) / lengthscales.pow(2).unsqueeze(-1)


def _rbf(x: torch.Tensor, lengthscales: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    """K [n, n] = sigma^2 exp(-||(x - x') / l||^2 / 2) for x [n, D]."""
    scaled = x / lengthscales  # [n, D]
    return variance * torch.exp(-0.5 * torch.cdist(scaled, scaled).pow(2))


def _negative_log_marginal(
    x: torch.Tensor,
    y: torch.Tensor,
    log_lengthscales: torch.Tensor,
    log_variance: torch.Tensor,
    log_noise: torch.Tensor,
) -> torch.Tensor:
    """-log p(Y | x) / (n C) for the RBF-ARD GP: Y [n, C] independent columns of N(0, K + noise I),
    K [n, n] = sigma^2 exp(-||(x - x') / l||^2 / 2), all parameters on the log scale."""
    covariance = _rbf(x, log_lengthscales.exp(), log_variance.exp())  # [n, n]
    covariance = covariance + log_noise.exp() * torch.eye(len(x), dtype=x.dtype, device=x.device)
    factor = cholesky(covariance, name=COVARIANCE)  # [n, n]
    weights = torch.cholesky_solve(y, factor)  # [n, C]
    count, columns = y.shape
    log_det = 2 * factor.diagonal().log().sum()
    quadratic = 0.5 * (y * weights).sum() / (count * columns)
    return quadratic + 0.5 * log_det / count + 0.5 * math.log(2 * math.pi)


def screened_input_scales(
    x: torch.Tensor, y: torch.Tensor, *, seed: int = 0, bias: float = 1.0
) -> list[float] | None:
    """The start of the input scales, s_d = b g_d / sqrt(v_y) clamped to ``SCALE_RANGE``
    (module docstring; ``input_slopes``), from x [N, D] and y [N] (a regression target) or
    [N, C] (one-hot classes); None when the screen's covariance is not positive definite or its
    slopes are not finite (the scales then start at 1, as without the screen)."""
    try:
        slopes, target_variance = input_slopes(x, y, seed=seed)
    except NotPositiveDefiniteError:
        return None
    scales = bias * slopes / math.sqrt(target_variance)  # [D]
    if not torch.isfinite(scales).all():
        return None
    return scales.clamp(*SCALE_RANGE).tolist()
