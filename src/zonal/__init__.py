"""zonal: Gaussian processes that behave like deep networks.

The common core is harmonic analysis on the hypersphere S^{d-1} (``zonal.harmonics``): Gegenbauer
polynomials, spherical harmonics in any dimension and Funk-Hecke eigenvalues of zonal functions.
"""

from zonal import harmonics

__all__ = ["harmonics"]
__version__ = "0.1.0"
