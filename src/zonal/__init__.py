"""zonal: Gaussian processes that behave like deep networks.

The common core is harmonic analysis on the hypersphere S^{d-1} (``zonal.harmonics``): Gegenbauer
polynomials, spherical harmonics in any dimension and Funk-Hecke eigenvalues of zonal functions.
On it: zonal kernels (``zonal.kernels``), the data-to-sphere embedding (``zonal.geometry``),
inter-domain inducing features (``zonal.features``), their variational strategy
(``zonal.variational``), the models (``zonal.models``: SVGP, SGPR, DGP, activated DGP) and
exact pathwise samples of them (``zonal.sampling``).
"""

from zonal import features, geometry, harmonics, kernels, models, sampling, variational

__all__ = ["features", "geometry", "harmonics", "kernels", "models", "sampling", "variational"]
__version__ = "0.1.0"
