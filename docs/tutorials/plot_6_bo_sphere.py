"""
Bayesian optimisation on a sphere with BoTorch
==============================================

``zonal.bo.optimize`` runs BoTorch's acquisition functions with a GP whose kernel lives on the
sphere (an intrinsic Matérn kernel), and maximises the acquisition on the sphere itself
(Riemannian optimisation) rather than in a box. Here it minimises seed 004's singular function on
:math:`\\mathbb{S}^2` with a shallow GP and log expected improvement, on a budget of 14
evaluations, and is set against 300 runs of random search on the same budget.
"""

# %%
import matplotlib.pyplot as plt
import torch

from zonal.bo import optimize, singular_sphere

budget = 14
state = optimize(
    singular_sphere,
    ambient_dim=singular_sphere.ambient_dim,
    budget=budget,
    model="shallow",
    num_initial=5,
    optimum_value=singular_sphere.optimum_value,
    seed=0,
    progress=False,
)
regret = state.regret()
print(f"best value {float(state.best_so_far()[-1]):.3f}; final regret {float(regret[-1]):.3f}")

# %%
# Random search costs nothing to repeat: its median and interquartile range over 300 runs show
# where one BO run stands.
generator = torch.Generator().manual_seed(1)
points = torch.randn(300, budget, singular_sphere.ambient_dim, generator=generator)
points = torch.nn.functional.normalize(points.double(), dim=-1)
values = torch.stack([singular_sphere(run) for run in points])  # [300, budget]
random_regret = (values.cummin(-1).values - singular_sphere.optimum_value).abs()
low, median, high = random_regret.quantile(
    torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64), dim=0
)
print(f"random search after {budget}: median regret {float(median[-1]):.3f}")

steps = range(1, budget + 1)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.fill_between(steps, low, high, alpha=0.3, color="C1", label="random search, IQR of 300 runs")
ax.plot(steps, median, "--", color="C1", label="random search, median")
ax.plot(steps, regret, "o-", color="C0", label="BO on the sphere (shallow GP, log EI)")
ax.axvline(5.5, color="grey", lw=1)
ax.set_xlabel("evaluations (first 5: initial design)")
ax.set_ylabel("regret of the best so far")
ax.legend(fontsize=8)
ax.set_title(r"The singular function on $S^2$")
fig.tight_layout()
