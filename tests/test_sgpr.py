"""One-pass collapsed SGPR with spherical-harmonic features against exact GP inference."""

import itertools
import warnings

import numpy as np
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from torch.distributions import MultivariateNormal

from zonal.features import ActivatedFeatures, SphericalHarmonicFeatures
from zonal.kernels import ArcCosineKernel, PolynomialDecayKernel
from zonal.models import SGPR

INPUT_DIM = 3
AMBIENT_DIM = 4


def data(num_points=60, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, INPUT_DIM, dtype=torch.float64, generator=generator)
    noise = torch.randn(num_points, dtype=torch.float64, generator=generator)
    return x, torch.sin(2 * x[:, 0]) * x[:, 1] + 0.1 * noise


def exact_log_marginal(kernel, lifted, y, noise):
    covariance = kernel(lifted).to_dense() + noise * torch.eye(len(y), dtype=torch.float64)
    return MultivariateNormal(torch.zeros_like(y), covariance).log_prob(y)


@pytest.mark.parametrize("max_degree", [2, 4])
def test_complete_harmonics_and_truncated_kernel_give_the_exact_marginal(max_degree):
    x, y = data()
    kernel = ScaleKernel(
        PolynomialDecayKernel(AMBIENT_DIM, max_degree=max_degree, beta=1.5, homogeneous=True)
    ).double()
    kernel.outputscale = 0.7
    model = SGPR(kernel, SphericalHarmonicFeatures(AMBIENT_DIM, max_degree), INPUT_DIM, noise=0.05)
    model.fit_statistics(x, y)
    with torch.no_grad():
        lifted = model.lift(x)
        exact = exact_log_marginal(kernel, lifted, y, float(model.likelihood.noise))
        assert abs(model.elbo() - exact) < 1e-6
        # predictions equal exact GP regression with the truncated kernel
        test = torch.randn(7, INPUT_DIM, dtype=torch.float64)
        lifted_test = model.lift(test)
        k_train = kernel(lifted).to_dense() + float(model.likelihood.noise) * torch.eye(len(y))
        k_cross = kernel(lifted_test, lifted).to_dense()
        mean = k_cross @ torch.linalg.solve(k_train, y)
        prior_variance = kernel(lifted_test, diag=True)
        variance = prior_variance - (k_cross * torch.linalg.solve(k_train, k_cross.T).T).sum(-1)
        ours_mean, ours_variance = model.predict(test)
        assert (ours_mean - mean).abs().max() < 1e-8
        # the variance is a difference of O(prior) terms: compare relative to the prior variance
        assert ((ours_variance - variance).abs() / prior_variance).max() < 1e-8


def test_bound_is_below_the_marginal_and_grows_with_levels():
    x, y = data()
    kernel = ArcCosineKernel(AMBIENT_DIM, homogeneous=True)  # closed form: not truncated
    lifted = torch.cat([x, torch.ones(len(x), 1, dtype=torch.float64)], -1)
    exact = exact_log_marginal(kernel, lifted, y, 0.05)
    bounds = []
    for degree in range(0, 9):
        features = SphericalHarmonicFeatures(AMBIENT_DIM, degree, kernel=kernel)
        model = SGPR(kernel, features, INPUT_DIM, noise=0.05)
        model.fit_statistics(x, y)
        with torch.no_grad():
            bounds.append(float(model.elbo()))
    assert all(bound <= float(exact) + 1e-9 for bound in bounds)
    assert all(later >= earlier - 1e-9 for earlier, later in itertools.pairwise(bounds))
    assert float(exact) - bounds[-1] < 0.05 * abs(float(exact) - bounds[0])


def test_streaming_statistics_do_not_depend_on_chunking(tmp_path):
    x, y = data(101)
    kernel = PolynomialDecayKernel(AMBIENT_DIM, max_degree=6, beta=2.0, homogeneous=True)
    features = SphericalHarmonicFeatures(AMBIENT_DIM, 4)
    whole = SGPR(kernel, features, INPUT_DIM)
    whole.fit_statistics(x, y, chunk_size=1000)
    pieces = SGPR(kernel, features, INPUT_DIM)
    chunks = ((x[i : i + 13], y[i : i + 13]) for i in range(0, 101, 13))
    pieces.fit_statistics(chunks=chunks)
    arrays = SGPR(kernel, features, INPUT_DIM)
    arrays.fit_statistics(np.asarray(x), np.asarray(y), chunk_size=7)
    np.save(tmp_path / "x.npy", np.asarray(x))
    np.save(tmp_path / "y.npy", np.asarray(y))
    memmapped = SGPR(kernel, features, INPUT_DIM)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when it is handed a read-only array
        memmapped.fit_statistics(
            np.load(tmp_path / "x.npy", mmap_mode="r"),
            np.load(tmp_path / "y.npy", mmap_mode="r"),
            chunk_size=7,
        )
    for other in (pieces, arrays, memmapped):
        assert (whole.stat_gram - other.stat_gram).abs().max() < 1e-10
        assert abs(float((whole.elbo() - other.elbo()).detach())) < 1e-8


def test_fit_raises_the_bound_at_cost_independent_of_n():
    """After the data pass, one evaluation of the bound and its gradient costs the same floating
    point operations (counted by torch's FlopCounterMode) for N = 100 and N = 4000; L-BFGS then
    raises the bound."""
    from torch.utils.flop_counter import FlopCounterMode

    kernel = ScaleKernel(
        PolynomialDecayKernel(AMBIENT_DIM, max_degree=8, homogeneous=True)
    ).double()
    features = SphericalHarmonicFeatures(AMBIENT_DIM, 6)
    counts = []
    for count in (100, 4000):
        x, y = data(count)
        model = SGPR(kernel, features, INPUT_DIM)
        model.fit_statistics(x, y)
        with FlopCounterMode(display=False) as counter:
            model.elbo().backward()
        counts.append(counter.get_total_flops())
    assert counts[0] > 0 and counts[0] == counts[1]
    trace = model.fit(max_iter=30)
    assert trace[-1] > trace[0]


def test_bad_inputs():
    kernel = PolynomialDecayKernel(AMBIENT_DIM, max_degree=6, homogeneous=True)
    model = SGPR(kernel, SphericalHarmonicFeatures(AMBIENT_DIM, 2), INPUT_DIM)
    x, y = data(10)
    with pytest.raises(ValueError, match="rows"):
        model.accumulate(x, y[:5])
    bad = y.clone()
    bad[3] = float("nan")
    with pytest.raises(ValueError, match="row 3"):
        model.accumulate(x, bad)
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        model.accumulate(torch.zeros(4, 2, dtype=torch.float64), y[:4])
    with pytest.raises(ValueError, match="diagonal Kuu"):
        SGPR(kernel, ActivatedFeatures(AMBIENT_DIM, 5), INPUT_DIM)
    with pytest.raises(ValueError, match="fit_statistics"):
        SGPR(kernel, SphericalHarmonicFeatures(AMBIENT_DIM, 2), INPUT_DIM).elbo()


@pytest.mark.parametrize("whiten", [True, False])
def test_svgp_at_the_optimal_q_attains_the_collapsed_bound(whiten):
    """Titsias: the SVGP ELBO at the optimal q(u) equals SGPR's collapsed bound."""
    import gpytorch

    from zonal.models import SVGP

    x, y = data(50)
    kernel = ArcCosineKernel(AMBIENT_DIM, homogeneous=True)
    features = SphericalHarmonicFeatures(AMBIENT_DIM, 4, kernel=kernel)
    collapsed = SGPR(kernel, features, INPUT_DIM, noise=0.05)
    collapsed.fit_statistics(x, y)
    model = SVGP(kernel, features, INPUT_DIM, whiten=whiten)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = collapsed.likelihood.noise.detach()
    model.set_optimal_variational_distribution(x, y, likelihood.noise.detach())
    objective = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(y))
    with torch.no_grad():
        assert abs(float(objective(model(x), y)) * len(y) - float(collapsed.elbo())) < 1e-7


def test_sgpr_leaves_the_callers_features_trainable():
    """Defect: SGPR froze the features it was given (requires_grad_(False)), silently stopping an
    SVGP that shares them. SGPR now fits only the kernel and the noise and leaves them alone."""
    from zonal.features import SparseSphericalHarmonicFeatures

    kernel = ScaleKernel(PolynomialDecayKernel(AMBIENT_DIM, max_degree=6, homogeneous=True))
    kernel = kernel.double()
    features = SparseSphericalHarmonicFeatures(AMBIENT_DIM, 4, 3, kernel=kernel)
    phases = [parameter.detach().clone() for parameter in features.parameters()]
    assert phases, "the sparse features have learnable phases"
    model = SGPR(kernel, features, INPUT_DIM)
    assert all(parameter.requires_grad for parameter in features.parameters())
    x, y = data(60)
    model.fit_statistics(x, y)
    model.fit(max_iter=5)
    for before, after in zip(phases, features.parameters(), strict=True):
        assert torch.equal(before, after.detach())  # the statistics saw these features
    assert all(parameter.requires_grad for parameter in features.parameters())  # after fit too


def test_a_failed_statistics_pass_keeps_the_old_statistics_and_names_the_global_row():
    """A NaN at row 950 of a chunked pass is reported as row 950 (not its row in the chunk), and
    the statistics of the previous pass survive untouched (no half-accumulated state)."""
    kernel = ScaleKernel(PolynomialDecayKernel(AMBIENT_DIM, max_degree=6, homogeneous=True))
    model = SGPR(kernel.double(), SphericalHarmonicFeatures(AMBIENT_DIM, 3), INPUT_DIM)
    x, y = data(1000)
    model.fit_statistics(x[:200], y[:200])
    before = {name: getattr(model, name).clone() for name in SGPR.STATISTICS}
    bad = y.clone()
    bad[950] = float("nan")
    with pytest.raises(ValueError, match="first at row 950"):
        model.fit_statistics(x, bad, chunk_size=100)
    for name, value in before.items():
        assert torch.equal(getattr(model, name), value), name
    unfitted = SGPR(kernel.double(), SphericalHarmonicFeatures(AMBIENT_DIM, 3), INPUT_DIM)
    with pytest.raises(ValueError, match="fit_statistics first"):
        unfitted.predict(x[:3])


def test_a_float32_scale_kernel_keeps_the_sgpr_in_float64_and_priors_join_the_fit():
    """``ScaleKernel`` is float32 unless told (GPyTorch's default) while the features, the
    likelihood and the statistics are float64: the SGPR reads its rows in float64 whatever the
    kernel came in (it read them in float32, and its bound at a large outputscale went to +72.8
    nats a row against an exact -101.1). A GPyTorch ``outputscale_prior`` joins the bound the fit
    maximises: a tight prior pins the outputscale, which the data alone put elsewhere."""
    from gpytorch.priors import NormalPrior

    x, y = data(80)

    def fitted(prior):
        base = PolynomialDecayKernel(AMBIENT_DIM, max_degree=8, homogeneous=True)
        kernel = ScaleKernel(base) if prior is None else ScaleKernel(base, outputscale_prior=prior)
        features = SphericalHarmonicFeatures(AMBIENT_DIM, 6, kernel=kernel)
        model = SGPR(kernel, features, INPUT_DIM)
        model.fit_statistics(x, y)
        return model, model.fit(max_iter=40)

    free, _ = fitted(None)
    assert free.check_inputs(x).dtype == torch.float64
    assert all(p.dtype == torch.float64 for p in free.parameters())
    pinned, trace = fitted(NormalPrior(0.3, 0.001))
    assert abs(float(free.kernel.outputscale) - 0.3) > 0.05
    assert float(pinned.kernel.outputscale) == pytest.approx(0.3, abs=0.005)
    with torch.no_grad():
        prior = NormalPrior(0.3, 0.001).log_prob(pinned.kernel.outputscale).sum()
        expected = (pinned.elbo() + prior) / pinned.stat_count
    assert max(trace) == pytest.approx(float(expected), rel=1e-7)
