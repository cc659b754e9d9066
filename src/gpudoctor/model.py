"""The data every part of gpudoctor speaks: facts in, findings out.

Collectors, the trace analyzer and the static checkers all produce :class:`FactSet` objects — a
scope (what the facts describe: one rank, one GPU, one DataLoader call site…), a source
(live / trace / static / env), a location, a timestamp, and named values whose names carry their
units (``idle_pct``, ``mem_used_mib``, ``step_time_p50_ms``). The rules engine turns fact sets into
:class:`Finding` objects, or :class:`NotEvaluated` where the evidence a rule needs is missing.

This module must stay free of heavy imports (no rich, textual, torch, msgspec): every entrance and
every view imports it.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: What a fact's value may be. Lists hold plain values (e.g. graph-break reasons).
FactValue = int | float | str | bool | None | list | tuple


class Source(str, enum.Enum):
    """Where evidence comes from. A rule declares which of these it can use."""

    LIVE = "live"
    TRACE = "trace"
    STATIC = "static"
    ENV = "env"

    def __str__(self) -> str:
        return self.value


class Severity(str, enum.Enum):
    """How much a finding costs the user, in rising order."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"unknown severity {text!r}: use info, warning or critical") from None


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


@dataclass(frozen=True)
class Location:
    """Where a fact set (and so a finding) applies. Every field is optional."""

    rank: int | None = None
    step: int | None = None
    start_us: float | None = None
    end_us: float | None = None
    pid: int | None = None
    gpu: int | None = None
    path: str | None = None
    line: int | None = None
    col: int | None = None
    label: str | None = None  # free text, e.g. "DataLoader(train_set)"

    def describe(self) -> str:
        """A short human form: ``rank 1 · step 12`` or ``train.py:40:5``."""
        if self.path is not None:
            out = self.path
            if self.line is not None:
                out += f":{self.line}"
                if self.col is not None:
                    out += f":{self.col}"
            return out
        parts = []
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.gpu is not None:
            parts.append(f"GPU {self.gpu}")
        if self.pid is not None:
            parts.append(f"pid {self.pid}")
        if self.step is not None:
            parts.append(f"step {self.step}")
        if self.start_us is not None and self.end_us is not None:
            parts.append(f"{(self.end_us - self.start_us) / 1000:.1f} ms window")
        if self.label:
            parts.append(self.label)
        return " · ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class FactSet:
    """Named, unit-carrying values about one subject, from one source, at one time.

    Attributes:
        scope: What the facts describe; rules select fact sets by scope (``rank``, ``run``,
            ``gpu``, ``process``, ``python.dataloader`` …).
        source: Which entrance produced them.
        values: Fact name → value. Names carry units (``_pct``, ``_ms``, ``_us``, ``_mib``).
        location: Where they apply.
        timestamp: Unix time when they were taken.
    """

    scope: str
    source: Source
    values: Mapping[str, FactValue]
    location: Location = field(default_factory=Location)
    timestamp: float = field(default_factory=time.time)

    def get(self, name: str) -> FactValue:
        return self.values.get(name)


@dataclass(frozen=True)
class Evidence:
    """One number behind a verdict: a fact's value, or a threshold it was compared with."""

    name: str
    value: FactValue
    is_threshold: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "threshold": self.is_threshold}


@dataclass(frozen=True)
class Fix:
    """The concrete change that removes the problem, with a before → after snippet."""

    summary: str
    before: str = ""
    after: str = ""
    language: str = "python"

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "before": self.before, "after": self.after, "language": self.language}


@dataclass(frozen=True)
class Finding:
    """A rule's verdict on one fact set: the problem, the numbers, and the fix."""

    code: str
    name: str
    severity: Severity
    title: str
    message: str
    source: Source
    evidence: tuple[Evidence, ...]
    fix: Fix
    location: Location = field(default_factory=Location)
    timestamp: float = field(default_factory=time.time)

    @property
    def key(self) -> tuple[str, str]:
        """Identity across refreshes: same rule at the same place."""
        return (self.code, self.location.describe())

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "title": self.title,
            "message": self.message,
            "source": self.source.value,
            "where": self.location.describe(),
            "location": self.location.to_dict(),
            "evidence": [e.to_dict() for e in self.evidence],
            "fix": self.fix.to_dict(),
        }


@dataclass(frozen=True)
class NotEvaluated:
    """A rule that could not be judged because its evidence is missing — never a silent pass."""

    code: str
    name: str
    source: Source
    needs: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "source": self.source.value, "needs": self.needs}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Most severe first, then by rule code and place, so output is stable."""
    return sorted(findings, key=lambda f: (-f.severity.rank, f.code, f.location.describe()))
