"""Look-ahead and information-theoretic acquisitions for zonal models, on spheres and in boxes.

Every zonal model can be conditioned on new observations and fantasised
(``zonal.models.conditioning``), so BoTorch's acquisitions that look ahead take them:

* ``"kg"``: the one-shot knowledge gradient (``qKnowledgeGradient``): :math:`X` [b, q + F, d]
  holds the :math:`q` candidates and the :math:`F` maximisers of the fantasy models' posterior
  means; ``optimize_acqf_sphere`` (as ``optimize_acqf``) optimises all of them, on the sphere, so
  the inner problem is solved on the sphere too, and returns the :math:`q` candidates
  (``extract_candidates``);
* ``"mes"``: max-value entropy search (``qMaxValueEntropy``, Wang and Jegelka 2017) with the max
  values drawn on a candidate set (points on the sphere, or in the box);
* ``"jes"``: joint entropy search (``qJointEntropySearch``, Hvarfner et al. 2022; Tu et al. 2022)
  with the optima of pathwise posterior draws (``draw_matheron_paths``, registered by
  ``zonal.sampling``) maximised over the same candidate set, so optima lie on the sphere.

Deep models are ensembles (a Gaussian mixture over the inner draws). BoTorch's ``qKnowledgeGradient``
averages the ensemble twice for them: its value function (``PosteriorMean`` of the fantasy model)
already averages the mixture, and its ``forward`` then averages the last dimension again, which is
by then the t-batch. ``KnowledgeGradient`` is BoTorch's class with the second average left out, and
is what ``lookahead_acquisition`` builds (it equals ``qKnowledgeGradient`` for other models);
``MultiStepLookahead`` does the same for ``qMultiStepLookahead`` (fantasies of fantasies).
BoTorch's ``qMaxValueEntropy`` and ``qJointEntropySearch`` read one Gaussian per point and do
not take mixture posteriors: for an ensemble ``lookahead_acquisition`` gives them the
moment-matched Gaussian (``zonal.models.MomentMatchedModel``), and JES's optima come from the
mixture's own pathwise draws.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from botorch import settings
from botorch.acquisition import AcquisitionFunction, qKnowledgeGradient
from botorch.acquisition.joint_entropy_search import qJointEntropySearch
from botorch.acquisition.knowledge_gradient import _get_value_function, _split_fantasy_points
from botorch.acquisition.max_value_entropy_search import qMaxValueEntropy
from botorch.acquisition.multi_step_lookahead import _step, qMultiStepLookahead
from botorch.models.model import Model
from botorch.sampling import MCSampler, SobolQMCNormalSampler
from botorch.sampling.pathwise import draw_matheron_paths
from botorch.utils.transforms import is_ensemble, match_batch_shape, t_batch_mode_transform

from zonal.models import MomentMatchedModel, StackedModel, ZonalModel

LOOKAHEAD_ACQUISITIONS = ("kg", "mes", "jes")


class KnowledgeGradient(qKnowledgeGradient):
    r"""BoTorch's one-shot ``qKnowledgeGradient`` that averages an ensemble's mixture once (module
    docstring):

    .. math::

        \mathrm{KG}(x) = \frac{1}{F} \sum_f \max_{x'} \mathbb{E}[f(x') \mid \text{data}, (x, y_f)],

    the expectation the fantasy model's mixture mean."""

    # BoTorch types its decorator for AcquisitionFunction's own methods, not a subclass's
    @t_batch_mode_transform()  # type: ignore[arg-type]
    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """KG at :math:`X` [b, q + F, d] -> [b]: :math:`X`'s first :math:`q` rows are the
        candidates, its last :math:`F` the maximisers of the :math:`F` fantasy models' posterior
        means (``qKnowledgeGradient.forward`` without its ensemble average)."""
        X_actual, X_fantasies = _split_fantasy_points(X=X, n_f=self.num_fantasies)
        if self.X_pending is not None:
            X_actual = torch.cat([X_actual, match_batch_shape(self.X_pending, X_actual)], -2)
        # KG's models fantasise: BoTorch's ``Model`` type leaves ``fantasize`` to its mixin
        fantasy_model = self.model.fantasize(X=X_actual, sampler=self.sampler)  # type: ignore[operator]
        value_function = _get_value_function(
            model=fantasy_model,
            objective=self.objective,
            posterior_transform=self.posterior_transform,
            sampler=self.inner_sampler,
        )
        with settings.propagate_grads(True):
            values = value_function(X=X_fantasies)  # [F, b]
        if self.current_value is not None:
            values = values - self.current_value
        return values.mean(dim=0)  # [b]

    # BoTorch's decorators type its ``evaluate`` as taking X alone
    def evaluate(  # type: ignore[override]
        self, X: torch.Tensor, bounds: torch.Tensor, **kwargs: Any
    ) -> torch.Tensor:
        """KG at :math:`X` [b, q, d] -> [b] (:math:`X` [q, d]: [1]) with the inner problem solved
        in ``bounds`` [2, d] (``qKnowledgeGradient.evaluate``, its keyword options the same). For
        an ensemble BoTorch's ``evaluate`` averages the last dimension of its [b] values, the
        t-batch; here each t-batch is then evaluated on its own, so its one value is its own."""
        if not is_ensemble(self.model):
            return super().evaluate(X, bounds=bounds, **kwargs)  # type: ignore[call-arg]
        batches = X.reshape(-1, *X.shape[-2:])  # [b', q, d]
        evaluate = super().evaluate
        values = [evaluate(rows.unsqueeze(0), bounds=bounds, **kwargs)  # type: ignore[call-arg]
                  for rows in batches]  # fmt: skip
        return torch.stack(values).reshape(X.shape[:-2] if X.dim() > 2 else (1,))


class MultiStepLookahead(qMultiStepLookahead):
    """BoTorch's ``qMultiStepLookahead`` that averages an ensemble's mixture once, as
    ``KnowledgeGradient`` (the value functions of the fantasy models already average it)."""

    # BoTorch types its decorator for AcquisitionFunction's own methods, not a subclass's
    @t_batch_mode_transform()  # type: ignore[arg-type]
    def forward(self, X: torch.Tensor) -> torch.Tensor:
        r"""The look-ahead value at :math:`X` [b, q', d] -> [b],
        :math:`q' = q_0 + f_1 q_1 + f_2 f_1 q_2 + \dots` (``qMultiStepLookahead.forward`` without
        its ensemble average)."""
        Xs = self.get_multi_step_tree_input_representation(X)
        if not self._collapse_fantasy_base_samples:
            self._set_samplers_batch_range(batch_shape=X.shape[:-2])
        return _step(
            model=self.model,
            Xs=Xs,
            samplers=cast("list[MCSampler | None]", self.samplers),  # a ModuleList of them
            valfunc_cls=self._valfunc_cls,
            valfunc_argfacs=self._valfunc_argfacs,
            inner_samplers=cast("list[MCSampler | None]", self.inner_samplers),
            objective=self.objective,
            posterior_transform=self.posterior_transform,
            running_val=None,
        )


def optimal_samples(
    model: Model, candidates: torch.Tensor, num_optima: int, *, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(optimal inputs [num_optima, d], optimal outputs [num_optima, 1]) of ``num_optima``
    pathwise posterior draws, each maximised over ``candidates`` [n, d] (points on the sphere, or
    in the box): what ``qJointEntropySearch`` conditions on. A moment-matched model is drawn
    from its mixture; a stacked model draws each path from one component, chosen by weight."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.no_grad():
            values = _path_values(getattr(model, "ensemble", model), candidates, num_optima)
    best = values.argmax(-1)  # [num_optima]
    inputs = candidates[best]  # [num_optima, d]
    outputs = values.gather(-1, best.unsqueeze(-1))  # [num_optima, 1]
    return inputs, outputs.to(inputs)


def _path_values(model: Model, candidates: torch.Tensor, count: int) -> torch.Tensor:
    """``count`` posterior draws of f at ``candidates`` [n, d]: [count, n]."""
    import zonal.sampling  # noqa: F401  (registers zonal's models and kernels with BoTorch's paths)

    if isinstance(model, StackedModel):
        layout = model._layout()
        weights = torch.tensor([weight for _, weight, _, _ in layout], dtype=torch.float64)
        choice = torch.multinomial(weights, count, replacement=True)  # [count]
        values = [_path_values(component, candidates, int((choice == k).sum()))
                  for k, (component, *_) in enumerate(layout) if (choice == k).any()]  # fmt: skip
        return torch.cat(values)
    paths = draw_matheron_paths(model, torch.Size([count]))
    return paths(candidates).reshape(count, len(candidates))


def lookahead_acquisition(
    name: str,
    model: Model,
    candidates: torch.Tensor,
    *,
    num_fantasies: int = 16,
    num_optima: int = 16,
    seed: int = 0,
    X_pending: torch.Tensor | None = None,
) -> AcquisitionFunction:
    """The acquisition ``name`` (``LOOKAHEAD_ACQUISITIONS``) of a single-output ``model`` (module
    docstring). ``candidates`` [n, d]: the candidate set of MES's max values and of JES's optima
    (on the sphere for sphere problems); ``X_pending`` [p, d]: points chosen but not evaluated,
    which the acquisitions fantasise."""
    if name not in LOOKAHEAD_ACQUISITIONS:
        raise ValueError(f"acquisition must be one of {LOOKAHEAD_ACQUISITIONS}, got {name!r}")
    if name == "kg":
        sampler = SobolQMCNormalSampler(torch.Size([num_fantasies]), seed=seed)
        return KnowledgeGradient(
            model, num_fantasies=num_fantasies, sampler=sampler, X_pending=X_pending
        )
    if is_ensemble(model):  # a deep or stacked zonal model
        model = MomentMatchedModel(cast(ZonalModel, model))
    if name == "mes":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return qMaxValueEntropy(
                model, candidate_set=candidates, num_fantasies=num_fantasies, X_pending=X_pending
            )
    inputs, outputs = optimal_samples(model, candidates, num_optima, seed=seed)
    return qJointEntropySearch(model, inputs, outputs, estimation_type="LB", X_pending=X_pending)
