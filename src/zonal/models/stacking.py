r"""Stacking of predictive distributions: a weighted mixture of trained regression models, or of
trained classifiers.

Given :math:`K` trained models with predictive densities :math:`p_k(y \mid x)`, stacking (Y. Yao,
A. Vehtari, D. Simpson and A. Gelman, *Using Stacking to Average Bayesian Predictive
Distributions*, Bayesian Analysis 13(3), 2018) predicts with the mixture

.. math::

    p(y \mid x) = \sum_k w_k p_k(y \mid x), \qquad w \text{ on the simplex},

its weights maximising the mean log density of held-out rows,
:math:`\frac{1}{n} \sum_i \log \sum_k w_k p_k(y_i \mid x_i)`: a concave objective, maximised by
``stacking_weights`` (EM, whose every step raises it); ``zonal fit`` rounds the maximiser to
multiples of 1 / ``WEIGHT_RESOLUTION``.
When one model is best everywhere the weights pick it; when models err differently the mixture
beats each of them (``zonal fit``'s ``auto``: ``zonal.fitting``). Two ways to weigh few held-out
rows less decisively: the mean of the maximiser over Bayesian-bootstrap replicates of the rows
(``bootstrap_stacking_weights``, ``auto``'s) and the posterior mean of the mixture weights under a
Dirichlet prior (``posterior_stacking_weights``; compared in docs/fit_evidence.md).

``StackedModel`` answers the model contract of ``zonal.models.contract``: ``predict`` gives the
mixture moments (mean :math:`\sum_k w_k m_k`, variance
:math:`\sum_k w_k (v_k + m_k^2) - \text{mean}^2`), ``log_predictive_density``
:math:`\log \sum_k w_k p_k(y \mid x)`, and ``posterior`` a BoTorch ``GaussianMixturePosterior``
whose equally weighted components are the components' own (one for a single-layer model,
:math:`S` Monte Carlo components for a deep one), each repeated in proportion to its weight. For
that the weights are multiples of 1 / ``WEIGHT_RESOLUTION`` (``quantize_weights``), so the
posterior and the closed forms agree exactly. Components are single-output models with Gaussian
likelihoods, each keeping its own noise, or classifiers of one likelihood (Bernoulli or softmax)
and one number of latent outputs: their mixture predicts the class probabilities
:math:`\sum_k w_k p_k(c \mid x)` (``zonal.tabular.metrics.class_probabilities``), its latent
posterior is the equally weighted mixture of theirs as above (multitask normals, interleaved).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, cast

import numpy as np
import torch
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.likelihoods import GaussianLikelihood
from linear_operator.operators import DenseLinearOperator

from zonal.models import conditioning
from zonal.models.contract import PREDICTION_CHUNK, ZonalModel

#: stacking weights are multiples of 1 / WEIGHT_RESOLUTION (their posterior repeats components)
WEIGHT_RESOLUTION = 20
#: EM iterations of ``stacking_weights`` at most, and the objective gain that ends them
STACKING_ITERATIONS = 2000
STACKING_TOLERANCE = 1e-10


def _check_log_densities(log_densities: torch.Tensor) -> None:
    """Refuse held-out log densities that are not [n, K] with n, K >= 1, or hold NaN or +inf."""
    if log_densities.dim() != 2 or log_densities.shape[0] == 0 or log_densities.shape[1] == 0:
        raise ValueError(
            f"log_densities must be [n, K] with n, K >= 1, got {tuple(log_densities.shape)}"
        )
    if torch.isnan(log_densities).any() or (log_densities == math.inf).any():
        raise ValueError("log_densities holds NaN or +inf: the models' densities are not valid")


def stacking_weights(
    log_densities: torch.Tensor,
    *,
    row_weights: torch.Tensor | None = None,
    iterations: int = STACKING_ITERATIONS,
    tolerance: float = STACKING_TOLERANCE,
) -> torch.Tensor:
    """The weights w [K] on the simplex maximising sum_i c_i log sum_k w_k exp(L_ik) for held-out
    log densities L [n, K] (row i, model k) and row weights c [n] (``row_weights``, non-negative,
    normalised to sum to 1; equal by default: the mean log density of the mixture). Row weights
    [B, n] give B such problems at once (weights [B, K]): ``bootstrap_stacking_weights``.

    EM from equal weights: responsibilities r_ik = w_k p_ik / sum_j w_j p_ij, then w_k = sum_i
    c_i r_ik; each step raises the (concave) objective, and the loop ends when it gains less than
    ``tolerance`` (in every problem of a batch). A model whose density is -inf on some rows is
    not excluded by that alone; a column that is not finite anywhere gets weight 0, and a row to
    which every model gives density 0 says nothing about the weights and is left out.
    """
    _check_log_densities(log_densities)
    log_densities = log_densities.to(torch.float64)
    count = len(log_densities)
    if row_weights is None:
        row_weights = torch.ones(count, dtype=torch.float64, device=log_densities.device)
    row_weights = torch.as_tensor(row_weights, dtype=torch.float64, device=log_densities.device)
    if row_weights.shape[-1:] != (count,) or row_weights.dim() > 2:
        raise ValueError(
            f"row_weights must be [n] or [B, n] with n = {count}, got {tuple(row_weights.shape)}"
        )
    if not torch.isfinite(row_weights).all() or (row_weights < 0).any():
        raise ValueError("row_weights must be finite and non-negative")
    batched = row_weights.dim() == 2
    row_weights = row_weights.reshape(-1, count)  # [B, n]
    informative = torch.isfinite(log_densities).any(1)  # [n]
    log_densities, row_weights = log_densities[informative], row_weights[:, informative]
    usable = torch.isfinite(log_densities).any(0)  # [K]
    if not usable.any():
        raise ValueError("every model gives zero density to every held-out row")
    totals = row_weights.sum(-1, keepdim=True)  # [B, 1]
    if not (totals > 0).all():
        raise ValueError("row_weights give no weight to any row that a model gives density")
    row_weights = row_weights / totals  # [B, n']
    # densities scaled by each row's largest (at most 1, and 1 somewhere in the row): the EM
    # step w_k <- w_k sum_i c_i p_ik / sum_j w_j p_ij is the same in these units
    scaled = torch.exp(log_densities - log_densities.max(-1, keepdim=True).values)  # [n', K]
    weights = (usable.to(log_densities) / usable.sum()).expand(len(totals), -1)  # [B, K]
    previous = torch.full((len(totals),), -math.inf, dtype=torch.float64, device=totals.device)
    for _ in range(iterations):
        mixture = weights @ scaled.mT  # [B, n'], sum_k w_k p_ik (scaled)
        objective = (row_weights * mixture.log()).sum(-1)  # [B], up to a constant
        weights = weights * ((row_weights / mixture) @ scaled)  # [B, K]
        if float((objective - previous).max()) < tolerance:
            break
        previous = objective
    weights = weights / weights.sum(-1, keepdim=True)
    return weights if batched else weights[0]


def bootstrap_stacking_weights(
    log_densities: torch.Tensor,
    draws: int,
    *,
    seed: int = 0,
    iterations: int = STACKING_ITERATIONS,
    tolerance: float = STACKING_TOLERANCE,
) -> torch.Tensor:
    """The mean over ``draws`` Bayesian-bootstrap replicates of the stacking weights [K] of
    held-out log densities L [n, K]: each replicate weighs the rows by c ~ Dirichlet(1, ..., 1)
    (Rubin 1981; the row weights of Yao et al. 2018's pseudo-BMA+) and maximises sum_i c_i log
    sum_k w_k p_ik (``stacking_weights``, all replicates in one batch, with ``iterations`` and
    ``tolerance``). Where a few rows decide the weights, the replicates disagree and their mean
    keeps some weight on every model that wins some replicate; on many rows it tends to the
    plain weights. The draws come from a generator seeded with ``seed`` (the same weights for
    the same rows)."""
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    # drawn on the CPU from a seeded CPU generator (the same draws on every device), then moved
    generator = torch.Generator(device="cpu").manual_seed(seed)
    gamma = torch.empty(draws, len(log_densities), dtype=torch.float64, device="cpu").exponential_(
        generator=generator
    )  # [B, n]: each row, normalised, a Dirichlet(1, ..., 1) draw
    replicates = stacking_weights(
        log_densities,
        row_weights=gamma.to(log_densities.device),
        iterations=iterations,
        tolerance=tolerance,
    )  # [B, K]
    weights = replicates.mean(0)  # [K]
    return weights / weights.sum()


#: Gibbs sweeps of ``posterior_stacking_weights`` kept (after as many again discarded), and its
#: chains: Monte Carlo sizes, not constants fitted to tables (the test holds the mean within 0.01
#: of quadrature on the simplex)
POSTERIOR_SWEEPS = 1000
POSTERIOR_CHAINS = 16


def posterior_stacking_weights(
    log_densities: torch.Tensor,
    *,
    concentration: float = 1.0,
    sweeps: int = POSTERIOR_SWEEPS,
    chains: int = POSTERIOR_CHAINS,
    seed: int = 0,
) -> torch.Tensor:
    """The posterior mean E[w | L] [K] of the mixture weights of held-out log densities L [n, K]
    under a Dirichlet(a, ..., a) prior (``concentration`` a; 1: uniform on the simplex), the
    rows being independent draws of the mixture sum_k w_k p_k(y | x):

        p(w | L) ∝ prod_k w_k^(a - 1) prod_i sum_k w_k exp(L_ik).

    Where ``stacking_weights`` takes this likelihood's maximiser (the posterior mode under the
    uniform prior), the mean keeps the weight the rows cannot rule out: a model that wins every one
    of a few rows by a small margin does not take all the weight, and as n grows the two agree.
    (The posterior of mixing proportions with known components; the Bayesian counterpart of Yao
    et al. 2018's stacking.)

    Computed by Gibbs sampling with the rows' allocations z_i (``chains`` chains from the prior,
    ``sweeps`` sweeps kept after as many discarded): z_i | w ~ Cat(w_k p_ik / sum_j w_j p_ij), w |
    z ~ Dirichlet(a + counts(z)), averaging E[w | z] = (a + counts) / (K a + n) (Rao-Blackwell).
    A column that is not finite anywhere is not a mixture component (weight 0, out of the prior);
    a row to which every model gives density 0 is left out. Draws come from numpy's generator
    seeded with ``seed`` (the same weights on every device)."""
    _check_log_densities(log_densities)
    if not (isinstance(concentration, int | float) and concentration > 0):
        raise ValueError(f"concentration must be a positive number, got {concentration!r}")
    for name, value in (("sweeps", sweeps), ("chains", chains)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    finite = torch.isfinite(log_densities).cpu().numpy()  # [n, K]
    usable, rows = finite.any(0), finite.any(1)  # [K], [n]
    kept = log_densities.detach().to(device="cpu", dtype=torch.float64).numpy()[rows][:, usable]
    if kept.size == 0:
        raise ValueError("every model gives zero density to every held-out row")
    count, models = kept.shape  # n', K'
    scaled = np.exp(kept - kept.max(-1, keepdims=True))  # [n', K'], 1 somewhere in each row
    rng = np.random.default_rng(seed)
    prior = np.full((chains, models), float(concentration))  # [C, K']
    weights = _dirichlet(prior, rng)  # [C, K']
    total = np.zeros(models)
    offsets = models * np.arange(chains)[:, None]  # [C, 1]: each chain's counts apart
    for sweep in range(2 * sweeps):
        cumulative = np.cumsum(weights[:, None, :] * scaled, -1)  # [C, n', K']
        thresholds = rng.random((chains, count, 1)) * cumulative[..., -1:]  # [C, n', 1]
        allocation = np.minimum((cumulative < thresholds).sum(-1), models - 1)  # [C, n']
        counts = np.bincount((allocation + offsets).ravel(), minlength=chains * models)
        counts = counts.reshape(chains, models)  # [C, K']
        if sweep >= sweeps:
            total += ((prior + counts) / (models * concentration + count)).mean(0)
        weights = _dirichlet(prior + counts, rng)
    mean = np.zeros(finite.shape[1])
    mean[usable] = total / sweeps
    return torch.as_tensor(mean, dtype=torch.float64, device=log_densities.device)


def _dirichlet(concentrations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One Dirichlet draw per row of concentrations [C, K] (normalised Gamma draws)."""
    gammas = rng.standard_gamma(concentrations)  # [C, K]
    return gammas / gammas.sum(-1, keepdims=True)


def quantize_weights(
    weights: Sequence[float] | torch.Tensor, resolution: int = WEIGHT_RESOLUTION
) -> torch.Tensor:
    """Weights [K] rounded to multiples of 1 / ``resolution`` summing to 1 (largest remainder:
    floor every scaled weight, then give the leftover units to the largest remainders)."""
    if isinstance(resolution, bool) or not isinstance(resolution, int) or resolution < 1:
        raise ValueError(f"resolution must be a positive integer, got {resolution!r}")
    weights = torch.as_tensor(weights, dtype=torch.float64)
    if weights.dim() != 1 or len(weights) == 0:
        raise ValueError(f"weights must be a non-empty vector, got shape {tuple(weights.shape)}")
    if not torch.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"weights must be finite, non-negative and not all zero, got {weights}")
    scaled = weights / weights.sum() * resolution  # [K]
    units = scaled.floor()
    leftover = resolution - int(units.sum())
    order = torch.argsort(scaled - units, descending=True, stable=True)
    units[order[:leftover]] += 1
    return units / resolution


class _DeepComponent(Protocol):
    """What an ensemble component (``_is_ensemble``: a deep GP, a stack) offers."""

    posterior_seed: int | None
    num_posterior_samples: int


def _num_samples(component: ZonalModel) -> int:
    """S_k, the Monte Carlo components of an ensemble component; 1 for any other."""
    if not component._is_ensemble:
        return 1
    return cast(_DeepComponent, component).num_posterior_samples


class StackedModel(ZonalModel):
    r"""The mixture :math:`\sum_k w_k p_k(y \mid x)` of trained single-output regression models, or
    of trained classifiers (the module docstring; weights from ``stacking_weights``).

    Args:
        components: trained ``ZonalModel``s, all of the same input dimension, dtype and device:
            with one output and a Gaussian likelihood each, or classifiers with one likelihood
            class (not Gaussian) and one number of outputs.
        weights: their weights (non-negative, normalised here and rounded to multiples of
            1 / ``WEIGHT_RESOLUTION``); components whose rounded weight is 0 still belong to the
            model but contribute nothing.
    """

    _is_ensemble = True
    weights: torch.Tensor  # buffer [K]

    def __init__(
        self, components: Sequence[ZonalModel], weights: Sequence[float] | torch.Tensor
    ) -> None:
        super().__init__()
        components = list(components)
        if len(components) == 0:
            raise ValueError("a stacked model needs at least one component")
        if len(weights) != len(components):
            raise ValueError(f"{len(components)} components but {len(weights)} weights")
        for index, component in enumerate(components):
            if not isinstance(component, ZonalModel):
                raise ValueError(f"component {index} must be a ZonalModel")
        for index, component in enumerate(components):
            _check_component(index, component, components[0])
        self._num_outputs = components[0].num_outputs
        input_dims = {getattr(component, "input_dim", None) for component in components}
        if len(input_dims) != 1:
            raise ValueError(f"the components take different input dimensions {input_dims}")
        self.input_dim = input_dims.pop()
        firsts = [next(component.parameters()) for component in components]
        placements = {(str(parameter.device), parameter.dtype) for parameter in firsts}
        if len(placements) != 1:
            raise ValueError(f"the components live on different devices or dtypes {placements}")
        self.components = torch.nn.ModuleList(components)
        reference = next(components[0].parameters())
        quantized = quantize_weights(weights).to(device=reference.device, dtype=reference.dtype)
        self.register_buffer("weights", quantized)  # [K], multiples of 1 / WEIGHT_RESOLUTION

    @property
    def is_classifier(self) -> bool:
        """Whether the components are classifiers (their likelihood is not Gaussian)."""
        return _is_classifier(self._models()[0])

    # ------------------------------------------------------------------ deep components' draws
    @property
    def posterior_seed(self) -> int | None:
        """The inner-layer seed of the deep components (None without one)."""
        seeds = [component.posterior_seed for component in self._deep_components()]
        return seeds[0] if seeds else None

    @posterior_seed.setter
    def posterior_seed(self, seed: int | None) -> None:
        for component in self._deep_components():
            component.posterior_seed = seed

    @property
    def num_posterior_samples(self) -> int:
        """Monte Carlo components of each deep component (1 without one)."""
        counts = [component.num_posterior_samples for component in self._deep_components()]
        return max(counts, default=1)

    @num_posterior_samples.setter
    def num_posterior_samples(self, count: int) -> None:
        for component in self._deep_components():
            component.num_posterior_samples = int(count)

    @property
    def draws_samples(self) -> bool:
        """Whether a component is deep (its inner layers are Monte Carlo samples)."""
        return bool(self._deep_components())

    def _models(self) -> list[ZonalModel]:
        """The components (``components`` holds them as a ModuleList)."""
        return cast("list[ZonalModel]", list(self.components))

    def _deep_components(self) -> list[_DeepComponent]:
        deep = [component for component in self._models() if component._is_ensemble]
        return cast("list[_DeepComponent]", deep)

    # ------------------------------------------------------------------ contract
    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        """:math:`q(f(X))` as equally weighted components: batch [*b, T], event [q] (see
        ``_noisy_distribution``)."""
        return self._noisy_distribution(X, observation_noise=False)

    def _noisy_distribution(
        self, X: torch.Tensor, observation_noise: bool | torch.Tensor
    ) -> MultivariateNormal:
        """The components' distributions at X [*b, q, D] on one mixture dimension [*b, T, q]:
        with units c_k = w_k ``WEIGHT_RESOLUTION`` and S_k Monte Carlo components of model k (1
        for a single-layer model), each of model k's components appears r_k = c_k L / S_k times
        (L the least common multiple of the S_k in use; the r_k then divided by their greatest
        common divisor), so that equal weights over the T = sum_k r_k S_k components give model k
        the weight r_k S_k / T = w_k. With ``observation_noise`` each component adds its own noise
        (or the given noise tensor), so ``posterior`` is the mixture's over y(X). The covariance
        stays a lazy operator: it is factorised (with GPyTorch's jitter) only when sampled."""
        parts = []
        event = 2 if self.is_classifier and self.num_outputs > 1 else 1  # mean event: [q(, C)]
        for component, _, _, repeat in self._layout():
            distribution = component.posterior(X, observation_noise=observation_noise).distribution
            mean = distribution.mean  # [*b, (S,) q(, C)]
            covariance = _interleaved_covariance(distribution)  # [*b, (S,) qC, qC]
            if not component._is_ensemble:
                mean, covariance = mean.unsqueeze(-1 - event), covariance.unsqueeze(-3)
            parts.append((repeat, mean, covariance))
        means = [mean.repeat_interleave(repeat, dim=-1 - event)  # [*b, S_k r_k, q(, C)]
                 for repeat, mean, _ in parts]  # fmt: skip
        covariances = [covariance.repeat_interleave(repeat, dim=-3)
                       for repeat, _, covariance in parts]  # fmt: skip
        covariance = DenseLinearOperator(torch.cat(covariances, dim=-3))  # [*b, T, qC, qC]
        mean = torch.cat(means, dim=-1 - event)  # [*b, T, q(, C)]
        if event == 2:
            return MultitaskMultivariateNormal(mean, covariance, interleaved=True)
        return MultivariateNormal(mean, covariance)

    def _layout(self) -> list[tuple[ZonalModel, float, int, int]]:
        """(model k, w_k, S_k, r_k) for the components of positive weight, in the order of the mixture
        dimension (``_noisy_distribution``): each of model k's S_k components appears r_k times
        in a row."""
        units = torch.round(self.weights * WEIGHT_RESOLUTION).long().tolist()
        parts = [
            (component, _num_samples(component), count)
            for component, count in zip(self._models(), units, strict=True)
            if count > 0
        ]
        common = math.lcm(*(samples for _, samples, _ in parts))
        repeats = [count * common // samples for _, samples, count in parts]
        divisor = math.gcd(*repeats)
        return [(component, count / WEIGHT_RESOLUTION, samples, repeat // divisor)
                for (component, samples, count), repeat in zip(parts, repeats, strict=True)]  # fmt: skip

    # ------------------------------------------------------------------ conditioning
    def _conditioned(
        self, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None, *, per_component: bool
    ) -> StackedModel:
        """Each component of positive weight conditioned on the new rows (with its own noise when
        ``noise`` is None), the weights kept; components of weight 0 are left out. Fantasies
        (``per_component``, Y [*F, *b, T, q]) give each mixture component its own draw: model k
        gets the draws of its own S_k components (the first of each component's r_k repeats)."""
        components, weights, offset = [], [], 0
        for component, weight, samples, repeat in self._layout():
            targets = Y
            if per_component:
                slots = offset + repeat * torch.arange(samples, device=Y.device)  # [S_k]
                targets = Y.index_select(-2, slots)  # [*F, *b, S_k, q]
                if not component._is_ensemble:
                    targets = targets.squeeze(-2)
                offset += samples * repeat
            component_noise = None if noise is None else noise.unsqueeze(-1)
            components.append(
                conditioning.condition_on_observations(
                    component,
                    X,
                    targets.unsqueeze(-1),
                    component_noise,
                    per_component=per_component and component._is_ensemble,
                )
            )
            weights.append(weight)
        model = StackedModel(components, weights)
        model._conditioned_batch = components[0].batch_shape
        return model

    @torch.no_grad()
    def predict(
        self, X: torch.Tensor, include_noise: bool = False, *, chunk_size: int = PREDICTION_CHUNK
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Mixture moments [N] (a classifier's latent ones: [N, C] for :math:`C` outputs): mean
        :math:`\sum_k w_k m_k`, variance :math:`\sum_k w_k (v_k + m_k^2) - \text{mean}^2`."""
        X = self.check_inputs(X)
        if X.dim() != 2:
            raise ValueError(f"predict takes inputs [N, D], got {tuple(X.shape)}")
        mean = second_moment = torch.zeros((), dtype=X.dtype, device=X.device)
        for weight, component in self.weighted_components():
            component_mean, variance = component.predict(X, include_noise, chunk_size=chunk_size)
            mean = mean + weight * component_mean  # [N(, C)]
            second_moment = second_moment + weight * (variance + component_mean**2)
        return mean, (second_moment - mean**2).clamp(min=0)

    @torch.no_grad()
    def log_predictive_density(
        self, X: torch.Tensor, y: torch.Tensor, *, chunk_size: int = PREDICTION_CHUNK
    ) -> torch.Tensor:
        r""":math:`\log \sum_k w_k p_k(y_i \mid x_i)` per row [N]."""
        X = self.check_inputs(X)
        terms = [
            math.log(weight) + component.log_predictive_density(X, y, chunk_size=chunk_size)
            for weight, component in self.weighted_components()
        ]  # K' x [N]
        return torch.logsumexp(torch.stack(terms), dim=0)

    def weighted_components(self) -> list[tuple[float, ZonalModel]]:
        """(weight, component) for the components of positive weight."""
        return [(float(weight), component)
                for weight, component in zip(self.weights, self._models(), strict=True)
                if weight > 0]  # fmt: skip


def _is_classifier(model: ZonalModel) -> bool:
    """Whether ``model`` classifies (its likelihood is not Gaussian)."""
    return not isinstance(model.likelihood, GaussianLikelihood)


def _check_component(index: int, component: ZonalModel, first: ZonalModel) -> None:
    """Raise a ValueError unless component ``index`` can join a mixture whose first component is
    ``first``: a single-output Gaussian regression model (when ``first`` is one), or a classifier
    of ``first``'s likelihood class and number of outputs."""
    likelihood = type(component.likelihood).__name__
    if not _is_classifier(first):
        if not isinstance(component.likelihood, GaussianLikelihood):
            raise ValueError(
                f"component {index} has a {likelihood} but component 0 a Gaussian likelihood: "
                "stacking mixes regression models or classifiers, not both"
            )
        if component.num_outputs != 1:
            raise ValueError(f"component {index} must be a single-output ZonalModel")
        return
    if type(component.likelihood) is not type(first.likelihood):
        raise ValueError(
            f"component {index} has a {likelihood} but component 0 a "
            f"{type(first.likelihood).__name__}: stacked classifiers share one likelihood"
        )
    if component.num_outputs != first.num_outputs:
        raise ValueError(
            f"component {index} has {component.num_outputs} latent outputs but component 0 "
            f"{first.num_outputs}: stacked classifiers share their classes"
        )


def _interleaved_covariance(distribution: MultivariateNormal) -> torch.Tensor:
    """The dense covariance of ``distribution``: [*b, q, q] for a normal, [*b, qC, qC] in the
    interleaved order (point-major, then output) for a multitask normal over [q, C], whichever
    order it stores."""
    covariance = distribution.lazy_covariance_matrix.to_dense()
    if not isinstance(distribution, MultitaskMultivariateNormal) or distribution._interleaved:
        return covariance
    q, outputs = distribution.mean.shape[-2:]
    batch = covariance.shape[:-2]
    blocks = covariance.reshape(*batch, outputs, q, outputs, q)  # [*b, C, q, C, q]
    return blocks.permute(*range(len(batch)), -3, -4, -1, -2).reshape(*batch, q * outputs, -1)
