"""Tables of numbers: the rank table (live, several ranks) and the per-rank / per-step breakdowns
of a trace analysis (``analyze --tui``).

Why it exists: a straggler or an input-bound rank only shows when ranks sit side by side. It shows
rows the session or the trace analyzer produced; it computes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.widgets import DataTable

from gpudoctor.report.model import MetricTable
from gpudoctor.tui.format import value_text


class MetricGrid(DataTable):
    """A read-only table of dict rows; ``show`` replaces its contents."""

    DEFAULT_CSS = "MetricGrid { height: auto; max-height: 12; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self._signature: tuple[Any, ...] = ()

    def show(self, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> None:
        signature = (tuple(columns), tuple(tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows))
        if signature == self._signature:
            return
        self._signature = signature
        self.clear(columns=True)
        for column in columns:
            self.add_column(column, key=column)
        for row in rows:
            self.add_row(*(value_text(row.get(c)) for c in columns))

    def show_table(self, table: MetricTable) -> None:
        self.border_title = table.title
        self.show(table.columns, table.rows)


def rank_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Columns of the live rank table, in first-seen order."""
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    return columns
