"""Writes what the dashboard shows to files: one Markdown and one JSON report, side by side.

Why it exists: an engineer who found the problem on a cluster node wants to paste it into a ticket.
It turns a live snapshot into a :class:`Report` (no new numbers: the snapshot's findings, notes and
rank rows) and leaves all formatting to :func:`gpudoctor.report.render`. It never touches the UI.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.live.samples import Snapshot
from gpudoctor.model import sort_findings
from gpudoctor.report import render
from gpudoctor.report.model import MetricTable, Report
from gpudoctor.tui.widgets.tables import rank_columns


@dataclass(frozen=True)
class ExportResult:
    markdown_path: Path
    json_path: Path


def snapshot_report(snapshot: Snapshot) -> Report:
    """The report of a live snapshot, exactly as ``attach --once`` builds it (when that module is there)."""
    try:
        from gpudoctor.live.report import build_report
    except ImportError:
        return _plain_report(snapshot)
    return build_report(snapshot, elapsed_s=round(snapshot.timestamp - snapshot.started_at, 1))


def _plain_report(snapshot: Snapshot) -> Report:
    tables = []
    if snapshot.rank_table:
        rows = [dict(r) for r in snapshot.rank_table]
        tables.append(MetricTable("Ranks", rank_columns(rows), rows, key="ranks"))
    return Report(
        command="attach",
        inputs=[f"pid {snapshot.target_pid}"],
        findings=list(snapshot.findings),
        not_evaluated=list(snapshot.not_evaluated),
        tables=tables,
        notes=list(snapshot.notes),
        elapsed_s=round(snapshot.timestamp - snapshot.started_at, 1),
    )


def export_report(report: Report, directory: Path, stem: str | None = None) -> ExportResult:
    """Write ``<stem>.md`` and ``<stem>.json`` into ``directory``.

    Raises:
        UserError: the directory cannot be written (one sentence, what to do).
    """
    stem = stem or f"gpudoctor-{report.command}-{time.strftime('%Y%m%d-%H%M%S')}"
    md_path, json_path = directory / f"{stem}.md", directory / f"{stem}.json"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with md_path.open("w", encoding="utf-8") as stream:
            render(report, "markdown", stream)
        with json_path.open("w", encoding="utf-8") as stream:
            render(report, "json", stream)
    except OSError as exc:
        raise UserError(f"cannot write the report to {directory}: {exc.strerror}; "
                        "start gpudoctor from a writable directory.", ExitCode.USAGE) from None
    return ExportResult(md_path.resolve(), json_path.resolve())


def exit_summary(snapshot: Snapshot | None, exported: tuple[Path, Path] | None = None,
                 job_stops: str | None = None) -> str:
    """One paragraph for the terminal after the dashboard closes: what was watched, the finding to fix
    first with its estimate and fix, where an export went, and the next command. ``job_stops``: what
    happens to a job the caller owns and ends on quit (the demo's example), said instead of "the job keeps
    running" and its ``attach`` hint."""
    if snapshot is None:
        return "gpudoctor: detached before the first sample; " + (job_stops or "the job keeps running.")
    pid = snapshot.target_pid
    watched = round(snapshot.timestamp - snapshot.started_at)
    running = snapshot.process.alive if snapshot.process is not None else True
    alive = running and job_stops is None
    text = f"gpudoctor: watched pid {pid} for {watched} s; " + (
        "the job has exited." if not running else job_stops or "detached, the job keeps running.")
    findings = sort_findings(list(snapshot.findings))
    if findings:
        top = findings[0]
        gain = f" (fix est. {top.impact.describe().removeprefix('est. ')})" if top.impact is not None else ""
        others = f"; {len(findings) - 1} more finding(s)" if len(findings) > 1 else ""
        text += (f" Fix first: {top.severity.value.upper()} {top.code} {top.name} — {top.title}{gain}. "
                 f"{top.fix.summary.rstrip('.')}{others}.")
    else:
        text += " No finding while watched."
    if exported is not None:
        text += f" Exported: {exported[0]} and {exported[1]}."
    if alive:
        text += f" Next: `gpudoctor attach {pid} --once` for a report, or `gpudoctor explain CODE` for a rule."
    elif job_stops is not None and running:
        text += (" Next: `gpudoctor run -- python train.py` (or `gpudoctor attach PID`) on your own job, or "
                 "`gpudoctor explain CODE` for a rule.")
    return text
