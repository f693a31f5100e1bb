"""Named errors of the Bayesian optimisation loop (``zonal.bo.loop``).

Each carries the loop's state so far (``error.state``, a ``BOState``); the loop also writes that
state to its state file before raising, so a run can be inspected or resumed after the cause is
fixed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zonal.bo.state import BOState


class BOError(ValueError):
    """A Bayesian optimisation run stopped on bad input; ``state`` is the run so far (or None)."""

    def __init__(self, message: str, state: BOState | None = None) -> None:
        super().__init__(message)
        self.state = state


class BudgetError(BOError):
    """The budget (total evaluations) is smaller than the initial design."""


class ObjectiveNaNError(BOError):
    """The objective returned NaN or an infinite value at a point (the point is not recorded)."""


class OffSphereError(BOError):
    """A point given to, or proposed by, the loop does not lie on the unit sphere."""


class MissingOptionalDependencyError(ImportError):
    """An optional extra (``pip install zonal[bo]``) is needed for the asked-for option."""


__all__ = [
    "BOError",
    "BudgetError",
    "MissingOptionalDependencyError",
    "ObjectiveNaNError",
    "OffSphereError",
]
