"""The compiler-style view of a ``check`` report: ``path:line:col: GD### message``, one per line.

Editors, terminals and CI logs turn this shape into clickable links (flake8, ruff and TorchFix use
it). Lines are grouped by file; on a terminal the code is coloured by severity. Renderers only
format; they never compute anything.
"""

from __future__ import annotations

import os
from typing import TextIO

from gpudoctor.catalog.impact import needs_in_words
from gpudoctor.model import Finding, Severity
from gpudoctor.report.model import Report
from gpudoctor.report.tables import plain_lines

_COLORS = {Severity.CRITICAL: "\033[1;31m", Severity.WARNING: "\033[1;33m", Severity.INFO: "\033[1;36m"}
_DIM, _BOLD, _RESET = "\033[2m", "\033[1m", "\033[0m"


def finding_line(finding: Finding, color: bool = False) -> str:
    """``path:line:col: GD301 [warning] message`` (the location part is left out when there is none)."""
    where = finding.location.describe()
    tag = f"{finding.code} [{finding.severity.value}]"
    code = f"{_COLORS[finding.severity]}{tag}{_RESET}" if color else tag
    place = f"{_BOLD}{where}{_RESET}" if color and where else where
    return f"{place}: {code} {finding.message}" if where else f"{code} {finding.message}"


def write_lines(report: Report, out: TextIO, color: bool | None = None) -> None:
    """Write every finding as one line, files in order, a blank line between files, then a summary."""
    if color is None:
        color = hasattr(out, "isatty") and out.isatty() and not os.environ.get("NO_COLOR")
    findings = sorted(report.findings, key=lambda f: (f.location.path or "", f.location.line or 0,
                                                      f.location.col or 0, f.code))
    previous: str | None = None
    for finding in findings:
        path = finding.location.path or ""
        if previous is not None and path != previous:
            out.write("\n")
        previous = path
        out.write(finding_line(finding, color) + "\n")
    for table in report.tables:
        out.write(f"\n{table.title}\n" if previous is not None else f"{table.title}\n")
        previous = ""
        for line in plain_lines(table):
            out.write(f"  {line}\n")
    for item in report.not_evaluated:
        text = f"{item.code} {item.name} not evaluated: needs {needs_in_words(item.needs)}"
        out.write(f"{_DIM}{text}{_RESET}\n" if color else text + "\n")
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in Severity}
    summary = (f"{len(report.findings)} finding(s): {counts[Severity.CRITICAL]} critical, "
               f"{counts[Severity.WARNING]} warning, {counts[Severity.INFO]} info")
    if report.elapsed_s is not None:
        summary += f" in {report.elapsed_s:.2f} s"
    out.write(("\n" if report.findings else "") + summary + "\n")
    for note in report.notes:
        out.write(f"note: {note}\n")
