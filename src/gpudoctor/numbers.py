"""One way to write a number for a person: values, counts, ranges, speed-ups and shares of a step.

Why this exists: rule messages (catalog templates), impact lines, evidence, the card groups and the
dashboard each formatted numbers their own way, and a reader saw "8.0 small copies", "est.
1.01–1.01×" and two percentages of one time. Every view and the template renderer call these
functions, so that a count prints as a count, a range whose ends print alike is one value, and a
finding whose fix gains nothing shows as such.

What it must not do: import anything heavy (the rules engine and every view import it), or decide
anything but how a number reads.
"""

from __future__ import annotations

import re
from typing import Any

#: ``.1f``-style precision in a format spec (``>8.2f``, ``,.1f``, ``.0f``).
_FIXED = re.compile(r"\.(\d+)f$")

#: A fix whose estimate rounds to this or less gains nothing a reader can see (the card says ``1.00×``).
NO_GAIN_SPEEDUP = 1.005


def formatted(value: Any, spec: str) -> str:
    """``format(value, spec)``, except that a whole number in a fixed-point spec prints without
    decimals: ``{n:.1f}`` of 8.0 is ``8``, of 8.25 is ``8.2`` — a count never reads as a float."""
    if spec and isinstance(value, float) and value.is_integer() and _FIXED.search(spec):
        spec = _FIXED.sub(".0f", spec)
    return format(value, spec)


def plain(value: Any) -> str:
    """A value for evidence and tables: thousands grouped, three significant digits below 10, one
    decimal below 1000; whole numbers without decimals; yes/no; ``–`` for none or NaN."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}" if abs(value) >= 1000 else str(int(value))
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(v) for v in value[:5]) + (" …" if len(value) > 5 else "")
    return "–" if value is None else str(value)


def speedup(low: float, high: float) -> str:
    """``1.49–1.63×``, or ``1.49×`` when both ends print alike."""
    a, b = f"{low:.2f}", f"{high:.2f}"
    return f"{a}×" if a == b else f"{a}–{b}×"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 finding``, ``3 findings``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def ms_share(ms: float, base_ms: float) -> str:
    """``125.4 ms (84%)``: a time and its share of ``base_ms`` (the one step every line of a report uses)."""
    if base_ms <= 0:
        return f"{ms:.1f} ms"
    return f"{ms:.1f} ms ({100.0 * ms / base_ms:.0f}%)"


def gains_nothing(low: float, high: float) -> bool:
    """Whether a fix's whole estimated range prints as ``1.00×``: nothing worth a card."""
    return high < NO_GAIN_SPEEDUP and low < NO_GAIN_SPEEDUP
