"""torch.compile of the tile functions: same Gram matrices as eager PyTorch, a clean fallback when
compiling fails, the opt-out, and the polynomial arcsine that compiled arc-cosine kernels use."""

import math
import warnings

import mpmath
import pytest
import torch

from zonal.kernels import (
    ArcCosineKernel,
    ChordalMaternKernel,
    ChordalRBFKernel,
    DeepArcCosineKernel,
    PolynomialDecayKernel,
    ReLUNTKernel,
)
from zonal.kernels import compile as zonal_compile
from zonal.kernels.arccos import arcsin_polynomial
from zonal.kernels.compile import CompileSettings, compile_settings
from zonal.kernels.tiles import CosineMap, gram_no_grad


def random_sphere(num, ambient_dim, seed=0, batch=()):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(*batch, num, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def gram_pair(kernel, x1, x2=None):
    """(compiled, eager) Gram matrices, as ``zonal.kernels.compile`` gives them."""
    with torch.no_grad():
        with compile_settings(enabled=True, min_entries=0):
            compiled = kernel(x1, x2).to_dense()
        with compile_settings(enabled=False):
            eager = kernel(x1, x2).to_dense()
    return compiled, eager


def compiled_and_eager(kernel, x1, x2=None):
    """``gram_pair``, skipped with the reason where torch.compile fell back to eager PyTorch
    (the comparison would then be of eager with itself)."""
    failed_before = set(zonal_compile._FAILED)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled, eager = gram_pair(kernel, x1, x2)
    fallbacks = [str(w.message) for w in caught if "torch.compile of" in str(w.message)]
    if fallbacks or set(zonal_compile._FAILED) - failed_before:
        pytest.skip(f"torch.compile fell back to eager here: {fallbacks[:1]}")
    return compiled, eager


def check_compiled_matches_eager(kernel):
    """Square (symmetric tiles) and rectangular Gram matrices with edge tiles (300 = 256 + 44)."""
    x = random_sphere(300, 4, seed=1)
    compiled, eager = compiled_and_eager(kernel, x)
    assert torch.equal(compiled, compiled.mT)
    torch.testing.assert_close(compiled, eager, rtol=1e-12, atol=1e-13)
    compiled, eager = compiled_and_eager(kernel, x[:270], random_sphere(40, 4, seed=2))
    torch.testing.assert_close(compiled, eager, rtol=1e-12, atol=1e-13)


def test_compiled_arccos_matches_eager():
    check_compiled_matches_eager(ArcCosineKernel(4, order=1))


@pytest.mark.slow
@pytest.mark.parametrize(
    "factory",
    [
        lambda: ArcCosineKernel(4, order=0),
        lambda: ArcCosineKernel(4, order=2),
        lambda: DeepArcCosineKernel(4, depth=3),
        lambda: ReLUNTKernel(4, depth=3),
        lambda: ChordalMaternKernel(4, nu=2.5),
        lambda: ChordalRBFKernel(4),
        lambda: PolynomialDecayKernel(4, max_degree=12, beta=3.0),
    ],
)
def test_every_compiled_tile_function_matches_eager(factory):
    check_compiled_matches_eager(factory())


def test_failed_compilation_falls_back_to_eager(monkeypatch):
    def broken_compile(function, **kwargs):
        def run(*args):
            raise RuntimeError("no C++ compiler")

        return run

    monkeypatch.setattr(zonal_compile, "_COMPILED", {})
    monkeypatch.setattr(zonal_compile, "_FAILED", set())
    monkeypatch.setattr(torch, "compile", broken_compile)
    kernel = ChordalMaternKernel(3, nu=1.5)
    x = random_sphere(20, 3)
    with pytest.warns(RuntimeWarning, match="torch.compile .* failed"):
        compiled, eager = gram_pair(kernel, x)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: the function is now known to fail
        gram_pair(kernel, x)


def doubled(t):
    return t * 2


def test_opt_out_and_threshold(monkeypatch):
    """Disabled or below ``min_entries``: the eager wrapper, nothing compiled; above: one compiled
    wrapper for the variant, writing its result over the tile."""
    monkeypatch.setattr(zonal_compile, "_COMPILED", {})
    tile = torch.ones(4, 4, dtype=torch.float64)
    with compile_settings(enabled=False, min_entries=0):
        assert zonal_compile.tile_runner(doubled, 10**9)(tile) is tile
    with compile_settings(enabled=True, min_entries=100):
        zonal_compile.tile_runner(doubled, 99)(tile)
        assert not zonal_compile._COMPILED
        zonal_compile.tile_runner(doubled, 100)(tile)
        assert len(zonal_compile._COMPILED) == 1
    torch.testing.assert_close(tile, torch.full((4, 4), 8.0, dtype=torch.float64), rtol=0, atol=0)
    monkeypatch.setenv("ZONAL_COMPILE", "0")
    assert not CompileSettings().enabled
    monkeypatch.setenv("ZONAL_COMPILE", "1")
    assert CompileSettings().enabled


def test_a_tile_function_runs_on_the_unbatched_cosines_of_a_batched_kernel():
    """A kernel batch that its tile function does not use is broadcast when the tile is written,
    not evaluated once per batch member."""
    seen = []

    def recorded(t):
        seen.append(tuple(t.shape))
        return t * t

    x = random_sphere(300, 3)
    with compile_settings(enabled=False):
        gram = gram_no_grad(x, x, CosineMap(recorded), same=True, batch_shape=(8,))
    assert gram.shape == (8, 300, 300) and all(len(shape) == 2 for shape in seen)
    torch.testing.assert_close(gram, (x @ x.mT).clamp(-1, 1).square().expand(8, 300, 300))


def test_arcsin_polynomial_against_mpmath():
    """asin(u) = u P(u^2) on |u| <= 1/sqrt(2), to a few units in the last place."""
    u = torch.linspace(-1 / math.sqrt(2), 1 / math.sqrt(2), 2001, dtype=torch.float64)
    mpmath.mp.dps = 30
    exact = torch.tensor([float(mpmath.asin(mpmath.mpf(float(v)))) for v in u], dtype=torch.float64)
    error = (arcsin_polynomial(u) - exact).abs() / exact.abs().clamp_min(1e-300)
    assert float(error.max()) < 4 * torch.finfo(torch.float64).eps


def test_a_variant_at_dynamos_recompile_limit_falls_back_to_eager_with_a_warning(monkeypatch):
    """Without ``recompile_limit_raises`` dynamo would run such calls uncompiled and silently."""
    monkeypatch.setattr(zonal_compile, "_COMPILED", {})
    monkeypatch.setattr(zonal_compile, "_FAILED", set())
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1)
    monkeypatch.setattr(torch._dynamo.config, "automatic_dynamic_shapes", False)
    with compile_settings(enabled=True, min_entries=0), zonal_compile.recompile_limit_raises():
        run = zonal_compile.tile_runner(doubled, 0)
        first = run(torch.ones(4, 4, dtype=torch.float64))
        with pytest.warns(RuntimeWarning, match="torch.compile of doubled failed"):
            second = run(torch.ones(5, 5, dtype=torch.float64))  # a second graph: over the limit
    torch.testing.assert_close(first, torch.full((4, 4), 2.0, dtype=torch.float64))
    torch.testing.assert_close(second, torch.full((5, 5), 2.0, dtype=torch.float64))
