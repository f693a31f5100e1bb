"""The ``svgp-points`` recipe (``zonal.tabular.recipes.points``): an SVGP with learned inducing
points and a chordal kernel on the lifted rows [s * x, b]."""

from __future__ import annotations

import gpytorch
import numpy as np
import pytest
import torch

from zonal.cli import main
from zonal.models.training import TrainingControl
from zonal.tabular.recipes import build_points_svgp, resolve_spec, train_points_svgp
from zonal.tabular.saved import load_model


def rows(count: int, dim: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(count, dim, generator=generator, dtype=torch.float64)


def test_the_inducing_points_start_at_distinct_lifted_training_rows():
    x = rows(40, 3)
    spec = resolve_spec(3, model="svgp-points", num_inducing=16, ard=True, seed=5)
    model = build_points_svgp(spec, x)
    points = model.features.points.detach()  # [16, 4]
    lifted = torch.cat([x, torch.ones(40, 1, dtype=torch.float64)], dim=1)  # s = 1, b = 1
    matches = (points[:, None, :] == lifted[None, :, :]).all(-1)  # [16, 40]
    assert (matches.sum(1) == 1).all()  # each point is one training row ...
    assert len(set(matches.float().argmax(1).tolist())) == 16  # ... and no row twice
    again = build_points_svgp(spec, x).features.points.detach()
    assert torch.equal(points, again)  # drawn with the spec's seed


def test_fewer_rows_than_points_take_every_row_and_the_spec_keeps_their_count():
    x = rows(30, 2)
    y = torch.sin(x[:, 0])
    spec = resolve_spec(2, model="svgp-points", num_inducing=256, steps=5)
    fit = train_points_svgp(spec, x, y, TrainingControl())
    assert fit.spec["num_inducing"] == 30 and fit.model.features.num_inducing == 30
    loaded = build_points_svgp(fit.spec)  # a checkpoint's model before its state is loaded
    loaded.load_state_dict(fit.model.state_dict())
    test = rows(7, 2, seed=1)
    fit.model.eval()
    loaded.eval()
    with torch.no_grad():
        expected = fit.model.latent_distribution(test).mean
        assert torch.allclose(loaded.latent_distribution(test).mean, expected, atol=1e-12)


@pytest.mark.parametrize("epsilon", [1e-2, 1e-3])
def test_small_input_scales_turn_the_chordal_kernel_into_the_euclidean_rbf_ard(epsilon):
    # z = [s x, b] / r with r -> b = 1 and ||z - z'||^2 -> ||s (x - x')||^2 as s -> 0, so
    # r r' exp(-||z - z'||^2 / (2 rho^2)) -> exp(-sum_d (x_d - x'_d)^2 / (2 (rho / s_d)^2))
    spec = resolve_spec(3, model="svgp-points", num_inducing=4, ard=True)
    model = build_points_svgp(spec, rows(10, 3))
    relative = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    rho = 2.0 * epsilon  # Euclidean lengthscales 2, 1, 4 on the standard normal rows
    with torch.no_grad():
        model.input_map.raw_input_scales.copy_(
            model.input_map.input_scales_constraint.inverse_transform(epsilon * relative)
        )
        model.covar_module.base_kernel.lengthscale = rho
        model.covar_module.outputscale = 1.0
    x, other = rows(6, 3, seed=2), rows(5, 3, seed=3)
    with torch.no_grad():
        chordal = model.covar_module(model.lift(x), model.lift(other)).to_dense()  # [6, 5]
    euclidean = gpytorch.kernels.RBFKernel(ard_num_dims=3).double()
    euclidean.lengthscale = rho / (epsilon * relative)
    with torch.no_grad():
        expected = euclidean(x, other).to_dense()  # [6, 5]
    error = (chordal - expected).abs().max().item()
    assert error < 10 * epsilon**2  # O(||s x||^2): the r r' factor and the sphere's curvature
    assert expected.min() > 1e-3  # the comparison is not between two vanishing matrices


def test_with_every_row_as_a_point_the_optimal_q_gives_the_exact_posterior():
    # Z = X: the Titsias optimum of q(u) is the exact posterior, whose mean is the dense
    # k(x*, X) (K + sigma^2 I)^{-1} y of the same kernel on the lifted rows
    x, y = rows(25, 2), torch.cos(rows(25, 2, seed=4)[:, 0])
    spec = resolve_spec(2, model="svgp-points", num_inducing=25, kernel="chordal-matern")
    model = build_points_svgp(spec, x)
    model.set_optimal_variational_distribution(x, y)
    test = rows(9, 2, seed=5)
    model.eval()
    with torch.no_grad():
        mean = model.latent_distribution(test).mean  # [9]
        kernel, noise = model.covar_module, model.likelihood.noise.reshape(())
        train_lifted, test_lifted = model.lift(x), model.lift(test)
        gram = kernel(train_lifted).to_dense() + noise * torch.eye(25, dtype=torch.float64)
        cross = kernel(test_lifted, train_lifted).to_dense()  # [9, 25]
        expected = cross @ torch.linalg.solve(gram, y)
    assert torch.allclose(mean, expected, atol=1e-8)


def test_the_cli_fits_and_reloads_an_svgp_points_classifier(tmp_path, capsys):
    x = rows(120, 2)
    labels = np.where((x[:, 0] * x[:, 1] > 0).numpy(), "same", "other")
    data, checkpoint = tmp_path / "train.csv", tmp_path / "model.pt"
    lines = [f"{a},{b},{label}" for (a, b), label in zip(x.tolist(), labels, strict=True)]
    data.write_text("p,q,kind\n" + "\n".join(lines) + "\n")
    assert main(["fit", str(data), "--target", "kind", "--model", "svgp-points", "--kernel",
                 "chordal-matern", "--num-inducing", "16", "--steps", "20", "-o",
                 str(checkpoint), "--quiet"]) == 0  # fmt: skip
    assert "svgp-points (chordal-matern kernel, 16 inducing points)" in capsys.readouterr().out
    loaded = load_model(checkpoint)
    assert loaded.spec["model"] == "svgp-points" and loaded.spec["likelihood"] == "bernoulli"


def test_a_kernel_without_a_chordal_form_is_refused_by_name():
    with pytest.raises(ValueError, match=r"svgp-points uses the chordal-se or chordal-matern or "
                                         r"arccos kernel.*drop --kernel polynomial-decay"):  # fmt: skip
        resolve_spec(2, model="svgp-points", kernel="polynomial-decay")
