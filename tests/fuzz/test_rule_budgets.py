"""Per-run bounds on what a rule can cost (issue 39 item 5): evaluation steps, findings, message size.

A user rule costing ~0.2 s per site at the 5,000-sites-per-file cap ran ~18 min; a 1 MB message
template at 1,000 sites wrote a 1 GB report. The caps are tested by making them trigger, not by timing.
"""

from __future__ import annotations

import pytest

from gpudoctor.catalog import engine
from gpudoctor.catalog.catalog import Catalog
from gpudoctor.catalog.expr import MAX_MESSAGE_CHARS, MAX_TEMPLATE_CHARS, ExpressionError, Template
from gpudoctor.catalog.rulefile import RuleFileError, parse_rule_text
from gpudoctor.model import FactSet, Source


def _rule(condition: str, message: str = "fired", code: str = "GD990") -> str:
    return (f'+++\ncode = "{code}"\nname = "user-rule-{code[2:]}"\ntitle = "a user rule"\nseverity = "warning"\n\n'
            f'[[when]]\nid = "static-site"\nsource = "static"\nscope = "python.site"\ncondition = "{condition}"\n'
            f"message = '''{message}'''\n+++\n\n## What it detects\nA test.\n")


def _sites(n: int) -> list[FactSet]:
    return [FactSet(scope="python.site", source=Source.STATIC, values={"x": i}) for i in range(n)]


def _catalog(*texts: str) -> Catalog:
    rules = [parse_rule_text(t) for t in texts]
    return Catalog({r.code: r for r in rules})


def test_a_costly_rule_is_stopped_by_its_run_budget() -> None:
    costly = "len(sum([[0]] * 300, [])) > 0"  # ~91 k steps per site: under the per-evaluation cap
    result = engine.evaluate(_catalog(_rule(costly), _rule("x >= 0", code="GD991")), _sites(5000), [Source.STATIC])
    stopped = [e for e in result.errors if e.startswith("GD990 ") and "stopped after" in e]
    assert len(stopped) == 1 and "of 5000 fact sets" in stopped[0] and "budget of 5,000,000" in stopped[0]
    judged = int(stopped[0].split("stopped after ")[1].split()[0])
    assert 0 < judged < engine.RULE_RUN_BUDGET // 90_000 + 1
    assert sum(f.code == "GD990" for f in result.findings) == judged
    assert sum(f.code == "GD991" for f in result.findings) == engine.MAX_FINDINGS_PER_RULE  # cheap: not stopped
    assert any(e.startswith("GD991: 4,000 more findings not reported") for e in result.errors)


def test_a_rule_failing_at_every_site_is_one_note() -> None:
    result = engine.evaluate(_catalog(_rule("x + 'a' == 1")), _sites(3000), [Source.STATIC])
    assert len([e for e in result.errors if e.startswith("GD990")]) == 1


def test_message_templates_and_messages_are_capped() -> None:
    with pytest.raises(ExpressionError, match="message template longer than"):
        Template("x" * (MAX_TEMPLATE_CHARS + 1))
    with pytest.raises(RuleFileError):
        parse_rule_text(_rule("True", "y" * 1_000_000))
    wide = Template("{a}" * 20)  # each field at most 500 characters: 10,000 in all
    assert len(wide.render({"a": "z" * 10_000})) == MAX_MESSAGE_CHARS
