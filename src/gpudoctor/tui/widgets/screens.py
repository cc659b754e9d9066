"""Modal screens: help, the stacks view, a full-size fix, and the findings filter prompt.

Why it exists: these overlay the dashboard without stopping it (samples keep arriving underneath).
They display what they are given and post nothing but their own dismissal.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gpudoctor.live.samples import StackSample
from gpudoctor.model import Finding
from gpudoctor.tui.widgets.detail import fix_renderables

HELP_TEXT = """\
[b]gpudoctor dashboard[/b]

  [b]↑ ↓[/b] / mouse   choose a finding; its evidence and fix show on the right
  [b]f[/b], [b]enter[/b]     open the fix full size (before → after)
  [b]p[/b]            profile the next steps with torch.profiler (findings update when analysed)
  [b]s[/b]            stacks: where the training thread spends its time (py-spy)
  [b]e[/b]            export the report (Markdown + JSON) to files
  [b]r[/b]            switch rank (several ranks only)
  [b]t[/b]            next table (analyze: per-rank / per-step breakdowns)
  [b]/[/b]            filter findings (words match code, name, message); empty clears
  [b]?[/b]            this help
  [b]q[/b]            quit — detaches; the training job keeps running

Press any key to close."""


class _Modal(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss_screen", "close", show=False)]
    DEFAULT_CSS = """
    _Modal { align: center middle; }
    _Modal > .modal-box {
        width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    """

    def action_dismiss_screen(self) -> None:
        self.dismiss(None)


class HelpScreen(_Modal):
    """The key list."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box"):
            yield Static(HELP_TEXT)

    def on_key(self) -> None:
        self.dismiss(None)


def stacks_table(stacks: StackSample | None) -> Table | Text:
    """Activity shares and the most frequent leaf frames of the training thread."""
    if stacks is None or not stacks.samples:
        return Text("No stack samples yet (py-spy needs ptrace rights on the target).", style="dim")
    table = Table(box=None, expand=True, header_style="bold")
    table.add_column("where the main thread is", ratio=1)
    table.add_column("share", justify="right", width=7)
    for name, share in sorted(stacks.share_pct.items(), key=lambda kv: -kv[1]):
        table.add_row(Text(name, style="bold"), f"{share:.0f}%")
    if stacks.top_frames:
        table.add_row("", "")
        table.add_row(Text("top frames", style="bold"), "")
        for frame, share in stacks.top_frames:
            table.add_row(frame, f"{share:.0f}%")
    table.caption = f"{stacks.samples} samples over {stacks.window_s:.0f}s"
    return table


class StacksScreen(_Modal):
    """The stacks view: py-spy samples of the training thread, refreshed by the app."""

    def __init__(self, stacks: StackSample | None) -> None:
        super().__init__()
        self._stacks = stacks

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box"):
            yield Static(Text("Stacks (s or esc to close)", style="bold"))
            yield Static(stacks_table(self._stacks), id="stacks-body")

    def show(self, stacks: StackSample | None) -> None:
        self._stacks = stacks
        self.query_one("#stacks-body", Static).update(stacks_table(stacks))

    BINDINGS = [*_Modal.BINDINGS, Binding("s", "dismiss_screen", "close", show=False)]


class FixScreen(_Modal):
    """One finding's fix, full size; before and after side by side when wide enough."""

    def __init__(self, finding: Finding) -> None:
        super().__init__()
        self.finding = finding

    def compose(self) -> ComposeResult:
        title = Text(f"{self.finding.code} {self.finding.name} — fix", style="bold")
        # side by side only when the longest line fits half the box: a wrapped line goes back to
        # column 0 mid-expression (seen at 160 columns), which reads worse than the two stacked
        fix = self.finding.fix
        longest = max((len(line) for code in (fix.before, fix.after) for line in code.splitlines()), default=0)
        box = min(int(self.app.size.width * 0.9), 120) - 4       # .modal-box: 90%, at most 120, border + padding
        wide = longest <= (box - 2) // 2 - 1                       # two columns, 2 apart
        with VerticalScroll(classes="modal-box", id="fix-box"):
            yield Static(title)
            for renderable in fix_renderables(self.finding.fix, side_by_side=wide):
                yield Static(renderable)


class FilterScreen(ModalScreen[str]):
    """A one-line prompt; returns the filter text (empty clears it)."""

    BINDINGS = [Binding("escape", "cancel", "cancel", show=False)]
    DEFAULT_CSS = """
    FilterScreen { align: center bottom; }
    FilterScreen > Vertical { height: 3; width: 100%; background: $surface; }
    """

    def __init__(self, current: str) -> None:
        super().__init__()
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(value=self._current, placeholder="filter findings (e.g. GD102, memory, critical)",
                        id="filter-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(self._current)
