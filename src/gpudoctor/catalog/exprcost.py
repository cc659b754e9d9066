"""What one evaluation of a rule condition may spend: a cost budget and limits on the values it builds.

Parsing a condition bounds its length and node count, but a short condition can still be expensive:
``sum([[0]] * 40000, [])`` is quadratic, ``[0] * 200000000`` takes gigabytes, ``round(1e308 * 10)``
overflows. Every operation of :mod:`gpudoctor.catalog.expr` therefore goes through here: it is charged
for the elements it touches or builds (:class:`Budget`), sequence and integer growth is checked
*before* the value is built, and anything Python itself refuses (overflow, a math domain error) comes
out as an :class:`ExpressionError`, which the engine reports as a note about that one rule.

This module must not evaluate anything itself beyond the whitelisted operations it is given.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

#: Element-steps one evaluation may spend (each operation is charged for what it touches or builds).
MAX_COST = 1_000_000
#: Largest list, tuple or string a condition may build, counting nested elements and characters
#: (an integer counts one per 32 bits).
MAX_VALUE_SIZE = 100_000
#: Largest integer a condition may compute, in bits (about 1200 decimal digits).
MAX_INT_BITS = 4096
#: Largest ``ndigits`` accepted by ``round``.
MAX_ROUND_DIGITS = 400

_SEQUENCES = (str, list, tuple)


class ExpressionError(ValueError):
    """A condition or template that the safe evaluator refuses, or that failed while evaluated."""


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
    "given": lambda value, fallback: value,   # its MISSING case is the evaluator's (expr._eval)
}

BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: lambda a, b: a / b if b else math.inf if a else 0.0,
    ast.FloorDiv: lambda a, b: a // b if b else 0,
    ast.Mod: lambda a, b: a % b if b else 0,
}


class Budget:
    """The element-steps left to one evaluation, and the sizes of the values it has measured."""

    def __init__(self, limit: int = MAX_COST) -> None:
        self.limit = limit
        self.left = limit
        self._sizes: dict[int, tuple[Any, int]] = {}  # id → (value kept alive, size)

    def charge(self, steps: int) -> None:
        self.left -= max(steps, 1)
        if self.left < 0:
            raise ExpressionError(f"condition needs more than {self.limit} steps to evaluate")

    def size(self, value: Any) -> int:
        """Elements and characters in ``value``, counted deeply; measured once per value."""
        if isinstance(value, str):
            return len(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return 1 + abs(value).bit_length() // 32
        if not isinstance(value, (list, tuple)):
            return 1
        cached = self._sizes.get(id(value))
        if cached is not None:
            return cached[1]
        self.charge(len(value))
        total = len(value)
        for item in value:
            if isinstance(item, (*_SEQUENCES, int)):
                total += self.size(item) - (0 if isinstance(item, _SEQUENCES) else 1)
            if total > MAX_VALUE_SIZE:
                break
        self._sizes[id(value)] = (value, total)
        return total

    def check(self, value: Any, shown: str) -> Any:
        """``value`` itself, or an :class:`ExpressionError` if it is larger than a condition may hold."""
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
            raise ExpressionError(f"{shown} is an integer of more than {MAX_INT_BITS} bits")
        if isinstance(value, _SEQUENCES) and self.size(value) > MAX_VALUE_SIZE:
            raise ExpressionError(f"{shown} holds more than {MAX_VALUE_SIZE} elements and characters")
        return value


def _too_large(shown: str, size: int) -> ExpressionError:
    return ExpressionError(f"{shown} would build a value of {size} elements and characters "
                           f"(limit {MAX_VALUE_SIZE})")


def binop(op: ast.operator, left: Any, right: Any, budget: Budget, shown: str) -> Any:
    """``left op right``, refused before it is computed when the result would be too large."""
    if isinstance(op, ast.Mult):
        if isinstance(left, _SEQUENCES) and isinstance(right, int):
            left, right = right, left
        if isinstance(right, _SEQUENCES) and isinstance(left, int):
            grown = budget.size(right) * max(left, 0)
            if grown > MAX_VALUE_SIZE:
                raise _too_large(shown, grown)
            budget.charge(len(right) * max(left, 0))
        elif isinstance(left, int) and isinstance(right, int) \
                and abs(left).bit_length() + abs(right).bit_length() > MAX_INT_BITS + 1:
            raise ExpressionError(f"{shown} is an integer of more than {MAX_INT_BITS} bits")
    elif isinstance(op, ast.Add) and isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
        grown = budget.size(left) + budget.size(right)
        if grown > MAX_VALUE_SIZE:
            raise _too_large(shown, grown)
        budget.charge(len(left) + len(right))
    elif isinstance(op, ast.Mod) and isinstance(left, str):
        raise ExpressionError(f"cannot compute {shown}: % is arithmetic only, not string formatting")
    else:
        budget.charge(1)
    try:
        result = BINOPS[type(op)](left, right)
    except (TypeError, ArithmeticError, ValueError) as exc:
        raise ExpressionError(f"cannot compute {shown}: {exc}") from None
    return budget.check(result, shown)


def compare(op: Callable[[Any, Any], bool], left: Any, right: Any, budget: Budget, shown: str) -> bool:
    """A comparison, charged for the elements it may have to look at."""
    budget.charge(budget.size(left) + budget.size(right))
    try:
        return bool(op(left, right))
    except (TypeError, ArithmeticError, ValueError) as exc:
        raise ExpressionError(f"cannot compare in {shown}: {exc}") from None


def call(name: str, args: Sequence[Any], budget: Budget, shown: str) -> Any:
    """One whitelisted function, charged for its arguments; ``sum`` is charged step by step."""
    if name == "sum":
        return _sum(args, budget, shown)
    if name == "round" and len(args) > 1 and isinstance(args[1], int) and abs(args[1]) > MAX_ROUND_DIGITS:
        raise ExpressionError(f"cannot compute {shown}: round() takes at most {MAX_ROUND_DIGITS} digits")
    steps = sum(budget.size(a) for a in args)
    budget.charge(steps * max(len(args) - 1, 1) if name == "contains_any" else steps)
    try:
        result = FUNCTIONS[name](*args)
    except (TypeError, ArithmeticError, ValueError) as exc:
        raise ExpressionError(f"cannot compute {shown}: {exc}") from None
    return budget.check(result, shown)


def _sum(args: Sequence[Any], budget: Budget, shown: str) -> Any:
    if not 1 <= len(args) <= 2:
        raise ExpressionError(f"cannot compute {shown}: sum() takes a sequence and an optional start")
    values, total = args[0], args[1] if len(args) == 2 else 0
    if isinstance(values, str):
        raise ExpressionError(f"cannot compute {shown}: sum() of a string")
    try:
        items = iter(values)
    except TypeError as exc:
        raise ExpressionError(f"cannot compute {shown}: {exc}") from None
    add = ast.Add()
    for item in items:
        total = binop(add, total, item, budget, shown)
    return total
