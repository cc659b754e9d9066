"""Turns a :class:`Report` into terminal text, JSON or Markdown.

The JSON shape is documented in docs/json-schema.md and is a stable interface (CI scripts read it).
Renderers only format; they never compute metrics.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from gpudoctor import __version__
from gpudoctor.catalog.impact import needs_in_words
from gpudoctor.model import Finding, Severity
from gpudoctor.numbers import count, plain
from gpudoctor.report import tables
from gpudoctor.report.grouping import FindingGroup, group_findings, no_gain_line, split_no_gain
from gpudoctor.report.model import MetricTable, Report
from gpudoctor.report.stepbar import STYLE, legend, legend_text, plain_bar, segments
from gpudoctor.report.verdict import verdict_note

FORMATS = ("text", "json", "markdown")
SCHEMA_VERSION = 1

_SEVERITY_STYLE = {Severity.CRITICAL: "bold white on red", Severity.WARNING: "bold black on yellow",
                   Severity.INFO: "bold white on blue"}


def render(report: Report, fmt: str, stream: TextIO | None = None, color: bool | None = None) -> None:
    """Write ``report`` to ``stream`` (stdout by default) in ``fmt`` (text | json | markdown)."""
    out = stream or sys.stdout
    if fmt == "json":
        out.write(to_json(report) + "\n")
    elif fmt == "markdown":
        out.write(to_markdown(report))
    elif fmt == "text":
        _render_text(report, out, color)
    else:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def to_dict(report: Report) -> dict[str, Any]:
    counts = {s.value: sum(1 for f in report.findings if f.severity == s) for s in Severity}
    return {
        "gpudoctor": __version__,
        "schema": SCHEMA_VERSION,
        "command": report.command,
        "inputs": list(report.inputs),
        "summary": {"findings": len(report.findings), **counts, "not_evaluated": len(report.not_evaluated),
                    "headline": _summary_sentence(report),
                    "verdict_note": verdict_note(report.bottleneck, report.findings) or None},
        "bottleneck": report.bottleneck.to_dict() if report.bottleneck is not None else None,
        "bottlenecks": [b.to_dict() for b in report.bottlenecks],
        "findings": [f.to_dict() for f in report.findings],
        "not_evaluated": [n.to_dict() for n in report.not_evaluated],
        "tables": [{"title": t.title, "key": t.key, "columns": t.columns, "rows": t.rows} for t in report.tables],
        "notes": list(report.notes),
        "elapsed_s": report.elapsed_s,
        **report.data,
    }


def to_json(report: Report) -> str:
    return json.dumps(to_dict(report), indent=2, default=_json_default, allow_nan=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "value"):
        return value.value
    return str(value)


def _fmt(value: Any) -> str:
    return plain(value)


def impact_line(finding: Finding) -> str:
    """``est. 1.49–1.63× · costs 11.1 ms/step (51%) — <basis>``, or why there is no estimate."""
    if finding.impact is not None:
        return f"{finding.impact.describe()} — {finding.impact.basis}"
    return f"no estimate: {note_text(finding.impact_note)}" if finding.impact_note else ""


def note_text(note: str) -> str:
    """An impact note without a leading ``no estimate:`` of its own (the views say it once)."""
    text = note.strip()
    while text.lower().startswith("no estimate:"):
        text = text[len("no estimate:"):].strip()
    return text


def sources_text(finding: Finding) -> str:
    """``trace + live`` when several sources agreed on this finding."""
    return " + ".join(s.value for s in finding.sources) if finding.also_sources else ""


def evidence_line(finding: Finding) -> str:
    facts = [f"{e.name}={_fmt(e.value)}" for e in finding.evidence if not e.is_threshold]
    limits = [f"{e.name}={_fmt(e.value)}" for e in finding.evidence if e.is_threshold]
    text = ", ".join(facts)
    if limits:
        text += f" (thresholds: {', '.join(limits)})"
    return text


# ---------------------------------------------------------------- Markdown

def to_markdown(report: Report) -> str:
    lines = [f"# gpudoctor {report.command} report", ""]
    if report.inputs:
        lines += [f"Inputs: {', '.join(f'`{i}`' for i in report.inputs)}", ""]
    for b in _shown_bottlenecks(report):
        lines += [f"**Bottleneck:** {b.line}", "", "```", plain_bar(b), legend_text(b), "```", ""]
    if verdict_note(report.bottleneck, report.findings):
        lines += [f"*{verdict_note(report.bottleneck, report.findings)}*", ""]
    groups, quiet = split_no_gain(group_findings(report.findings))
    lines += [_summary_sentence(report, len(groups), len(quiet)), ""]
    for number, group in enumerate(groups, 1):
        f = group.lead
        where = f" — {group.where()}" if group.where() else ""
        lines += [f"## {number}. {f.severity.value.upper()} {f.code} {f.name}{where}", "", f"**{f.title}.** {f.message}", ""]
        if group.spread():
            lines += [f"Ranks: {group.spread()}", ""]
        if impact_line(f):
            lines += [f"Gain: {impact_line(f)}", ""]
        if sources_text(f):
            lines += [f"Seen by: {sources_text(f)}", ""]
        if f.evidence:
            lines += [f"Evidence: {evidence_line(f)}", ""]
        lines += [f"Fix: {f.fix.summary}", ""]
        if f.fix.before:
            lines += ["Before:", "", f"```{f.fix.language}", f.fix.before, "```", ""]
        if f.fix.after:
            lines += ["After:", "", f"```{f.fix.language}", f.fix.after, "```", ""]
    if quiet:
        lines += [no_gain_line(quiet), ""]
    for table in report.tables:
        lines += [f"## {table.title}", "", tables.markdown(table), ""]
    not_evaluated = not_evaluated_lines(report)
    if not_evaluated:
        lines += ["## Not evaluated", ""] + [f"- {n}" for n in not_evaluated] + [""]
    if report.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in tidy_notes(report.notes)] + [""]
    return "\n".join(lines)


def _shown_bottlenecks(report: Report) -> list[Any]:
    """The verdicts that lead the report: every rank's for up to four ranks, else the slowest rank's."""
    if len(report.bottlenecks) <= 4:
        return list(report.bottlenecks)
    return [report.bottleneck] if report.bottleneck is not None else []


def _summary_sentence(report: Report, cards: int | None = None, quiet: int = 0) -> str:
    if report.headline:
        return report.headline
    if not report.findings:
        return "No problems found." + (f" {count(len(report.not_evaluated), 'rule')} could not be evaluated."
                                       if report.not_evaluated else "")
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in Severity}
    parts = [f"{n} {s.value}" for s, n in sorted(counts.items(), key=lambda kv: -kv[0].rank) if n]
    folded = ""
    if cards is not None and cards + quiet < len(report.findings):
        folded = f" Shown as {count(cards, 'card')}: a rule that fires on several ranks is one card."
    elif cards is not None and quiet:
        folded = f" Shown as {count(cards, 'card')}."
    return f"{count(len(report.findings), 'finding')}: {', '.join(parts)}.{folded}"


#: A "needs" text that says the rule wants NVML: said once by the note that NVML is absent.
_NVML_NEEDS = ("NVML", "GPM metrics")


def not_evaluated_lines(report: Report) -> list[str]:
    """The rules that could not be judged, one line each, without repeats: a rule listed once per
    source and reason, and the rules that need only NVML readings folded into one line when a note
    already says NVML is absent."""
    nvml_absent = any("NVML is not available" in n for n in report.notes)
    seen: set[tuple[str, str]] = set()
    lines: list[str] = []
    nvml_codes: list[str] = []
    for n in report.not_evaluated:
        if (n.code, n.needs) in seen:
            continue
        seen.add((n.code, n.needs))
        if nvml_absent and all(any(w in part for w in _NVML_NEEDS) or not part.strip()
                               for part in n.needs.split(";")):
            nvml_codes.append(n.code)
            continue
        lines.append(f"{n.code} {n.name} [{n.source.value}]: needs {needs_in_words(n.needs)}")
    if nvml_codes:
        lines.append(f"{', '.join(dict.fromkeys(nvml_codes))}: need NVML readings, absent here (see the note on NVML)")
    return lines


def tidy_notes(notes: list[str]) -> list[str]:
    """Notes without repeats (the same note twice, or one that another already contains)."""
    out: list[str] = []
    for note in notes:
        text = note.strip()
        if text and not any(text == o or text in o for o in out):
            out = [o for o in out if o not in text] + [text]
    return out


# ---------------------------------------------------------------- terminal text (rich)

def inputs_in_words(inputs: Sequence[str]) -> str:
    """The report's inputs for its title line: one path, or a few short ones, as they are; more by the
    folder they share ("15 files under traces/hta/"), or the first three and a count when they share none."""
    listed = ", ".join(inputs)
    if len(inputs) == 1 or (len(inputs) <= 3 and len(listed) <= 70):
        return listed
    try:
        common = os.path.commonpath(inputs)
    except ValueError:  # absolute beside relative paths
        common = ""
    if common and common not in inputs:
        return f"{len(inputs)} files under {common.rstrip(os.sep)}{os.sep}"
    return ", ".join(inputs[:3]) + (f" (+{len(inputs) - 3} more)" if len(inputs) > 3 else "")


def _render_text(report: Report, out: TextIO, color: bool | None) -> None:
    from rich.console import Console
    from rich.text import Text

    is_tty = out.isatty() if hasattr(out, "isatty") else False
    no_color = bool(os.environ.get("NO_COLOR")) or color is False
    console = Console(file=out, width=None if is_tty else int(os.environ.get("COLUMNS", "80")), no_color=no_color,
                      force_terminal=bool(color) or None, highlight=False, soft_wrap=False)
    title = f"gpudoctor {report.command}"
    if report.inputs:
        title += f" · {inputs_in_words(report.inputs)}"
    console.print(Text(title, style="bold"))
    for b in _shown_bottlenecks(report):
        console.print(Text("Bottleneck: ", style="bold") + Text(b.line))
        console.print(rich_bar(b, max(20, min(console.width, 100) - 2)))
        console.print(rich_legend(b))
    note = verdict_note(report.bottleneck, report.findings)
    if note:
        console.print(Text(note, style="italic"))
    groups, quiet = split_no_gain(group_findings(report.findings))
    console.print(_summary_sentence(report, len(groups), len(quiet)))
    console.print()
    for number, group in enumerate(groups, 1):
        console.print(_card(number, group))
    if quiet:
        console.print(Text(no_gain_line(quiet), style="dim"))
        console.print()
    for table in report.tables:
        console.print(_rich_table(table, console.width))
        console.print()
    not_evaluated = not_evaluated_lines(report)
    if not_evaluated:
        console.print(Text("Not evaluated (evidence missing):", style="bold"))
        for line in not_evaluated:
            console.print(_hanging("  ", line, console.width, indent=4), style="dim")
        console.print()
    for note in tidy_notes(report.notes):
        console.print(_hanging("note: ", note, console.width), style="dim")


def _hanging(prefix: str, text: str, width: int, indent: int | None = None) -> Any:
    """``prefix + text`` wrapped to ``width`` with its continuation lines indented (under the text, or by
    ``indent``), not back at column 0; a long path stays whole."""
    import textwrap

    from rich.text import Text

    lines = textwrap.wrap(text, width=max(20, width), initial_indent=prefix,
                          subsequent_indent=" " * (len(prefix) if indent is None else indent),
                          break_long_words=False, break_on_hyphens=False)
    return Text("\n".join(lines), no_wrap=True, overflow="ignore")


def _card(number: int, group: FindingGroup) -> Any:
    """One finding group as a rich panel."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    f = group.lead
    head = Text()
    head.append(f"{number}. ", style="bold")
    head.append(f" {f.severity.value.upper()} ", style=_SEVERITY_STYLE[f.severity])
    head.append(f" {f.code} {f.name}", style="bold")
    if group.where():
        head.append(f"  {group.where()}", style="dim")
    parts: list[Any] = [Text(f"{f.title}. ", style="bold") + Text(f.message)]
    if group.spread():
        parts.append(Text("Ranks: ", style="bold") + Text(group.spread()))
    if f.impact is not None:
        parts.append(Text("Gain: ", style="bold cyan") + Text(f.impact.describe(), style="bold")
                     + Text(f" — {f.impact.basis}"))
    elif f.impact_note:
        parts.append(Text("Gain: ", style="bold cyan") + Text(impact_line(f), style="dim"))
    if sources_text(f):
        parts.append(Text("Seen by: ", style="bold") + Text(sources_text(f)))
    if f.evidence:
        parts.append(Text("Evidence: ", style="bold") + Text(evidence_line(f)))
    parts.append(Text("Fix: ", style="bold green") + Text(f.fix.summary))
    for label, code in (("before", f.fix.before), ("after", f.fix.after)):
        if code:
            parts.append(Text(label, style="dim"))
            parts.append(Syntax(code, f.fix.language or "python", theme="ansi_dark", word_wrap=True,
                                background_color="default"))
    return Panel(Group(*parts), title=head, title_align="left", border_style="dim", expand=True)


def rich_bar(bottleneck: Any, width: int) -> Any:
    """The step-time bar as coloured rich text (the dashboard draws the same)."""
    from rich.text import Text

    bar = Text()
    for name, cells in segments(bottleneck, width):
        fill, style = STYLE[name]
        bar.append(fill * cells, style=style)
    return bar


def rich_legend(bottleneck: Any) -> Any:
    """The bar's legend as rich text: each part's fill in its colour, its ms per step and share."""
    from rich.text import Text

    out = Text()
    for k, (name, label, ms, pct) in enumerate(legend(bottleneck)):
        fill, style = STYLE[name]
        if k:
            out.append(" · ", style="dim")
        out.append(fill, style=style)
        out.append(f" {label} {ms:.1f} ms ({pct:.0f}%)")
    return out


def _fitted_headers(shape: tables.Layout, width: int) -> list[str]:
    """Column names that fit ``width``: as they are where the table fits, else broken after an
    underscore onto lines no wider than the column's cells (``step_time_`` / ``p50_ms``), never inside
    a word as rich's fold would."""
    cells = [max((len(row[i]) for row in shape.rows), default=0) for i in range(len(shape.header))]
    if sum(max(len(h), c) for h, c in zip(shape.header, cells)) + 2 * (len(cells) - 1) <= width:
        return list(shape.header)
    out: list[str] = []
    for header, cell in zip(shape.header, cells):
        parts = [p + "_" for p in header.split("_")]
        parts[-1] = parts[-1][:-1]
        budget = max(cell, 6, max(len(p) for p in parts))
        lines = [""]
        for part in parts:
            if lines[-1] and len(lines[-1]) + len(part) > budget:
                lines.append("")
            lines[-1] += part
        out.append("\n".join(lines))
    return out


def _rich_table(table: MetricTable, width: int) -> Any:
    """A rich table drawn from :func:`gpudoctor.report.tables.layout`."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    shape = tables.layout(table, width)
    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, text in zip(_fitted_headers(shape, width), shape.text_columns):
        t.add_column(col, justify="left" if text else "right", overflow="fold")
    for row in shape.rows:
        t.add_row(*row)
    return Group(Text(table.title, style="bold"), t)
