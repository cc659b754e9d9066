"""The Textual app: wires views, key bindings and workers — nothing else.

Why it exists: ``attach``/``run``/``demo`` call :func:`run_dashboard` with a live session, and
``analyze --tui`` calls :func:`run_trace_browser` with a finished report. Every blocking call
(session snapshot, profile request, export) runs in a thread worker that only posts messages;
frequent snapshot messages replace each other, so a slow terminal never builds a backlog. It must
not compute metrics or judge rules (the session and the engine do) and never kills the target.

Signals: Ctrl-C in the dashboard is a key (the terminal is raw): it calls ``on_interrupt`` (``run``
passes SIGINT to its command there, once) and leaves like ``q``, with exit status 130. A SIGINT,
SIGTERM or SIGHUP sent to gpudoctor while the dashboard runs goes first to the handler that was in
place (``run``'s relay passes it to the command), then the app detaches and leaves the same way: never a
KeyboardInterrupt inside the event loop, and never a second signal to the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Footer
from textual.worker import Worker, WorkerState, get_current_worker

from gpudoctor.catalog import Catalog, load_catalog
from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.live.samples import Snapshot
from gpudoctor.report.model import Report
from gpudoctor.tui.export import exit_summary, export_report, snapshot_report
from gpudoctor.tui.history import SnapshotHistory
from gpudoctor.tui.protocol import DashboardSession
from gpudoctor.tui.widgets.detail import FindingDetail
from gpudoctor.tui.widgets.findings import FindingsList
from gpudoctor.tui.widgets.header import StatusHeader
from gpudoctor.tui.widgets.screens import FilterScreen, FixScreen, HelpScreen, StacksScreen
from gpudoctor.tui.widgets.views import LiveView, TraceView

log = logging.getLogger("gpudoctor.tui")


class SnapshotArrived(Message):
    """A new snapshot from the poll worker; a newer one replaces an unhandled older one."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotArrived)


class GpudoctorApp(App[int]):
    """The dashboard (``session`` given) or the trace browser (``report`` given)."""

    CSS_PATH = "gpudoctor.tcss"
    TITLE = "gpudoctor"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]
    BINDINGS = [
        Binding("f", "open_fix", "fix"),   # first: the key that reaches the fix (enter does too, unnamed)
        Binding("p", "profile", "profile"),
        Binding("s", "stacks", "stacks"),
        Binding("e", "export", "export"),
        Binding("r", "rank", "rank"),
        Binding("t", "next_table", "table"),
        Binding("slash", "filter", "filter", key_display="/"),
        Binding("enter", "open_fix", "fix", show=False),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "interrupt", "interrupt", show=False, priority=True),
    ]

    def __init__(self, session: DashboardSession | None = None, report: Report | None = None, *,
                 catalog: Catalog | None = None, refresh_s: float = 1.0, profile_steps: int = 5,
                 export_dir: Path | None = None, on_interrupt: Callable[[], None] | None = None) -> None:
        super().__init__()
        if (session is None) == (report is None):
            raise ValueError("give exactly one of session or report")
        self.session, self.report = session, report
        self.refresh_s, self.profile_steps = refresh_s, profile_steps
        self.export_dir = export_dir or Path.cwd()
        self._catalog = catalog
        self.history = SnapshotHistory()
        self.latest: Snapshot | None = None
        self.rank: int | None = None
        self.last_export: tuple[Path, Path] | None = None
        self._stop = threading.Event()
        self._errors_seen: set[str] = set()
        self._detached = False
        self.on_interrupt = on_interrupt
        self.signalled: int | None = None       # the signal that ended the app, if one did
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        if self.session is not None:
            yield LiveView(self._sections, id="view")
        else:
            yield TraceView(self._sections, id="view")
        # every key in 80 columns: compact, and the command palette (ctrl+p still opens it) left unnamed
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.signalled is not None:      # a signal came while the app started
            self.call_later(self._leave, int(ExitCode.INTERRUPTED))
        self.query_one(FindingsList).focus()
        if self.report is not None:
            self.query_one(TraceView).show(self.report)
            return
        history = getattr(self.session, "history", None)
        if callable(history):
            self.history.extend(history())
        self.poll()

    def on_unmount(self) -> None:
        self._stop.set()

    def _sections(self, code: str) -> dict[str, str] | None:
        if self._catalog is None:
            self._catalog = load_catalog()
        rule = self._catalog.get(code)
        return dict(rule.sections) if rule is not None else None

    # ---- workers ------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def poll(self) -> None:
        """Ask the session for a snapshot every ``refresh_s`` until the app stops."""
        worker = get_current_worker()
        assert self.session is not None
        while not worker.is_cancelled and not self._stop.is_set():
            try:
                self.post_message(SnapshotArrived(self.session.snapshot()))
            except Exception as exc:  # the session failed once: say so, keep the last data, keep trying
                self.call_from_thread(self._problem, f"live data: {exc}")
            self._stop.wait(self.refresh_s)

    @work(thread=True, exclusive=True, group="profile", exit_on_error=False)
    def run_profile(self, steps: int) -> None:
        assert self.session is not None
        result = self.session.profile(steps)
        if inspect.isawaitable(result):
            result = asyncio.run(result)  # type: ignore[arg-type]
        if isinstance(result, str) and result:
            self.call_from_thread(self.notify, result, title="profile")

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def run_export(self, report: Report) -> None:
        result = export_report(report, self.export_dir)
        self.last_export = (result.markdown_path, result.json_path)
        self.call_from_thread(self.notify, f"report written to {result.markdown_path} and {result.json_path.name}",
                              title="exported", timeout=8)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker errors become a notification."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            text = str(error) if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
            self._problem(f"{event.worker.group}: {text}")

    def _problem(self, text: str) -> None:
        if text not in self._errors_seen:
            self._errors_seen.add(text)
            self.notify(text, severity="error", timeout=10)

    # ---- data in ------------------------------------------------------------------------------
    def on_snapshot_arrived(self, message: SnapshotArrived) -> None:
        snapshot = message.snapshot
        self.latest = snapshot
        self.history.add(snapshot)
        findings = [f for f in snapshot.findings
                    if self.rank is None or f.location.rank in (None, self.rank)]
        try:
            view = self.query_one(LiveView)
            view.query_one(StatusHeader)
        except NoMatches:
            return  # the app is shutting down (or not yet composed): nothing to draw on
        view.show(snapshot, self.history, self.rank, findings)
        if isinstance(self.screen, StacksScreen):
            self.screen.show(snapshot.stacks)

    def on_findings_list_chosen(self, message: FindingsList.Chosen) -> None:
        not_evaluated = self.latest.not_evaluated if self.latest is not None else ()
        if self.report is not None:
            not_evaluated = tuple(self.report.not_evaluated)
        for detail in self.query(FindingDetail):  # none while shutting down
            detail.show(message.finding, not_evaluated, message.note)

    def on_data_table_row_selected(self, event: FindingsList.RowSelected) -> None:
        if isinstance(event.data_table, FindingsList):
            self.action_open_fix()

    # ---- actions ------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        live_only = {"profile", "stacks", "rank"}
        if action in live_only and self.session is None:
            return False
        return not (action == "next_table" and (self.report is None or len(self.report.tables) < 2))

    def action_profile(self) -> None:
        self.run_profile(self.profile_steps)

    def action_stacks(self) -> None:
        self.push_screen(StacksScreen(self.latest.stacks if self.latest else None))

    def action_export(self) -> None:
        if self.report is not None:
            self.run_export(self.report)
        elif self.latest is not None:
            self.run_export(snapshot_report(self.latest))
        else:
            self.notify("nothing to export yet: no sample has arrived", severity="warning")

    def action_rank(self) -> None:
        """Cycle all ranks → rank 0 → rank 1 … : findings of other ranks are hidden, its row highlighted."""
        rows = self.latest.rank_table if self.latest else ()
        ranks = [row["rank"] for row in rows if isinstance(row.get("rank"), int)]
        if len(ranks) < 2:
            self.notify("only one rank is watched")
            return
        order: list[int | None] = [None, *ranks]
        self.rank = order[(order.index(self.rank) + 1) % len(order)] if self.rank in order else None
        select: Callable[[int], None] | None = getattr(self.session, "select_rank", None)
        if callable(select) and self.rank is not None:
            select(self.rank)
        self.notify("showing all ranks" if self.rank is None else f"showing rank {self.rank}", timeout=2)
        if self.latest is not None:
            self.post_message(SnapshotArrived(self.latest))

    def action_next_table(self) -> None:
        view = self.query_one(TraceView)
        view.table_index += 1
        assert self.report is not None
        view.show(self.report)

    def action_filter(self) -> None:
        findings = self.query_one(FindingsList)
        self.push_screen(FilterScreen(findings.query_text), findings.set_filter)

    def action_open_fix(self) -> None:
        current = self.query_one(FindingsList).current
        if current is not None:
            self.push_screen(FixScreen(current))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        """Stop polling, detach (the target keeps running) and leave."""
        self._leave(int(ExitCode.OK))

    def action_interrupt(self) -> None:
        """Ctrl-C: ``on_interrupt`` (``run`` sends its command SIGINT, once), then leave with 130."""
        if self.on_interrupt is not None and self.signalled is None:
            self.on_interrupt()
        self.signalled = self.signalled or int(signal.SIGINT)
        self._leave(int(ExitCode.INTERRUPTED))

    def stop_on_signal(self, signum: int) -> None:
        """Called from a signal handler (the main thread, perhaps inside the event loop): leave soon."""
        first = self.signalled is None
        self.signalled = self.signalled or signum
        if first and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._leave, int(ExitCode.INTERRUPTED))

    def _leave(self, code: int) -> None:
        self._stop.set()
        self.detach()
        self.exit(code)

    def detach(self) -> None:
        """Close the session once; a failure to detach is logged, never raised at the user."""
        if self.session is None or self._detached:
            return
        self._detached = True
        try:
            self.session.close()
        except Exception as exc:
            log.warning("detaching from pid failed: %s", exc)


def run_dashboard(session: DashboardSession, job_stops: str | None = None, **options: object) -> int:
    """Open the dashboard on a live session; detach (never kill) on quit, Ctrl-C or a signal, then print
    the exit summary wrapped to the terminal (``job_stops``: see :func:`exit_summary`).
    Returns an exit status (130 after Ctrl-C or a signal)."""
    import shutil
    import textwrap

    app = GpudoctorApp(session=session, **options)  # type: ignore[arg-type]
    try:
        with _leave_on_signals(app):
            result = app.run()
    finally:
        app.detach()  # also when the app stopped another way (a crash)
    summary = exit_summary(app.latest, app.last_export, job_stops)
    width = shutil.get_terminal_size((100, 24)).columns
    print(textwrap.fill(summary, width=max(40, width - 1), break_long_words=False, break_on_hyphens=False),
          file=sys.stderr)
    if app.signalled is not None:
        return int(ExitCode.INTERRUPTED)
    return int(result if result is not None else ExitCode.OK)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _leave_on_signals(app: GpudoctorApp) -> Iterator[None]:
    """While the app runs: SIGINT/SIGTERM/SIGHUP go to the handler in place before (``run``'s relay,
    which passes them to the command; a KeyboardInterrupt it raises is dropped), then the app leaves."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {int(signum): signal.getsignal(signum) for signum in STOP_SIGNALS}

    def handler(signum: int, frame: FrameType | None) -> None:
        before = previous.get(signum)
        if callable(before) and before is not signal.default_int_handler:
            with contextlib.suppress(KeyboardInterrupt):
                before(signum, frame)
        app.stop_on_signal(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old if old is not None else signal.SIG_DFL)


def run_trace_browser(report: Report, **options: object) -> int:
    """Browse a finished trace analysis (``analyze --tui``). Returns an exit status."""
    app = GpudoctorApp(report=report, **options)  # type: ignore[arg-type]
    result = app.run()
    return int(result if result is not None else ExitCode.OK)
