"""The wall-clock budget bounds the collapsed SGPR's L-BFGS too (it used to run to its end)."""

from __future__ import annotations

import time

import numpy as np
import torch
from gpytorch.kernels import ScaleKernel

from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import PolynomialDecayKernel
from zonal.models import SGPR
from zonal.models.training import TrainingControl
from zonal.tabular.recipes import resolve_spec, train_sgpr


def _sgpr(num_points: int = 200, seed: int = 0) -> tuple[SGPR, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, 3, generator=generator, dtype=torch.float64)
    noise = torch.randn(num_points, generator=generator, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0]) + 0.1 * noise
    kernel = ScaleKernel(PolynomialDecayKernel(4, max_degree=8, homogeneous=True)).double()
    model = SGPR(kernel, SphericalHarmonicFeatures(4, 6), 3)
    model.fit_statistics(x, y)
    return model, x, y


def test_lbfgs_stops_at_the_deadline_after_one_iteration_with_the_better_bound():
    model, _, _ = _sgpr()
    with torch.no_grad():
        start = float(model.elbo())
    trace = model.fit(max_iter=100, deadline=time.monotonic() - 1.0)  # already passed
    assert 2 <= len(trace) <= 1 + 25  # the first evaluation, then one line search
    with torch.no_grad():
        assert float(model.elbo()) > start  # the iteration it ran improved the bound
    unbounded, _, _ = _sgpr()
    assert len(unbounded.fit(max_iter=100)) > len(trace)


def test_a_deadline_far_away_reaches_the_same_optimum_as_no_deadline():
    bounded, _, _ = _sgpr()
    bounded.fit(max_iter=50, deadline=time.monotonic() + 3600)
    free, _, _ = _sgpr()
    free.fit(max_iter=50)
    with torch.no_grad():
        np.testing.assert_allclose(float(bounded.elbo()), float(free.elbo()), rtol=1e-4)


def test_train_sgpr_ends_near_its_deadline():
    _, x, y = _sgpr(400)
    spec = resolve_spec(x.shape[1], model="sgpr", num_inducing=120, steps=500)
    started = time.monotonic()
    control = TrainingControl(deadline=started + 0.5)
    fit = train_sgpr(spec, x, y, control)
    assert time.monotonic() - started < 0.5 + 5.0  # the pass and one iteration past the deadline
    assert np.isfinite(fit.objective)
