"""zonal: Gaussian processes that behave like deep networks.

The common core is harmonic analysis on the hypersphere S^{d-1} (``zonal.harmonics``): Gegenbauer
polynomials, spherical harmonics in any dimension and Funk-Hecke eigenvalues of zonal functions.
On it: zonal kernels (``zonal.kernels``), the data-to-sphere embedding (``zonal.geometry``),
inter-domain inducing features (``zonal.features``), their variational strategy
(``zonal.variational``), the models (``zonal.models``: SVGP, SGPR, DGP, activated DGP) and
exact pathwise samples of them (``zonal.sampling``).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = ["features", "geometry", "harmonics", "kernels", "models", "sampling", "variational"]
try:  # the one version number lives in pyproject.toml; the installed metadata carries it
    __version__ = version("zonal")
except PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    """Import a subpackage on first use (``zonal.models``), so that ``import zonal`` and the
    command line (``zonal --help``) do not pay for torch, GPyTorch and BoTorch up front."""
    if name in __all__:
        module = importlib.import_module(f"zonal.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'zonal' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
