"""
The activated deep GP: trained as a network, then by the ELBO
=============================================================

An activated DGP's layers use activated inducing features, so its posterior mean *is* a neural
network with the same activation (seed 000 sec. 3.2, 5). ``two_stage_fit`` trains that network
first (plain mean squared error, fast), copies it into the DGP, then optimises the ELBO, which
adds the uncertainty the network lacks.
"""

# %%
import matplotlib.pyplot as plt
import torch
from gpytorch.likelihoods import GaussianLikelihood

from zonal.models import ActivatedDGP, two_stage_fit

torch.manual_seed(0)
x = torch.cat([torch.linspace(-3, -0.8, 60), torch.linspace(0.8, 3, 60)]).double().unsqueeze(-1)
y = torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(120, dtype=torch.float64)

model = ActivatedDGP(
    input_dim=1, hidden_dims=[5], likelihood=GaussianLikelihood().double(), num_inducing=32
)
history = two_stage_fit(model, x, y, network_steps=600, elbo_steps=300, lr=0.02)
print({stage: f"{values[0]:.3f} -> {values[-1]:.3f}" for stage, values in history.items()})

# %%
# The network of posterior means is an ordinary ``torch.nn.Module``; it matches the DGP's mean
# (up to the Monte Carlo noise of the hidden layers' uncertainty).
network = model.to_torch_module()
grid = torch.linspace(-5, 5, 300, dtype=torch.float64).unsqueeze(-1)
with torch.no_grad():
    network_mean = network(grid).reshape(-1)
    mean, variance = model.predict(grid, include_noise=True)
std = variance.sqrt()

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.fill_between(grid[:, 0], mean - 2 * std, mean + 2 * std, alpha=0.3, label="DGP mean ± 2 sd")
ax.plot(grid[:, 0], mean, label="DGP mean")
ax.plot(grid[:, 0], network_mean, "--", label="network of means")
ax.plot(x[:, 0], y, "k.", ms=3, label="data")
ax.axvspan(-0.8, 0.8, color="grey", alpha=0.1)
ax.set_xlabel("x")
ax.legend(fontsize=8)
ax.set_title("Activated DGP (2 layers, Softplus): wider bands off the data")
fig.tight_layout()
