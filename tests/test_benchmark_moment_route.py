"""``benchmarks/moment_route.py``: its counts and its moments are what it says they are."""

import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from moment_route import chebyshev_moments, harmonic_counts, main


def polynomials_on_the_sphere(ambient_dim: int, degree: int) -> int:
    """dim of polynomials of degree <= n restricted to S^{d-1}: the homogeneous ones of degrees n
    and n - 1 (x . x = 1 folds every lower degree into them)."""
    homogeneous = [math.comb(k + ambient_dim - 1, ambient_dim - 1) for k in (degree, degree - 1)]
    return homogeneous[0] + (homogeneous[1] if degree >= 1 else 0)


def test_the_counts_are_the_dimensions_of_polynomials_on_the_sphere():
    for ambient_dim, degree in [(3, 2), (5, 3), (9, 4)]:
        features, moments = harmonic_counts(ambient_dim, degree)
        assert features == polynomials_on_the_sphere(ambient_dim, degree)
        assert moments == polynomials_on_the_sphere(ambient_dim, 2 * degree)
    assert harmonic_counts(9, 4) == (660, 19_305)  # the figures the docs quote


def test_the_moments_are_sums_of_chebyshev_polynomials_in_any_blocking():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(37, 4, dtype=torch.float64, generator=generator)
    x /= x.norm(dim=1, keepdim=True)
    directions = torch.randn(4, 6, dtype=torch.float64, generator=generator)
    directions /= directions.norm(dim=0, keepdim=True)
    cosines = (x @ directions).clamp(-1, 1)
    for degree in (0, 1, 2, 5):
        expected = torch.cos(degree * torch.arccos(cosines)).sum(0)  # T_n(t) = cos(n arccos t)
        for block in (1, 8, 64):
            got = chebyshev_moments(x, directions, degree, block)
            torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


def test_the_script_prints_and_writes_its_figures(tmp_path, capsys):
    output = tmp_path / "route.json"
    figures = main(["--inputs", "2", "--degree", "2", "--rows", "64", "--block", "16",
                    "--repeats", "1", "--output", str(output)])  # fmt: skip
    assert json.loads(output.read_text()) == figures
    assert figures["features"] == 9 and figures["moments"] == 25
    assert figures["triangle_multiply_adds_per_row"] == 45
    assert "| Gram triangle" in capsys.readouterr().out
