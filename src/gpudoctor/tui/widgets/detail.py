"""The detail pane: one finding's evidence numbers, the rule's explanation, and the fix.

Why it exists: a verdict is only trusted with its numbers, and only useful with the change to make.
The fix is shown as a syntax-highlighted before → after snippet taken from the rule file. The
explanation text comes from the rule catalog (the same files ``gpudoctor explain`` prints). It
renders; it never evaluates rules.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from gpudoctor.catalog.impact import needs_in_words
from gpudoctor.model import Finding, Fix, NotEvaluated
from gpudoctor.numbers import speedup
from gpudoctor.report.render import note_text
from gpudoctor.tui.format import SEVERITY_LABEL, SEVERITY_STYLE, value_text

#: Given a rule code, the Markdown sections of its explanation (or None when unknown).
SectionLookup = Callable[[str], "dict[str, str] | None"]

_THEME = "ansi_dark"  # uses the terminal's palette: readable in tmux, over SSH, and degrades with NO_COLOR


def evidence_table(finding: Finding) -> Table:
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=False)
    table.add_column("evidence")
    table.add_column("value", justify="right")
    table.add_column("")
    for item in finding.evidence:
        table.add_row(item.name, value_text(item.value), "threshold" if item.is_threshold else "")
    return table


#: How far a continued code line is indented past the line it continues.
HANGING_INDENT = 4


def _comment_start(line: str) -> int:
    """Where a ``#`` comment starts in ``line`` (outside quotes, roughly), or -1."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return i
    return -1


def wrap_code(code: str, width: int) -> str:
    """``code`` with every line longer than ``width`` broken after a space or comma, each
    continuation indented past its line's own indent (never back to column 0, never mid-name)."""
    if width <= 0:
        return code
    out: list[str] = []
    for line in code.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        pad = " " * min(indent + HANGING_INDENT, max(0, width // 2))
        floor = indent
        while len(line) > width:
            cut = max(line.rfind(" ", 0, width), line.rfind(",", 0, width - 1) + 1)
            if cut <= floor:
                cut = width                     # one token longer than the box: cut it, as a last resort
            comment = _comment_start(line)
            out.append(line[:cut].rstrip())
            line = pad + ("# " if 0 <= comment < cut else "") + line[cut:].lstrip()
            floor = len(pad) + 2
        out.append(line)
    return "\n".join(out)


class CodeBlock:
    """A snippet laid out at the width it is drawn at: long lines continue indented (``wrap_code``)
    instead of wrapping back to column 0 mid-expression, as ``Syntax(word_wrap=True)`` does."""

    def __init__(self, code: str, language: str) -> None:
        self.code, self.language = code.rstrip(), language or "text"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Syntax(wrap_code(self.code, options.max_width), self.language, theme=_THEME, word_wrap=True)


def fix_renderables(fix: Fix, side_by_side: bool = False) -> list[RenderableType]:
    """The fix summary and its before → after snippets."""
    out: list[RenderableType] = [Text(fix.summary)] if fix.summary else []
    before = CodeBlock(fix.before, fix.language) if fix.before else None
    after = CodeBlock(fix.after, fix.language) if fix.after else None
    if side_by_side and before is not None and after is not None:
        grid = Table.grid(expand=True, padding=(0, 2))
        grid.add_column(ratio=1)
        grid.add_column(ratio=1)
        grid.add_row(Text("Before", style="bold red"), Text("After", style="bold green"))
        grid.add_row(before, after)
        out.append(grid)
        return out
    if before is not None:
        out += [Text("Before", style="bold red"), before]
    if after is not None:
        out += [Text("After →", style="bold green"), after]
    return out


def finding_renderable(finding: Finding, sections: dict[str, str] | None) -> Group:
    head = Text()
    head.append(f"{SEVERITY_LABEL[finding.severity]} ", style=SEVERITY_STYLE[finding.severity])
    head.append(f"{finding.code} {finding.name}", style="bold")
    head.append(f"\n{finding.title}", style="italic")
    parts: list[RenderableType] = [head, Text(finding.message)]
    if finding.impact is not None:  # one line here; how it was estimated goes under the fix
        imp = finding.impact
        share = f" · costs {imp.cost_pct_of_step:.0f}% of the step" if imp.cost_pct_of_step is not None else ""
        gain = speedup(imp.est_speedup_low, imp.est_speedup_high)
        middle = f" (the list shows its middle, {imp.est_speedup:.2f}×)" if "–" in gain else ""
        parts.append(Text("Gain: ", style="bold cyan") + Text(f"est. {gain}", style="bold") + Text(middle + share))
        if imp.shares_cost_with is not None:
            parts.append(Text(imp.overlap_text(), style="yellow"))

    if finding.evidence:
        parts += [Text(""), evidence_table(finding)]
    parts += [Text(""), Text("Fix (enter: full size)", style="bold"), *fix_renderables(finding.fix)]
    if finding.impact is not None:
        parts += [Text(""), Text("How the gain is estimated", style="bold"),
                  Text(f"{finding.impact.describe()}: {finding.impact.basis}", style="dim")]
    elif finding.impact_note:
        parts += [Text(""), Text(f"Gain: no estimate — {note_text(finding.impact_note)}", style="dim")]
    where = finding.location.describe()  # the list's "where" column shows it too: here with its sources
    sources = " + ".join(s.value for s in finding.sources)
    parts.append(Text(f"where: {where or 'the job'}  (from {sources})", style="dim"))
    if sections and sections.get("Why it is slow"):
        parts += [Text(""), Text("Why it is slow", style="bold"), Markdown(sections["Why it is slow"].strip())]
    return Group(*parts)


class FindingDetail(VerticalScroll):
    """Scrollable detail of the highlighted finding."""

    DEFAULT_CSS = """
    FindingDetail { height: 1fr; }
    FindingDetail > Static { height: auto; }
    """

    def __init__(self, lookup: SectionLookup, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._lookup = lookup
        self._body = Static("", id="detail-body")
        self.finding: Finding | None = None
        self._not_evaluated: tuple[NotEvaluated, ...] = ()
        self._note = ""
        self._shown_width = -1

    def on_resize(self) -> None:
        """Lay the text out again at a new width (the first show may come before any size is known)."""
        if self.size.width != self._shown_width:
            self._shown_width = self.size.width
            self.show(self.finding, self._not_evaluated, self._note)

    def compose(self) -> ComposeResult:
        yield self._body

    def show(self, finding: Finding | None, not_evaluated: tuple[NotEvaluated, ...] = (), note: str = "") -> None:
        """Show ``finding``; with none, say why the list is empty (``note``: a filter hides findings),
        else what could not be judged and why."""
        same_finding = finding is not None and self.finding is not None and finding.key == self.finding.key
        self.finding = finding
        self._not_evaluated = not_evaluated
        self._note = note
        if finding is None and note:
            self._body.update(Text(note, style="bold"))
            return
        if finding is not None:
            self._body.update(finding_renderable(finding, self._lookup(finding.code)))
            if not same_finding:  # fresh numbers for the same finding must not yank the reader back up
                self.scroll_home(animate=False)
            return
        text = Text("No findings so far.", style="bold")
        text.append("\nLive rules are judged every window; press p to profile a few steps for the "
                    "trace-based diagnosis (precision, host syncs, launch overhead).")
        if not_evaluated:
            text.append("\n\nNot evaluated (evidence missing):", style="bold")
            for item in not_evaluated:
                text.append(f"\n{item.code} {item.name}: needs {needs_in_words(item.needs)}")
        self._body.update(text)
