"""GPyTorch's own kernel test suite (``BaseKernelTestCase``), unmodified, run on every zonal kernel.

Every test method is GPyTorch's as written; only the suite's hooks are zonal's:

* data: points on S^{d-1} of the kernel's ambient width d (raw vectors of that width for the
  homogeneous variant) in place of GPyTorch's random data;
* ``active_dims``: GPyTorch builds ``create_kernel_no_ard(active_dims=...)`` for wide data and
  ``create_kernel_no_ard()`` for the active columns alone. A zonal kernel's ambient_dim is part of
  its definition (its eigenvalues depend on it), so in the two active-dims tests the hooks give
  both kernels the width of the active columns and the wide data unit vectors in those columns;
* dtype: zonal's kernels are float64 by default (docs/design.md), so the suite runs with float64
  as torch's default dtype, which GPyTorch's dtype test compares a new kernel's with.
"""

import unittest

import torch
from gpytorch.test.base_kernel_test_case import BaseKernelTestCase

from zonal.kernels import (
    ArcCosineKernel,
    ChordalMaternKernel,
    ChordalRBFKernel,
    DeepArcCosineKernel,
    IntrinsicHeatKernel,
    IntrinsicMaternKernel,
    PolynomialDecayKernel,
    ReLUNTKernel,
    SpectralZonalKernel,
)

WIDE = 10  # width of the data that the active_dims checks slice
#: the active columns of GPyTorch's two active-dims tests
ACTIVE_COLUMNS = {
    "test_active_dims_list": [0, 2, 4, 6],
    "test_active_dims_range": list(range(3, 9)),
}


class _ZonalKernelSuite(BaseKernelTestCase):
    """The suite for one zonal kernel class; subclasses define ``make(ambient_dim, **kwargs)``."""

    seed = 0
    ambient_dim = 3
    homogeneous = False

    def make(self, ambient_dim, **kwargs):
        raise NotImplementedError

    def setUp(self):
        self._default_dtype = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        super().setUp()

    def tearDown(self):
        super().tearDown()
        torch.set_default_dtype(self._default_dtype)

    def _active_columns(self):
        return ACTIVE_COLUMNS.get(self._testMethodName)

    def create_kernel_no_ard(self, **kwargs):
        active = self._active_columns()
        width = self.ambient_dim if active is None else len(active)
        return self.make(width, homogeneous=self.homogeneous, **kwargs)

    def _points(self, *batch, width=None):
        x = torch.randn(*batch, width or self.ambient_dim, dtype=torch.float64)
        return x if self.homogeneous else x / x.norm(dim=-1, keepdim=True)

    def create_data_no_batch(self):
        active = self._active_columns()
        if active is None:
            return self._points(50)
        x = torch.randn(50, WIDE, dtype=torch.float64)
        if not self.homogeneous:  # the active columns hold a point of S^{k-1}
            x[:, active] = self._points(50, width=len(active))
        return x

    def create_data_single_batch(self):
        return self._points(2, 3)

    def create_data_double_batch(self):
        return self._points(3, 2, 50)


class TestArcCosineOrder0(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return ArcCosineKernel(ambient_dim, order=0, **kwargs)


class TestArcCosineOrder1(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return ArcCosineKernel(ambient_dim, order=1, **kwargs)


class TestArcCosineOrder2(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return ArcCosineKernel(ambient_dim, order=2, **kwargs)


class TestArcCosineHomogeneous(_ZonalKernelSuite, unittest.TestCase):
    homogeneous = True

    def make(self, ambient_dim, **kwargs):
        return ArcCosineKernel(ambient_dim, order=1, **kwargs)


class TestDeepArcCosine(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return DeepArcCosineKernel(ambient_dim, depth=3, **kwargs)


class TestReLUNTK(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return ReLUNTKernel(ambient_dim, depth=2, **kwargs)


class TestChordalMatern(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return ChordalMaternKernel(ambient_dim, nu=2.5, **kwargs)


class TestChordalMaternHomogeneous(_ZonalKernelSuite, unittest.TestCase):
    homogeneous = True

    def make(self, ambient_dim, **kwargs):
        return ChordalMaternKernel(ambient_dim, nu=1.5, **kwargs)


class TestChordalRBF(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return ChordalRBFKernel(ambient_dim, **kwargs)


class TestIntrinsicMatern(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return IntrinsicMaternKernel(ambient_dim, nu=1.5, max_degree=10, **kwargs)


class TestIntrinsicHeat(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return IntrinsicHeatKernel(ambient_dim, max_degree=10, **kwargs)


class TestPolynomialDecay(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return PolynomialDecayKernel(ambient_dim, max_degree=10, beta=2.5, **kwargs)


class TestSpectral(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        return SpectralZonalKernel(ambient_dim, [0.5, 0.3, 0.1, 0.05], **kwargs)


class TestSpectralFixed(_ZonalKernelSuite, unittest.TestCase):
    def make(self, ambient_dim, **kwargs):
        spectrum = [0.5, 0.0, 0.1, 0.05]
        return SpectralZonalKernel(ambient_dim, spectrum, learn_eigenvalues=False, **kwargs)
