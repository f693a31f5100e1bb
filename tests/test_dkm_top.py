"""Normalisation schemes (seed 003 appendix C) against the element-by-element formulas of eqs.
67-73, and the top layers (appendix E) against dense computations from explicit features: the
linear top is the full-map convolution of eqs. 91-93; global average pooling is exact (eq. 118)
when the test features lie in the span of the inducing features, and otherwise equals eq. 125
computed with an explicit inverse and the explicit diagonal correction D."""

import itertools

import pytest
import torch

from zonal.dkm.normalisation import GramNormalisation
from zonal.dkm.top import global_average_pooling_top, linear_top


def generator(seed):
    return torch.Generator().manual_seed(seed)


def blocks_from_features(inducing, features):
    """Omega_ii [M, M], Omega_ti [P, H, W, M], diag Omega_tt [P, H, W] and the full tt Gram
    [P, S, S] of explicit features (Omega = H H^T / N)."""
    width = features.shape[-1]
    flat = features.flatten(1, 2)  # [P, S, N]
    return (
        inducing @ inducing.mT / width,
        features @ inducing.mT / width,
        features.square().sum(-1) / width,
        flat @ flat.mT / width,
    )


SCHEMES = list(
    itertools.product(
        ["none", "batch", "local"],
        ["none", "batch", "image", "location", "local"],
        ["none", "batch", "local"],
        ["none", "batch", "location"],
    )
)


@pytest.mark.parametrize("scheme", SCHEMES[::5] + SCHEMES[-3:])
def test_normalisation_matches_the_elementwise_formulas(scheme):
    inducing_norm, tt_norm, inducing_scale, tt_scale = scheme
    gram_ii, cross, diagonal, _ = blocks_from_features(
        torch.randn(3, 4, generator=generator(1), dtype=torch.float64),
        torch.randn(2, 3, 2, 4, generator=generator(2), dtype=torch.float64),
    )
    layer = GramNormalisation(
        3,
        (3, 2),
        inducing=inducing_norm,
        train_test=tt_norm,
        inducing_scale=inducing_scale,
        train_test_scale=tt_scale,
    ).double()
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.copy_(torch.rand(parameter.shape, generator=generator(3)) + 0.5)
    psi = torch.ones(3, dtype=torch.float64)
    if layer.inducing_scale is not None:
        psi = psi * layer.inducing_scale.detach()
    big_psi = torch.ones(3, 2, dtype=torch.float64)
    if layer.train_test_scale is not None:
        big_psi = big_psi * layer.train_test_scale.detach()
    g = diagonal
    a = {
        "none": lambda i: 1.0,
        "batch": lambda i: gram_ii.diagonal().mean().sqrt(),
        "local": lambda i: gram_ii[i, i].sqrt(),
    }[inducing_norm]
    big_a = {
        "none": lambda j, r, s: 1.0,
        "batch": lambda j, r, s: g.mean().sqrt(),
        "image": lambda j, r, s: g[j].mean().sqrt(),
        "location": lambda j, r, s: g[:, r, s].mean().sqrt(),
        "local": lambda j, r, s: g[j, r, s].sqrt(),
    }[tt_norm]
    normal_ii, normal_ti, normal_tt = layer(gram_ii, cross, diagonal)
    for i, k in itertools.product(range(3), range(3)):
        expected = gram_ii[i, k] * psi[i] * psi[k] / (a(i) * a(k))
        assert float(normal_ii[i, k]) == pytest.approx(float(expected), rel=1e-12)
    for j, r, s, i in itertools.product(range(2), range(3), range(2), range(3)):
        expected = cross[j, r, s, i] * psi[i] * big_psi[r, s] / (a(i) * big_a(j, r, s))
        assert float(normal_ti[j, r, s, i]) == pytest.approx(float(expected), rel=1e-12)
        expected_tt = g[j, r, s] * big_psi[r, s] ** 2 / big_a(j, r, s) ** 2
        assert float(normal_tt[j, r, s]) == pytest.approx(float(expected_tt), rel=1e-12)


def test_unknown_normalisation_is_a_named_error():
    with pytest.raises(ValueError, match="unknown train/test normalisation 'layer'"):
        GramNormalisation(3, (2, 2), train_test="layer")


def test_linear_top_is_the_full_map_convolution():
    """K_ii = (1/S) sum_s C_s Omega_ii C_s^T, K_{i,j} = (1/S) sum_s sum_i' C_{s,ii'} Omega_{i',js},
    K_jj = (1/S) sum_s Omega_{js,js} (eqs. 91-93), written as sums over locations."""
    omega_ii, omega_ti, omega_tt, _ = blocks_from_features(
        torch.randn(3, 4, generator=generator(4), dtype=torch.float64),
        torch.randn(2, 3, 2, 4, generator=generator(5), dtype=torch.float64),
    )
    mixing = torch.randn(5, 3, 3, 2, generator=generator(6), dtype=torch.float64)
    kernel_ii, kernel_ti, kernel_tt = linear_top(omega_ii, omega_ti, omega_tt, mixing)
    per_location = mixing.permute(2, 3, 0, 1).reshape(6, 5, 3)  # C_s [S, M_out, M]
    torch.testing.assert_close(
        kernel_ii, (per_location @ omega_ii @ per_location.mT).mean(0), rtol=1e-12, atol=1e-13
    )
    expected_ti = torch.einsum("sab,psb->pa", per_location, omega_ti.reshape(2, 6, 3)) / 6
    torch.testing.assert_close(kernel_ti, expected_ti, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(kernel_tt, omega_tt.reshape(2, 6).mean(-1), rtol=1e-12, atol=1e-13)


def test_gap_top_is_exact_when_test_features_lie_in_the_inducing_span():
    """Test features H_t = B H_i make Omega_tt = Omega_ti Omega_ii^-1 Omega_it exactly, so the
    corrected Nystrom diagonal equals the exact (1 / S^2) sum_rs Omega_{jr,js} (eq. 118)."""
    inducing = torch.randn(4, 6, generator=generator(7), dtype=torch.float64)  # [M, N]
    mixing = torch.randn(2, 3, 2, 4, generator=generator(8), dtype=torch.float64)  # B
    features = mixing @ inducing  # [P, H, W, N]
    omega_ii, omega_ti, omega_tt, full_tt = blocks_from_features(inducing, features)
    kernel_ii, kernel_ti, kernel_tt = global_average_pooling_top(
        omega_ii, torch.linalg.cholesky(omega_ii), omega_ti, omega_tt
    )
    torch.testing.assert_close(kernel_ii, omega_ii, rtol=0, atol=0)
    torch.testing.assert_close(kernel_ti, omega_ti.mean((1, 2)), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(kernel_tt, full_tt.mean((1, 2)), rtol=1e-9, atol=1e-11)


def test_gap_top_equals_the_corrected_nystrom_formula_with_explicit_inverse():
    inducing = torch.randn(3, 6, generator=generator(9), dtype=torch.float64)
    features = torch.randn(2, 3, 2, 6, generator=generator(10), dtype=torch.float64)
    omega_ii, omega_ti, omega_tt, full_tt = blocks_from_features(inducing, features)
    inverse = torch.linalg.inv(omega_ii)
    flat = omega_ti.reshape(2, 6, 3)  # [P, S, M]
    nystrom = flat @ inverse @ flat.mT  # [P, S, S]
    correction = torch.diag_embed(
        full_tt.diagonal(dim1=-2, dim2=-1) - nystrom.diagonal(dim1=-2, dim2=-1)
    )
    expected = (nystrom + correction).mean((1, 2))  # (1 / S^2) sum_rs of the corrected Nystrom
    _, _, kernel_tt = global_average_pooling_top(
        omega_ii, torch.linalg.cholesky(omega_ii), omega_ti, omega_tt
    )
    torch.testing.assert_close(kernel_tt, expected, rtol=1e-10, atol=1e-12)
