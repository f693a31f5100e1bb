"""The markdown report of a run: our numbers beside the seed's, then figures, tables and the config.

For each source in ``Experiment.paper`` (e.g. ``"seed 000 table 2"``) the report has a table
``quantity | ours | paper (seed 000 table 2)``; metrics without a paper value follow in their own table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MISSING = "—"


def flatten_metrics(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings flattened to dotted keys: ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_metrics(value, prefix=f"{name}."))
        else:
            flat[name] = value
    return flat


def format_value(value: Any) -> str:
    """A metric or paper value as short text: floats to 4 significant digits, ``None`` as a dash."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        shown = ", ".join(format_value(item) for item in value[:8])
        return f"[{shown}{', ...' if len(value) > 8 else ''}]"
    return str(value)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table; cells are formatted with ``format_value`` and escaped."""
    lines = [_row(header), _row(["---"] * len(header))]
    lines.extend(_row([format_value(cell) for cell in row]) for row in rows)
    return "\n".join(lines)


def comparison_tables(
    metrics: Mapping[str, Any], paper: Mapping[str, Mapping[str, Any]], protocol: str = ""
) -> str:
    """One ``quantity | ours (protocol) | paper (source)`` table per paper source, then the other
    metrics; ``protocol`` (e.g. "quick (reduced)") labels our column, so that a quick number is
    never set beside a paper's as if like for like."""
    ours = f"ours, {protocol}" if protocol else "ours"
    flat = flatten_metrics(metrics)
    sections: list[str] = []
    compared: set[str] = set()
    for source, values in paper.items():
        if not values:
            sections.append(f"### {source}\n\nNo numbers to compare: see the figures of this run.")
            continue
        rows = [(quantity, flat.get(quantity), value) for quantity, value in values.items()]
        compared.update(values)
        sections.append(
            f"### {source}\n\n" + markdown_table(["quantity", ours, f"paper ({source})"], rows)
        )
    others = [(key, value) for key, value in flat.items() if key not in compared]
    if others:
        title = "### Other metrics" if paper else "### Metrics"
        sections.append(f"{title}\n\n" + markdown_table(["quantity", "ours"], others))
    return "\n\n".join(sections)


def render_report(
    *,
    title: str,
    summary: str,
    run_name: str,
    metrics: Mapping[str, Any],
    paper: Mapping[str, Mapping[str, Any]],
    config: Mapping[str, Any],
    details: Sequence[str] = (),
    figures: Sequence[str] = (),
    tables: Sequence[str] = (),
    protocol: str = "",
) -> str:
    """The whole ``report.md`` of a run.

    ``details`` are short lines about the run (preset, time, versions); ``figures`` and ``tables``
    are file names in the run folder, embedded and linked; ``protocol`` labels our numbers.
    """
    parts = [f"# {title}", summary, f"Run `{run_name}`."]
    if details:
        parts.append("\n".join(f"- {line}" for line in details))
    if paper:
        sources = ", ".join(paper)
        parts.append(f"## Results beside the paper\n\nReproduces: {sources}.")
    else:
        parts.append("## Results\n\nThis experiment has no paper reference values.")
    parts.append(comparison_tables(metrics, paper, protocol))
    if figures:
        parts.append("## Figures\n\n" + "\n\n".join(f"![{name}]({name})" for name in figures))
    if tables:
        parts.append("## Tables\n\n" + "\n".join(f"- [{name}]({name})" for name in tables))
    parts.append("## Config\n\n" + markdown_table(["key", "value"], config.items()))
    return "\n\n".join(part for part in parts if part) + "\n"


def _row(cells: Sequence[str]) -> str:
    escaped = [str(cell).replace("|", "\\|").replace("\n", " ") for cell in cells]
    return "| " + " | ".join(escaped) + " |"
