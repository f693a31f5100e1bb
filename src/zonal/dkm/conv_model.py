r"""The sparse convolutional deep kernel machine (seed 003 secs. 4-5, appendices B, C, E).

Layer 0 takes images :math:`X` [P, C, H, W] and learned inducing patches :math:`Z`
[M_0, C, kh, kw] (the inter-domain inducing inputs of the input layer, initialised at random
training patches) and gives the kernel blocks of a patch-averaged linear kernel
(``input_patch_blocks``). Each later layer :math:`l`

1. normalises and rescales the Gram blocks of layer :math:`l - 1` (``GramNormalisation``,
   appendix C),
2. applies the nonlinearity :math:`\Omega = K(G)` (the arc-cosine / ReLU Gram kernel, eq. 16),
3. convolves: :math:`\Gamma_{ii} = \frac{1}{\lvert D \rvert} \sum_d C_d \Omega_{ii} C_d^\top`,
   :math:`\Gamma_{ti}` a conv2d of :math:`\Omega_{ti}` with the learned mixing :math:`C^l`
   [M_l, M_{l-1}, kh, kw] (so :math:`M` changes from layer to layer),
   :math:`\operatorname{diag} \Gamma_{tt}` an average pool (eqs. 26-27, 66),

and, like the fully connected DKM, learns :math:`G^l_{ii}` (:math:`\nu_l < \infty`) and predicts
:math:`G^l_{ti}` and the diagonal of :math:`G^l_{tt}` by the GP conditional, image by image over
the locations. A layer may end a residual block: its Gram blocks become the convex combination
:math:`w G^l + (1 - w) G^k` with the blocks of an earlier layer :math:`k` of the same shape
(seed 003 sec. 5). The top normalises, applies :math:`\Omega`, and collapses the locations by
global average pooling (inducing :math:`K_{ii} = \Omega_{ii}`, Nystrom-corrected diagonal) or a
linear layer (a full-map convolution); the output is a sparse GP with
:math:`q(f_i^c) = \mathcal{N}(\mu_c, A)`, initialised with :math:`A = K_{ii}` and :math:`\mu_c` a
draw from the prior :math:`\mathcal{N}(0, K_{ii})` (seed 003 sec. 5 draws both at random,
:math:`A = V V^\top` with :math:`V` Gaussian, with no scale given).

Only the diagonal of the test/train blocks is ever formed, so ``posterior`` gives the per-image
marginals (independent across the :math:`q` images: the joint is not computed, as in the seed), and
``batch``, ``image`` and ``location`` normalisations use the statistics of the evaluated batch.
Inputs follow zonal's contract as rows [N, C H W] (``images_to_inputs`` flattens checked images).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import torch
import torch.utils.checkpoint
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.likelihoods import Likelihood
from linear_operator.operators import DiagLinearOperator

from zonal._validation import check_finite
from zonal.dkm.conditional import conditional_blocks
from zonal.dkm.convolution import (
    ConvGeometry,
    convolve_cross,
    convolve_diagonal,
    convolve_inducing,
    input_patch_blocks,
)
from zonal.dkm.divergence import gaussian_kl_from_roots
from zonal.dkm.gram_kernels import GramKernel, gram_kernel
from zonal.dkm.likelihoods import likelihood_outputs
from zonal.dkm.model import BatchOutputs, DeepKernelMachine
from zonal.dkm.normalisation import GramNormalisation
from zonal.dkm.objective import check_nu
from zonal.dkm.psd import CholeskyParameter
from zonal.dkm.top import global_average_pooling_top, linear_top
from zonal.linalg import cholesky

TOPS = ("gap", "linear")
#: a layer's Gram blocks: G_ii [M, M], G_ti [P, H, W, M], diag G_tt [P, H, W]
Blocks = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class ConvLayerSpec:
    """One convolutional Gram layer: :math:`M` inducing points, its filter geometry, and (for the
    last layer of a residual block) the earlier layer whose Gram blocks it is averaged with."""

    num_inducing: int
    geometry: ConvGeometry = field(default_factory=ConvGeometry)
    skip_from: int | None = None


def resnet_layers(
    inducing: Sequence[int] = (16, 32, 64), blocks_per_stage: int = 3
) -> list[ConvLayerSpec]:
    r"""The ResNet20-like stack of seed 003 sec. 5: a :math:`3 \times 3` stem, then three stages
    of ``blocks_per_stage`` blocks of two :math:`3 \times 3` layers with
    :math:`M = \mathtt{inducing}[\mathtt{stage}]`, stride 2 at the first layer of stages 2 and 3; a
    block whose shapes do not change ends with a skip connection to its input (downsampling blocks,
    whose input has another shape, have none)."""
    layers = [ConvLayerSpec(inducing[0])]
    for stage, count in enumerate(inducing):
        for block in range(blocks_per_stage):
            downsample = stage > 0 and block == 0
            block_input = len(layers) - 1
            stride = 2 if downsample else 1
            layers.append(ConvLayerSpec(count, ConvGeometry((3, 3), stride, 1)))
            layers.append(ConvLayerSpec(count, skip_from=None if downsample else block_input))
    return layers


def initial_mixing(
    num_inducing: int,
    num_previous: int,
    kernel_size: tuple[int, int],
    generator: torch.Generator,
    noise: float = 0.1,
) -> torch.Tensor:
    """Mixing matrices C [M, M', kh, kw] that start each new inducing point as a spatially constant
    patch of one randomly chosen inducing point of the layer below (C_{d,i,i'} = 1 for that i' at
    every offset d), plus Gaussian noise of scale ``noise`` to tell duplicates apart.

    Seed 003 initialises the mixing "randomly" without saying how. Zero-mean Gaussian mixing makes
    Gamma_ti average out (sum over offsets and mixed signs) while Gamma_ii does not, so test/train
    points start almost uncorrelated with the inducing points and learning stalls; the selection
    keeps them correlated from the start.
    """
    chosen = torch.randint(num_previous, (num_inducing,), generator=generator)  # [M]
    selection = torch.nn.functional.one_hot(chosen, num_previous).to(torch.float64)  # [M, M']
    noise_term = noise * torch.randn(
        num_inducing, num_previous, *kernel_size, generator=generator, dtype=torch.float64
    )
    return selection.reshape(num_inducing, num_previous, 1, 1) + noise_term


class ConvDKM(DeepKernelMachine):
    r"""A sparse convolutional DKM (module docstring).

    Args:
        image_shape: :math:`(C, H, W)` of the input images.
        layers: the Gram layers (``ConvLayerSpec``; ``resnet_layers()`` for the seed's stack).
        likelihood: as for ``SparseDKM`` (the seed's default: ``SoftmaxLikelihood(num_classes=10,
            mixing_weights=False)``).
        inducing_patches: :math:`Z` [M_0, C, kh, kw], the first layer's inducing patches.
        kernel: the nonlinearity's Gram kernel (default the ReLU arc-cosine kernel).
        nu: :math:`\nu_l` per layer (or one for all; ``math.inf`` for NNGP layers). The first
            layer's kernel is linear in the patches, so with more inducing patches than values per
            patch (:math:`C \cdot \mathit{kh} \cdot \mathit{kw}`) its :math:`K_{ii}` is singular and
            :math:`\mathtt{nu}[0]` must be :math:`\infty`.
        top: ``"gap"`` (global average pooling) or ``"linear"``.
        normalisation: keyword arguments of ``GramNormalisation`` (``inducing``, ``train_test``,
            ``inducing_scale``, ``train_test_scale``); ``None`` for no normalisation layer at all.
        skip_weight: :math:`w` of the skip connections' convex combinations.
        likelihood_samples, seed: Monte Carlo draws of the categorical likelihood, their seed.
        gradient_checkpointing: recompute each layer in the backward pass instead of keeping its
            intermediates (for large batches and feature maps).
    """

    def __init__(
        self,
        image_shape: tuple[int, int, int],
        layers: Sequence[ConvLayerSpec],
        likelihood: Likelihood,
        *,
        inducing_patches: torch.Tensor,
        kernel: GramKernel | str = "relu",
        nu: float | Sequence[float] = 1.0,
        top: str = "gap",
        normalisation: dict[str, str] | None = None,
        skip_weight: float = 0.5,
        likelihood_samples: int = 1000,
        gradient_checkpointing: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if len(image_shape) != 3 or any(int(size) < 1 for size in image_shape):
            raise ValueError(f"image_shape must be (C, H, W), got {image_shape!r}")
        if not layers:
            raise ValueError("a convolutional DKM needs at least one layer")
        if top not in TOPS:
            raise ValueError(f"unknown top layer {top!r}; choose one of {TOPS}")
        if not 0 <= skip_weight <= 1:
            raise ValueError(f"skip_weight must lie in [0, 1], got {skip_weight}")
        self.image_shape = tuple(int(size) for size in image_shape)
        self.layer_specs = tuple(layers)
        self.kernel = gram_kernel(kernel) if isinstance(kernel, str) else kernel
        self.nu = check_nu(nu, len(layers))
        self.top = top
        self.skip_weight = float(skip_weight)
        self.gradient_checkpointing = bool(gradient_checkpointing)
        self.likelihood = likelihood
        self._num_outputs = likelihood_outputs(likelihood)
        self.input_dim = math.prod(self.image_shape)
        self.likelihood_samples = likelihood_samples
        self.seed = seed
        self.spatial_shapes = self._check_layers(inducing_patches)
        patch_values = self.image_shape[0] * layers[0].geometry.patch_size
        if layers[0].num_inducing > patch_values and not math.isinf(self.nu[0]):
            raise ValueError(
                f"the first layer's kernel is linear in the C kh kw = {patch_values} values of a "
                f"patch, so its K_ii has rank <= {patch_values} < M_0 = {layers[0].num_inducing} "
                "and a learned G_ii would have an infinite KL: use nu[0] = inf (an NNGP first "
                f"layer) or at most {patch_values} inducing patches"
            )
        generator = torch.Generator().manual_seed(seed)
        self.inducing_patches = torch.nn.Parameter(
            inducing_patches.detach().to(torch.float64).clone()
        )
        self.mixing = torch.nn.ParameterList(
            torch.nn.Parameter(
                initial_mixing(
                    spec.num_inducing, previous.num_inducing, spec.geometry.kernel_size, generator
                )
            )
            for previous, spec in itertools.pairwise(layers)
        )
        last = layers[-1].num_inducing
        if top == "linear":
            self.top_mixing = torch.nn.Parameter(
                initial_mixing(last, last, self.spatial_shapes[-1], generator)
            )
        self.normalisations = None
        if normalisation is not None:
            self.normalisations = torch.nn.ModuleList(
                GramNormalisation(spec.num_inducing, shape, **normalisation)
                for spec, shape in zip(layers, self.spatial_shapes, strict=True)
            ).to(torch.float64)
        self.grams = torch.nn.ModuleDict()
        empty = inducing_patches.new_zeros(0, *self.image_shape, dtype=torch.float64)
        with torch.no_grad():
            priors, top_chol, _, _ = self._propagate(empty)  # the NNGP: every G^l_ii = K_ii
        for index, prior in enumerate(priors):
            if not math.isinf(self.nu[index]):
                self.grams[str(index)] = CholeskyParameter(prior, name=f"G^{index + 1}_ii")
        # mu: a draw of the inducing outputs from their prior N(0, K_ii), one column per channel
        # (seed 003 sec. 5 initialises mu randomly). A zero mean makes every logit 0, so the
        # layers below get no gradient from the labels, only the one that shrinks the outputs'
        # variance, which the KL-free train/test scales Psi of the last normalisation follow
        # down to the constant output (objective -log C; app. C, eq. 73)
        whitened_mean = torch.randn(
            last, self._num_outputs, generator=generator, dtype=torch.float64
        )  # [M, C]
        self.output_mean = torch.nn.Parameter(top_chol @ whitened_mean)
        self.output_covariance = CholeskyParameter(top_chol @ top_chol.mT, name="A")
        self.to(torch.float64)

    def _check_layers(self, inducing_patches: torch.Tensor) -> list[tuple[int, int]]:
        channels, height, width = self.image_shape
        first = self.layer_specs[0]
        expected = (first.num_inducing, channels, *first.geometry.kernel_size)
        if (
            not isinstance(inducing_patches, torch.Tensor)
            or tuple(inducing_patches.shape) != expected
        ):
            shape = getattr(inducing_patches, "shape", None)
            raise ValueError(f"inducing_patches must be [M_0, C, kh, kw] = {expected}, got {shape}")
        check_finite(inducing_patches.reshape(len(inducing_patches), -1), "inducing_patches")
        shapes = []
        for index, spec in enumerate(self.layer_specs):
            height, width = spec.geometry.output_shape(height, width)
            shapes.append((height, width))
            if spec.skip_from is None:
                continue
            source = spec.skip_from
            if not 0 <= source < index:
                raise ValueError(
                    f"layer {index} skips from layer {source}, which does not precede it"
                )
            if (
                self.layer_specs[source].num_inducing != spec.num_inducing
                or shapes[source] != shapes[-1]
            ):
                raise ValueError(
                    f"layer {index} skips from layer {source} of another shape "
                    f"({self.layer_specs[source].num_inducing} inducing, {shapes[source]} vs "
                    f"{spec.num_inducing} inducing, {shapes[-1]})"
                )
        return shapes

    # ------------------------------------------------------------------ inputs
    def images_to_inputs(self, images: torch.Tensor) -> torch.Tensor:
        """Rows [N, C H W] of images [N, C, H, W] (or [N, H, W] for one channel), checked."""
        if images.dim() == 3 and self.image_shape[0] == 1:
            images = images.unsqueeze(1)
        if images.dim() != 4 or tuple(images.shape[1:]) != self.image_shape:
            raise ValueError(
                f"images must be [N, {', '.join(map(str, self.image_shape))}] "
                f"(channels, height, width), got {tuple(images.shape)}"
            )
        return images.flatten(1)

    # ------------------------------------------------------------------ propagation
    def _omega(self, index: int, blocks: Blocks) -> Blocks:
        """Normalise layer ``index``'s Gram blocks and apply the nonlinearity Omega = K(G)."""
        gram_ii, cross, diagonal = blocks
        if self.normalisations is not None:
            gram_ii, cross, diagonal = self.normalisations[index](gram_ii, cross, diagonal)
        omega_ti = self.kernel.cross(cross, diagonal, gram_ii.diagonal())  # [P, H, W, M]
        return self.kernel(gram_ii), omega_ti, self.kernel.diagonal(diagonal)

    def _layer(
        self, index: int, images: torch.Tensor, *blocks: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Layer ``index``: (G_ii, G_ti, diag G_tt, K_ii, KL) from the blocks of the layer below
        (none for the first layer, which reads the images)."""
        spec = self.layer_specs[index]
        if not blocks:
            kernel_ii, kernel_ti, kernel_tt = input_patch_blocks(
                images, self.inducing_patches, spec.geometry
            )
        else:
            omega_ii, omega_ti, omega_tt = self._omega(index - 1, cast(Blocks, blocks))
            mixing = self.mixing[index - 1]
            kernel_ii = convolve_inducing(omega_ii, mixing)
            kernel_ti = convolve_cross(omega_ti, mixing, spec.geometry)
            kernel_tt = convolve_diagonal(omega_tt, spec.geometry)
        if str(index) not in self.grams:  # an NNGP layer
            return kernel_ii, kernel_ti, kernel_tt, kernel_ii, kernel_ii.new_zeros(())
        chol = cholesky(kernel_ii, name=f"K_ii of convolutional layer {index + 1}")
        root = cast(CholeskyParameter, self.grams[str(index)]).root  # [M, M]
        images_count, height, width, size = kernel_ti.shape
        cross, diagonal, _ = conditional_blocks(
            chol,
            kernel_ti.reshape(images_count, height * width, size),
            kernel_tt.reshape(images_count, height * width),
            root,
        )
        return (
            root @ root.mT,
            cross.reshape(kernel_ti.shape),
            diagonal.reshape(kernel_tt.shape),
            kernel_ii,
            gaussian_kl_from_roots(root, chol),
        )

    def _propagate(
        self, images: torch.Tensor
    ) -> tuple[list[torch.Tensor], torch.Tensor, tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        """(K_ii of every layer, the Cholesky factor of the output K_ii, the output kernel's
        (K_ti [P, M], diag K_tt [P]), the layer KLs [L]) for images [P, C, H, W]. With
        ``gradient_checkpointing`` each layer's intermediates are recomputed in the backward pass
        instead of kept (less memory, about one more forward pass of time)."""
        priors, kls = [], []
        saved: list[tuple[torch.Tensor, ...]] = []
        blocks: tuple[torch.Tensor, ...] = ()
        for index, spec in enumerate(self.layer_specs):
            if self.gradient_checkpointing and torch.is_grad_enabled():
                outputs = torch.utils.checkpoint.checkpoint(
                    self._layer, index, images, *blocks, use_reentrant=False
                )
            else:
                outputs = self._layer(index, images, *blocks)
            blocks, prior, kl = outputs[:3], outputs[3], outputs[4]
            priors.append(prior)
            kls.append(kl)
            if spec.skip_from is not None:
                weight, earlier = self.skip_weight, saved[spec.skip_from]
                blocks = tuple(
                    weight * now + (1 - weight) * then
                    for now, then in zip(blocks, earlier, strict=True)
                )
            saved.append(blocks)
        omega_ii, omega_ti, omega_tt = self._omega(len(self.layer_specs) - 1, cast(Blocks, blocks))
        if self.top == "gap":
            top_chol = cholesky(omega_ii, name="Omega_ii of the pooled output layer")
            _, kernel_ti, kernel_tt = global_average_pooling_top(
                omega_ii, top_chol, omega_ti, omega_tt
            )
        else:
            kernel_ii, kernel_ti, kernel_tt = linear_top(
                omega_ii, omega_ti, omega_tt, self.top_mixing
            )
            top_chol = cholesky(kernel_ii, name="K_ii of the linear output layer")
        return priors, top_chol, (kernel_ti, kernel_tt), torch.stack(kls)

    def batch_outputs(self, inputs: torch.Tensor) -> BatchOutputs:
        """Output marginals and KL terms for a minibatch of image rows [B, C H W]."""
        images = inputs.reshape(-1, *self.image_shape)
        _, top_chol, (kernel_ti, kernel_tt), layer_kls = self._propagate(images)
        _, variance, mean = conditional_blocks(
            top_chol, kernel_ti, kernel_tt, self.output_covariance.root, self.output_mean
        )
        output_kl = gaussian_kl_from_roots(self.output_covariance.root, top_chol, self.output_mean)
        assert mean is not None  # given an output mean, the blocks carry the predictive mean
        return BatchOutputs(mean, variance, output_kl, layer_kls)

    def latent_distribution(self, X: torch.Tensor) -> MultivariateNormal:
        """The per-image marginals of :math:`q(f(X))`, :math:`X` [*b, q, C H W], as independent
        Gaussians."""
        batch_shape = X.shape[:-1]
        outputs = self.batch_outputs(X.reshape(-1, X.shape[-1]))
        mean = outputs.mean.reshape(*batch_shape, self._num_outputs)  # [*b, q, C]
        variance = outputs.variance.clamp_min(0).reshape(batch_shape)  # [*b, q]
        if self._num_outputs == 1:
            return MultivariateNormal(mean.squeeze(-1), DiagLinearOperator(variance))
        interleaved = variance.repeat_interleave(self._num_outputs, dim=-1)  # [*b, q C]
        return MultitaskMultivariateNormal(mean, DiagLinearOperator(interleaved), interleaved=True)
