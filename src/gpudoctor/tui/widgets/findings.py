"""The findings list: largest estimated gain first, filterable, keeping the selection across refreshes.

Why it exists: the list is where the ten-second answer is — which problems, how bad, where. It
takes findings already judged by the rules engine; it never judges anything itself. Severity is
spelled out (CRIT/WARN/INFO) so the list reads the same with ``NO_COLOR``.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from gpudoctor.model import Finding, Severity, sort_findings
from gpudoctor.tui.format import SEVERITY_LABEL, SEVERITY_STYLE


def matches(finding: Finding, query: str) -> bool:
    """Case-insensitive match of every word of ``query`` against the finding's text."""
    haystack = " ".join(
        (finding.code, finding.name, finding.title, finding.message, finding.severity.value,
         finding.source.value, finding.location.describe())
    ).lower()
    return all(word in haystack for word in query.lower().split())


def gain_label(finding: Finding) -> str:
    """``1.50×`` (the middle of the estimate, what the list is ordered by), or ``–`` when there is none."""
    return f"{finding.impact.est_speedup:.2f}×" if finding.impact is not None else "–"


#: The columns every width shows, at their widths ("1.53×" is 5 wide).
FIXED_COLUMNS = (("sev", 4), ("gain", 5), ("code", 5))


def cut(text: str, width: int | None) -> str:
    """``text`` whole, or cut to ``width`` with "…" at the end (never an unmarked cut)."""
    if width is None or len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"


def filter_note(query: str, hidden: Sequence[Finding]) -> str:
    """What an empty list must say while a filter hides findings (never "No findings so far")."""
    if not query or not hidden:
        return ""
    worst = max(hidden, key=lambda f: f.severity.rank)
    return (f"No finding matches the filter “{query}”; it hides {len(hidden)} "
            f"({worst.severity.value} {worst.code} among them). Press / and clear the text to see them all.")


class FindingsList(DataTable):
    """A row per finding; highlighting a row posts :class:`FindingsList.Chosen`."""

    DEFAULT_CSS = "FindingsList { height: 1fr; }"

    class Chosen(Message):
        """The highlighted finding changed (``None`` when the list is empty)."""

        def __init__(self, finding: Finding | None, note: str = "") -> None:
            super().__init__()
            self.finding = finding
            self.note = note   # with no finding: why the list is empty (a filter hides them)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._all: list[Finding] = []
        self._shown: list[Finding] = []
        self.query_text = ""
        self._filled = False
        self._rows: list[tuple[Severity, str, str, str, str]] = []
        self._layout: tuple[int | None, bool] = (None, True)

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        """sev, gain and code at their widths; problem whole where it fits (else cut with "…") and
        where only when the problem fits beside it (the detail names the place too)."""
        self.clear(columns=True)
        for label, width in FIXED_COLUMNS:
            self.add_column(label, width=width, key=label)
        problem, where = self._layout
        self.add_column("problem", width=problem, key="problem")
        if where:
            self.add_column("where", key="where")

    def _fit(self) -> tuple[int | None, bool]:
        """(problem's width, None for its own; whether the where column is shown) at this width."""
        pad = 2 * self.cell_padding
        room = self.size.width - sum(width + pad for _, width in FIXED_COLUMNS) - pad
        if self.show_vertical_scrollbar:
            room -= self.styles.scrollbar_size_vertical
        if room <= 0:  # not laid out yet
            return None, True
        names = [len(name) for _, _, _, name, _ in self._rows] or [0]
        places = [len(where) for *_, where in self._rows] or [0]
        problem = max(len("problem"), *names)
        if problem + pad + max(len("where"), *places) <= room:
            return None, True
        return min(problem, room), False

    def on_resize(self) -> None:
        if self._fit() != self._layout:
            self._filled = False   # lay the rows out again at the new width
            self._refill()

    @property
    def shown(self) -> list[Finding]:
        return list(self._shown)

    @property
    def current(self) -> Finding | None:
        if not self._shown or self.cursor_row < 0 or self.cursor_row >= len(self._shown):
            return None
        return self._shown[self.cursor_row]

    def set_findings(self, findings: Sequence[Finding]) -> None:
        """Replace the findings, keeping the highlighted one if it is still there."""
        self._all = sort_findings(list(findings))
        self._refill()

    def set_filter(self, query: str | None) -> None:
        self.query_text = (query or "").strip()
        self._refill()

    def _chosen(self) -> Message:
        hidden = [f for f in self._all if f not in self._shown]
        return self.Chosen(self.current, filter_note(self.query_text, hidden))

    def _title(self) -> None:
        """The border says a filter is on, and how many findings it lets through."""
        if self.query_text:
            self.border_title = f"Findings · filter “{self.query_text}”: {len(self._shown)} of {len(self._all)}"
        else:
            self.border_title = "Findings"

    def _refill(self) -> None:
        keep = self.current.key if self.current is not None else None
        shown = [f for f in self._all if not self.query_text or matches(f, self.query_text)]
        rows = [(f.severity, gain_label(f), f.code, f.name, f.location.describe()) for f in shown]
        if self._filled and rows == self._rows:
            # Same rows (numbers in messages may have moved): keep the table, refresh the detail only.
            changed = [f.to_dict() for f in shown] != [f.to_dict() for f in self._shown]
            self._shown = shown
            self._title()
            if changed:
                self.post_message(self._chosen())
            return
        self._filled, self._rows, self._shown = True, rows, shown
        layout = self._fit()
        if layout != self._layout:
            self._layout = layout
            self._add_columns()
        self.clear()
        problem, show_where = self._layout
        for severity, gain, code, name, where in rows:
            cells: list[object] = [Text(SEVERITY_LABEL[severity], style=SEVERITY_STYLE[severity]),
                                   Text(gain, style="bold" if gain != "–" else "dim"), code, cut(name, problem)]
            self.add_row(*(cells + [where] if show_where else cells))
        row = next((i for i, f in enumerate(shown) if f.key == keep), 0)
        if shown:
            self.move_cursor(row=row)
        self._title()
        self.post_message(self._chosen())

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.post_message(self._chosen())
