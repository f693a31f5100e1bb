"""Figure pieces shared by the experiments (matplotlib is imported by the caller)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: horizontal shift of the second series against the first, and the width of a box
OFFSET, WIDTH = 0.35, 0.3


def paired_boxplots(
    axis: Any, series: Sequence[tuple[str, str, Mapping[int, Sequence[float]]]]
) -> None:
    """Box plots against an integer x (a depth) for two series side by side: each series is
    (label, colour, {x: values}); each gets a legend entry."""
    for offset, (label, colour, by_x) in enumerate(series):
        positions = sorted(by_x)
        if not positions:
            continue
        boxes = axis.boxplot(
            [by_x[x] for x in positions],
            positions=[x + (offset - 0.5) * OFFSET for x in positions],
            widths=WIDTH,
            patch_artist=True,
            manage_ticks=False,
            medianprops={"color": "black"},
        )
        for box in boxes["boxes"]:
            box.set_facecolor(colour)
        axis.plot([], [], color=colour, label=label)
