"""The data every part of gpudoctor speaks: facts in, findings out.

Collectors, the trace analyzer and the static checkers all produce :class:`FactSet` objects — a
scope (what the facts describe: one rank, one GPU, one DataLoader call site…), a source
(live / trace / static / env), a location, a timestamp, and named values whose names carry their
units (``idle_pct``, ``mem_used_mib``, ``step_time_p50_ms``). The rules engine turns fact sets into
:class:`Finding` objects, or :class:`NotEvaluated` where the evidence a rule needs is missing.

This module must stay free of heavy imports (no rich, textual, torch): every entrance and every view
imports it. Its types are ``msgspec.Struct`` rather than dataclasses for the same reason: a frozen
dataclass costs ~1 ms of start-up to generate its methods, a Struct ~30 µs (every command imports
msgspec already).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from typing import Any

import msgspec

from gpudoctor.numbers import gains_nothing, speedup
from gpudoctor.severity import Severity

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


class Location(msgspec.Struct, frozen=True):
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
        return {k: v for k in self.__struct_fields__ if (v := getattr(self, k)) is not None}


class FactSet(msgspec.Struct, frozen=True):
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
    location: Location = msgspec.field(default_factory=Location)
    timestamp: float = msgspec.field(default_factory=time.time)

    def get(self, name: str) -> FactValue:
        return self.values.get(name)


class Evidence(msgspec.Struct, frozen=True):
    """One number behind a verdict: a fact's value, or a threshold it was compared with."""

    name: str
    value: FactValue
    is_threshold: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "threshold": self.is_threshold}


class Fix(msgspec.Struct, frozen=True):
    """The concrete change that removes the problem, with a before → after snippet."""

    summary: str
    before: str = ""
    after: str = ""
    language: str = "python"

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "before": self.before, "after": self.after, "language": self.language}


class Impact(msgspec.Struct, frozen=True):
    """What a finding costs the step now and what its fix is estimated to gain.

    The estimate follows the bottleneck (see :mod:`gpudoctor.catalog.impact`): a fix that shortens
    GPU work gains at most down to the host's floor; one that shortens host work at most down to the
    GPU's busy time.
    """

    cost_ms_per_step: float | None
    cost_pct_of_step: float | None
    est_speedup_low: float
    est_speedup_high: float
    basis: str
    side: str  # "gpu" or "host"
    after: str | None = None  # a rule whose fix must come first for this gain to show (e.g. "GD102")
    #: a finding listed above whose measured cost overlaps this one's (see catalog/merge.py
    #: mark_shared_costs): this gain is not in addition to that one's
    shares_cost_with: str | None = None

    @property
    def est_speedup(self) -> float:
        """The middle of the range (geometric mean): what severity and order are judged on."""
        return float((self.est_speedup_low * self.est_speedup_high) ** 0.5)

    def describe(self) -> str:
        """``est. 1.20–1.45× · costs 12.3 ms/step (21%)``."""
        gain = f"est. {speedup(self.est_speedup_low, self.est_speedup_high)}"
        if self.cost_ms_per_step is not None:
            gain += f" · costs {self.cost_ms_per_step:.1f} ms/step"
            if self.cost_pct_of_step is not None:
                gain += f" ({self.cost_pct_of_step:.0f}%)"
        if self.after is not None:
            gain += f" · after the {self.after} fix"
        if self.shares_cost_with is not None:
            gain += f" · {self.overlap_text()}"
        return gain

    @property
    def gains_nothing(self) -> bool:
        """Whether the whole estimated range prints as ``1.00×``: a fix that gains nothing visible."""
        return gains_nothing(self.est_speedup_low, self.est_speedup_high)

    def overlap_text(self) -> str:
        """What the user must know when another finding's cost overlaps this one's ('' when none)."""
        if self.shares_cost_with is None:
            return ""
        return f"overlaps {self.shares_cost_with} above: not in addition to its gain; measure again after its fix"

    def to_dict(self) -> dict[str, Any]:
        return {"cost_ms_per_step": self.cost_ms_per_step, "cost_pct_of_step": self.cost_pct_of_step,
                "est_speedup_low": self.est_speedup_low, "est_speedup_high": self.est_speedup_high,
                "est_speedup": round(self.est_speedup, 3), "basis": self.basis, "side": self.side,
                "after": self.after, "shares_cost_with": self.shares_cost_with}


class Finding(msgspec.Struct, frozen=True):
    """A rule's verdict on one fact set: the problem, the numbers, the fix and what the fix gains."""

    code: str
    name: str
    severity: Severity
    title: str
    message: str
    source: Source
    evidence: tuple[Evidence, ...]
    fix: Fix
    location: Location = msgspec.field(default_factory=Location)
    timestamp: float = msgspec.field(default_factory=time.time)
    impact: Impact | None = None
    impact_note: str = ""  # why there is no impact, when there is none
    also_sources: tuple[Source, ...] = ()  # other sources whose evidence agreed (merged findings)
    overlaps: tuple[str, ...] = ()  # the rule's ``overlaps``: rules whose cost is partly this one's (catalog)
    estimate_from: tuple[Source, ...] = ()  # the rule's ``estimate_from``: whose estimate a merge keeps first
    cleared_by: tuple[Source, ...] = ()  # the rule's ``cleared_by``: whose clean judgement withdraws it unestimated
    symptom: bool = False  # the rule's ``symptom``: info beside a step verdict (catalog/merge.defer_symptoms)

    @property
    def key(self) -> tuple[str, str]:
        """Identity across refreshes: same rule at the same place."""
        return (self.code, self.location.describe())

    @property
    def sources(self) -> tuple[Source, ...]:
        return (self.source, *self.also_sources)

    @property
    def gain(self) -> float:
        """Estimated speedup of the fix (1.0 when there is no estimate): what findings are ordered by."""
        return self.impact.est_speedup if self.impact is not None else 1.0

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
            "sources": [s.value for s in self.sources],
            "evidence": [e.to_dict() for e in self.evidence],
            "fix": self.fix.to_dict(),
            "impact": self.impact.to_dict() if self.impact is not None else None,
            **({"impact_note": self.impact_note} if self.impact is None and self.impact_note else {}),
        }


class NotEvaluated(msgspec.Struct, frozen=True):
    """A rule that could not be judged because its evidence is missing — never a silent pass."""

    code: str
    name: str
    source: Source
    needs: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "source": self.source.value, "needs": self.needs}


#: Where a finding without an estimate sorts among estimated ones: as if it gained its severity's threshold.
_NO_ESTIMATE_ORDER = {Severity.CRITICAL: 1.5, Severity.WARNING: 1.1, Severity.INFO: 1.0}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Largest estimated gain first, then the most severe, then rule code and place (stable output).

    What to fix first is what gains most. A finding without an estimate (a hang, an unpinned base
    image) sorts as if it gained the default threshold of its severity. A finding whose gain shows
    only after another fix (``impact.after``: a faster GPU while the loop waits for data) sorts after
    every finding that gains now.
    """
    def order(f: Finding) -> tuple[int, float, int, str, str]:
        gain = f.impact.est_speedup if f.impact is not None else _NO_ESTIMATE_ORDER[f.severity]
        deferred = int(f.impact is not None and f.impact.after is not None)
        return (deferred, -round(gain, 3), -f.severity.rank, f.code, f.location.describe())
    return sorted(findings, key=order)
