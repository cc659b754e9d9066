"""Reads one rule file: TOML front matter between ``+++`` lines, then the Markdown explanation.

The format is documented in ``docs/rules-format.md``. Everything a view shows about a rule — the
``rules`` listing, ``explain``, SARIF rule metadata, the dashboard's detail pane — comes from here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from gpudoctor.boundedio import InputFileError, loads_toml, read_regular_text
from gpudoctor.catalog.expr import Condition, ExpressionError, Template
from gpudoctor.catalog.impact import ImpactModel, parse_impact
from gpudoctor.model import Fix, Severity, Source

#: The headings every rule explanation has, in this order (a meta-test checks them).
HEADINGS = (
    "What it detects",
    "Why it is slow",
    "Evidence",
    "Fix",
    "Impact",
    "Known false positives",
    "Options",
    "References",
)
CODE_RE = re.compile(r"^GD\d{3}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
#: A rule file larger than this is refused (the largest built-in one is a few KiB).
MAX_RULE_FILE_BYTES = 1024 * 1024
_FENCE_RE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```", re.S | re.M)


class RuleFileError(ValueError):
    """A rule file that cannot be loaded; the message names the file."""


class When(msgspec.Struct, frozen=True):
    """One way a rule can fire: for one source, over fact sets of one scope."""

    id: str  # kebab-case, unique within the rule: names this way of firing (recorded rule cases are keyed by it)
    source: Source
    scope: str
    condition: Condition
    message: Template
    severity: Severity | None = None
    needs: str = ""  # said when no fact set of this scope exists
    impact: ImpactModel | None = None  # this block's estimate (the rule's [impact] unless overridden)
    no_case: str = ""  # live/trace only: why no recorded fact set fires this block (tests/core/test_rule_cases.py)


class Gate(msgspec.Struct, frozen=True):
    """A rule whose finding, while a live fact stays at or above one of the rule's options, holds back
    the findings whose fix shortens one side of the step (GD102: while the loop waits for data, a
    faster GPU only waits longer). Applied by :mod:`gpudoctor.catalog.finalize`."""

    fact: str             #: the live job fact compared (``data_wait_pct``)
    above: str            #: the rule's option it is compared with (``max_dataloader_pct``)
    holds_back: str       #: the impact side whose findings step back (``gpu``)
    no_gain_below: float  #: the rule's own estimate under which its fix gains nothing: the others become 1.0x


class Rule(msgspec.Struct, frozen=True):
    code: str
    name: str
    title: str
    severity: Severity
    family: str
    whens: tuple[When, ...]
    options: dict[str, Any]
    sections: dict[str, str]
    fix: Fix
    evidence: tuple[str, ...] = ()
    path: Path | None = None
    tags: tuple[str, ...] = msgspec.field(default_factory=tuple)
    #: rules whose measured cost is partly this one's (the same wait, the same kernels, the same fix):
    #: when both fire, the one listed lower says that its gain is not in addition (catalog/merge.py)
    overlaps: tuple[str, ...] = msgspec.field(default_factory=tuple)
    #: whose estimate a merged finding keeps when several sources' agree (catalog/merge.py); empty: the
    #: default order (trace, live, env, static)
    estimate_from: tuple[Source, ...] = msgspec.field(default_factory=tuple)
    #: sources whose judgement withdraws this rule's findings that carry no estimate: a profile window's
    #: trace that judged the rule and found nothing measures what the live reading could only suspect
    cleared_by: tuple[Source, ...] = msgspec.field(default_factory=tuple)
    #: a symptom of what bounds the step, with no fix of its own (GD101: the GPU idles): info wherever
    #: the report has the step's verdict, which names the bound (catalog/merge.defer_symptoms)
    symptom: bool = False
    #: what this rule's finding holds back while it stands (``[gate]``; catalog/finalize.py)
    gate: Gate | None = None

    @property
    def sources(self) -> tuple[Source, ...]:
        return tuple(dict.fromkeys(w.source for w in self.whens))

    @property
    def explanation(self) -> str:
        return "\n\n".join(f"## {h}\n\n{self.sections.get(h, '').strip()}" for h in HEADINGS)

    def summary(self) -> str:
        """First paragraph of *What it detects*, one line."""
        text = self.sections.get("What it detects", "").strip().split("\n\n")[0]
        return " ".join(text.split())

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "title": self.title,
            "severity": self.severity.value,
            "family": self.family,
            "sources": [s.value for s in self.sources],
            "options": dict(self.options),
            "summary": self.summary(),
            "explanation": {h: self.sections.get(h, "").strip() for h in HEADINGS},
            "fix": self.fix.to_dict(),
        }


def parse_rule_text(text: str, origin: str = "<rule>", path: Path | None = None) -> Rule:
    """Parse a rule file's text. Raises :class:`RuleFileError` naming ``origin``."""
    try:
        return _parse(text, path)
    except (ExpressionError, ValueError, KeyError, TypeError, AttributeError) as exc:  # TOMLDecodeError is a ValueError
        raise RuleFileError(f"{origin}: {exc}") from None


def read_rule_text(path: Path) -> str:
    """The text of one rule file: a regular file of at most :data:`MAX_RULE_FILE_BYTES` only."""
    try:
        return read_regular_text(path, MAX_RULE_FILE_BYTES)
    except InputFileError as exc:
        raise RuleFileError(f"{path}: rule file {exc}") from None


def load_rule_file(path: Path) -> Rule:
    """Read and parse one rule file (:func:`read_rule_text`, then :func:`parse_rule_text`)."""
    return parse_rule_text(read_rule_text(path), str(path), path)


def _parse(text: str, path: Path | None) -> Rule:
    if not text.startswith("+++"):
        raise ValueError("a rule file starts with TOML front matter between '+++' lines")
    end = text.find("\n+++", 3)
    if end < 0:
        raise ValueError("front matter is not closed with a '+++' line")
    meta = loads_toml(text[3:end])  # nesting and huge integers become a ValueError
    body = text[end + 4 :]
    code, name = str(meta["code"]), str(meta["name"])
    if not CODE_RE.match(code):
        raise ValueError(f"code {code!r} must look like GD123")
    if not NAME_RE.match(name):
        raise ValueError(f"name {name!r} must be kebab-case and name the problem")
    severity = Severity.parse(meta.get("severity", "warning"))
    options = dict(meta.get("options", {}))
    impact = parse_impact(meta["impact"]) if "impact" in meta else None
    raw_whens = meta.get("when", [])
    if not raw_whens:
        raise ValueError("a rule needs at least one [[when]] block")
    whens = tuple(_parse_when(w, n, len(raw_whens), options, impact) for n, w in enumerate(raw_whens, 1))
    _check_unique_ids(whens)
    sections = _split_sections(body)
    return Rule(
        code=code,
        name=name,
        title=str(meta["title"]),
        severity=severity,
        family=str(meta.get("family", "general")),
        whens=whens,
        options=options,
        sections=sections,
        fix=_parse_fix(sections.get("Fix", "")),
        evidence=_names(meta.get("evidence", ()), "evidence"),
        path=path,
        tags=_names(meta.get("tags", ()), "tags"),
        overlaps=_codes(meta.get("overlaps", ()), code),
        estimate_from=_sources(meta.get("estimate_from", ()), "estimate_from"),
        cleared_by=_sources(meta.get("cleared_by", ()), "cleared_by"),
        symptom=_flag(meta.get("symptom", False), "symptom"),
        gate=_gate(meta["gate"], options) if "gate" in meta else None,
    )


def _gate(raw: Any, options: dict[str, Any]) -> Gate:
    """``[gate]``: fact, above (one of the rule's options), holds_back (an impact side), no_gain_below."""
    if not isinstance(raw, dict) or set(raw) != {"fact", "above", "holds_back", "no_gain_below"}:
        raise ValueError("[gate] takes exactly fact, above, holds_back and no_gain_below")
    if raw["above"] not in options:
        raise ValueError(f"[gate] above = {raw['above']!r} must name one of the rule's [options]")
    if raw["holds_back"] not in ("gpu", "host"):
        raise ValueError("[gate] holds_back must be \"gpu\" or \"host\"")
    floor = raw["no_gain_below"]
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 1.0 <= floor < 10.0:
        raise ValueError("[gate] no_gain_below must be a speed-up factor from 1.0 to 10")
    return Gate(fact=str(raw["fact"]), above=str(raw["above"]), holds_back=str(raw["holds_back"]),
                no_gain_below=float(floor))


def _flag(raw: Any, key: str) -> bool:
    if not isinstance(raw, bool):
        raise ValueError(f"{key} must be true or false, not {raw!r}")
    return raw


def _sources(raw: Any, key: str) -> tuple[Source, ...]:
    """``estimate_from`` / ``cleared_by``: source names (most trusted first)."""
    names = _names(raw, key)
    try:
        return tuple(Source(n) for n in names)
    except ValueError:
        raise ValueError(f"{key}: {list(names)!r} must name sources: live, trace, static, env") from None


def _codes(raw: Any, own: str) -> tuple[str, ...]:
    """The rule codes of ``overlaps``: a list of GD123-style codes, not the rule's own."""
    codes = _names(raw, "overlaps")
    for c in codes:
        if not CODE_RE.match(c) or c == own:
            raise ValueError(f"overlaps: {c!r} must be another rule's code, like GD123")
    return codes


#: The keys a ``[[when]]`` block takes (``impact`` is its ``[when.impact]`` table).
WHEN_KEYS = ("id", "source", "scope", "condition", "message", "severity", "needs", "impact", "no_case")
#: The sources whose blocks have recorded cases, and so may say why they have none (``no_case``).
CASE_SOURCES = (Source.LIVE, Source.TRACE)


def _parse_when(raw: dict[str, Any], number: int, count: int, options: dict[str, Any],
                impact: ImpactModel | None) -> When:
    """One ``[[when]]`` block, the ``number``-th of ``count``; errors name the block by its id, or its place."""
    ident = raw.get("id")
    if ident is None:
        raise ValueError(f"[[when]] block {number} of {count} has no id: add id = \"...\" as its first key, a "
                         "kebab-case name for this way of firing that is unique within the rule (\"trace-critical\")")
    if not isinstance(ident, str) or not NAME_RE.match(ident):
        raise ValueError(f"[[when]] block {number} of {count} has id = {ident!r}, which is not kebab-case "
                         "(lower-case words and digits joined by '-', like \"live-fixable-wait\")")
    unknown = sorted(set(raw) - set(WHEN_KEYS))
    if unknown:
        raise ValueError(f"[[when]] block \"{ident}\" has unknown key(s) {', '.join(unknown)}: a block takes "
                         f"{', '.join(WHEN_KEYS)}")
    source = Source(raw["source"])
    no_case = raw.get("no_case", "")
    if "no_case" in raw and source not in CASE_SOURCES:
        raise ValueError(f"[[when]] block \"{ident}\" is a {source.value} block with no_case, which only live and "
                         "trace blocks take (they are the ones with recorded cases): take it off")
    if not isinstance(no_case, str) or ("no_case" in raw and not no_case.strip()):
        raise ValueError(f"[[when]] block \"{ident}\" has no_case = {no_case!r}: it takes a reason, a non-empty "
                         "string saying why no recorded fact set fires the block")
    condition = Condition(str(raw["condition"]))
    message = Template(str(raw["message"]))
    sev = raw.get("severity")
    return When(
        id=ident,
        no_case=no_case,
        source=source,
        scope=str(raw["scope"]),
        condition=condition,
        message=message,
        severity=Severity.parse(sev) if sev else None,
        needs=str(raw.get("needs", "")),
        impact=parse_impact(raw["impact"]) if "impact" in raw else impact,
    )


def _check_unique_ids(whens: tuple[When, ...]) -> None:
    seen: dict[str, int] = {}
    for number, when in enumerate(whens, 1):
        if when.id in seen:
            raise ValueError(f"[[when]] block {number} of {len(whens)} has id \"{when.id}\", which block {seen[when.id]} "
                             "already has: ids are unique within a rule")
        seen[when.id] = number


def _names(value: Any, key: str) -> tuple[str, ...]:
    """A front-matter list of names (``evidence``, ``tags``); anything else is a ValueError naming the key."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} must be a list of names")
    return tuple(value)


def _split_sections(body: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []
    in_fence = False
    for line in body.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith("## "):
            if current is not None:
                sections[current] = "\n".join(lines).strip()
            current, lines = line[3:].strip(), []
        elif current is not None:
            lines.append(line)
    if current is not None:
        sections[current] = "\n".join(lines).strip()
    return sections


def _parse_fix(section: str) -> Fix:
    blocks = _FENCE_RE.findall(section)
    summary = _FENCE_RE.sub("", section)
    summary = "\n".join(
        line for line in summary.splitlines() if line.strip().rstrip(":").lower() not in ("before", "after")
    ).strip()
    before = blocks[0][1].rstrip() if len(blocks) > 0 else ""
    after = blocks[1][1].rstrip() if len(blocks) > 1 else ""
    language = (blocks[0][0] or "python") if blocks else "python"
    return Fix(summary=" ".join(summary.split("\n\n")[0].split()), before=before, after=after, language=language)
