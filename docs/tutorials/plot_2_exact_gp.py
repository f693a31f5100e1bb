"""
A zonal kernel inside GPyTorch's exact GP
=========================================

zonal's kernels are GPyTorch kernels. With ``homogeneous=True`` a kernel takes raw vectors
:math:`[x, b]` and applies the 1-homogeneous extension of seed 000 eq. 7, so a first-order
arc-cosine kernel on one input behaves like an infinitely wide ReLU network: linear far from the
data, with a variance that grows with :math:`\\lVert [x, b] \\rVert`.
"""

# %%
import gpytorch
import matplotlib.pyplot as plt
import torch

from zonal.kernels import ArcCosineKernel

torch.manual_seed(0)
x = torch.linspace(-2, 2, 40, dtype=torch.float64)
y = torch.sin(2 * x) + 0.1 * torch.randn(40, dtype=torch.float64)


def with_bias(x: torch.Tensor) -> torch.Tensor:
    """[x, 1]: the input to a homogeneous kernel on S^1."""
    return torch.stack([x, torch.ones_like(x)], -1)


class ExactGP(gpytorch.models.ExactGP):
    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        super().__init__(x, y, gpytorch.likelihoods.GaussianLikelihood())
        self.mean_module = gpytorch.means.ZeroMean()
        kernel = ArcCosineKernel(ambient_dim=2, order=1, homogeneous=True)
        self.covar_module = gpytorch.kernels.ScaleKernel(kernel)

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


model = ExactGP(with_bias(x), y).double()

# %%
# Type-II maximum likelihood with Adam, exactly as for any GPyTorch kernel.
model.train()
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
for _ in range(100):
    optimizer.zero_grad()
    loss = -mll(model(with_bias(x)), y)
    loss.backward()
    optimizer.step()
print(f"negative log marginal likelihood per point: {loss.item():.3f}")

# %%
# The posterior far outside the data: the mean continues linearly, the band widens.
model.eval()
grid = torch.linspace(-5, 5, 300, dtype=torch.float64)
with torch.no_grad():
    predictive = model.likelihood(model(with_bias(grid)))
    mean, std = predictive.mean, predictive.variance.sqrt()
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.fill_between(grid, mean - 2 * std, mean + 2 * std, alpha=0.3, label="mean ± 2 sd")
ax.plot(grid, mean, label="posterior mean")
ax.plot(x, y, "k.", label="data")
ax.set_xlabel("x")
ax.legend()
ax.set_title("Exact GP with a homogeneous arc-cosine kernel")
fig.tight_layout()
