"""Conditioning on new observations and fantasies: BoTorch's batch semantics for zonal models.

``ZonalModel.condition_on_observations(X, Y, noise=None)`` and ``ZonalModel.fantasize(X, sampler,
observation_noise=None)`` (``zonal.models.contract``) check and reshape their arguments here, then
call the model's own ``_conditioned(X, Y, noise, per_component)``:

* :math:`X` [*b, q, D] in data space (the input transform, if any, is applied here);
* :math:`Y` [*F, *b, q, m] (fewer batch dimensions broadcast), outcome-transformed here; the model
  receives :math:`Y` [*F, *b, q] for one output, [*F, *b, q, m] for :math:`m` outputs (``SVGP``
  only);
* noise [*b, q, m] of the new rows' observation variances in the outcome-transformed space
  (BoTorch's convention), or None for the likelihood's noise; the model receives [*b, q]
  ([*b, q, m] for :math:`m` outputs);
* ``per_component`` (fantasies of a mixture model): :math:`Y` [*F, *b, S, q] holds one
  observation per mixture component, as the sampler draws them from a ``GaussianMixturePosterior``.

The returned model has the batch shape [*F, *b] (``batch_shape``): ``posterior(X')`` broadcasts
:math:`X'` [*b', q', D] against it, as BoTorch's look-ahead acquisitions (``qKnowledgeGradient``,
``qMaxValueEntropy`` with pending points, ``qJointEntropySearch``,
``qNegIntegratedPosteriorVariance``) expect; a deep or stacked model (a Gaussian mixture) takes
the knowledge gradient through ``zonal.bo.KnowledgeGradient`` and the entropy searches through
``MomentMatchedModel`` (docs/conditioning.md). The hyperparameters are never refitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from copy import deepcopy
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from botorch import settings
from botorch.models.utils.assorted import fantasize as fantasize_flag
from botorch.sampling import MCSampler
from gpytorch.likelihoods import (
    FixedNoiseGaussianLikelihood,
    GaussianLikelihood,
    MultitaskGaussianLikelihood,
)
from gpytorch.utils.memoize import clear_cache_hook

if TYPE_CHECKING:
    from zonal.models.contract import ZonalModel

Model = TypeVar("Model", bound="ZonalModel")


class ConditioningError(ValueError):
    """A model, likelihood or argument that conditioning on observations does not support."""


def task_noises(model: ZonalModel) -> torch.Tensor:
    """The noise variance of each output [P] of ``model``'s ``MultitaskGaussianLikelihood`` with
    independent noise (rank 0); other likelihoods are refused by name."""
    likelihood = getattr(model, "likelihood", None)
    if not isinstance(likelihood, MultitaskGaussianLikelihood) or likelihood.rank != 0:
        raise ConditioningError(
            "conditioning a multi-output model needs a MultitaskGaussianLikelihood with "
            f"independent noise (rank 0), the model has {type(likelihood).__name__}"
        )
    noise = likelihood.noise.new_zeros(likelihood.num_tasks)  # [P]
    if likelihood.has_global_noise:
        noise = noise + likelihood.noise
    if likelihood.has_task_noise:
        noise = noise + likelihood.task_noises
    return noise


def gaussian_noise(model: ZonalModel) -> torch.Tensor:
    """The homoscedastic noise variance s^2 (a scalar tensor) of ``model``'s Gaussian likelihood;
    other likelihoods are refused by name (the update needs a Gaussian likelihood)."""
    likelihood = getattr(model, "likelihood", None)
    if not isinstance(likelihood, GaussianLikelihood) or isinstance(
        likelihood, FixedNoiseGaussianLikelihood
    ):
        name = type(likelihood).__name__
        raise ConditioningError(
            f"conditioning on observations needs a GaussianLikelihood, the model has {name} "
            "(online variational conditioning is exact only for a Gaussian likelihood)"
        )
    return likelihood.noise.reshape(())


def conditioned_copy(model: Model) -> Model:
    """A copy of ``model`` in eval mode to hold a conditioned state: parameters and buffers are
    copied, so the original is left as it was. GPyTorch's memoised values are dropped first, and
    the tensors of an earlier conditioning that carry an autograd graph (differentiable in the
    fantasised points) are shared with the copy, which replaces rather than modifies them."""
    model.eval()
    shared: dict[
        int, Any
    ] = {}  # tensors computed with a graph (a conditioned state) are shared, not copied
    for module in model.modules():
        if hasattr(module, "_memoize_cache"):
            clear_cache_hook(module)
        state = [getattr(module, name, None) for name in ("_online", "_new_rows")]
        for tensor in [*module.buffers(recurse=False), *_tensors(state)]:
            if tensor.grad_fn is not None:
                shared[id(tensor)] = tensor
    copy = deepcopy(model, shared)
    return copy.eval()


def _tensors(values: Iterable[object]) -> list[torch.Tensor]:
    """The tensors among ``values`` and inside the tuples among them."""
    found: list[torch.Tensor] = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, tuple):
            found.extend(_tensors(value))
    return found


def prepare_observations(
    model: ZonalModel, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(X [*b, q, D] input-transformed, Y [*F, *b, q] outcome-transformed, noise [*b, q] or None)
    from BoTorch-shaped arguments (module docstring), with named errors."""
    outputs = model.num_outputs
    if outputs != 1 and not model._conditions_outputs:
        raise ConditioningError(
            f"conditioning {type(model).__name__} is implemented for one output; this one has "
            f"{outputs} (use a ModelListGP of single-output models, or a multi-output SVGP)"
        )
    if not isinstance(X, torch.Tensor) or X.dim() < 2:
        raise ConditioningError("X must be a tensor [q, D] (or [..., q, D])")
    model.eval()  # transforms in training mode would learn from the new rows
    X = model.check_inputs(model.transform_inputs(X))
    Y = torch.as_tensor(Y).to(X)
    if Y.dim() == 1 and outputs == 1:
        Y = Y.unsqueeze(-1)
    if Y.dim() < 2 or Y.shape[-1] != outputs or Y.shape[-2] != X.shape[-2]:
        raise ConditioningError(
            f"Y must have shape [..., q, {outputs}] with q = {X.shape[-2]} rows of X, got "
            f"{tuple(Y.shape)}"
        )
    if not torch.isfinite(Y).all():
        raise ConditioningError("Y contains NaN or infinite values")
    outcome_transform = getattr(model, "outcome_transform", None)
    if outcome_transform is not None:
        Y, _ = outcome_transform(Y, X=X)  # eval mode: the training statistics
    if noise is not None:
        noise = torch.as_tensor(noise).to(X)
        if outputs == 1 and noise.dim() > 1 and noise.shape[-1] == 1:
            noise = noise.squeeze(-1)
        if not (noise > 0).all():
            raise ConditioningError("noise variances must be positive")
    return X, (Y.squeeze(-1) if outputs == 1 else Y), noise


def condition_on_observations(
    model: ZonalModel,
    X: torch.Tensor,
    Y: torch.Tensor,
    noise: torch.Tensor | None = None,
    *,
    per_component: bool = False,
) -> ZonalModel:
    """The model conditioned on (X, Y) (module docstring)."""
    X, Y, noise = prepare_observations(model, X, Y, noise)
    return model._conditioned(X, Y, noise, per_component=per_component)


def fantasize(
    model: ZonalModel,
    X: torch.Tensor,
    sampler: MCSampler,
    observation_noise: torch.Tensor | None = None,
    **kwargs: Any,
) -> ZonalModel:
    """BoTorch's ``fantasize``: draw Y ~ p(y(X) | data) with ``sampler`` ([*F, *b, (S,) q, 1]) and
    condition on each draw. ``observation_noise`` None uses the likelihood's noise; a tensor
    [*b, q, 1] (outcome-transformed) gives the new rows' noise. ``propagate_grads`` keeps the
    gradient through the posterior at X (as BoTorch's)."""
    if observation_noise is not None and not isinstance(observation_noise, torch.Tensor):
        raise ConditioningError("observation_noise must be None or a tensor [..., q, 1]")
    with fantasize_flag(), settings.propagate_grads(kwargs.pop("propagate_grads", False)):
        posterior = model.posterior(
            X, observation_noise=True if observation_noise is None else observation_noise
        )
        Y = sampler(posterior)  # [*F, *b, (S,) q, 1]
    noise = None if observation_noise is None else observation_noise.expand(*X.shape[:-1], 1)
    with fantasize_flag():
        return condition_on_observations(model, X, Y, noise, per_component=bool(model._is_ensemble))
