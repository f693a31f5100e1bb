r"""The sparse fully connected deep kernel machine (seed 003 eqs. 10-11, appendix D).

Inputs :math:`X` [P, N_0] and :math:`M` learned inducing inputs :math:`X_i` [M, N_0] give the input
Gram blocks :math:`G^0_{ii} = X_i X_i^\top / N_0`, :math:`G^0_{ti} = X X_i^\top / N_0`,
:math:`G^0_{tt} = X X^\top / N_0` (only its diagonal in training). Layer
:math:`l = 1, \dots, L`:

* the kernel blocks :math:`K_{ii}, K_{ti}, K_{tt} = K(G^{l-1})` (``zonal.dkm.gram_kernels``);
* the inducing block :math:`G^l_{ii}` is a learned positive definite matrix
  (``CholeskyParameter``, initialised at the NNGP value :math:`K_{ii}`, seed 003 sec. 5); with
  :math:`\nu_l = \infty` it *is* :math:`K_{ii}` (the NNGP layer, no parameters);
* :math:`G^l_{ti}` and :math:`G^l_{tt}` follow by the GP conditional (``zonal.dkm.conditional``).

The output layer is a sparse GP with kernel :math:`K(G^L)` and
:math:`q(f_i^c) = \mathcal{N}(\mu_c, A)`, one mean per output channel and one covariance :math:`A`
shared by the channels (appendix D.1). The objective is eq. 75,

.. math::

    \mathcal{L} = \sum_p \mathbb{E}_q[\log p(y_p \mid f_p)]
    - \sum_c \operatorname{KL}\big(\mathcal{N}(\mu_c, A) \,\|\, \mathcal{N}(0, K_{ii}^{L+1})\big)
    - \sum_l \nu_l \operatorname{KL}\big(\mathcal{N}(0, G^l_{ii}) \,\|\,
    \mathcal{N}(0, K(G^{l-1}_{ii}))\big),

and on a minibatch :math:`B` of a training set of :math:`P` points, eq. 76:
:math:`\frac{1}{\lvert B \rvert} \sum_{p \in B} \mathbb{E}_q[\dots] - (\text{KL terms}) / P`, whose
mean over the batches of an epoch is :math:`\mathcal{L} / P`. The model answers zonal's contract
(``zonal.models.contract``): ``posterior`` is the joint Gaussian over the :math:`q` points (full
:math:`G_{tt}` blocks), ``predict`` and ``log_predictive_density`` use the per-point marginals
(diagonal :math:`G_{tt}`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, cast

import torch
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.likelihoods import Likelihood
from linear_operator.operators import (
    DenseLinearOperator,
    IdentityLinearOperator,
    KroneckerProductLinearOperator,
)

from zonal._validation import check_finite
from zonal.dkm.conditional import conditional_blocks
from zonal.dkm.divergence import gaussian_kl_from_roots
from zonal.dkm.gram_kernels import GramKernel, gram_kernel
from zonal.dkm.likelihoods import likelihood_outputs
from zonal.dkm.model import BatchOutputs, DeepKernelMachine
from zonal.dkm.objective import check_nu, input_gram
from zonal.dkm.psd import CholeskyParameter
from zonal.linalg import cholesky


class InducingLayer(NamedTuple):
    r"""One layer's inducing quantities: :math:`L` with :math:`L L^\top = K(G^{l-1}_{ii})`,
    :math:`V` with :math:`V V^\top = G^l_{ii}`, and whether :math:`G^l_{ii}` is learned (False: the
    NNGP layer, :math:`V = L`)."""

    prior_chol: torch.Tensor
    root: torch.Tensor
    learned: bool


class InducingChain(NamedTuple):
    """The inducing blocks of every layer, the input block and the output layer's :math:`K_{ii}`
    factor."""

    input_gram: torch.Tensor
    layers: list[InducingLayer]
    output_chol: torch.Tensor


class SparseDKM(DeepKernelMachine):
    r"""A sparse fully connected deep kernel machine (module docstring).

    Args:
        inducing_inputs: :math:`X_i` [M, N_0], the initial inducing inputs (learned unless
            ``learn_inducing_inputs=False``); seed 003 initialises them at training points.
        num_layers: :math:`L`, the number of Gram-matrix layers (0: a GP with kernel
            :math:`K(G^0)`).
        likelihood: ``GaussianLikelihood()`` (one output), ``MultitaskGaussianLikelihood(C,
            rank=0, ...)`` (:math:`C` outputs) or ``SoftmaxLikelihood(num_classes=C,
            mixing_weights=False)`` (classification, Monte Carlo, appendix D.2.2).
        kernel: a ``GramKernel`` or its name (default ``"relu"``, the first-order arc-cosine).
        nu: regularisation strength :math:`\nu_l \ge 0` per layer, or one for all (``math.inf``:
            NNGP layer).
        likelihood_samples: Monte Carlo draws for the categorical likelihood (seed 003 F.4: 1000).
        seed: seeds the Monte Carlo draws of predictions (the same call gives the same numbers).
    """

    def __init__(
        self,
        inducing_inputs: torch.Tensor,
        num_layers: int,
        likelihood: Likelihood,
        *,
        kernel: GramKernel | str = "relu",
        nu: float | Sequence[float] = 1.0,
        likelihood_samples: int = 1000,
        learn_inducing_inputs: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not isinstance(inducing_inputs, torch.Tensor) or inducing_inputs.dim() != 2:
            raise ValueError("inducing_inputs must be a tensor [M, N_0]")
        check_finite(inducing_inputs, "inducing_inputs")
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0:
            raise ValueError(f"num_layers must be an integer >= 0, got {num_layers!r}")
        if isinstance(likelihood_samples, bool) or not isinstance(likelihood_samples, int):
            raise ValueError(
                f"likelihood_samples must be a positive int, got {likelihood_samples!r}"
            )
        if likelihood_samples < 1:
            raise ValueError(f"likelihood_samples must be a positive int, got {likelihood_samples}")
        self.kernel = gram_kernel(kernel) if isinstance(kernel, str) else kernel
        self.nu = check_nu(nu, num_layers)
        self.num_layers = num_layers
        self.likelihood = likelihood
        self._num_outputs = likelihood_outputs(likelihood)
        self.input_dim = inducing_inputs.shape[-1]
        self.likelihood_samples = likelihood_samples
        self.seed = seed
        inputs = inducing_inputs.detach().to(torch.float64).clone()
        self.inducing_inputs = torch.nn.Parameter(inputs, requires_grad=learn_inducing_inputs)
        nngp = self._nngp_inducing_grams(inputs)  # G^1_ii..G^{L+1}_ii at the NNGP
        self.grams = torch.nn.ModuleDict(
            {
                str(index): CholeskyParameter(gram, name=f"G^{index + 1}_ii")
                for index, gram in enumerate(nngp[:-1])
                if not math.isinf(self.nu[index])
            }
        )
        size = len(inputs)
        self.output_mean = torch.nn.Parameter(inputs.new_zeros(size, self._num_outputs))
        self.output_covariance = CholeskyParameter(nngp[-1], name="A")
        self.to(torch.float64)  # the likelihood's noise too (float64 by default)

    def _nngp_inducing_grams(self, inputs: torch.Tensor) -> list[torch.Tensor]:
        grams = [input_gram(inputs)]
        for _ in range(self.num_layers + 1):
            grams.append(self.kernel(grams[-1]))
        return grams[1:]

    # ------------------------------------------------------------------ propagation
    def inducing_chain(self) -> InducingChain:
        """Factorised inducing blocks of every layer (:math:`O(L M^3)`, independent of the
        data)."""
        gram = input_gram(self.inducing_inputs)  # G^0_ii [M, M]
        layers = []
        for index in range(self.num_layers):
            prior_chol = cholesky(self.kernel(gram), name=f"K(G^{index}_ii) of layer {index + 1}")
            learned = str(index) in self.grams
            root = cast(CholeskyParameter, self.grams[str(index)]).root if learned else prior_chol
            layers.append(InducingLayer(prior_chol, root, learned))
            gram = root @ root.mT
        output_chol = cholesky(self.kernel(gram), name=f"K(G^{self.num_layers}_ii) of the output")
        return InducingChain(input_gram(self.inducing_inputs), layers, output_chol)

    def propagate(
        self, inputs: torch.Tensor, chain: InducingChain, *, joint: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Output means [*b, n, C] and covariances (variances [*b, n], or [*b, n, n] with
        ``joint``) of :math:`f` at inputs [*b, n, N_0] under :math:`q` (eqs. 86-87)."""
        width = inputs.shape[-1]
        cross = inputs @ self.inducing_inputs.mT / width  # G^0_ti [*b, n, M]
        tt = inputs @ inputs.mT / width if joint else inputs.square().sum(-1) / width
        inducing_diag = chain.input_gram.diagonal()  # [M]
        for layer in chain.layers:
            tt_diag = tt.diagonal(dim1=-2, dim2=-1) if joint else tt
            kernel_ti = self.kernel.cross(cross, tt_diag, inducing_diag)  # [*b, n, M]
            kernel_tt = self.kernel(tt) if joint else self.kernel.diagonal(tt)
            if layer.learned:
                cross, tt, _ = conditional_blocks(
                    layer.prior_chol, kernel_ti, kernel_tt, layer.root
                )
            else:  # NNGP layer: G^l = K(G^{l-1})
                cross, tt = kernel_ti, kernel_tt
            inducing_diag = layer.root.square().sum(-1)  # diag G^l_ii [M]
        tt_diag = tt.diagonal(dim1=-2, dim2=-1) if joint else tt
        kernel_ti = self.kernel.cross(cross, tt_diag, inducing_diag)
        kernel_tt = self.kernel(tt) if joint else self.kernel.diagonal(tt)
        _, covariance, mean = conditional_blocks(
            chain.output_chol, kernel_ti, kernel_tt, self.output_covariance.root, self.output_mean
        )
        assert mean is not None  # given an output mean, the blocks carry the predictive mean
        return mean, covariance

    def batch_outputs(self, inputs: torch.Tensor) -> BatchOutputs:
        """Output marginals and KL terms for a minibatch of inputs [B, N_0]."""
        chain = self.inducing_chain()
        mean, variance = self.propagate(inputs, chain)  # [B, C], [B]
        output_kl = gaussian_kl_from_roots(
            self.output_covariance.root, chain.output_chol, self.output_mean
        )
        layer_kls = [
            gaussian_kl_from_roots(layer.root, layer.prior_chol)
            if layer.learned
            else output_kl.new_zeros(())
            for layer in chain.layers
        ]
        stacked = torch.stack(layer_kls) if layer_kls else output_kl.new_zeros(0)
        return BatchOutputs(mean, variance, output_kl, stacked)

    # ------------------------------------------------------------------ the contract
    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        """The joint :math:`q(f(X))` over the :math:`q` points of :math:`X` [*b, q, N_0] (full
        :math:`G_{tt}` blocks)."""
        mean, covariance = self.propagate(X, self.inducing_chain(), joint=True)
        covariance = (covariance + covariance.mT) / 2  # [*b, q, q]
        if self._num_outputs == 1:
            return MultivariateNormal(mean.squeeze(-1), covariance)
        identity = IdentityLinearOperator(
            self._num_outputs, dtype=covariance.dtype, device=covariance.device
        )
        joint = KroneckerProductLinearOperator(DenseLinearOperator(covariance), identity)
        return MultitaskMultivariateNormal(mean, joint, interleaved=True)
