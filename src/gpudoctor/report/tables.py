"""How a report's table is laid out for a person: which way round, which header, each cell's text.

Why this exists: the terminal, Markdown and the compiler-style ``check`` view each drew tables their
own way, and the terminal one turned a one-row table on its side with that row's first value as the
header ("metric  steps_total 131"). Every view now asks :func:`layout` and only draws its answer.

- A table whose first column names its rows (``rank``, ``gpu``, ``pid`` …) and is too wide for the
  view is turned on its side: one column per row, headed ``rank 0``, ``rank 1`` …
- A table of one row with no such column (the agent's step summary) reads as ``metric | value``.
- Otherwise rows stay rows.

What it must not do: compute numbers (cells come from :func:`gpudoctor.numbers.plain`).
"""

from __future__ import annotations

import msgspec

from gpudoctor.numbers import plain
from gpudoctor.report.model import MetricTable

#: Columns whose values name a row (a table keyed by one of them can be turned on its side).
KEY_COLUMNS = frozenset({"rank", "gpu", "pid", "file", "name", "code", "where", "activity", "step", "status", "run"})
#: Columns of text, drawn left-aligned.
TEXT_COLUMNS = frozenset({"rank", "file", "name", "gpu", "metric", "pid", "role", "code", "where", "activity",
                          "value", "status", "cause", "note", "step_source", "throttle", "target_pids"})


class Layout(msgspec.Struct, frozen=True):
    """What a view draws: a header, rows of cell text, and which columns are text (left-aligned)."""

    header: list[str]
    rows: list[list[str]]
    text_columns: list[bool]


def layout(table: MetricTable, width: int = 100) -> Layout:
    """The table as a view should draw it ``width`` characters wide (see the module docstring)."""
    columns = list(table.columns)
    if not columns:
        return Layout([], [], [])
    keyed = columns[0] in KEY_COLUMNS
    needed = sum(max(len(c), 6) + 2 for c in columns)
    if len(table.rows) == 1 and not keyed and len(columns) > 2:
        row = table.rows[0]
        return Layout(["metric", "value"], [[c, plain(row.get(c))] for c in columns], [True, False])
    if keyed and needed > width and len(table.rows) <= 8 and len(columns) >= 3:
        key, *metrics = columns
        header = ["metric", *(f"{key} {plain(row.get(key))}" for row in table.rows)]
        rows = [[m, *(plain(row.get(m)) for row in table.rows)] for m in metrics]
        return Layout(header, rows, [True, *(False for _ in table.rows)])
    rows = [[plain(row.get(c)) for c in columns] for row in table.rows]
    return Layout(columns, rows, [c in TEXT_COLUMNS for c in columns])


def plain_lines(table: MetricTable, width: int = 100) -> list[str]:
    """The table as aligned plain-text lines (header first), for views without rich."""
    shape = layout(table, width)
    widths = [max(len(cell) for cell in column) for column in zip(shape.header, *shape.rows)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if text else c.rjust(w)
                         for c, w, text in zip(cells, widths, shape.text_columns)).rstrip()

    return [line(shape.header), *(line(r) for r in shape.rows)]


def markdown(table: MetricTable) -> str:
    """The table in Markdown (laid out as for a 120-column view)."""
    shape = layout(table, 120)
    head = "| " + " | ".join(shape.header) + " |"
    sep = "| " + " | ".join("---" if text else "---:" for text in shape.text_columns) + " |"
    body = ["| " + " | ".join(r) + " |" for r in shape.rows]
    return "\n".join([head, sep, *body])
