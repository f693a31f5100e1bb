"""
Bayesian optimisation on a sphere with BoTorch
==============================================

``zonal.bo.optimize`` runs BoTorch's acquisition functions with a GP whose kernel lives on the
sphere (an intrinsic Matérn kernel), and maximises the acquisition on the sphere itself
(Riemannian optimisation) rather than in a box. Here it minimises seed 004's Ackley function on
:math:`\\mathbb{S}^3` with a shallow GP and log expected improvement, against random search.
"""

# %%
import matplotlib.pyplot as plt
import torch

from zonal.bo import ackley_sphere, optimize

budget = 14
state = optimize(
    ackley_sphere,
    ambient_dim=ackley_sphere.ambient_dim,
    budget=budget,
    model="shallow",
    num_initial=5,
    optimum_value=ackley_sphere.optimum_value,
    seed=0,
    progress=False,
)
regret = state.regret()
print(f"best value {float(state.best_so_far()[-1]):.3f}; final regret {float(regret[-1]):.3f}")

# %%
# Random search on the same budget, for scale.
generator = torch.Generator().manual_seed(0)
random_points = torch.nn.functional.normalize(
    torch.randn(budget, ackley_sphere.ambient_dim, generator=generator, dtype=torch.float64), dim=-1
)
random_values = ackley_sphere(random_points)
random_regret = (random_values.cummin(0).values - ackley_sphere.optimum_value).abs()

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogy(range(1, budget + 1), regret, "o-", label="BO on the sphere (shallow GP, log EI)")
ax.semilogy(range(1, budget + 1), random_regret, "s--", label="random search")
ax.axvline(5.5, color="grey", lw=1)
ax.set_xlabel("evaluations (first 5: initial design)")
ax.set_ylabel("regret of the best so far")
ax.legend(fontsize=8)
ax.set_title(r"Ackley on $S^3$")
fig.tight_layout()
