"""
Spherical harmonics and Funk-Hecke in a few lines
=================================================

Orthonormal spherical harmonics in any dimension, the reproducing kernel of each degree, and the
eigenvalues of a zonal function by the Funk-Hecke formula, checked against a closed form.
"""

# %%
# Harmonics on :math:`\mathbb{S}^{2}` (``ambient_dim`` :math:`d = 3`), orthonormal for the
# normalised surface measure: the addition theorem
# :math:`\sum_j \phi_{nj}(x)\phi_{nj}(x') = Z_n(x^\top x')` holds to rounding.
import matplotlib.pyplot as plt
import torch

from zonal.harmonics import (
    SphericalHarmonics,
    arccos_eigenvalues,
    funk_hecke,
    relu_coefficients,
    zonal_harmonic,
)

harmonics = SphericalHarmonics(ambient_dim=3, max_degree=8)
x = torch.nn.functional.normalize(torch.randn(200, 3, dtype=torch.float64), dim=-1)
phi = harmonics(x)  # [200, 81], columns ordered by degree
levels = harmonics.levels
gram = torch.stack([phi[:, levels == n] @ phi[:, levels == n].T for n in range(9)])  # [9, 200, 200]
addition = zonal_harmonic(x @ x.T, 8, ambient_dim=3).permute(2, 0, 1)  # Z_n(x . x'), [9, 200, 200]
print(f"{phi.shape[1]} harmonics; addition theorem error {(gram - addition).abs().max():.1e}")

# %%
# Funk-Hecke: the ReLU's coefficients :math:`\sigma_n` by Gauss-Jacobi quadrature split at the
# kink, against the closed form of seed 000 (eqs. C.19-C.20).
quadrature = funk_hecke(lambda t: t.clamp(min=0), ambient_dim=5, max_degree=9, kinks=(0.0,))
closed = relu_coefficients(5, 9)
print("max |quadrature - closed form| =", float((quadrature - closed).abs().max()))

# %%
# The first-order arc-cosine kernel's spectrum :math:`\lambda_n = 2 d \sigma_n^2`: odd levels
# above 1 vanish, and the even ones decay polynomially.
fig, ax = plt.subplots(figsize=(6, 3.5))
for ambient_dim in (3, 5, 10):
    spectrum = arccos_eigenvalues(ambient_dim, 20)
    kept = spectrum > 0
    degrees = torch.arange(21)[kept]
    ax.loglog(degrees[1:], spectrum[kept][1:], "o-", label=f"d = {ambient_dim}")
ax.set_xlabel("degree n")
ax.set_ylabel(r"$\lambda_n$")
ax.set_title("Arc-cosine (order 1) eigenvalues, non-zero levels")
ax.legend()
fig.tight_layout()

# %%
# One degree-4 harmonic on the sphere, drawn over longitude and latitude.
longitude, latitude = torch.meshgrid(
    torch.linspace(-torch.pi, torch.pi, 120, dtype=torch.float64),
    torch.linspace(-torch.pi / 2, torch.pi / 2, 60, dtype=torch.float64),
    indexing="xy",
)
points = torch.stack(
    [latitude.cos() * longitude.cos(), latitude.cos() * longitude.sin(), latitude.sin()], -1
)
values = harmonics(points.reshape(-1, 3))[:, levels == 4][:, 2].reshape(points.shape[:-1])
fig, ax = plt.subplots(figsize=(6, 3))
ax.pcolormesh(longitude, latitude, values, cmap="RdBu_r", shading="auto")
ax.set_xlabel("longitude")
ax.set_ylabel("latitude")
ax.set_title("a spherical harmonic of degree 4")
fig.tight_layout()
