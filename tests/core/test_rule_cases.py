"""Every live and trace ``[[when]]`` block fires on a recorded fact set (ruff's per-rule fixture habit).

The cases in ``tests/data/rule_cases/<CODE>.json`` are measured, not invented: trace blocks keep the
fact set of a real trace on which they fire, live blocks the evidence of a live finding in a JSON
report of a real H200 run, or the live fact set rebuilt from the samples such a report keeps
(``tests/data/rule_cases/make_cases.py`` extracts them). A block with no
recorded case anywhere says why in its rule file, ``no_case = "..."`` (and, where a GPU run would
record one, that run). Cases are keyed by the block's ``id``, so inserting a block moves nothing.
The test fails when a block is neither covered nor has a reason, when a block with a reason has
gained a case (take its no_case off), and when a case no longer fires — a condition changed, or a
fact was renamed — which is the moment to re-record or re-think the rule.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.expr import MISSING
from gpudoctor.catalog.impact import DEFAULT_OPTIONS
from gpudoctor.catalog.registry import LOCATION_NAMES, REGISTRY
from gpudoctor.catalog.rulefile import CASE_SOURCES, Rule, When
from gpudoctor.model import Source

CASES = Path(__file__).resolve().parents[1] / "data" / "rule_cases"


@cache
def _catalog_rules() -> tuple[Rule, ...]:
    return tuple(load_catalog())


def _blocks() -> Iterator[tuple[Rule, When]]:
    for rule in _catalog_rules():
        for when in rule.whens:
            if when.source in CASE_SOURCES:
                yield rule, when


@cache
def _cases(code: str) -> dict[str, dict[str, Any]]:
    path = CASES / f"{code}.json"
    if not path.exists():
        return {}
    loaded: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _evaluate(rule: Rule, when: When, facts: Mapping[str, Any], location: Mapping[str, Any]) -> Any:
    """The block's condition on a fact set, with the engine's merge order (facts, location, options)."""
    env = {**{k: v for k, v in facts.items() if v is not None}, **location, **DEFAULT_OPTIONS, **rule.options}
    return when.condition.evaluate(env)


BLOCKS = list(_blocks())


@pytest.mark.parametrize(("rule", "when"), BLOCKS, ids=[f"{r.code}[{w.id}]" for r, w in BLOCKS])
def test_block_fires_on_its_recorded_case(rule: Rule, when: When) -> None:
    case = _cases(rule.code).get(when.id)
    name = f"{rule.code} block {when.id!r}"
    if case is None:
        assert when.no_case, (
            f"{name} ({when.source.value}:{when.scope}, {when.condition.text!r}) has no recorded case: re-run "
            "tests/data/rule_cases/make_cases.py on new recordings, or give the block no_case = \"<why>\" in "
            f"{rule.path.name if rule.path else rule.code}")
        return
    assert not when.no_case, f"{name} has a recorded case now ({case['origin']}): take its no_case off"
    assert (case["source"], case["scope"]) == (when.source.value, when.scope), (
        f"{name} is {when.source.value}:{when.scope} now, its case was recorded for "
        f"{case['source']}:{case['scope']}: re-run make_cases.py")
    verdict = _evaluate(rule, when, case["facts"], case["location"])
    assert verdict is not MISSING and verdict, (
        f"{name} ({when.condition.text!r}) no longer fires on its recorded case ({case['origin']}): got {verdict!r}")
    assert _evaluate(rule, when, {}, {}) is MISSING, "the condition must depend on the recorded facts"


def test_recorded_facts_are_declared_for_their_source_and_scope() -> None:
    stale = []
    for rule in _catalog_rules():
        for ident, case in _cases(rule.code).items():
            source, scope = Source(case["source"]), case["scope"]
            stale += [f"{rule.code}[{ident}] {name} ({source.value}:{scope})" for name in case["facts"]
                      if name not in LOCATION_NAMES and not REGISTRY.knows(name, source, scope)]
    assert not stale, "recorded facts the registry no longer declares (renamed? re-run make_cases.py): " + ", ".join(stale)


def test_every_case_file_belongs_to_a_live_or_trace_block() -> None:
    blocks = {(r.code, w.id) for r, w in BLOCKS}
    files = sorted(CASES.glob("GD*.json"))
    assert files, f"no recorded cases under {CASES}"
    orphans = [f"{path.stem}[{ident}]" for path in files for ident in _cases(path.stem) if (path.stem, ident) not in blocks]
    assert not orphans, f"cases of blocks that no longer exist (renamed id? re-run make_cases.py): {', '.join(orphans)}"
