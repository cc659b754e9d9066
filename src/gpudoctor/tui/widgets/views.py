"""The two main layouts: the live dashboard and the trace browser.

Why it exists: ``attach``/``run``/``demo`` and ``analyze --tui`` show the same findings list and detail
pane around different evidence (live panels vs. per-rank / per-step tables). Each view takes data
through one ``show`` method and lays widgets out; it never polls, parses or judges.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from gpudoctor.live.samples import Snapshot
from gpudoctor.model import Finding
from gpudoctor.report.model import Report
from gpudoctor.tui.history import SnapshotHistory
from gpudoctor.tui.widgets.bottleneck_panel import BottleneckPanel
from gpudoctor.tui.widgets.detail import FindingDetail, SectionLookup
from gpudoctor.tui.widgets.findings import FindingsList
from gpudoctor.tui.widgets.gpu_panel import GpuPanel
from gpudoctor.tui.widgets.header import StatusHeader
from gpudoctor.tui.widgets.process_panel import ProcessPanel
from gpudoctor.tui.widgets.step_panel import StepPanel
from gpudoctor.tui.widgets.tables import MetricGrid, rank_columns


class FindingsArea(Horizontal):
    """Findings list beside (or, on narrow terminals, above) the detail pane."""

    def __init__(self, lookup: SectionLookup, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._lookup = lookup

    def compose(self) -> ComposeResult:
        findings = FindingsList(id="findings")
        findings.border_title = "Findings"
        yield findings
        detail = FindingDetail(self._lookup, id="detail")
        detail.border_title = "Detail"
        yield detail


class LiveView(Vertical):
    """Header, GPU panel, step and process panels, rank table, findings and detail."""

    def __init__(self, lookup: SectionLookup, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._lookup = lookup

    def compose(self) -> ComposeResult:
        yield StatusHeader("waiting for the first sample…", id="header")
        yield BottleneckPanel(id="bottleneck")
        gpus = GpuPanel(id="gpus")
        gpus.border_title = "GPU"
        yield gpus
        with Horizontal(id="host-row"):
            steps = StepPanel(id="steps")
            steps.border_title = "Steps"
            steps.border_subtitle = "sparkline: steps/s, oldest left"
            yield steps
            process = ProcessPanel(id="process")
            process.border_title = "Process · /dev/shm"
            yield process
        ranks = MetricGrid(id="ranks")
        ranks.border_title = "Ranks"
        ranks.display = False
        yield ranks
        yield FindingsArea(self._lookup, id="findings-area")

    def show(self, snapshot: Snapshot, history: SnapshotHistory, rank: int | None,
             findings: list[Finding]) -> None:
        """Show one snapshot; ``findings`` are the ones to list (already filtered by rank)."""
        self.query_one(StatusHeader).show_snapshot(snapshot, rank)
        self.query_one(BottleneckPanel).show(snapshot.bottleneck)
        self.query_one(GpuPanel).show(snapshot.gpus, history, snapshot.notes)
        self.query_one(StepPanel).show(snapshot.steps, snapshot.agent, history)
        self.query_one(ProcessPanel).show(snapshot.process, snapshot.shm)
        ranks = self.query_one("#ranks", MetricGrid)
        ranks.display = len(snapshot.rank_table) > 1
        if ranks.display:
            rows = [dict(r) for r in snapshot.rank_table]
            ranks.show(rank_columns(rows), rows)
            selected = next((i for i, r in enumerate(rows) if rank is not None and r.get("rank") == rank), None)
            ranks.show_cursor = selected is not None
            if selected is not None:
                ranks.move_cursor(row=selected)
        self.query_one(FindingsList).set_findings(findings)


class TraceView(Vertical):
    """Header, one breakdown table at a time (``t`` cycles), findings and detail."""

    def __init__(self, lookup: SectionLookup, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._lookup = lookup
        self.table_index = 0

    def compose(self) -> ComposeResult:
        yield StatusHeader("", id="header")
        yield BottleneckPanel(id="bottleneck")
        yield MetricGrid(id="breakdown")
        yield FindingsArea(self._lookup, id="findings-area")

    def show(self, report: Report) -> None:
        self.query_one(StatusHeader).show_report(report)
        self.query_one(BottleneckPanel).show(report.bottleneck, "the traces have no ProfilerStep#N steps")
        grid = self.query_one("#breakdown", MetricGrid)
        grid.display = bool(report.tables)
        if report.tables:
            self.table_index %= len(report.tables)
            table = report.tables[self.table_index]
            grid.show_table(table)
            if len(report.tables) > 1:
                grid.border_subtitle = f"table {self.table_index + 1}/{len(report.tables)} · t: next"
        self.query_one(FindingsList).set_findings(report.findings)
