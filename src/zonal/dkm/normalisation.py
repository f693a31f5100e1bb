r"""Batch-norm-like normalisation and rescaling of convolutional Gram matrices (seed 003 app. C).

Every scheme has the form (eqs. 67-69)

.. math::

    N_{ij}^{ii} &= G_{ij}^{ii} \psi_i \psi_j / (a_i a_j), \\
    N_{i,js}^{it} &= G_{i,js}^{it} \psi_i \Psi_s / (a_i A_{js}), \\
    N_{jr,jr}^{tt} &= G_{jr,jr}^{tt} \Psi_r^2 / A_{jr}^2,

with parameter-free normalisers :math:`a` (inducing) and :math:`A` (test/train) and learned scales
:math:`\psi`, :math:`\Psi`:

* inducing normalisation :math:`a_i`: ``none`` 1; ``batch``
  :math:`\sqrt{\operatorname{mean}_j G_{jj}^{ii}}`; ``local`` :math:`\sqrt{G_{ii}^{ii}}`;
* test/train normalisation :math:`A_{jr}`: ``none`` 1; ``batch`` sqrt of the mean of
  :math:`\operatorname{diag} G^{tt}` over every image and location of the batch; ``image`` over the
  locations of image :math:`j`; ``location`` over the images of the batch at location :math:`r`;
  ``local`` :math:`\sqrt{G_{jr,jr}^{tt}}`;
* inducing scaling :math:`\psi`: ``none`` 1; ``batch`` one learned scalar; ``local`` one per
  inducing point;
* test/train scaling :math:`\Psi`: ``none`` 1; ``batch`` one learned scalar; ``location`` one per
  location.

``batch``, ``image`` and ``location`` test/train normalisers use the statistics of the batch that is
evaluated, as batch normalisation does in training (the seed keeps no running averages); evaluate
predictions in large batches. Seed 003's default is ``batch`` everywhere.
"""

from __future__ import annotations

import torch

INDUCING_NORMALISATIONS = ("none", "batch", "local")
TRAIN_TEST_NORMALISATIONS = ("none", "batch", "image", "location", "local")
INDUCING_SCALINGS = ("none", "batch", "local")
TRAIN_TEST_SCALINGS = ("none", "batch", "location")


def _inverse_root(values: torch.Tensor) -> torch.Tensor:
    """1 / sqrt of a non-negative statistic, with 1 / sqrt(0) read as 0: a block whose diagonal
    vanishes (a location that is zero in every image, e.g. MNIST's blank border in the first
    layer) is constant 0, so it normalises to 0 with a zero gradient. Both branches of the
    ``where`` stay finite (the zero entries take the root of 1), so no inf * 0 reaches the
    backward pass; clamping the statistic to the smallest float instead makes the factor's square
    1 / tiny (4.5e307 in float64, 8.5e37 in float32), which overflows to inf under any upstream
    gradient above a few units, and inf times the block's zero derivative is NaN."""
    positive = values > 0
    return torch.where(positive, 1 / torch.where(positive, values, 1).sqrt(), 0)


def _check(value: str, choices: tuple[str, ...], name: str) -> str:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {choices}")
    return value


class GramNormalisation(torch.nn.Module):
    """One layer's normalisation and rescaling (module docstring).

    Args:
        num_inducing: M, the inducing points of the layer (for ``local`` inducing scaling).
        spatial_shape: (H, W) of the layer's feature map (for ``location`` scaling).
        inducing, train_test: the normalisations a and A.
        inducing_scale, train_test_scale: the scalings psi and Psi (learned, initialised at 1).
    """

    def __init__(
        self,
        num_inducing: int,
        spatial_shape: tuple[int, int],
        *,
        inducing: str = "batch",
        train_test: str = "batch",
        inducing_scale: str = "batch",
        train_test_scale: str = "batch",
    ) -> None:
        super().__init__()
        self.inducing = _check(inducing, INDUCING_NORMALISATIONS, "inducing normalisation")
        self.train_test = _check(train_test, TRAIN_TEST_NORMALISATIONS, "train/test normalisation")
        scale_i = _check(inducing_scale, INDUCING_SCALINGS, "inducing scaling")
        scale_t = _check(train_test_scale, TRAIN_TEST_SCALINGS, "train/test scaling")
        shapes_i: dict[str, tuple[int, ...] | None] = {
            "none": None,
            "batch": (1,),
            "local": (num_inducing,),
        }
        shapes_t: dict[str, tuple[int, ...] | None] = {
            "none": None,
            "batch": (1, 1),
            "location": tuple(spatial_shape),
        }
        shape_i, shape_t = shapes_i[scale_i], shapes_t[scale_t]
        self.inducing_scale = None if shape_i is None else torch.nn.Parameter(torch.ones(shape_i))
        self.train_test_scale = None if shape_t is None else torch.nn.Parameter(torch.ones(shape_t))

    def _inverse_inducing_normaliser(self, gram_ii: torch.Tensor) -> torch.Tensor:
        """1 / a_i [M]."""
        diagonal = gram_ii.diagonal()  # [M]
        if self.inducing == "none":
            return torch.ones_like(diagonal)
        if self.inducing == "batch":
            return _inverse_root(diagonal.mean()).expand_as(diagonal)
        return _inverse_root(diagonal)

    def _inverse_train_test_normaliser(self, diagonal: torch.Tensor) -> torch.Tensor:
        """1 / A_jr [P, H, W]."""
        if self.train_test == "none":
            return torch.ones_like(diagonal)
        if self.train_test == "batch":
            return _inverse_root(diagonal.mean()).expand_as(diagonal)
        if self.train_test == "image":
            return _inverse_root(diagonal.mean((1, 2), keepdim=True)).expand_as(diagonal)
        if self.train_test == "location":
            return _inverse_root(diagonal.mean(0, keepdim=True)).expand_as(diagonal)
        return _inverse_root(diagonal)

    def forward(
        self, gram_ii: torch.Tensor, cross: torch.Tensor, diagonal: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(N^ii [M, M], N^ti [P, H, W, M], diag N^tt [P, H, W]) of the blocks G^ii, G^ti, diag G^tt."""
        factor_i = self._inverse_inducing_normaliser(gram_ii)  # psi_i / a_i [M]
        if self.inducing_scale is not None:
            factor_i = factor_i * self.inducing_scale.to(gram_ii)
        factor_t = self._inverse_train_test_normaliser(diagonal)  # Psi_r / A_jr [P, H, W]
        if self.train_test_scale is not None:
            factor_t = factor_t * self.train_test_scale.to(diagonal)
        normal_ii = gram_ii * factor_i.unsqueeze(-1) * factor_i
        normal_ti = cross * factor_t.unsqueeze(-1) * factor_i
        return normal_ii, normal_ti, diagonal * factor_t.square()
