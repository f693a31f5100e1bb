"""
Harmonic SGPR on a real table
=============================

The collapsed SGPR with spherical-harmonic features (seed 000 sec. 3.3, seed 002 sec. 5): the
features' :math:`K_{uu}` is diagonal, so one pass over the data gathers the sufficient statistics
and every optimiser step afterwards costs :math:`O(M^3)`, whatever :math:`N`. Here on the yacht
hydrodynamics table (308 rows, 6 inputs), fetched by ``zonal.datasets``.
"""

# %%
import gpytorch
import matplotlib.pyplot as plt
import torch

from zonal.datasets import load_dataset
from zonal.features import SphericalHarmonicFeatures
from zonal.kernels import PolynomialDecayKernel
from zonal.models import SGPR

data = load_dataset("yacht")
x = torch.as_tensor(data.X, dtype=torch.float64)
y = torch.as_tensor(data.y, dtype=torch.float64).reshape(-1)
order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
train, test = order[:277], order[277:]
x_mean, x_std = x[train].mean(0), x[train].std(0)
y_mean, y_std = y[train].mean(), y[train].std()
x = (x - x_mean) / x_std
y = (y - y_mean) / y_std
print(f"{data.name}: {len(train)} training rows, {len(test)} test rows, {x.shape[1]} inputs")

# %%
# Inputs live in :math:`\mathbb{R}^6`, so the sphere is :math:`\mathbb{S}^6` (``ambient_dim`` 7).
# The polynomial-decay kernel's harmonics up to degree 4 give M features.
ambient_dim = x.shape[1] + 1
kernel = gpytorch.kernels.ScaleKernel(
    PolynomialDecayKernel(ambient_dim, max_degree=8, homogeneous=True)
).double()
features = SphericalHarmonicFeatures(ambient_dim, max_degree=4, kernel=kernel)
model = SGPR(kernel, features, input_dim=x.shape[1])
model.fit_statistics(x[train], y[train])  # the one pass over the data
model.fit(max_iter=50)  # L-BFGS on the collapsed bound, O(M^3) per step
print(f"M = {features.num_inducing} harmonic features")

# %%
# Test error and log predictive density in standardised units.
mean, variance = model.predict(x[test], include_noise=True)
mse = float((mean - y[test]).square().mean())
density = float(model.log_predictive_density(x[test], y[test]).mean())
print(f"test MSE {mse:.4f}, test log predictive density {density:.3f} per row")

fig, ax = plt.subplots(figsize=(4, 4))
ax.errorbar(y[test], mean.detach(), yerr=2 * variance.detach().sqrt(), fmt="o", alpha=0.7)
limits = [float(y[test].min()) - 0.3, float(y[test].max()) + 0.3]
ax.plot(limits, limits, "k--", lw=1)
ax.set_xlabel("observed (standardised)")
ax.set_ylabel("predicted ± 2 sd")
ax.set_title("yacht: harmonic SGPR")
fig.tight_layout()
