r"""The surrogate models of zonal's Bayesian optimisation on spheres (seed 004 sec. 4.2, app. A).

* ``exact_sphere_gp``: BoTorch's ``SingleTaskGP`` with zonal's intrinsic Matérn kernel of
  :math:`\mathbb{S}^{d-1}` (seed 004 eq. 2.24) as its covariance, on unit-vector inputs. Nothing
  else is needed: the zonal kernel is a GPyTorch kernel, so BoTorch's exact GP, its
  ``fit_gpytorch_mll`` and its pathwise draws (zonal's exact harmonic prior features,
  ``zonal.sampling``) take it unchanged.
  ``fit_exact_gp`` maximises the marginal likelihood with BoTorch's L-BFGS-B.
* ``residual_deep_gp``: zonal's ``ResidualDGP`` on ``OnSphere`` inputs (vector fields moved by the
  exponential map, seed 004 eq. 3.3), every layer with ``num_inducing`` fixed inducing points of
  a near-uniform design (app. A.1: 60, "initialised uniformly"); ``fit_deep_gp`` is Adam on the
  doubly-stochastic ELBO (app. A.2: 500 steps at 0.01).

Both are BoTorch models. The exact GP is BoTorch's own, so every BoTorch acquisition takes it. The
residual deep GP is an ensemble (a Gaussian mixture over its inner draws): BoTorch's analytic and
Monte Carlo acquisitions (EI, LogEI, PI, UCB, PosteriorMean, qEI, qLogNEI, qUCB, ...) take it as it
is, but BoTorch's look-ahead classes read one Gaussian per point or average the ensemble a second
time and fail on it with shape errors (``qKnowledgeGradient``, ``qMultiStepLookahead``,
``qMaxValueEntropy``, ``qLowerBoundMaxValueEntropy``, ``qJointEntropySearch``,
``PosteriorStandardDeviation``): use ``zonal.bo.KnowledgeGradient`` and ``MultiStepLookahead``, or
``lookahead_acquisition`` (``zonal.bo.lookahead``; MES and JES through the moment-matched
Gaussian, ``zonal.models.MomentMatchedModel``).
"""

from __future__ import annotations

import warnings

import torch
from botorch.exceptions import InputDataWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from gpytorch.mlls import ExactMarginalLogLikelihood

from zonal._validation import check_unit_vectors
from zonal.bo.design import sobol_sphere
from zonal.geometry import OnSphere
from zonal.models import ResidualDGP, fit_dgp
from zonal.models.residual_dgp import residual_dgp
from zonal.models.vector_field import sphere_kernel


def _check_training_data(train_X: torch.Tensor, train_Y: torch.Tensor) -> None:
    """train_X a tensor [N, d] of unit vectors and train_Y with N rows; a ``ValueError``
    naming the problem otherwise."""
    if not isinstance(train_X, torch.Tensor) or train_X.dim() != 2:
        raise ValueError("train_X must be a tensor [N, d] of unit vectors")
    check_unit_vectors(train_X, train_X.shape[-1], "train_X")
    if train_Y.shape[0] != train_X.shape[0]:
        raise ValueError(f"train_X has {len(train_X)} rows but train_Y has {train_Y.shape[0]}")


def exact_sphere_gp(
    train_X: torch.Tensor,
    train_Y: torch.Tensor,
    *,
    nu: float = 2.5,
    lengthscale: float = 1.0,
    outputscale: float = 1.0,
    max_degree: int = 30,
) -> SingleTaskGP:
    r"""``SingleTaskGP`` on unit vectors train_X [N, d] with targets train_Y [N, 1] (or [N]) and
    the covariance :math:`\sigma^2 k_\nu`, :math:`k_\nu` the intrinsic Matérn-:math:`\nu` kernel of
    :math:`\mathbb{S}^{d-1}` truncated at ``max_degree`` (app. A.1: :math:`\nu = 2.5`, lengthscale
    and output scale 1 to start). No outcome transform: standardise the targets before
    (``zonal.bo.loop`` does)."""
    _check_training_data(train_X, train_Y)
    train_Y = train_Y.reshape(len(train_X), -1).to(train_X)
    kernel = sphere_kernel(
        train_X.shape[-1],
        nu,
        lengthscale=lengthscale,
        outputscale=outputscale,
        max_degree=max_degree,
    ).to(device=train_X.device, dtype=train_X.dtype)
    with warnings.catch_warnings():
        # BoTorch asks for inputs in the unit cube: unit vectors are this model's domain
        warnings.simplefilter("ignore", InputDataWarning)
        return SingleTaskGP(train_X, train_Y, covar_module=kernel, outcome_transform=None)


def fit_exact_gp(model: SingleTaskGP) -> SingleTaskGP:
    """Maximise the exact marginal likelihood (BoTorch's ``fit_gpytorch_mll``); the model, in
    evaluation mode."""
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model.eval()


def residual_deep_gp(
    ambient_dim: int,
    *,
    num_hidden_layers: int = 1,
    num_inducing: int = 60,
    nu: float = 2.5,
    posterior_samples: int = 32,
    posterior_seed: int = 0,
    initial_noise: float = 1e-2,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> ResidualDGP:
    r"""A residual DGP on :math:`\mathbb{S}^{d-1}` (``OnSphere`` inputs) with ``num_hidden_layers``
    projected vector fields, every layer's ``num_inducing`` inducing points fixed on
    ``sobol_sphere`` (scrambled by ``seed``); its posterior mixes ``posterior_samples`` inner draws
    from ``posterior_seed`` (fixed: an acquisition function of it is deterministic); parameters of
    ``dtype`` on ``device`` (those of the training inputs, in ``zonal.bo.loop``)."""
    inducing = sobol_sphere(num_inducing, ambient_dim, seed=seed, dtype=dtype, device=device)
    model = residual_dgp(ambient_dim, num_hidden_layers, inducing, input_map=OnSphere(), nu=nu)
    model = model.to(dtype=dtype, device=inducing.device)
    model.num_posterior_samples = int(posterior_samples)
    model.posterior_seed = int(posterior_seed)
    model.likelihood.noise = initial_noise
    return model


def fit_deep_gp(
    model: ResidualDGP,
    train_X: torch.Tensor,
    train_Y: torch.Tensor,
    *,
    num_steps: int = 500,
    lr: float = 0.01,
    num_samples: int = 3,
    seed: int = 0,
) -> ResidualDGP:
    """Full-batch Adam on the doubly-stochastic ELBO (``zonal.models.fit_dgp``) with targets
    train_Y [N] (or [N, 1]); the model, in evaluation mode."""
    _check_training_data(train_X, train_Y)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the layers' reparametrised samples use the global stream
        fit_dgp(
            model,
            train_X,
            train_Y.reshape(len(train_X)),
            num_steps=num_steps,
            batch_size=len(train_X),
            lr=lr,
            num_samples=num_samples,
            seed=seed,
        )
    return model.eval()


__all__ = ["exact_sphere_gp", "fit_deep_gp", "fit_exact_gp", "residual_deep_gp"]
