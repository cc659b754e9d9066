"""A small, safe evaluator for rule conditions and message templates.

Rule files are data, and a user's own rule directory must not be able to run code. Conditions are
parsed with :func:`ast.parse` in ``eval`` mode and then *interpreted* here over a whitelist of node
types — nothing is ever passed to :func:`eval` or :func:`compile`. Attribute access, subscripts,
lambdas, comprehensions and calls to anything but the functions in :data:`FUNCTIONS` are refused at
load time, with the rule file named in the error.

Missing evidence is tracked, not guessed: a name whose fact is absent (or ``None``) evaluates to
:data:`MISSING`, which propagates through arithmetic and comparisons; ``and``/``or`` still decide
when a known operand settles the result. A condition that ends as ``MISSING`` means "not evaluated".
"""

from __future__ import annotations

import ast
import math
import operator
import string
from collections.abc import Callable, Mapping
from typing import Any

MAX_CONDITION_CHARS = 2000
MAX_NODES = 400


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


class ExpressionError(ValueError):
    """A condition or template that the safe evaluator refuses."""


def _count(values: Any, item: Any = True) -> int:
    return sum(1 for v in values if v == item)


def _contains_any(haystack: Any, *needles: Any) -> bool:
    text = haystack if isinstance(haystack, str) else " ".join(map(str, haystack))
    return any(str(n) in text for n in needles)


#: The only callables a condition may use.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "len": len,
    "round": round,
    "any": any,
    "all": all,
    "sum": sum,
    "count": _count,
    "contains_any": _contains_any,
    "lower": lambda s: str(s).lower(),
    "log2": math.log2,
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: lambda a, b: a / b if b else math.inf if a else 0.0,
    ast.FloorDiv: lambda a, b: a // b if b else 0,
    ast.Mod: lambda a, b: a % b if b else 0,
}
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
    ast.Call, *_BINOPS, *_CMPOPS,
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
        nodes = list(ast.walk(tree))
        if len(nodes) > MAX_NODES:
            raise ExpressionError(f"condition has more than {MAX_NODES} parts")
        for node in nodes:
            if not isinstance(node, _ALLOWED):
                raise ExpressionError(f"'{type(node).__name__}' is not allowed in a condition")
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
        """Evaluate over ``env`` (facts and options). Returns a value or :data:`MISSING`."""
        return _eval(self._tree, env)

    def __repr__(self) -> str:
        return f"Condition({self.text!r})"


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        value = env.get(node.id, MISSING)
        return MISSING if value is None else value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_eval(e, env) for e in node.elts]
        return MISSING if any(i is MISSING for i in items) else items
    if isinstance(node, ast.BoolOp):
        return _eval_boolop(node, env)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env)
        if value is MISSING:
            return MISSING
        if isinstance(node.op, ast.Not):
            return not value
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if left is MISSING or right is MISSING:
            return MISSING
        try:
            return _BINOPS[type(node.op)](left, right)
        except TypeError as exc:
            raise ExpressionError(f"cannot compute {ast.unparse(node)}: {exc}") from None
    if isinstance(node, ast.Compare):
        return _eval_compare(node, env)
    if isinstance(node, ast.IfExp):
        test = _eval(node.test, env)
        if test is MISSING:
            return MISSING
        return _eval(node.body if test else node.orelse, env)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        args = [_eval(a, env) for a in node.args]
        if any(a is MISSING for a in args):
            return MISSING
        try:
            return FUNCTIONS[node.func.id](*args)
        except (TypeError, ValueError) as exc:
            raise ExpressionError(f"cannot compute {ast.unparse(node)}: {exc}") from None
    raise ExpressionError(f"'{type(node).__name__}' is not allowed in a condition")  # pragma: no cover


def _eval_boolop(node: ast.BoolOp, env: Mapping[str, Any]) -> Any:
    is_and = isinstance(node.op, ast.And)
    saw_missing = False
    for value_node in node.values:
        value = _eval(value_node, env)
        if value is MISSING:
            saw_missing = True
        elif is_and and not value:
            return False
        elif not is_and and value:
            return True
    return MISSING if saw_missing else is_and


def _eval_compare(node: ast.Compare, env: Mapping[str, Any]) -> Any:
    left = _eval(node.left, env)
    for op, comparator in zip(node.ops, node.comparators):
        right = _eval(comparator, env)
        if left is MISSING or right is MISSING:
            return MISSING
        try:
            if not _CMPOPS[type(op)](left, right):
                return False
        except TypeError as exc:
            raise ExpressionError(f"cannot compare in {ast.unparse(node)}: {exc}") from None
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
                out.append(format(value, spec))
            except (TypeError, ValueError):
                out.append(str(value))
        return "".join(out)
