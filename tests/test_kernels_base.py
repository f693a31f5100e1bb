"""Behaviour shared by every zonal kernel: PSD Gram matrices, GPyTorch/BoTorch plumbing, gradients,
diag and batch modes, the eigenvalue cache, input checks."""

import copy
import pickle
import warnings

import gpytorch
import numpy as np
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zonal.harmonics import num_harmonics
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
    ZonalKernel,
)


def random_sphere(num, ambient_dim, seed=0, batch=()):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(*batch, num, ambient_dim, generator=generator, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


FACTORIES = {
    "arccos0": lambda d, **kw: ArcCosineKernel(d, order=0, **kw),
    "arccos1": lambda d, **kw: ArcCosineKernel(d, order=1, **kw),
    "arccos2": lambda d, **kw: ArcCosineKernel(d, order=2, **kw),
    "deep_arccos": lambda d, **kw: DeepArcCosineKernel(d, depth=3, **kw),
    "ntk": lambda d, **kw: ReLUNTKernel(d, depth=2, **kw),
    "matern12": lambda d, **kw: ChordalMaternKernel(d, nu=0.5, **kw),
    "matern52": lambda d, **kw: ChordalMaternKernel(d, nu=2.5, **kw),
    "chordal_rbf": lambda d, **kw: ChordalRBFKernel(d, **kw),
    "intrinsic_matern": lambda d, **kw: IntrinsicMaternKernel(d, nu=1.5, max_degree=12, **kw),
    "heat": lambda d, **kw: IntrinsicHeatKernel(d, max_degree=12, **kw),
    "polynomial_decay": lambda d, **kw: PolynomialDecayKernel(d, max_degree=12, beta=3.0, **kw),
    "spectral": lambda d, **kw: SpectralZonalKernel(d, [0.5, 0.3, 0.1, 0.05, 0.01], **kw),
}
WITH_HYPERPARAMETERS = [
    "matern12",
    "matern52",
    "chordal_rbf",
    "intrinsic_matern",
    "heat",
    "polynomial_decay",
    "spectral",
]


def assert_psd(gram, tolerance=1e-10):
    torch.testing.assert_close(gram, gram.transpose(-2, -1), rtol=0, atol=1e-14)
    eigenvalues = torch.linalg.eigvalsh(gram)
    assert float(eigenvalues.min()) >= -tolerance * float(eigenvalues.abs().max())


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("ambient_dim", [2, 3, 6])
def test_gram_symmetric_psd_and_diag_consistent(name, ambient_dim):
    kernel = FACTORIES[name](ambient_dim)
    x = random_sphere(40, ambient_dim, seed=ambient_dim)
    with torch.no_grad():
        gram = kernel(x).to_dense()
        diagonal = kernel(x, diag=True)
    assert gram.shape == (40, 40) and gram.dtype == torch.float64
    assert_psd(gram)
    torch.testing.assert_close(diagonal, gram.diagonal(), rtol=1e-12, atol=1e-12)


# name -> p: the truncation error of the Mercer sum falls as L^-p. With lambda_n >= 0 and
# |Z_n(t)| <= Z_n(1) = N_n, the error at any t is at most its value at t = 1, the tail
# sum_{n > L} lambda_n N_n = s(1) - mercer_L(1); the tail falls as sum_{n > L} n^{-p-1} ~ L^-p with
# lambda_n N_n ~ n^{-p-1}: a cone at t = 1 (arc-cosine order 0, NTK, Matern-1/2) gives p = 1,
# arc-cosine order m gives p = 2m + 1 (lambda_n ~ n^{-d-2m}, seed 000 app. C), Matern-nu p = 2 nu.
MERCER_RATES = {
    "arccos0": 1,
    "arccos1": 3,
    "arccos2": 5,
    "deep_arccos": 3,
    "ntk": 1,
    "matern12": 1,
    "matern52": 5,
}


def _mercer_tail(kernel, truncation):
    one = torch.ones(1, 1, dtype=torch.float64)
    with torch.no_grad():
        return float(kernel.shape(one) - kernel.mercer(one, truncation))


@pytest.mark.parametrize("name", sorted(MERCER_RATES))
def test_mercer_evaluation_within_its_tail_and_at_its_rate(name):
    truncation, ambient_dim = 80, 4
    closed = FACTORIES[name](ambient_dim)
    mercer = FACTORIES[name](ambient_dim, evaluation="mercer", max_degree=truncation)
    x1, x2 = random_sphere(10, ambient_dim, seed=1), random_sphere(7, ambient_dim, seed=2)
    x2 = torch.cat([x2, x1[:1]])  # one coincident pair: t = 1, where the error is the whole tail
    with torch.no_grad():
        error = (closed(x1, x2).to_dense() - mercer(x1, x2).to_dense()).abs().max()
    tail = _mercer_tail(closed, truncation)
    assert closed.uses_closed_form and not mercer.uses_closed_form
    assert tail > 0
    assert float(error) <= tail * (1 + 1e-9) + 1e-14
    rate = MERCER_RATES[name]
    ratio = _mercer_tail(closed, truncation // 2) / tail  # ~ 2^p
    assert 2**rate / 1.25 < ratio < 2**rate * 1.25


def test_mercer_evaluation_of_chordal_rbf_at_rounding_level():
    """Eigenvalues exp(-1/rho^2) Gamma(d/2) (2 rho^2)^alpha I_{n+alpha}(1/rho^2) (modified Bessel)
    fall faster than geometrically: at L = 20 the tail bound is below 1e-20, so the Mercer sum must
    match the closed form to rounding (a few hundred ulp over the sum)."""
    from scipy.special import gamma, ive

    ambient_dim, truncation = 4, 20
    alpha = (ambient_dim - 2) / 2
    levels = range(truncation + 1, 200)
    counts = np.array([num_harmonics(ambient_dim, n) for n in levels])
    eigenvalues = gamma(ambient_dim / 2) * 2**alpha * ive(np.array(levels) + alpha, 1.0)  # rho = 1
    tail = float((eigenvalues * counts).sum())
    assert tail < 1e-20
    closed = ChordalRBFKernel(ambient_dim)
    mercer = ChordalRBFKernel(ambient_dim, evaluation="mercer", max_degree=truncation)
    closed.lengthscale = mercer.lengthscale = 1.0
    x1, x2 = random_sphere(10, ambient_dim, seed=1), random_sphere(7, ambient_dim, seed=2)
    with torch.no_grad():
        error = (closed(x1, x2).to_dense() - mercer(x1, x2).to_dense()).abs().max()
    assert float(error) < tail + 1e-13


@st.composite
def kernels(draw):
    ambient_dim = draw(st.sampled_from([2, 3, 5]))
    family = draw(st.sampled_from(sorted(FACTORIES)))
    positive = st.floats(0.05, 8.0)
    if family.startswith("arccos"):
        kernel = ArcCosineKernel(ambient_dim, order=draw(st.sampled_from([0, 1, 2])))
    elif family == "deep_arccos":
        order = draw(st.sampled_from([0, 1, 2]))
        kernel = DeepArcCosineKernel(ambient_dim, depth=draw(st.integers(1, 5)), order=order)
    elif family == "ntk":
        kernel = ReLUNTKernel(ambient_dim, depth=draw(st.integers(1, 5)))
    elif family.startswith("matern"):
        kernel = ChordalMaternKernel(ambient_dim, nu=draw(st.sampled_from([0.5, 1.5, 2.5])))
        kernel.lengthscale = draw(positive)
    elif family == "chordal_rbf":
        kernel = ChordalRBFKernel(ambient_dim)
        kernel.lengthscale = draw(st.floats(0.05, 3.0))
    elif family == "intrinsic_matern":
        nu = draw(st.floats(0.3, 6.0))
        kernel = IntrinsicMaternKernel(ambient_dim, nu=nu, max_degree=draw(st.integers(0, 30)))
        kernel.lengthscale = draw(positive)
    elif family == "heat":
        kernel = IntrinsicHeatKernel(ambient_dim, max_degree=draw(st.integers(0, 30)))
        kernel.lengthscale = draw(positive)
    elif family == "polynomial_decay":
        kernel = PolynomialDecayKernel(
            ambient_dim,
            max_degree=draw(st.integers(0, 30)),
            beta=draw(st.floats(0.01, 12.0)),
            variance=draw(positive),
            include_constant=draw(st.booleans()),
        )
    else:
        # zero or at least 1e-6: a spectrum of subnormal numbers (hypothesis drew [5e-324, ...])
        # gives a Gram matrix of subnormals, whose eigenvalues no relative tolerance can judge
        eigenvalue = st.one_of(st.just(0.0), st.floats(1e-6, 10.0))
        spectrum = draw(st.lists(eigenvalue, min_size=1, max_size=15))
        kernel = SpectralZonalKernel(ambient_dim, spectrum, learn_eigenvalues=False)
    if kernel.has_closed_form and draw(st.booleans()):
        kernel.evaluation, kernel.max_degree = "mercer", draw(st.integers(0, 40))
    return kernel


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernel=kernels(), seed=st.integers(0, 2**16))
def test_property_gram_is_psd_for_random_hyperparameters(kernel, seed):
    x = random_sphere(30, kernel.ambient_dim, seed=seed)
    with torch.no_grad():
        gram = kernel(x).to_dense()
    assert torch.isfinite(gram).all()
    assert_psd(gram)


def _gradcheck_hyperparameters(kernel, x1, x2):
    names = [name for name, _ in kernel.named_parameters()]
    assert names, "kernel has no hyperparameters"
    values = tuple(p.detach().clone().requires_grad_() for _, p in kernel.named_parameters())

    def gram(*tensors):
        params = dict(zip(names, tensors, strict=True))
        with gpytorch.settings.lazily_evaluate_kernels(False):
            return torch.func.functional_call(kernel, params, (x1, x2)).to_dense()

    assert torch.autograd.gradcheck(gram, values)


@pytest.mark.parametrize("name", WITH_HYPERPARAMETERS)
def test_gradcheck_every_hyperparameter(name):
    kernel = ScaleKernel(FACTORIES[name](3)).to(torch.float64)
    _gradcheck_hyperparameters(kernel, random_sphere(5, 3, seed=1), random_sphere(4, 3, seed=2))


def _gram_jacobian_singular_values(kernel, ambient_dim=3):
    """Singular values of d vec K / d theta over every learnable scalar theta of ``kernel``."""
    names = [name for name, p in kernel.named_parameters() if p.requires_grad]
    values = tuple(dict(kernel.named_parameters())[name].detach().clone() for name in names)
    x1, x2 = random_sphere(6, ambient_dim, seed=1), random_sphere(5, ambient_dim, seed=2)

    def gram(*tensors):
        params = dict(zip(names, tensors, strict=True))
        with gpytorch.settings.lazily_evaluate_kernels(False):
            return torch.func.functional_call(kernel, params, (x1, x2)).to_dense().reshape(-1)

    jacobians = torch.autograd.functional.jacobian(gram, values)  # each [30, *param.shape]
    jacobian = torch.cat([j.reshape(j.shape[0], -1) for j in jacobians], dim=1)  # [30, P]
    return torch.linalg.svdvals(jacobian)


@pytest.mark.parametrize("name", [n for n in WITH_HYPERPARAMETERS if n != "spectral"])
def test_scale_kernel_has_no_flat_direction(name):
    """Under ScaleKernel every learnable scalar moves K in its own direction: the Jacobian of the
    Gram matrix in the parameters has full column rank. A kernel variance beside the outputscale
    (they enter only as a product) would make two columns parallel (defect 5)."""
    kernel = ScaleKernel(FACTORIES[name](3)).to(torch.float64)
    singular = _gram_jacobian_singular_values(kernel)
    assert float(singular.min() / singular.max()) > 1e-6


def test_kernels_that_carry_their_scale_are_identifiable_alone():
    """A learnable spectrum (or polynomial decay with ``learn_variance=True``) carries the scale
    itself, so it is used without ScaleKernel; alone it has no flat direction."""
    for kernel in (
        FACTORIES["spectral"](3),
        PolynomialDecayKernel(3, max_degree=8, beta=2.0, variance=0.5, learn_variance=True),
    ):
        singular = _gram_jacobian_singular_values(kernel)
        assert float(singular.min() / singular.max()) > 1e-8
    scaled = ScaleKernel(PolynomialDecayKernel(3, max_degree=8, learn_variance=True)).double()
    singular = _gram_jacobian_singular_values(scaled)  # the flat direction, made on purpose
    assert float(singular.min() / singular.max()) < 1e-12


@pytest.mark.parametrize("name", ["matern12", "matern52", "chordal_rbf"])
def test_gradcheck_funk_hecke_eigenvalues_in_hyperparameters(name):
    kernel = FACTORIES[name](3, evaluation="mercer", max_degree=20)
    _gradcheck_hyperparameters(kernel, random_sphere(5, 3, seed=1), random_sphere(4, 3, seed=2))


@pytest.mark.parametrize("name", ["arccos1", "ntk", "matern52", "heat", "polynomial_decay"])
def test_input_gradcheck_homogeneous(name):
    kernel = FACTORIES[name](3, homogeneous=True)
    x1 = (random_sphere(4, 3, seed=3) * 1.7).requires_grad_()
    x2 = random_sphere(3, 3, seed=4) * 0.6
    assert torch.autograd.gradcheck(lambda a: kernel(a, x2).to_dense(), (x1,))


@pytest.mark.parametrize("name", ["arccos1", "matern52", "polynomial_decay"])
def test_input_gradient_against_equal_but_fixed_points(name):
    """K(x, y) with y equal to x in value but outside the graph: the derivative in x alone is not
    symmetric, so the matrix must not be symmetrised through the graph."""
    kernel = FACTORIES[name](3, homogeneous=True)
    x = random_sphere(5, 3, seed=7) * 1.3
    fixed = x.clone()
    assert torch.autograd.gradcheck(
        lambda a: kernel(a, fixed).to_dense(), (x.clone().requires_grad_(),)
    )


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_no_nan_gradients_on_the_diagonal_and_duplicates(name):
    kernel = FACTORIES[name](3)
    x = random_sphere(6, 3)
    x = torch.cat([x, x[:2], -x[2:3]]).requires_grad_()
    loss = kernel(x).to_dense().sum() + kernel(x, x.detach() * 1.0).to_dense().sum()
    loss = loss + kernel(x, diag=True).sum()
    params = [x, *kernel.parameters()]
    grads = torch.autograd.grad(loss, params)
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("name", ["arccos1", "matern52", "heat", "polynomial_decay"])
def test_batch_shapes(name):
    kernel = FACTORIES[name](3, batch_shape=torch.Size([2]))
    if kernel.has_lengthscale:
        kernel.lengthscale = torch.tensor([[[0.5]], [[1.5]]], dtype=torch.float64)
    if name == "polynomial_decay":
        kernel.beta = torch.tensor([[2.0], [4.0]], dtype=torch.float64)
    x1, x2 = random_sphere(5, 3, seed=1, batch=(2,)), random_sphere(4, 3, seed=2, batch=(2,))
    with torch.no_grad():
        gram = kernel(x1, x2).to_dense()
        assert gram.shape == (2, 5, 4)
        assert kernel.eigenvalues(6).shape == (2, 7)
        for b in range(2):  # each batch member equals an unbatched kernel with its values
            single = FACTORIES[name](3)
            if single.has_lengthscale:
                single.lengthscale = float(kernel.lengthscale[b])
            if name == "polynomial_decay":
                single.beta = float(kernel.beta[b])
            torch.testing.assert_close(gram[b], single(x1[b], x2[b]).to_dense())
        x3 = random_sphere(5, 3, seed=3, batch=(3, 2))  # extra leading batch dimension
        assert kernel(x3).to_dense().shape == (3, 2, 5, 5)
        assert kernel(x3, diag=True).shape == (3, 2, 5)


def test_scale_kernel_multiplies():
    kernel = ScaleKernel(ChordalMaternKernel(3)).to(torch.float64)
    kernel.outputscale = torch.tensor(2.5, dtype=torch.float64)
    x = random_sphere(6, 3)
    with torch.no_grad():
        torch.testing.assert_close(
            kernel(x).to_dense(), 2.5 * kernel.base_kernel(x).to_dense(), rtol=1e-14, atol=0
        )


def test_eigenvalue_cache_reuse_invalidation_and_repeated_backward():
    kernel = ChordalMaternKernel(3, nu=1.5, evaluation="mercer", max_degree=15)
    first = kernel.eigenvalues()
    assert kernel.eigenvalues() is first  # cached within a forward pass
    assert kernel.eigenvalues(10) is not first and kernel.eigenvalues(10).shape == (11,)
    x = random_sphere(8, 3)
    for _ in range(3):  # unchanged hyperparameters, fresh graphs: no "backward twice" error
        kernel(x).to_dense().sum().backward()
    grad = kernel.raw_lengthscale.grad.clone()
    assert torch.isfinite(grad).all() and float(grad.abs().sum()) > 0
    with torch.no_grad():
        before = kernel.eigenvalues()
        assert kernel.eigenvalues() is before
        kernel.lengthscale = 2.0
        after = kernel.eigenvalues()
    assert after is not before and not torch.allclose(after, before)
    kernel.raw_lengthscale.data.add_(0.1)  # in-place change is seen too
    with torch.no_grad():
        assert not torch.equal(kernel.eigenvalues(), after)


@pytest.mark.parametrize("name", ["PolynomialDecayKernel", "ArcCosineKernel"])
def test_eigenvalues_cached_on_one_device_are_recomputed_on_the_device_moved_to(name):
    """A kernel moved by ``.to(device)`` after its eigenvalues were cached recomputes them there:
    the cache's snapshot is on the old device (comparing across devices raised on a GPU, and a
    model moved to CUDA could not evaluate its bound), and a kernel without hyperparameters (the
    arc-cosine kernel) computes them on its anchor's device (they stayed on the CPU). The meta
    device stands in for a GPU."""
    import zonal.kernels

    kernel = getattr(zonal.kernels, name)(9, max_degree=8, homogeneous=True).double()
    with torch.no_grad():  # an entry without a graph, kept for reuse (as in a statistics pass)
        assert kernel.eigenvalues().device.type == "cpu"
        kernel.to("meta")  # the device alone: the dtype check would not see the move
        moved = kernel.eigenvalues()
    assert moved.device.type == "meta" and moved.dtype == torch.float64 and moved.shape == (9,)


def test_copy_pickle_and_expand_batch_with_cached_graph():
    kernel = PolynomialDecayKernel(3, max_degree=6)
    values = kernel.eigenvalues()
    assert values.requires_grad  # the cache holds a graph
    clone = copy.deepcopy(kernel)
    restored = pickle.loads(pickle.dumps(kernel))
    expanded = kernel.expand_batch(torch.Size([2]))
    x = random_sphere(5, 3)
    with torch.no_grad():
        reference = kernel(x).to_dense()
        for other in (clone, restored):
            torch.testing.assert_close(other(x).to_dense(), reference)
        assert expanded(x).to_dense().shape == (2, 5, 5)


def _regression_data(ambient_dim=3, num=30):
    x = random_sphere(num, ambient_dim, seed=11)
    generator = torch.Generator().manual_seed(12)
    y = torch.sin(3 * x[:, 0]) + x[:, 1] * x[:, 2]
    return x, y + 0.05 * torch.randn(num, generator=generator, dtype=torch.float64)


class _ExactGP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, kernel):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(kernel)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


@pytest.mark.parametrize("name", ["arccos1", "matern52", "intrinsic_matern", "polynomial_decay"])
def test_exact_gp_trains_and_predicts(name):
    x, y = _regression_data()
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    model = _ExactGP(x, y, likelihood, FACTORIES[name](3)).to(torch.float64)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    model.train()
    losses = []
    for _ in range(8):
        optimizer.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0]
    model.eval()
    with torch.no_grad():
        prediction = likelihood(model(random_sphere(7, 3, seed=13)))
    assert prediction.mean.shape == (7,) and bool((prediction.variance > 0).all())


@pytest.mark.parametrize("name", ["arccos1", "heat", "spectral"])
def test_botorch_single_task_gp_posterior(name):
    from botorch.models import SingleTaskGP

    x, y = _regression_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch warns that sphere points leave the unit cube
        model = SingleTaskGP(x, y.unsqueeze(-1), covar_module=ScaleKernel(FACTORIES[name](3)))
        model = model.to(torch.float64)
        test_x = random_sphere(2, 3, seed=14, batch=(4,)).requires_grad_()  # [4, q=2, 3]
        posterior = model.posterior(test_x)
        assert posterior.mean.shape == (4, 2, 1)
        assert posterior.mvn.covariance_matrix.shape == (4, 2, 2)
        (posterior.mean.sum() + posterior.variance.sum()).backward()
    assert torch.isfinite(test_x.grad).all()
    assert bool((posterior.variance > 0).all())


def test_input_validation():
    kernel = ChordalMaternKernel(3)
    with pytest.raises(ValueError, match="unit vectors"):
        kernel(torch.ones(3, 3, dtype=torch.float64)).to_dense()
    with pytest.raises(ValueError, match="unit vectors"):
        kernel(random_sphere(3, 3), 2 * random_sphere(3, 3)).to_dense()
    with pytest.raises(ValueError, match="NaN"):
        kernel(torch.full((2, 3), float("nan"), dtype=torch.float64)).to_dense()
    with pytest.raises(ValueError, match="last_dim_is_batch"):
        kernel.forward(random_sphere(3, 3), random_sphere(3, 3), last_dim_is_batch=True)
    with pytest.raises(ValueError, match="ambient_dim"):
        ArcCosineKernel(1)
    with pytest.raises(ValueError, match="max_degree"):
        PolynomialDecayKernel(3, max_degree=-1)
    with pytest.raises(NotImplementedError):
        IntrinsicHeatKernel(3).shape(torch.zeros(2, 2, dtype=torch.float64))
    assert isinstance(kernel, ZonalKernel) and isinstance(kernel, gpytorch.kernels.Kernel)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_no_grad_fast_path_equals_autograd_path(name):
    """Above one 256-tile and off a multiple of it: exact symmetry, same values with and without grad."""
    kernel = FACTORIES[name](4)
    x = random_sphere(300, 4, seed=21, batch=(2,))
    with torch.no_grad():
        fast = kernel(x).to_dense()
    slow = kernel(x.clone().requires_grad_()).to_dense()
    assert torch.equal(fast, fast.mT)
    torch.testing.assert_close(slow.detach(), fast, rtol=1e-13, atol=1e-14)
    torch.testing.assert_close(fast.diagonal(dim1=-2, dim2=-1), kernel(x, diag=True).detach())


def test_keyword_arguments_gpytorch_would_ignore_are_refused():
    """``gpytorch.kernels.Kernel`` swallows unknown keywords: a misspelt ``homogeneous`` built a
    non-homogeneous kernel, and ``ard_num_dims`` failed only at the first Gram matrix. Both are
    named at construction, as is a lengthscale prior on a kernel without a lengthscale; the
    options GPyTorch does use still work."""
    from gpytorch.constraints import Interval
    from gpytorch.priors import NormalPrior

    with pytest.raises(TypeError, match=r"unexpected keyword argument.*homogenous"):
        ArcCosineKernel(3, homogenous=True)
    with pytest.raises(ValueError, match=r"takes no ard_num_dims.*SphereEmbedding"):
        ChordalMaternKernel(3, ard_num_dims=3)
    with pytest.raises(ValueError, match="has no lengthscale: drop lengthscale_prior"):
        ArcCosineKernel(3, lengthscale_prior=NormalPrior(1.0, 0.1))
    kernel = ChordalMaternKernel(3, lengthscale_prior=NormalPrior(1.0, 0.1),
                                 lengthscale_constraint=Interval(0.1, 5.0),
                                 batch_shape=torch.Size([2]))  # fmt: skip
    assert [name for name, *_ in kernel.named_priors()] == ["lengthscale_prior"]
    assert kernel.lengthscale.shape == (2, 1, 1)
