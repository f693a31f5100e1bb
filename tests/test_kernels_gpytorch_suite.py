"""GPyTorch's own kernel test suite (``BaseKernelTestCase``) run on every zonal kernel class.

Data: points on S^{d-1} of one fixed ambient width d (raw vectors of that width for the homogeneous
variant) in place of GPyTorch's random data of varying widths. Three checks are overridden because
they do not apply as written; each override states why and asserts the zonal behaviour instead.
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


class _ZonalKernelSuite(BaseKernelTestCase):
    """The suite for one zonal kernel class; subclasses define ``make(ambient_dim, **kwargs)``."""

    seed = 0
    ambient_dim = 3
    homogeneous = False

    def make(self, ambient_dim, **kwargs):
        raise NotImplementedError

    def create_kernel_no_ard(self, **kwargs):
        return self.make(self.ambient_dim, homogeneous=self.homogeneous, **kwargs)

    def _points(self, *batch, width=None):
        x = torch.randn(*batch, width or self.ambient_dim, dtype=torch.float64)
        return x if self.homogeneous else x / x.norm(dim=-1, keepdim=True)

    def create_data_no_batch(self):
        return self._points(50)

    def create_data_single_batch(self):
        return self._points(2, 3)

    def create_data_double_batch(self):
        return self._points(3, 2, 50)

    def _check_active_dims(self, active_dims):
        x = torch.randn(50, WIDE, dtype=torch.float64)
        if not self.homogeneous:  # the active columns hold a point of S^{k-1}
            active = x[:, active_dims]
            x[:, active_dims] = active / active.norm(dim=-1, keepdim=True)
        width = len(active_dims)
        kernel = self.make(width, homogeneous=self.homogeneous, active_dims=active_dims)
        reference = self.make(width, homogeneous=self.homogeneous)
        with torch.no_grad():
            actual = kernel(x).evaluate_kernel().to_dense()
            expected = reference(x[:, active_dims]).evaluate_kernel().to_dense()
        self.assertAllClose(actual, expected, rtol=1e-12, atol=1e-12)

    def test_active_dims_list(self):
        """GPyTorch compares ``make(active_dims=[0, 2, 4, 6])`` on wide data with ``make()`` on the
        four active columns, both built by ``create_kernel_no_ard``: a zonal kernel's ambient_dim is
        fixed at construction, so no single ``make()`` fits both widths. Here both kernels have
        ambient_dim 4, and the active columns of the wide data hold a point of S^3."""
        self._check_active_dims([0, 2, 4, 6])

    def test_active_dims_range(self):
        """As ``test_active_dims_list``, with the six active columns 3..8."""
        self._check_active_dims(list(range(3, 9)))

    def test_kernel_dtype_device(self):
        """GPyTorch expects a new kernel in ``torch.get_default_dtype()`` (float32); zonal's
        hyperparameters and buffers are float64 by default (docs/design.md: harmonics, eigenvalues and
        Cholesky work in float64), so the new kernel must report float64. The rest of the check is
        GPyTorch's: the device, conversion with ``.to``, and the error on mixed dtypes."""
        kernel = self.create_kernel_no_ard(batch_shape=torch.Size([]))
        self.assertEqual(kernel.dtype, torch.float64)
        self.assertEqual(kernel.device, torch.device("cpu"))
        kernel.to(dtype=torch.float32)
        self.assertEqual(kernel.dtype, torch.float32)
        x = self._points(5).to(torch.float32)
        with torch.no_grad():
            self.assertEqual(kernel(x).to_dense().dtype, torch.float32)
        kernel.register_parameter("foo", torch.nn.Parameter(torch.zeros(1, dtype=torch.float64)))
        with self.assertRaisesRegex(RuntimeError, "parameters have multiple dtypes"):
            _ = kernel.dtype


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
