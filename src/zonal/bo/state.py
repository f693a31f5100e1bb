r"""The state of a Bayesian optimisation run on a sphere: what has been evaluated, by which model,
and the regret trace; saved atomically after every step so that a run resumes where it stopped.

The regret after :math:`n` evaluations is :math:`\lvert y^\ast_n - y_{\mathrm{opt}} \rvert` with
:math:`y^\ast_n` the best value found in the first :math:`n` (seed 004 eq. 4.2); ``regret()`` gives
it for every :math:`n` (the initial design included).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from zonal._files import atomic_writer

#: models that chose a point: the initial design, the shallow exact GP, the residual DGP
SOURCES = ("initial", "shallow", "deep")


@dataclass
class BOState:
    """A run so far. ``X`` [n, d] and ``Y`` [n] are the evaluated points and objective values
    (as the objective returned them); ``sources[i]`` is the model that chose point :math:`i`;
    ``switched_at`` the first BO step taken by the deep model (None: none yet);
    ``adaptive_checks`` the held-out log densities compared by the adaptive switch;
    ``step_seconds`` the wall time of each BO step (fit + acquisition + evaluation)."""

    ambient_dim: int
    strategy: str
    seed: int
    num_initial: int
    minimize: bool
    switch_after: int | None = None
    optimum_value: float | None = None
    X: torch.Tensor = field(default_factory=lambda: torch.empty(0, 0, dtype=torch.float64))
    Y: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.float64))
    sources: list[str] = field(default_factory=list)
    switched_at: int | None = None
    adaptive_checks: list[dict[str, float]] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)

    @property
    def num_evaluations(self) -> int:
        return len(self.Y)

    @property
    def num_steps(self) -> int:
        """BO steps taken (evaluations beyond the initial design)."""
        return max(0, self.num_evaluations - self.num_initial)

    def best_so_far(self) -> torch.Tensor:
        r""":math:`y^\ast_n` [n]: the best value among the first :math:`n` evaluations (min or max
        as asked)."""
        if self.num_evaluations == 0:
            return self.Y.clone()
        values = -self.Y if self.minimize else self.Y
        best = torch.cummax(values, dim=0).values
        return -best if self.minimize else best

    def regret(self) -> torch.Tensor:
        r""":math:`\lvert y^\ast_n - y_{\mathrm{opt}} \rvert` [n] (seed 004 eq. 4.2); needs
        ``optimum_value``."""
        if self.optimum_value is None:
            raise ValueError("the regret needs the optimum value (optimize(..., optimum_value=))")
        return (self.best_so_far() - self.optimum_value).abs()

    @property
    def best_point(self) -> torch.Tensor:
        """The best point found [d]."""
        index = int(self.Y.argmin() if self.minimize else self.Y.argmax())
        return self.X[index]

    @property
    def best_value(self) -> float:
        return float(self.Y.min() if self.minimize else self.Y.max())

    def branch(
        self, strategy: str, num_evaluations: int, switch_after: int | None = None
    ) -> BOState:
        """The first ``num_evaluations`` evaluations of this run as the start of a run of
        ``strategy``. Steps are seeded by their index alone (``loop.step_seed``), so a
        ``"switch"`` or ``"adaptive"`` run makes a ``"shallow"`` run's choices until its switch:
        branching a shallow run there saves recomputing them."""
        if not self.num_initial <= num_evaluations <= self.num_evaluations:
            raise ValueError(
                f"a branch keeps between {self.num_initial} and {self.num_evaluations} "
                f"evaluations, got {num_evaluations}"
            )
        steps = num_evaluations - self.num_initial
        return BOState(
            ambient_dim=self.ambient_dim,
            strategy=strategy,
            seed=self.seed,
            num_initial=self.num_initial,
            minimize=self.minimize,
            switch_after=switch_after,
            optimum_value=self.optimum_value,
            X=self.X[:num_evaluations].clone(),
            Y=self.Y[:num_evaluations].clone(),
            sources=list(self.sources[:num_evaluations]),
            switched_at=None,
            adaptive_checks=[],
            step_seconds=list(self.step_seconds[:steps]),
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the state to ``path`` atomically (a torch file of plain types and tensors)."""
        with atomic_writer(path, "wb") as handle:
            torch.save(asdict(self), handle)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BOState:
        """The state saved at ``path`` (tensors and plain types only: ``weights_only``)."""
        payload: dict[str, Any] = torch.load(Path(path), weights_only=True)
        return cls(**payload)


__all__ = ["SOURCES", "BOState"]
