"""The convolutional DKM (seed 003 secs. 4-5) as a whole: with 1x1 images, 1x1 filters and
identity mixing it is exactly the fully connected DKM; on small images its output kernel equals a
brute-force composition (patch loops, explicit inverses) of the layers; the ResNet-like stack has the
seed's shape; the contract and bad input."""

import math

import pytest
import torch
from gpytorch.likelihoods import GaussianLikelihood, SoftmaxLikelihood

from zonal.dkm import ArcCosineGram, SparseDKM
from zonal.dkm.conv_model import ConvDKM, ConvLayerSpec, resnet_layers
from zonal.dkm.convolution import ConvGeometry


def generator(seed):
    return torch.Generator().manual_seed(seed)


def test_one_pixel_convolutional_dkm_is_the_fully_connected_dkm():
    """1x1 images, 1x1 filters, identity mixing, a NNGP first layer (G = X X^T / C, the FC input
    Gram) and a linear top: the same objective and predictions as SparseDKM, to rounding."""
    x = torch.randn(10, 3, generator=generator(0), dtype=torch.float64)
    y = torch.randn(10, generator=generator(1), dtype=torch.float64)
    connected = SparseDKM(x[:4], 2, GaussianLikelihood(), nu=(0.5, 2.0))
    geometry = ConvGeometry((1, 1), 1, 0)
    convolutional = ConvDKM(
        (3, 1, 1),
        [ConvLayerSpec(4, geometry)] * 3,
        GaussianLikelihood(),
        inducing_patches=x[:4].reshape(4, 3, 1, 1),
        nu=(math.inf, 0.5, 2.0),
        top="linear",
        normalisation=None,
    )
    identity = torch.eye(4, dtype=torch.float64).reshape(4, 4, 1, 1)
    with torch.no_grad():
        for mixing in [*convolutional.mixing, convolutional.top_mixing]:
            mixing.copy_(identity)
        connected.grams["0"].assign(connected.grams["0"].matrix + 0.1 * torch.eye(4))
        connected.output_mean.normal_(generator=generator(2))
        for index in range(2):
            convolutional.grams[str(index + 1)].assign(connected.grams[str(index)].matrix)
        convolutional.output_covariance.assign(connected.output_covariance.matrix)
        convolutional.output_mean.copy_(connected.output_mean)
    torch.testing.assert_close(
        convolutional.objective(x, y, 10), connected.objective(x, y, 10), rtol=1e-12, atol=1e-12
    )
    for conv_value, fc_value in zip(
        convolutional.predict(x[4:]), connected.predict(x[4:]), strict=True
    ):
        torch.testing.assert_close(conv_value, fc_value, rtol=1e-11, atol=1e-12)


def loop_convolution(omega_ii, omega_ti, omega_tt, mixing, stride, padding):
    """Gamma blocks by loops over output locations and offsets (eqs. 26, 27, 66)."""
    _, height, width, _ = omega_ti.shape
    kh, kw = mixing.shape[2:]
    out_h = (height + 2 * padding - kh) // stride + 1
    out_w = (width + 2 * padding - kw) // stride + 1
    count = kh * kw
    gamma_ii = (
        sum(
            mixing[:, :, a, b] @ omega_ii @ mixing[:, :, a, b].mT
            for a in range(kh)
            for b in range(kw)
        )
        / count
    )
    gamma_ti = torch.zeros(omega_ti.shape[0], out_h, out_w, mixing.shape[0], dtype=torch.float64)
    gamma_tt = torch.zeros(omega_ti.shape[0], out_h, out_w, dtype=torch.float64)
    for r in range(out_h):
        for s in range(out_w):
            for a in range(kh):
                for b in range(kw):
                    row, col = r * stride + a - padding, s * stride + b - padding
                    if 0 <= row < height and 0 <= col < width:
                        gamma_ti[:, r, s] += omega_ti[:, row, col] @ mixing[:, :, a, b].mT / count
                        gamma_tt[:, r, s] += omega_tt[:, row, col] / count
    return gamma_ii, gamma_ti, gamma_tt


def loop_conditional(kernel_ii, kernel_ti, kernel_tt, gram_ii):
    """G_ti = K_ti K_ii^-1 G_ii and diag G_tt location by location, with an explicit inverse."""
    inverse = torch.linalg.inv(kernel_ii)
    cross = kernel_ti @ inverse @ gram_ii  # [P, H, W, M]
    projected = (kernel_ti @ inverse * kernel_ti).sum(-1)
    lifted = (kernel_ti @ inverse @ gram_ii @ inverse * kernel_ti).sum(-1)
    return cross, kernel_tt - projected + lifted


def test_output_kernel_equals_a_brute_force_composition_of_the_layers():
    """Two layers on 5x5 two-channel images (the second with stride 2 and a 3x3 filter), no
    normalisation, a linear top: the output mean and variance from patch loops, explicit inverses
    and the Gram kernel applied block by block."""
    images = torch.randn(3, 2, 5, 5, generator=generator(3), dtype=torch.float64)
    patches = torch.randn(4, 2, 3, 3, generator=generator(4), dtype=torch.float64)
    layers = [ConvLayerSpec(4), ConvLayerSpec(3, ConvGeometry((3, 3), 2, 1))]
    model = ConvDKM(
        (2, 5, 5),
        layers,
        GaussianLikelihood(),
        inducing_patches=patches,
        nu=1.0,
        top="linear",
        normalisation=None,
    )
    with torch.no_grad():
        for index, size in enumerate((4, 3)):
            root = torch.randn(size, size, generator=generator(5 + index), dtype=torch.float64)
            model.grams[str(index)].assign(model.grams[str(index)].matrix + 0.05 * root @ root.mT)
        model.output_mean.normal_(generator=generator(7))
    kernel = ArcCosineGram(1)
    identity_channels = torch.eye(2, dtype=torch.float64)
    # layer 1: the input as features with one-hot inducing inputs, mixing = the patches (eq. 25)
    omega_ii = identity_channels / 2
    omega_ti = images.permute(0, 2, 3, 1) / 2  # [P, H, W, C]
    omega_tt = images.square().sum(1) / 2
    blocks = loop_convolution(omega_ii, omega_ti, omega_tt, patches, 1, 1)
    for index, mixing in enumerate([model.mixing[0], None]):
        gram_ii = model.grams[str(index)].matrix.detach()
        cross, diagonal = loop_conditional(*blocks, gram_ii)
        omega_ii = kernel(gram_ii)
        omega_ti = kernel.cross(cross, diagonal, gram_ii.diagonal())
        omega_tt = kernel.diagonal(diagonal)
        if mixing is not None:
            blocks = loop_convolution(omega_ii, omega_ti, omega_tt, mixing.detach(), 2, 1)
    top = model.top_mixing.detach()
    kernel_ii, kernel_ti, kernel_tt = loop_convolution(omega_ii, omega_ti, omega_tt, top, 1, 0)
    kernel_ti, kernel_tt = kernel_ti.flatten(1), kernel_tt.flatten()
    inverse = torch.linalg.inv(kernel_ii)
    covariance_a = model.output_covariance.matrix.detach()
    expected_mean = kernel_ti @ inverse @ model.output_mean.detach()
    expected_variance = (
        kernel_tt
        - (kernel_ti @ inverse * kernel_ti).sum(-1)
        + (kernel_ti @ inverse @ covariance_a @ inverse * kernel_ti).sum(-1)
    )
    mean, variance = model.predict(images.flatten(1))
    torch.testing.assert_close(mean, expected_mean.squeeze(-1), rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(variance, expected_variance, rtol=1e-9, atol=1e-11)


def test_resnet_stack_has_the_seeds_shape():
    """ResNet20: a stem and 3 stages x 3 blocks x 2 layers = 19 layers with M = 16/32/64 x s,
    stride 2 entering stages 2 and 3, and skips exactly in the 7 blocks that keep their shape."""
    layers = resnet_layers((16, 32, 64))
    assert len(layers) == 19
    assert [layer.num_inducing for layer in layers] == [16] * 7 + [32] * 6 + [64] * 6
    assert [i for i, layer in enumerate(layers) if layer.geometry.stride == 2] == [7, 13]
    skips = {i: layer.skip_from for i, layer in enumerate(layers) if layer.skip_from is not None}
    assert skips == {2: 0, 4: 2, 6: 4, 10: 8, 12: 10, 16: 14, 18: 16}


def test_contract_predict_is_the_posterior_marginals():
    images = torch.randn(5, 1, 6, 6, generator=generator(8), dtype=torch.float64)
    patches = images[:4, :, :3, :3].clone()
    model = ConvDKM(
        (1, 6, 6),
        [ConvLayerSpec(4), ConvLayerSpec(4, skip_from=0)],
        SoftmaxLikelihood(num_classes=3, mixing_weights=False),
        inducing_patches=patches,
        normalisation={},
    )
    inputs = model.images_to_inputs(images)
    posterior = model.posterior(inputs)
    mean, variance = model.predict(inputs)
    torch.testing.assert_close(mean, posterior.mean, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(variance, posterior.variance, rtol=1e-12, atol=1e-14)


def test_bad_images_and_settings_are_named_errors():
    patches = torch.randn(4, 1, 3, 3, dtype=torch.float64)
    model = ConvDKM((1, 6, 6), [ConvLayerSpec(4)], GaussianLikelihood(), inducing_patches=patches)
    with pytest.raises(ValueError, match=r"images must be \[N, 1, 6, 6\]"):
        model.images_to_inputs(torch.randn(2, 3, 6, 6))
    with pytest.raises(ValueError, match=r"inputs must have shape \[N, 36\]"):
        model.predict(torch.randn(2, 49, dtype=torch.float64))
    with pytest.raises(ValueError, match="nu of layer 1 must be >= 0"):
        ConvDKM(
            (1, 6, 6), [ConvLayerSpec(4)], GaussianLikelihood(), inducing_patches=patches, nu=-1.0
        )
    with pytest.raises(ValueError, match="skips from layer 0 of another shape"):
        ConvDKM(
            (1, 6, 6),
            [ConvLayerSpec(4), ConvLayerSpec(8, skip_from=0)],
            GaussianLikelihood(),
            inducing_patches=patches,
        )
    with pytest.raises(ValueError, match=r"inducing_patches must be \[M_0, C, kh, kw\]"):
        ConvDKM((2, 6, 6), [ConvLayerSpec(4)], GaussianLikelihood(), inducing_patches=patches)
    with pytest.raises(ValueError, match="unknown top layer 'max'"):
        ConvDKM(
            (1, 6, 6), [ConvLayerSpec(4)], GaussianLikelihood(), inducing_patches=patches, top="max"
        )


def test_first_layer_with_more_inducing_patches_than_patch_values_must_be_nngp():
    """The first layer's kernel is linear in the C kh kw patch values: more inducing patches than
    that make K_ii singular (rank <= C kh kw), so a learned first layer is refused by name."""
    patches = torch.randn(10, 1, 3, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="rank <= 9 < M_0 = 10"):
        ConvDKM((1, 6, 6), [ConvLayerSpec(10)], GaussianLikelihood(), inducing_patches=patches)
    model = ConvDKM(
        (1, 6, 6), [ConvLayerSpec(10)], GaussianLikelihood(), inducing_patches=patches, nu=math.inf
    )
    assert "0" not in model.grams


@pytest.mark.slow
def test_convolutional_dkm_learns_digits():
    """Two layers (an NNGP patch layer, a learned 3x3 layer), a linear top, 300 ZCA-whitened 8x8
    digits, 15 epochs (about 20 s): the objective rises and held-out accuracy reaches 70%
    (chance: 10%)."""
    from sklearn.datasets import load_digits

    from zonal.dkm import fit_dkm

    digits = load_digits()
    pixels = torch.as_tensor(digits.data, dtype=torch.float64)
    pixels = pixels - pixels.mean(0)
    values, vectors = torch.linalg.eigh(pixels.mT @ pixels / len(pixels))
    whitened = pixels @ vectors @ torch.diag((values + 0.1 * values.mean()).rsqrt()) @ vectors.mT
    labels = torch.as_tensor(digits.target)
    order = torch.randperm(len(pixels), generator=generator(9))
    train, test = order[:300], order[300:700]
    images = whitened.reshape(-1, 1, 8, 8)
    corners = torch.randint(0, 6, (16, 2), generator=generator(10))
    patches = torch.stack(
        [images[train[k], :, a : a + 3, b : b + 3] for k, (a, b) in enumerate(corners.tolist())]
    )
    model = ConvDKM(
        (1, 8, 8),
        [ConvLayerSpec(16), ConvLayerSpec(16)],
        SoftmaxLikelihood(num_classes=10, mixing_weights=False),
        inducing_patches=patches,
        nu=(math.inf, 1.0),
        top="linear",
        normalisation=None,
        likelihood_samples=50,
    )
    history = fit_dkm(model, whitened[train], labels[train], epochs=15, batch_size=100, lr=0.02)
    assert sum(history[-3:]) / 3 > sum(history[:3]) / 3 + 0.5
    predicted = model.class_log_probabilities(whitened[test]).argmax(-1)
    assert float((predicted == labels[test]).double().mean()) >= 0.7


def test_gradient_checkpointing_gives_the_same_objective_and_gradients():
    images = torch.randn(4, 1, 6, 6, generator=generator(11), dtype=torch.float64)
    labels = torch.tensor([0, 1, 2, 1])

    def gradients(checkpointing):
        model = ConvDKM(
            (1, 6, 6),
            [
                ConvLayerSpec(4),
                ConvLayerSpec(4, skip_from=0),
                ConvLayerSpec(5, ConvGeometry((3, 3), 2, 1)),
            ],
            SoftmaxLikelihood(num_classes=3, mixing_weights=False),
            inducing_patches=images[:4, :, :3, :3].clone(),
            normalisation={},
            likelihood_samples=4,
            gradient_checkpointing=checkpointing,
        )
        value = model.objective(images.flatten(1), labels, 10, generator(12))
        value.backward()
        return value.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}

    plain, plain_grads = gradients(False)
    checked, checked_grads = gradients(True)
    torch.testing.assert_close(checked, plain, rtol=1e-13, atol=0)
    for name, gradient in plain_grads.items():
        torch.testing.assert_close(checked_grads[name], gradient, rtol=1e-10, atol=1e-13, msg=name)


def test_initial_output_mean_is_a_draw_from_the_prior_and_the_logits_vary():
    """mu starts as L eps, L L^T = K_ii of the output layer, eps standard normal (seed 003 sec. 5
    initialises mu randomly): the whitened mean L^-1 mu is standard normal, and the initial
    logits differ between images, so the labels reach the layers below from the first step
    (with mu = 0 every logit is 0 and the last train/test scale Psi collapses instead)."""
    from gpytorch.likelihoods import SoftmaxLikelihood

    from zonal.dkm import ConvDKM, resnet_layers

    generator = torch.Generator().manual_seed(0)
    images = torch.randn(20, 1, 8, 8, generator=generator, dtype=torch.float64)
    patches = torch.randn(4, 1, 3, 3, generator=generator, dtype=torch.float64)
    model = ConvDKM(
        (1, 8, 8),
        resnet_layers((4, 8, 16), 1),
        SoftmaxLikelihood(num_classes=10, mixing_weights=False),
        inducing_patches=patches,
        nu=1.0,
    )
    with torch.no_grad():
        _, top_chol, _, _ = model._propagate(images[:0])
        whitened = torch.linalg.solve_triangular(top_chol, model.output_mean, upper=False)
        logits = model.batch_outputs(images.flatten(1)).mean  # [20, 10]
    assert whitened.shape == (16, 10)
    assert abs(float(whitened.mean())) < 0.25 and 0.7 < float(whitened.var()) < 1.4
    assert float(logits.std(0).min()) > 1e-3
