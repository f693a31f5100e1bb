"""The kernelised convolution of seed 003 (eqs. 15, 26-27, 66, appendix B) against a brute-force
loop over patches and offsets (stride and padding included) and against a wide random convolutional
layer (10^4 output channels, Monte Carlo within its standard error)."""

import math

import pytest
import torch
import torch.nn.functional as functional

from zonal.dkm.convolution import (
    ConvGeometry,
    convolve_cross,
    convolve_diagonal,
    convolve_inducing,
    input_patch_blocks,
)


def generator(seed):
    return torch.Generator().manual_seed(seed)


def padded_features(features, padding):
    """Features [P, H, W, N] with zero rows around (the zero padding of the feature map)."""
    return functional.pad(features, (0, 0, padding, padding, padding, padding))


def brute_force_blocks(inducing, features, mixing, geometry):
    """Gamma_ii, Gamma_ti, diag Gamma_tt from explicit features by loops over offsets d and
    output locations (eqs. 15, 26, 27), Omega = H H^T / N."""
    width = features.shape[-1]
    kh, kw = geometry.kernel_size
    offsets = [(a, b) for a in range(kh) for b in range(kw)]
    padded = padded_features(features, geometry.padding)  # [P, H + 2p, W + 2p, N]
    out_h, out_w = geometry.output_shape(features.shape[1], features.shape[2])
    size, count = mixing.shape[0], len(offsets)
    gamma_ii = torch.zeros(size, size, dtype=torch.float64)
    for a, b in offsets:
        patch_features = mixing[:, :, a, b] @ inducing  # [M, N]
        gamma_ii += patch_features @ patch_features.mT / width / count
    gamma_ti = torch.zeros(features.shape[0], out_h, out_w, size, dtype=torch.float64)
    gamma_tt = torch.zeros(features.shape[0], out_h, out_w, dtype=torch.float64)
    for j in range(features.shape[0]):
        for r in range(out_h):
            for s in range(out_w):
                for a, b in offsets:
                    pixel = padded[j, r * geometry.stride + a, s * geometry.stride + b]  # [N]
                    omega_it = inducing @ pixel / width  # [M']
                    gamma_ti[j, r, s] += mixing[:, :, a, b] @ omega_it / count
                    gamma_tt[j, r, s] += pixel @ pixel / width / count
    return gamma_ii, gamma_ti, gamma_tt


@pytest.mark.parametrize("stride, padding", [(1, 1), (2, 1), (1, 0), (2, 2)])
def test_convolution_blocks_equal_a_brute_force_loop_over_patches(stride, padding):
    geometry = ConvGeometry((3, 3), stride, padding)
    features = torch.randn(2, 5, 6, 4, generator=generator(1), dtype=torch.float64)  # [P, H, W, N]
    inducing = torch.randn(3, 4, generator=generator(2), dtype=torch.float64)  # [M', N]
    mixing = torch.randn(5, 3, 3, 3, generator=generator(3), dtype=torch.float64)  # [M, M', 3, 3]
    expected = brute_force_blocks(inducing, features, mixing, geometry)
    omega_ii = inducing @ inducing.mT / 4
    omega_ti = features @ inducing.mT / 4  # [P, H, W, M']
    omega_tt = features.square().sum(-1) / 4  # [P, H, W]
    torch.testing.assert_close(
        convolve_inducing(omega_ii, mixing), expected[0], rtol=1e-12, atol=1e-13
    )
    torch.testing.assert_close(
        convolve_cross(omega_ti, mixing, geometry), expected[1], rtol=1e-12, atol=1e-13
    )
    torch.testing.assert_close(
        convolve_diagonal(omega_tt, geometry), expected[2], rtol=1e-12, atol=1e-13
    )


def test_input_patch_blocks_equal_brute_force_with_patches_as_inducing_inputs():
    """First layer: the inducing patches Z are the mixed inducing inputs C_d H_i of eq. 25 with
    one-hot H_i over the (offset, channel) pairs, so the brute force applies unchanged."""
    geometry = ConvGeometry((3, 3), 2, 1)
    images = torch.randn(2, 2, 5, 5, generator=generator(4), dtype=torch.float64)  # [P, C, H, W]
    patches = torch.randn(4, 2, 3, 3, generator=generator(5), dtype=torch.float64)  # [M, C, 3, 3]
    # one inducing input per channel (N = C features, H_i = I); C_{d, m, c} = Z_{m, c, d}
    mixing = patches  # [M, M' = C, 3, 3]
    expected = brute_force_blocks(
        torch.eye(2, dtype=torch.float64), images.permute(0, 2, 3, 1), mixing, geometry
    )
    actual = input_patch_blocks(images, patches, geometry)
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-13)


def test_convolution_blocks_are_the_covariance_of_a_wide_random_conv_layer():
    """F = conv(H, W) (and F_i = sum_d W_d^T C_d H_i, eq. 25) with W ~ N(0, 1 / (|D| N)) and
    10^4 output channels: F F^T / N_out matches Gamma within 4 standard errors."""
    geometry = ConvGeometry((3, 3), 1, 1)
    features = torch.randn(2, 4, 4, 3, generator=generator(6), dtype=torch.float64)  # [P, H, W, N]
    inducing = torch.randn(2, 3, generator=generator(7), dtype=torch.float64)  # [M', N]
    mixing = torch.randn(2, 2, 3, 3, generator=generator(8), dtype=torch.float64)  # [M, M', 3, 3]
    channels = 10_000
    weights = torch.randn(channels, 3, 3, 3, generator=generator(9), dtype=torch.float64)
    weights = weights / math.sqrt(9 * 3)  # [N_out, N, kh, kw], variance 1 / (|D| N)
    outputs_t = functional.conv2d(
        features.permute(0, 3, 1, 2), weights, padding=1
    )  # [P, N_out, H, W]
    patches_i = torch.einsum("mnab,nc->mcab", mixing, inducing)  # C_d H_i as patches [M, N, 3, 3]
    outputs_i = torch.einsum("mcab,ocab->mo", patches_i, weights)  # [M, N_out]
    products_ii = outputs_i.unsqueeze(1) * outputs_i.unsqueeze(0)  # [M, M, N_out]
    products_ti = outputs_t.permute(0, 2, 3, 1).unsqueeze(-2) * outputs_i.reshape(1, 1, 1, 2, -1)
    products_tt = outputs_t.square().permute(0, 2, 3, 1)  # [P, H, W, N_out]
    omega_ii = inducing @ inducing.mT / 3
    omega_ti = features @ inducing.mT / 3
    exact = (
        convolve_inducing(omega_ii, mixing),
        convolve_cross(omega_ti, mixing, geometry),
        convolve_diagonal(features.square().sum(-1) / 3, geometry),
    )
    for value, products in zip(exact, (products_ii, products_ti, products_tt), strict=True):
        error = products.std(-1) / math.sqrt(channels)
        assert ((value - products.mean(-1)).abs() <= 4 * error).all()


def test_geometry_refuses_bad_settings_by_name():
    with pytest.raises(ValueError, match="stride must be a positive int"):
        ConvGeometry((3, 3), 0, 1)
    with pytest.raises(ValueError, match="does not fit"):
        ConvGeometry((5, 5), 1, 0).output_shape(3, 3)
