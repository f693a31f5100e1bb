"""Deep kernel machines (seed 003): Gram-matrix kernels and the DKM objective, sparse fully
connected and convolutional DKMs (inter-domain inducing points), their training."""

from zonal.dkm.augmentation import random_crops
from zonal.dkm.conditional import ConditionalBlocks, conditional_blocks
from zonal.dkm.conv_model import ConvDKM, ConvLayerSpec, resnet_layers
from zonal.dkm.convolution import ConvGeometry
from zonal.dkm.divergence import gaussian_kl, gaussian_kl_from_roots
from zonal.dkm.gram_kernels import ArcCosineGram, GramKernel, SquaredExponentialGram, gram_kernel
from zonal.dkm.model import BatchOutputs, DeepKernelMachine, ObjectiveTerms
from zonal.dkm.objective import (
    check_nu,
    dkm_objective,
    gaussian_log_marginal,
    input_gram,
    nngp_grams,
)
from zonal.dkm.psd import CholeskyParameter
from zonal.dkm.sparse import InducingChain, InducingLayer, SparseDKM
from zonal.dkm.training import TrainingDivergedError, fit_dkm

__all__ = [
    "ArcCosineGram",
    "BatchOutputs",
    "CholeskyParameter",
    "ConditionalBlocks",
    "ConvDKM",
    "ConvGeometry",
    "ConvLayerSpec",
    "DeepKernelMachine",
    "GramKernel",
    "InducingChain",
    "InducingLayer",
    "ObjectiveTerms",
    "SparseDKM",
    "SquaredExponentialGram",
    "TrainingDivergedError",
    "check_nu",
    "conditional_blocks",
    "dkm_objective",
    "fit_dkm",
    "gaussian_kl",
    "gaussian_kl_from_roots",
    "gaussian_log_marginal",
    "gram_kernel",
    "input_gram",
    "nngp_grams",
    "random_crops",
    "resnet_layers",
]
