"""The condition language: correct results, honest MISSING, and no way to run code."""

from __future__ import annotations

import pytest

from gpudoctor.catalog.expr import MISSING, Condition, ExpressionError, Template
from gpudoctor.catalog.rulefile import RuleFileError, parse_rule_text


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("idle_pct > max_idle_pct", {"idle_pct": 61.0, "max_idle_pct": 30}, True),
        ("idle_pct > max_idle_pct", {"idle_pct": 10.0, "max_idle_pct": 30}, False),
        ("10 < x <= 20", {"x": 20}, True),
        ("10 < x <= 20", {"x": 21}, False),
        ("a / b > 0.5", {"a": 1, "b": 0}, True),  # division by zero is infinity, not a crash
        ("'gloo' in backend", {"backend": "gloo,nccl"}, True),
        ("count(flags) >= 2", {"flags": [True, False, True]}, True),
        ("max(a, b) - min(a, b)", {"a": 3, "b": 7}, 4),
        ("x if flag else y", {"x": 1, "y": 2, "flag": False}, 2),
        ("not enabled", {"enabled": False}, True),
    ],
)
def test_conditions_evaluate(text: str, env: dict, expected: object) -> None:
    assert Condition(text).evaluate(env) == expected


def test_missing_fact_is_undecided_not_false() -> None:
    cond = Condition("idle_pct > 30")
    assert cond.evaluate({}) is MISSING
    assert cond.evaluate({"idle_pct": None}) is MISSING


def test_and_or_decide_when_a_known_operand_settles_it() -> None:
    assert Condition("a > 1 and b > 1").evaluate({"a": 0}) is False
    assert Condition("a > 1 or b > 1").evaluate({"a": 5}) is True
    assert Condition("a > 1 and b > 1").evaluate({"a": 5}) is MISSING


def test_names_exclude_called_functions() -> None:
    assert set(Condition("max(a, b) > limit").names) == {"a", "b", "limit"}


@pytest.mark.parametrize(
    "hostile",
    [
        "__import__('os').system('touch /tmp/gpudoctor-pwned')",
        "().__class__.__bases__[0].__subclasses__()",
        "open('/etc/passwd').read()",
        "eval('1')",
        "[x for x in range(10**9)]",
        "(lambda: 1)()",
        "x.__class__",
        "values[0]",
        "getattr(x, 'y')",
        "2 ** 99999999",
        "f'{x}'",
    ],
)
def test_hostile_conditions_are_refused_at_load(hostile: str) -> None:
    with pytest.raises(ExpressionError):
        Condition(hostile)


def test_hostile_rule_file_cannot_run_code(tmp_path) -> None:
    marker = tmp_path / "pwned"
    text = f'''+++
code = "GD990"
name = "hostile-rule"
title = "x"
[[when]]
source = "trace"
scope = "rank"
condition = "__import__('pathlib').Path('{marker}').touch()"
message = "x"
+++
## What it detects
'''
    with pytest.raises(RuleFileError, match="GD990|hostile|not allowed"):
        parse_rule_text(text, "hostile.md")
    assert not marker.exists()


@pytest.mark.parametrize("template", ["{x.__class__}", "{x[0]}", "{x!r}", "{x:{y}}"])
def test_templates_refuse_attribute_index_and_conversion(template: str) -> None:
    with pytest.raises(ExpressionError):
        Template(template)


def test_template_renders_with_format_specs_and_missing_values() -> None:
    t = Template("idle {idle_pct:.1f}% on rank {rank}, step {step}")
    assert t.render({"idle_pct": 61.234, "rank": 2}) == "idle 61.2% on rank 2, step ?"
