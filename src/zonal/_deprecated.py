"""The warning of an import path kept for one release after its code moved."""

from __future__ import annotations

import warnings


def warn_moved(old: str, new: str) -> None:
    """A ``DeprecationWarning``: the module ``old`` moved to ``new`` and goes in the next release.

    Called at the top level of the old module (a thin shim that re-exports the public names), so
    the warning is raised once, when the old path is first imported."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; import {new} instead",
        DeprecationWarning,
        stacklevel=3,
    )
