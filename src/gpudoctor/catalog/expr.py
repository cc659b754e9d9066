"""A small, safe evaluator for rule conditions and message templates.

Rule files are data, and a user's own rule directory must not be able to run code. Conditions are
parsed with :func:`ast.parse` in ``eval`` mode and then *interpreted* here over a whitelist of node
types — nothing is ever passed to :func:`eval` or :func:`compile`. Attribute access, subscripts,
lambdas, comprehensions and calls to anything but the functions in :data:`FUNCTIONS` are refused at
load time, with the rule file named in the error.

Missing evidence is tracked, not guessed: a name whose fact is absent (or ``None``) evaluates to
:data:`MISSING`, which propagates through arithmetic and comparisons; ``and``/``or`` still decide
when a known operand settles the result. A condition that ends as ``MISSING`` means "not evaluated".

Evaluation is bounded, not only parsing: every evaluation has a cost budget (:data:`MAX_COST`
element-steps, charged by the size of what each operation touches or builds), no value may grow past
:data:`MAX_VALUE_SIZE` elements and characters (counted deeply) or :data:`MAX_INT_BITS` bits, and a
template's format widths and precisions stay under :data:`MAX_FORMAT_WIDTH`. Overflow, a blown budget
or any other failure of a condition is an :class:`ExpressionError` — the engine turns it into a note
about that one rule and the rest of the run goes on.
"""

from __future__ import annotations

import ast
import operator
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

from gpudoctor.catalog.exprcost import (
    BINOPS,
    FUNCTIONS,
    MAX_COST,
    MAX_INT_BITS,
    MAX_VALUE_SIZE,
    Budget,
    ExpressionError,
    binop,
    call,
    compare,
)
from gpudoctor.numbers import formatted

__all__ = ["FUNCTIONS", "MAX_COST", "MAX_INT_BITS", "MAX_VALUE_SIZE", "MISSING", "Condition", "ExpressionError",
           "Template"]

MAX_CONDITION_CHARS = 2000
MAX_NODES = 400
#: Deepest nesting of a condition's tree (keeps the recursive interpreter far from Python's limit).
MAX_DEPTH = 60
#: Largest width or precision in a message template's format spec.
MAX_FORMAT_WIDTH = 200
#: Longest text one template field renders to (a fact holding a long list is shortened).
MAX_RENDERED_CHARS = 500
#: Python's format-spec mini-language: [[fill]align][sign][z][#][0][width][grouping][.precision][type].
_SPEC_RE = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(?P<width>\d*)[_,]?(?:\.(?P<precision>\d+))?[a-zA-Z%]?", re.S)


class _Missing:
    """Sentinel for evidence that is not there."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        raise TypeError("MISSING has no truth value; check with `is MISSING`")


MISSING: Any = _Missing()


_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
    ast.BinOp, ast.Compare, ast.Name, ast.Load, ast.Constant, ast.List, ast.Tuple, ast.IfExp,
    ast.Call, *BINOPS, *_CMPOPS,
)


class Condition:
    """A parsed, checked condition. Build once per rule, evaluate many times."""

    def __init__(self, text: str) -> None:
        if len(text) > MAX_CONDITION_CHARS:
            raise ExpressionError(f"condition longer than {MAX_CONDITION_CHARS} characters")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise ExpressionError(f"condition is not a valid expression: {exc.msg}") from None
        except (ValueError, MemoryError, RecursionError) as exc:  # e.g. a literal Python refuses
            raise ExpressionError(f"condition is not a valid expression: {exc}") from None
        nodes = list(ast.walk(tree))
        if len(nodes) > MAX_NODES:
            raise ExpressionError(f"condition has more than {MAX_NODES} parts")
        if _depth(tree) > MAX_DEPTH:
            raise ExpressionError(f"condition is nested more than {MAX_DEPTH} levels deep")
        for node in nodes:
            if not isinstance(node, _ALLOWED):
                raise ExpressionError(f"'{type(node).__name__}' is not allowed in a condition")
            if isinstance(node, ast.Constant):
                _check_constant(node.value)
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                    shown = ast.unparse(node.func)
                    raise ExpressionError(f"call to '{shown}' is not allowed (allowed: {', '.join(FUNCTIONS)})")
                if node.keywords:
                    raise ExpressionError("keyword arguments are not allowed in a condition")
        self.text = text.strip()
        self._tree = tree.body
        called = {n.func.id for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        self.names: tuple[str, ...] = tuple(
            dict.fromkeys(
                n.id for n in nodes
                if isinstance(n, ast.Name) and n.id not in called and n.id not in ("True", "False", "None")
            )
        )

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Evaluate over ``env`` (facts and options). Returns a value or :data:`MISSING`.

        Raises:
            ExpressionError: the condition failed (a type error, overflow, its cost budget spent).
        """
        try:
            return _eval(self._tree, env, Budget())
        except ExpressionError:
            raise
        except (TypeError, ArithmeticError, ValueError, MemoryError, RecursionError) as exc:
            raise ExpressionError(f"cannot evaluate {self.text[:80]!r}: {type(exc).__name__}: {exc}") from None

    def __repr__(self) -> str:
        return f"Condition({self.text!r})"


def _depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _check_constant(value: object) -> None:
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise ExpressionError(f"constant {type(value).__name__} {value!r:.40} is not allowed in a condition")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ExpressionError(f"integer constant of more than {MAX_INT_BITS} bits in a condition")


def _shown(node: ast.AST) -> str:
    """The node's source text, for messages; unparsed once per node (it was 40% of judging a rank set)."""
    text: str | None = getattr(node, "_gd_shown", None)
    if text is None:
        text = ast.unparse(node)
        node._gd_shown = text  # type: ignore[attr-defined]
    return text


def _eval(node: ast.AST, env: Mapping[str, Any], budget: Budget) -> Any:
    budget.charge(1)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        value = env.get(node.id, MISSING)
        return MISSING if value is None else value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_eval(e, env, budget) for e in node.elts]
        if any(i is MISSING for i in items):
            return MISSING
        return budget.check(items, "a list")
    if isinstance(node, ast.BoolOp):
        return _eval_boolop(node, env, budget)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env, budget)
        if value is MISSING:
            return MISSING
        if isinstance(node.op, ast.Not):
            return not value
        if isinstance(value, (str, list, tuple)):
            raise ExpressionError(f"cannot compute {ast.unparse(node)}: a sign on a {type(value).__name__}")
        try:
            return -value if isinstance(node.op, ast.USub) else +value
        except TypeError as exc:
            raise ExpressionError(f"cannot compute {ast.unparse(node)}: {exc}") from None
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env, budget), _eval(node.right, env, budget)
        if left is MISSING or right is MISSING:
            return MISSING
        return binop(node.op, left, right, budget, _shown(node))
    if isinstance(node, ast.Compare):
        return _eval_compare(node, env, budget)
    if isinstance(node, ast.IfExp):
        test = _eval(node.test, env, budget)
        if test is MISSING:
            return MISSING
        return _eval(node.body if test else node.orelse, env, budget)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        args = [_eval(a, env, budget) for a in node.args]
        if node.func.id == "given" and len(args) == 2 and args[0] is MISSING:
            return args[1]     # given(fact, fallback): the fallback stands in for a fact not measured
        if any(a is MISSING for a in args):
            return MISSING
        return call(node.func.id, args, budget, _shown(node))
    raise ExpressionError(f"'{type(node).__name__}' is not allowed in a condition")  # pragma: no cover


def _eval_boolop(node: ast.BoolOp, env: Mapping[str, Any], budget: Budget) -> Any:
    is_and = isinstance(node.op, ast.And)
    saw_missing = False
    for value_node in node.values:
        value = _eval(value_node, env, budget)
        if value is MISSING:
            saw_missing = True
        elif is_and and not value:
            return False
        elif not is_and and value:
            return True
    return MISSING if saw_missing else is_and


def _eval_compare(node: ast.Compare, env: Mapping[str, Any], budget: Budget) -> Any:
    left = _eval(node.left, env, budget)
    for op, comparator in zip(node.ops, node.comparators):
        right = _eval(comparator, env, budget)
        if left is MISSING or right is MISSING:
            return MISSING
        if not compare(_CMPOPS[type(op)], left, right, budget, _shown(node)):
            return False
        left = right
    return True


class Template:
    """A message template: ``{name}`` or ``{name:.1f}`` only — no attribute or index access."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.fields: list[tuple[str, str, str]] = []  # (literal, name, spec)
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise ExpressionError(f"message template is malformed: {exc}") from None
        for literal, name, spec, conversion in parsed:
            if name is not None and (not name.isidentifier() or conversion):
                raise ExpressionError(f"template field {{{name}}} must be a plain name")
            if spec and "{" in spec:
                raise ExpressionError("nested template fields are not allowed")
            if spec:
                _check_spec(name or "", spec)
            self.fields.append((literal, name or "", spec or ""))

    @property
    def names(self) -> list[str]:
        return [name for _, name, _ in self.fields if name]

    def render(self, env: Mapping[str, Any]) -> str:
        out = []
        for literal, name, spec in self.fields:
            out.append(literal)
            if not name:
                continue
            value = env.get(name)
            if value is None:
                out.append("?")
                continue
            try:
                shown = formatted(value, spec)
            except (TypeError, ValueError, ArithmeticError):
                shown = _plain(value)
            out.append(shown if len(shown) <= MAX_RENDERED_CHARS else shown[: MAX_RENDERED_CHARS - 1] + "…")
        return "".join(out)


def _plain(value: Any) -> str:
    try:
        return str(value)
    except (ValueError, ArithmeticError):  # e.g. an integer past Python's digit limit
        return f"<{type(value).__name__}>"


def _check_spec(name: str, spec: str) -> None:
    """Refuse a format spec Python would not accept, or one whose width or precision is huge."""
    match = _SPEC_RE.fullmatch(spec)
    if match is None:
        raise ExpressionError(f"template field {{{name}:{spec}}} has an invalid format spec")
    for part in ("width", "precision"):
        number = match.group(part)
        if number and (len(number) > 6 or int(number) > MAX_FORMAT_WIDTH):
            raise ExpressionError(f"template field {{{name}:{spec}}}: format {part} above {MAX_FORMAT_WIDTH}")
