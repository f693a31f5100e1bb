"""
A small deep kernel machine
===========================

A deep kernel machine (seed 003) keeps, in place of features, one learned Gram matrix per layer,
regularised towards the NNGP limit by a KL term weighted by :math:`\\nu`. ``SparseDKM`` learns the
Gram blocks at M inducing points (inter-domain in the convolutional model) and predicts like a GP
at the top layer. Here a two-layer DKM fits a 2-d function.
"""

# %%
import matplotlib.pyplot as plt
import torch
from gpytorch.likelihoods import GaussianLikelihood

from zonal.dkm import SparseDKM, fit_dkm

generator = torch.Generator().manual_seed(0)
inputs = torch.rand(300, 2, generator=generator, dtype=torch.float64) * 4 - 2
targets = torch.sin(2 * inputs[:, 0]) + 0.5 * inputs[:, 1] ** 2
targets = targets + 0.05 * torch.randn(300, generator=generator, dtype=torch.float64)
features = torch.cat([inputs, torch.ones(300, 1, dtype=torch.float64)], 1)  # a bias feature
train, test = slice(0, 200), slice(200, 300)

model = SparseDKM(features[:20], 2, GaussianLikelihood(), nu=1.0)
history = fit_dkm(model, features[train], targets[train], epochs=40, batch_size=100, lr=0.03)
mean, variance = model.predict(features[test])
rmse = float((mean - targets[test]).square().mean().sqrt())
print(
    f"objective {history[0]:.2f} -> {history[-1]:.2f}; test RMSE {rmse:.3f} "
    f"(targets' sd {float(targets.std()):.2f})"
)

# %%
# The objective rises as the Gram matrices move away from the NNGP, and predictions follow the
# target function.
fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.5))
left.plot(history)
left.set_xlabel("step")
left.set_ylabel("DKM objective")
right.errorbar(targets[test], mean.detach(), yerr=2 * variance.detach().sqrt(), fmt="o", alpha=0.6)
right.plot([-1.5, 3], [-1.5, 3], "k--", lw=1)
right.set_xlabel("target")
right.set_ylabel("predicted ± 2 sd")
fig.tight_layout()
