"""Property-based fuzzing of the rule interpreter (issue 15): random conditions and message templates.

Properties: building a :class:`Condition` or :class:`Template` raises nothing but ExpressionError;
evaluating raises nothing but ExpressionError, within a time and a memory bound; rendering never
raises and its output stays bounded. Examples come from a grammar of the condition language (every
operator and function, hostile constants such as ``1e308`` and 400-digit integers, the repetition that
built gigabytes) plus raw text. Derandomized with a fixed budget so CI is stable and fast.
"""

from __future__ import annotations

import os
import time
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudoctor.catalog.expr import (
    FUNCTIONS,
    MAX_RENDERED_CHARS,
    MISSING,
    Condition,
    ExpressionError,
    Template,
)

#: CI runs the same examples every time; GPUDOCTOR_FUZZ_RANDOM=1 explores new ones (with a larger
#: GPUDOCTOR_FUZZ_EXAMPLES) when hunting for bugs by hand.
DERANDOMIZE = not os.environ.get("GPUDOCTOR_FUZZ_RANDOM")
FUZZ = settings(max_examples=int(os.environ.get("GPUDOCTOR_FUZZ_EXAMPLES", "300")),
                deadline=None, derandomize=DERANDOMIZE, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
#: One evaluation may take this long and allocate this much at its peak (the budget keeps it far below).
MAX_EVAL_S = 3.0
MAX_EVAL_PEAK_MIB = 16

ENV = {"idle_pct": 61.5, "n": 7, "big": int("9" * 400), "name": "nccl", "flags": [True, False, True],
       "items": list(range(50)), "none": None, "huge_float": 1e308, "neg": -3, "text": "x" * 1000}

CONSTANTS = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**6).map(str),
    st.sampled_from(["0", "1", "-1", "10**3", "1e308", "1e-308", "2.5", "True", "False", "None", "'gloo'", "''",
                     "9" * 400, "400000", "200000000", "100000", "'%d'", "'{x}'", "[]", "[0]", "[[0]]", "()"]),
    st.floats(allow_nan=False).map(repr),
    st.text(alphabet="abc %{}\\'\"\n", max_size=8).map(repr),
)
NAMES = st.sampled_from([*ENV, "missing_fact", "True", "None"])
BINOPS = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "<<", "&", "@"])
REPEATS = st.sampled_from(["3", "1000", "400000", "3000000", "20000000", "200000000", "-1", "True"])
CMPOPS = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not in", "is", "is not"])


def _expressions() -> st.SearchStrategy[str]:
    leaves = st.one_of(CONSTANTS, NAMES)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, BINOPS, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, REPEATS).map(lambda t: f"({t[0]} * {t[1]})"),  # the repetition that built GBs
            st.tuples(inner, CMPOPS, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["-", "+", "not "]), inner).map(lambda t: f"({t[0]}{t[1]})"),
            st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
            st.tuples(st.sampled_from(sorted(FUNCTIONS)), st.lists(inner, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"),
        )

    return st.recursive(leaves, extend, max_leaves=12)


def _evaluate_bounded(condition: Condition) -> object:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        return condition.evaluate(ENV)
    except ExpressionError:
        return None
    finally:
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert elapsed < MAX_EVAL_S, f"{condition.text!r} took {elapsed:.1f} s"
        assert peak < MAX_EVAL_PEAK_MIB * 2**20, f"{condition.text!r} peaked at {peak / 2**20:.0f} MiB"


@FUZZ
@given(_expressions())
def test_random_conditions_fail_only_as_expression_errors(text: str) -> None:
    try:
        condition = Condition(text)
    except ExpressionError:
        return
    value = _evaluate_bounded(condition)
    assert value is None or value is MISSING or isinstance(value, (bool, int, float, str, list, tuple))


@FUZZ
@given(st.text(max_size=200))
def test_raw_text_conditions_fail_only_as_expression_errors(text: str) -> None:
    try:
        condition = Condition(text)
    except ExpressionError:
        return
    _evaluate_bounded(condition)


SPECS = st.one_of(
    st.text(alphabet="<>=^+- z#0123456789_,.%bcdeEfFgGnosxX{}!:[]", max_size=12),
    st.sampled_from([">100000000", ".100000f", "0>5", ",.2f", "x<200", ">201", "=+020.3e", "%", "s", "_b"]),
)


@FUZZ
@given(st.lists(st.tuples(st.text(alphabet="ab {}", max_size=4), st.one_of(NAMES, st.text(max_size=5)),
                          st.one_of(st.just(""), SPECS)), max_size=5))
def test_random_templates_fail_only_at_load_and_render_bounded(parts: list[tuple[str, str, str]]) -> None:
    text = "".join(f"{lit}{{{name}{':' + spec if spec else ''}}}" for lit, name, spec in parts)
    try:
        template = Template(text)
    except ExpressionError:
        return
    started = time.perf_counter()
    rendered = template.render(ENV)
    assert time.perf_counter() - started < MAX_EVAL_S
    assert len(rendered) <= len(text) + len(template.names) * MAX_RENDERED_CHARS
