"""Finds and loads rule files: the built-in catalog, plus the user's own rule directories.

Built-in rules live in the repository's top-level ``rules/`` folder, which the wheel ships as
``gpudoctor/rules``. A user's rule that reuses a built-in code replaces it (so a team can tune the
text or condition); codes are otherwise never reused — retired codes go in ``REDIRECTS``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec

from gpudoctor.catalog import rulecache
from gpudoctor.catalog.impact import DEFAULT_OPTIONS
from gpudoctor.catalog.registry import REGISTRY, unknown_names
from gpudoctor.catalog.rulefile import Rule, RuleFileError, parse_rule_text, read_rule_text
from gpudoctor.model import Source

#: Retired or renamed codes → the code that now covers them.
REDIRECTS: dict[str, str] = {}


def builtin_rules_dir() -> Path:
    """The packaged catalog, or the source tree's ``rules/`` in a development checkout."""
    packaged = Path(__file__).resolve().parent.parent / "rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "rules"


class Catalog(msgspec.Struct):
    rules: dict[str, Rule] = msgspec.field(default_factory=dict)

    def __iter__(self) -> Iterator[Rule]:
        return iter(sorted(self.rules.values(), key=lambda r: r.code))

    def __len__(self) -> int:
        return len(self.rules)

    def get(self, code_or_name: str) -> Rule | None:
        key = code_or_name.strip()
        key = REDIRECTS.get(key.upper(), key)
        if key.upper() in self.rules:
            return self.rules[key.upper()]
        return next((r for r in self.rules.values() if r.name == key.lower()), None)

    def for_source(self, source: Source) -> list[Rule]:
        return [r for r in self if source in r.sources]

    def select(self, select: Iterable[str] = (), ignore: Iterable[str] = ()) -> Catalog:
        """Keep rules whose code starts with a ``select`` prefix (all if empty), minus ``ignore``."""
        sel, ign = [s.upper() for s in select], [s.upper() for s in ignore]
        kept = {
            code: rule for code, rule in self.rules.items()
            if (not sel or any(code.startswith(s) or rule.name.upper() == s for s in sel))
            and not any(code.startswith(i) or rule.name.upper() == i for i in ign)
        }
        return Catalog(kept)


def load_catalog(extra_dirs: Iterable[Path] = ()) -> Catalog:
    """Load the built-in rules and then each extra directory (later ones win on equal codes).

    Every rule file is read on each call; the parsed rules come from :mod:`.rulecache` when the
    files and the parsing code are unchanged since a catalog was last parsed from them.
    """
    dirs = [builtin_rules_dir(), *(Path(d) for d in extra_dirs)]
    files: list[tuple[Path, str]] = []
    for directory in dirs:
        if not directory.is_dir():
            raise RuleFileError(f"{directory}: rule directory does not exist")
        files.extend((path, read_rule_text(path)) for path in sorted(directory.glob("GD*.md")))
    key = rulecache.catalog_key(files)
    cached = rulecache.load_cached(dirs, key)
    if cached is not None:
        return Catalog(cached)
    rules = _parse_rules(files)
    rulecache.store(dirs, key, rules)
    return Catalog(rules)


def _parse_rules(files: Iterable[tuple[Path, str]]) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    names: dict[str, str] = {}
    for path, text in files:
        rule = parse_rule_text(text, str(path), path)
        check_rule_facts(rule, path)
        other = names.get(rule.name)
        if other is not None and other != rule.code:
            raise RuleFileError(f"{path}: name {rule.name!r} is already used by {other}")
        rules[rule.code] = rule
        names[rule.name] = rule.code
    return rules


def check_rule_facts(rule: Rule, origin: object) -> None:
    """Every name a rule reads must be a declared fact of its block's source and scope, or an option.

    Raises:
        RuleFileError: naming the rule, the block and the unknown names (a typo, or a fact no
            producer emits — see :mod:`gpudoctor.catalog.registry`).
    """
    shadowing = sorted(o for o in rule.options if o in REGISTRY.names())
    if shadowing:  # the engine's environment would hold both: one of them silently wins
        raise RuleFileError(f"{origin}: {rule.code} has an option named like a fact: {', '.join(shadowing)} "
                            f"(rename the option)")
    options = [*rule.options, *DEFAULT_OPTIONS]
    for when in rule.whens:
        names = [*when.condition.names, *when.message.names, *(when.impact.names if when.impact else ())]
        unknown = unknown_names(names, when.source, when.scope, options)
        if unknown:
            raise RuleFileError(f"{origin}: {rule.code} reads {', '.join(unknown)}, which no {when.source.value} "
                                f"producer emits for scope {when.scope!r} (see docs/facts.md for the fact names)")
    stray = [e for e in rule.evidence
             if e not in rule.options and not any(REGISTRY.get(e, s) is not None for s in rule.sources)]
    if stray:
        raise RuleFileError(f"{origin}: {rule.code} lists evidence {', '.join(stray)}, which is no fact of its sources")
