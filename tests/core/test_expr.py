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
id = "trace-hostile"
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


# --- Cost budget and size limits (issue 15): every case ends as an ExpressionError, quickly. ---

@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("sum([[0]] * 400000, []) == []", "would build a value"),   # was > 30 s (quadratic)
        ("sum([[0]] * 40000, []) == []", "steps to evaluate"),       # under the size limit, over the budget
        ("len([0] * 200000000) > 0", "would build a value"),         # was 1.5 GB
        ("lower(['x' * 1000] * 1000) == ''", "would build a value"),
        ("round(1e308 * 10) > 0", "infinity"),                        # OverflowError
        ("big / 3 > 0", "too large for a float"),                     # 400-digit integer divided
        ("big * big * big * big > 0", "bits"),
        ("'%0100000000d' % 1 == ''", "string formatting"),
        ("-[1] == 0", "sign on a list"),
        ("log2(0) > 1", "math domain"),
        ("round(1.5, big) > 0", "at most"),
    ],
)
def test_expensive_or_failing_conditions_are_expression_errors(text: str, said: str) -> None:
    import time

    started = time.perf_counter()
    with pytest.raises(ExpressionError, match=said):
        Condition(text).evaluate({"big": int("9" * 400)})
    assert time.perf_counter() - started < 5.0


@pytest.mark.parametrize("text", ["b'x' * 10", "1j == 0", "... is None", "1" * 1300 + " > 0",
                                  "-" * 100 + "x > 0"])
def test_constants_and_depth_are_bounded_at_load(text: str) -> None:
    with pytest.raises(ExpressionError):
        Condition(text)


def test_modest_conditions_still_evaluate_within_budget() -> None:
    assert Condition("sum([[1, 2]] * 100, []) == [1, 2] * 100").evaluate({}) is True
    assert Condition("len(flags) * 2 + count(flags) == 8").evaluate({"flags": [True, False, True]}) is True


@pytest.mark.parametrize("template", ["{x:>100000000}", "{x:.100000f}", "{x:bogus}"])
def test_template_format_widths_are_bounded(template: str) -> None:
    with pytest.raises(ExpressionError):
        Template(template)


def test_template_output_is_bounded() -> None:
    rendered = Template("{x:>200} {items}").render({"x": 1, "items": list(range(10000))})
    assert len(rendered) < 800


def test_overflowing_rule_becomes_a_note_and_the_run_goes_on(tmp_path) -> None:
    from gpudoctor.catalog.catalog import Catalog
    from gpudoctor.catalog.engine import evaluate
    from gpudoctor.model import FactSet, Source

    def rule(code: str, name: str, condition: str) -> object:
        return parse_rule_text(f'''+++
code = "{code}"
name = "{name}"
title = "x"
[[when]]
id = "trace-hostile"
source = "trace"
scope = "rank"
condition = "{condition}"
message = "fired"
+++
## What it detects
x
''', f"{name}.md")

    catalog = Catalog({"GD991": rule("GD991", "overflowing-rule", "round(1e308 * 10) > 0"),
                       "GD992": rule("GD992", "plain-rule", "idle_pct > 10")})
    result = evaluate(catalog, [FactSet(scope="rank", source=Source.TRACE, values={"idle_pct": 50.0})],
                      [Source.TRACE])
    assert [f.code for f in result.findings] == ["GD992"]
    assert len(result.errors) == 1 and "GD991" in result.errors[0]
