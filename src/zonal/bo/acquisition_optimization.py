r"""``optimize_acqf_sphere``: BoTorch's ``optimize_acqf`` with the box replaced by
:math:`\mathbb{S}^{d-1}`.

Candidates are q-batches of unit vectors :math:`X` [q, d]. The steps (seed 004 sec. 4.1 and
app. A.2):

1. Raw samples: ``raw_samples`` q-batches, from a near-uniform design (``design.sobol_sphere``)
   and, when ``anchors`` (e.g. the best observed points) are given, perturbations of them:
   :math:`x = \exp_a(s u)` with :math:`u` a random tangent direction at the anchor :math:`a` and
   radii :math:`s` spread geometrically between ``perturbation_scales`` (narrow wells are found
   near good points).
2. Initial conditions: ``num_restarts`` of them chosen by BoTorch's ``initialize_q_batch``
   (Boltzmann sampling on the standardised acquisition values), or ``batch_initial_conditions``.
3. Multi-start Riemannian ascent (``riemannian.riemannian_ascent``; ``optimizer="geoopt"``:
   geoopt's Riemannian Adam), every restart in one t-batch.
4. The best restart (``return_best_only``; restarts where the acquisition is NaN are passed
   over, and NaN at every restart is a ``ValueError``), or all of them.

The candidates lie on the sphere to rounding (:math:`\lvert 1 - \|x\| \rvert \le 10^{-12}` is
tested). The return is BoTorch's: (candidates [q, d], acquisition value []) or ([R, q, d], [R]). A
one-shot acquisition (``qKnowledgeGradient``, ``zonal.bo.KnowledgeGradient``,
``qMultiStepLookahead``) is optimised over its augmented q-batch (the :math:`q` candidates and the
fantasies' points, ``get_augmented_q_batch_size``), all on the sphere, and the :math:`q` candidates
are extracted (``extract_candidates``), as ``optimize_acqf`` does.
"""

from __future__ import annotations

import math

import torch
from botorch.acquisition import AcquisitionFunction, OneShotAcquisitionFunction
from botorch.optim.initializers import initialize_q_batch

from zonal._validation import check_ambient_dim, check_unit_vectors
from zonal.bo.design import sobol_sphere
from zonal.bo.riemannian import AscentOptions, geoopt_ascent, riemannian_ascent
from zonal.geometry import exp_map, project_to_tangent

OPTIMIZERS = {"riemannian": riemannian_ascent, "geoopt": geoopt_ascent}
#: q-batches evaluated at a time when scoring raw samples
RAW_CHUNK = 512


def perturb(
    anchors: torch.Tensor,
    count: int,
    scales: tuple[float, float],
    generator: torch.Generator,
) -> torch.Tensor:
    """``count`` points [count, d] near the anchors [A, d] (cycled): exp_a(s u), u a uniform
    unit tangent direction at a, s geometric from scales[0] to scales[1] radians."""
    rows = anchors[torch.arange(count, device=anchors.device) % len(anchors)]  # [count, d]
    noise = torch.randn(rows.shape, generator=generator, dtype=torch.float64).to(rows)
    direction = project_to_tangent(rows, noise)
    direction = direction / direction.norm(dim=-1, keepdim=True).clamp(min=1e-300)
    low, high = math.log(scales[0]), math.log(scales[1])
    fraction = torch.rand(count, generator=generator, dtype=torch.float64).to(rows)
    radius = torch.exp(low + (high - low) * fraction)  # [count]
    return exp_map(rows, radius.unsqueeze(-1) * direction)


def raw_candidates(
    ambient_dim: int,
    q: int,
    raw_samples: int,
    *,
    anchors: torch.Tensor | None,
    anchor_fraction: float,
    perturbation_scales: tuple[float, float],
    seed: int,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """Raw q-batches [raw_samples, q, d]: the Sobol design and perturbed anchors (step 1)."""
    near = 0 if anchors is None else round(anchor_fraction * raw_samples)
    design = sobol_sphere((raw_samples - near) * q, ambient_dim, seed=seed, dtype=dtype)
    points = [design.to(device)]
    if anchors is not None and near:
        generator = torch.Generator().manual_seed(seed)
        anchors = anchors.to(dtype=dtype, device=device)
        points.append(perturb(anchors, near * q, perturbation_scales, generator))
    return torch.cat(points).reshape(raw_samples, q, ambient_dim)


def acquisition_device(acq_function: AcquisitionFunction) -> torch.device:
    """The device of the acquisition's first parameter or buffer (its model's), the CPU if it
    has none: where ``optimize_acqf_sphere`` puts its candidates when no device is given."""
    for tensor in (*acq_function.parameters(), *acq_function.buffers()):
        return tensor.device
    return torch.device("cpu")


def acquisition_dtype(acq_function: AcquisitionFunction) -> torch.dtype:
    """The dtype of the acquisition's first floating-point parameter or buffer (its model's),
    float64 if it has none: the dtype of ``optimize_acqf_sphere``'s candidates when none is
    given, so that a float32 model gets float32 candidates (as BoTorch's ``optimize_acqf``
    follows its bounds)."""
    for tensor in (*acq_function.parameters(), *acq_function.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype
    return torch.float64


@torch.no_grad()
def evaluate_in_chunks(acq_function: AcquisitionFunction, X: torch.Tensor) -> torch.Tensor:
    """a(X) [B] for q-batches X [B, q, d], ``RAW_CHUNK`` at a time."""
    return torch.cat([acq_function(rows) for rows in X.split(RAW_CHUNK)])


def optimize_acqf_sphere(
    acq_function: AcquisitionFunction,
    ambient_dim: int,
    q: int,
    num_restarts: int,
    raw_samples: int | None = None,
    options: dict | None = None,
    batch_initial_conditions: torch.Tensor | None = None,
    return_best_only: bool = True,
    *,
    anchors: torch.Tensor | None = None,
    anchor_fraction: float = 0.25,
    perturbation_scales: tuple[float, float] = (1e-3, 0.3),
    optimizer: str = "riemannian",
    seed: int = 0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Maximise ``acq_function`` over q-batches of points on :math:`\mathbb{S}^{d-1}` (module
    docstring).

    Args:
        acq_function: any BoTorch acquisition function (t-batched: :math:`X` [b, q, d] -> [b]).
        ambient_dim: :math:`d` (the sphere :math:`\mathbb{S}^{d-1}` in :math:`\mathbb{R}^d`).
        q: points per candidate batch (optimised jointly; a one-shot acquisition's augmented
            batch is optimised and its :math:`q` candidates returned).
        num_restarts: :math:`R`, restarts of the ascent.
        raw_samples: q-batches scored to choose the restarts (needed without
            ``batch_initial_conditions``).
        options: ``AscentOptions`` fields (``maxiter`` is taken for ``max_iterations``).
        batch_initial_conditions: starting q-batches [R, q, d] of unit vectors ([R, q', d],
            :math:`q'` the augmented batch size, for a one-shot acquisition).
        return_best_only: the best restart only, or all.
        anchors: points [A, d] on the sphere whose neighbourhoods are sampled (the best
            observed points); ``anchor_fraction`` of the raw samples come from them.
        perturbation_scales: smallest and largest geodesic radius of the perturbations.
        optimizer: ``"riemannian"`` (zonal's steepest ascent) or ``"geoopt"`` (Riemannian Adam).
        seed: seed of the Sobol scrambling, the perturbations and the restart choice.
        dtype: dtype of the candidates; by default the acquisition's (``acquisition_dtype``:
            float64 where it holds no floating-point tensor).
        device: device of the candidates; by default the acquisition's (``acquisition_device``).
    """
    ambient_dim = check_ambient_dim(ambient_dim)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}")
    if q < 1 or num_restarts < 1:
        raise ValueError(f"q and num_restarts must be >= 1, got q={q}, {num_restarts=}")
    ascent_options = AscentOptions.from_dict(options)
    if isinstance(acq_function, OneShotAcquisitionFunction):  # the q candidates and the points
        q = acq_function.get_augmented_q_batch_size(q)  # of the fantasies' inner problems
    device = acquisition_device(acq_function) if device is None else torch.device(device)
    dtype = acquisition_dtype(acq_function) if dtype is None else dtype
    if batch_initial_conditions is not None:
        start = batch_initial_conditions.to(dtype=dtype, device=device)
        if start.dim() != 3 or start.shape[-2:] != (q, ambient_dim):
            raise ValueError(
                f"batch_initial_conditions must have shape [R, {q}, {ambient_dim}], got "
                f"{tuple(start.shape)}"
            )
        check_unit_vectors(start, ambient_dim, "batch_initial_conditions")
    else:
        if raw_samples is None or raw_samples < num_restarts:
            raise ValueError(
                f"raw_samples must be given and >= num_restarts ({num_restarts}), got {raw_samples}"
            )
        if anchors is not None:
            check_unit_vectors(anchors, ambient_dim, "anchors")
            if len(anchors) == 0:
                anchors = None
        raw = raw_candidates(
            ambient_dim,
            q,
            raw_samples,
            anchors=anchors,
            anchor_fraction=anchor_fraction,
            perturbation_scales=perturbation_scales,
            seed=seed,
            dtype=dtype,
            device=device,
        )
        values = evaluate_in_chunks(acq_function, raw)  # [raw_samples]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            start, _ = initialize_q_batch(raw, values, num_restarts)
    points, values = OPTIMIZERS[optimizer](acq_function, start, ascent_options)
    if torch.isnan(values).all():
        raise ValueError(
            f"the acquisition function is NaN at all {len(values)} restarts: check the model "
            "(its posterior variance) and the acquisition's inputs"
        )
    if isinstance(acq_function, OneShotAcquisitionFunction):  # each restart's q candidates
        points = acq_function.extract_candidates(points)
    if not return_best_only:
        return points, values
    best = int(values.nan_to_num(nan=-math.inf).argmax())  # a NaN restart is never the best
    return points[best], values[best]


__all__ = [
    "OPTIMIZERS",
    "acquisition_device",
    "acquisition_dtype",
    "optimize_acqf_sphere",
    "perturb",
    "raw_candidates",
]
