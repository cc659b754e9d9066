"""SARIF 2.1.0 output for ``gpudoctor check``: what GitHub code scanning and IDEs ingest.

Rule metadata (short and full description, help with the fix, default level, options) comes from
the rule files through :meth:`Rule.to_dict`, like every other view. Only formats; computes nothing.
A test validates the output against the OASIS schema vendored in tests/data/static/.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any, TextIO

from gpudoctor import __version__
from gpudoctor.catalog import Catalog
from gpudoctor.model import Finding, Severity
from gpudoctor.report.model import Report

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {Severity.CRITICAL: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
INFO_URI = "https://github.com/gpudoctor/gpudoctor"


def _rule_descriptor(rule_dict: dict[str, Any]) -> dict[str, Any]:
    fix = rule_dict["fix"]
    explanation = rule_dict["explanation"]
    markdown = "\n\n".join(f"## {heading}\n\n{text}" for heading, text in explanation.items() if text)
    return {
        "id": rule_dict["code"],
        "name": rule_dict["name"],
        "shortDescription": {"text": rule_dict["title"]},
        "fullDescription": {"text": rule_dict["summary"] or rule_dict["title"]},
        "help": {"text": fix["summary"] or rule_dict["title"], "markdown": markdown},
        "defaultConfiguration": {"level": LEVELS[Severity(rule_dict["severity"])]},
        "properties": {"family": rule_dict["family"], "sources": rule_dict["sources"],
                       "options": rule_dict["options"], "tags": ["performance", rule_dict["family"]]},
    }


def _result(finding: Finding, index: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "level": LEVELS[finding.severity],
        "message": {"text": finding.message},
    }
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    loc = finding.location
    if loc.path:
        region: dict[str, int] = {}
        if loc.line:
            region["startLine"] = loc.line
            if loc.col:
                region["startColumn"] = loc.col
        physical: dict[str, Any] = {"artifactLocation": {"uri": PurePath(loc.path).as_posix()}}
        if region:
            physical["region"] = region
        result["locations"] = [{"physicalLocation": physical}]
    elif loc.describe():
        result["locations"] = [{"message": {"text": loc.describe()}}]
    return result


def to_sarif(report: Report, catalog: Catalog) -> dict[str, Any]:
    """The SARIF log as a dict: one run, every rule of the catalog described once."""
    rules = [_rule_descriptor(rule.to_dict()) for rule in catalog]
    index = {r["id"]: i for i, r in enumerate(rules)}
    notifications = [{"level": "note", "message": {"text": f"{n.code} {n.name} not evaluated: needs {n.needs}"},
                      "descriptor": {"id": n.code}} for n in report.not_evaluated]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "gpudoctor", "version": __version__, "semanticVersion": __version__,
                                "informationUri": INFO_URI, "rules": rules}},
            "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
            "results": [_result(f, index) for f in report.findings],
            "columnKind": "unicodeCodePoints",
        }],
    }


def write_sarif(report: Report, catalog: Catalog, out: TextIO) -> None:
    out.write(json.dumps(to_sarif(report, catalog), indent=2) + "\n")
