"""The one object every entrance hands to the renderers."""

from __future__ import annotations

from typing import Any

import msgspec

from gpudoctor.bottleneck import Bottleneck
from gpudoctor.model import Finding, NotEvaluated, Severity, sort_findings


class MetricTable(msgspec.Struct):
    """A small table of numbers for the report (e.g. per-rank temporal breakdown).

    ``rows`` are dicts with the same keys as ``columns``; column names carry units.
    """

    title: str
    columns: list[str]
    rows: list[dict[str, Any]]
    key: str = ""  # machine name for JSON, e.g. "ranks"


class Report(msgspec.Struct):
    """Findings plus the evidence tables behind them, from one entrance."""

    command: str                      # analyze | check | attach
    inputs: list[str]
    findings: list[Finding] = msgspec.field(default_factory=list)
    not_evaluated: list[NotEvaluated] = msgspec.field(default_factory=list)
    tables: list[MetricTable] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    data: dict[str, Any] = msgspec.field(default_factory=dict)  # extra machine-readable sections (e.g. per-rank metrics)
    elapsed_s: float | None = None
    headline: str | None = None  # replaces the findings-count sentence (e.g. compare's verdict)
    bottlenecks: list[Bottleneck] = msgspec.field(default_factory=list)  # what bounds the step: per rank, or the job

    @property
    def bottleneck(self) -> Bottleneck | None:
        """The verdict that leads the report: the slowest rank's (the one the others wait for)."""
        return max(self.bottlenecks, key=lambda b: b.step_ms, default=None)

    def __post_init__(self) -> None:
        self.findings = sort_findings(self.findings)

    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=None)

    def count_at_or_above(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity.rank >= severity.rank)
