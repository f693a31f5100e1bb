"""``zonal.models.lbfgs.maximise_by_lbfgs``: the unbudgeted L-BFGS run, cut at a deadline with
the best evaluation kept; the SGPR's budgeted fit is its unbudgeted fit when it converges first."""

from __future__ import annotations

import time

import pytest
import torch
from gpytorch.kernels import ScaleKernel

from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import PolynomialDecayKernel
from zonal.linalg import NotPositiveDefiniteError
from zonal.models import SGPR
from zonal.models.lbfgs import maximise_by_lbfgs


def _quadratic() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A concave quadratic -0.5 (x - m)^T A (x - m) and its maximiser m (closed form)."""
    generator = torch.Generator().manual_seed(0)
    root = torch.randn(5, 5, generator=generator, dtype=torch.float64)
    matrix = root @ root.T + 5 * torch.eye(5, dtype=torch.float64)
    return (
        matrix,
        torch.randn(5, generator=generator, dtype=torch.float64),
        torch.zeros(5, dtype=torch.float64, requires_grad=True),
    )


def test_it_reaches_the_closed_form_maximiser_and_stops_on_its_own():
    matrix, centre, x = _quadratic()
    trace = maximise_by_lbfgs(
        [x], lambda: -0.5 * (x - centre) @ matrix @ (x - centre), max_iter=100
    )
    torch.testing.assert_close(x.detach(), centre, atol=1e-5, rtol=0)  # gradient tolerance 1e-7
    assert len(trace) < 100  # ended by its tolerances, not by max_iter evaluations


def test_past_the_deadline_it_stops_at_the_next_evaluation_with_the_best_parameters():
    matrix, centre, x = _quadratic()
    values = []

    def objective() -> torch.Tensor:
        value = -0.5 * (x - centre) @ matrix @ (x - centre)
        values.append((float(value), x.detach().clone()))
        return value

    trace = maximise_by_lbfgs([x], objective, max_iter=100, deadline=time.monotonic() - 1.0)
    assert len(trace) == 1  # the first evaluation always runs; the second is past the deadline
    torch.testing.assert_close(x.detach(), values[0][1])


def test_an_error_of_a_trial_point_keeps_the_best_so_far_and_propagates_before_one():
    _, _, x = _quadratic()
    calls = []

    def objective() -> torch.Tensor:
        calls.append(1)
        if len(calls) > 2:
            raise NotPositiveDefiniteError("trial")
        return -(x - 1.0).pow(2).sum()

    trace = maximise_by_lbfgs([x], objective, max_iter=50, stop_on=(NotPositiveDefiniteError,))
    assert len(trace) == 2 and trace[1] > trace[0]  # the third evaluation failed
    with torch.no_grad():
        assert float(-(x - 1.0).pow(2).sum()) == max(trace)  # back at the best evaluation

    def failing() -> torch.Tensor:
        raise NotPositiveDefiniteError("at the start")

    with pytest.raises(NotPositiveDefiniteError):  # no finite evaluation to keep
        maximise_by_lbfgs([x], failing, max_iter=5, stop_on=(NotPositiveDefiniteError,))


def _sgpr() -> SGPR:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(400, 3, generator=generator, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(400, generator=generator, dtype=torch.float64)
    kernel = ScaleKernel(PolynomialDecayKernel(4, max_degree=8, homogeneous=True)).double()
    model = SGPR(kernel, SphericalHarmonicFeatures(4, 6), 3)
    model.fit_statistics(x, y)
    return model


def test_a_budgeted_sgpr_fit_that_converges_first_is_the_unbudgeted_fit():
    free, bounded = _sgpr(), _sgpr()
    free_trace = free.fit(max_iter=200)
    started = time.monotonic()
    bounded_trace = bounded.fit(max_iter=200, deadline=started + 3600.0)
    assert bounded_trace == free_trace  # the same evaluations, not one iteration per call
    with torch.no_grad():
        assert float(bounded.elbo()) == float(free.elbo())
