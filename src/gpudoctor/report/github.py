"""GitHub Actions workflow-command output: one ``::error``/``::warning``/``::notice`` per finding.

GitHub turns these lines into annotations on the pull request's diff. Values are escaped as the
runner expects (``%``, CR, LF in data; also ``:`` and ``,`` in properties). Only formats.
"""

from __future__ import annotations

from typing import TextIO

from gpudoctor.model import Finding, Severity
from gpudoctor.report.model import Report

COMMANDS = {Severity.CRITICAL: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    """``::warning file=train.py,line=12,col=5,title=GD301 host-sync-in-step::message``."""
    props = []
    loc = finding.location
    if loc.path:
        props.append(f"file={_escape_property(loc.path)}")
        if loc.line:
            props.append(f"line={loc.line}")
            if loc.col:
                props.append(f"col={loc.col}")
    props.append(f"title={_escape_property(f'{finding.code} {finding.name}')}")
    message = finding.message if loc.path else f"{loc.describe()}: {finding.message}" if loc.describe() \
        else finding.message
    return f"::{COMMANDS[finding.severity]} {','.join(props)}::{_escape_data(message)}"


def write_github(report: Report, out: TextIO) -> None:
    for finding in report.findings:
        out.write(annotation(finding) + "\n")
