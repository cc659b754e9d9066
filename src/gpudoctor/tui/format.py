"""Text formatting for the dashboard: numbers with units, durations, severity labels.

Why it exists: every panel shows the same kinds of numbers, and they must look the same everywhere
(and stay readable with ``NO_COLOR``: severity is always spelled out, never colour only).
It must not compute metrics — it only turns values the session already computed into text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudoctor.model import Severity

if TYPE_CHECKING:
    from rich.text import Text
    from textual.widgets import Static

DASH = "–"

SEVERITY_LABEL = {Severity.CRITICAL: "CRIT", Severity.WARNING: "WARN", Severity.INFO: "INFO"}
SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def pct(value: float | None, digits: int = 0) -> str:
    """``16%`` or a dash when the value is unknown."""
    if value is None:
        return DASH
    return f"{value:.{digits}f}%"


def num(value: float | None, digits: int = 0, unit: str = "") -> str:
    """A number with an optional unit suffix, or a dash."""
    if value is None:
        return DASH
    return f"{value:.{digits}f}{unit}"


def mib(value: float | None) -> str:
    """Memory in the largest sensible unit: ``812M`` / ``5.4G``."""
    if value is None:
        return DASH
    if value >= 1024:
        return f"{value / 1024:.1f}G"
    return f"{value:.0f}M"


def mem_pair(used_mib: float | None, total_mib: float | None) -> str:
    """``5.4G/141G``."""
    if used_mib is None:
        return DASH
    if total_mib is None:
        return mib(used_mib)
    return f"{mib(used_mib)}/{mib(total_mib)}"


def duration(seconds: float | None) -> str:
    """``45s``, ``12m05s``, ``3h07m``."""
    if seconds is None or seconds < 0:
        return DASH
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def value_text(value: object) -> str:
    """An evidence value as text: floats to at most 2 decimals, lists joined."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(value_text(v) for v in value)
    return str(value)


def shorten(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` characters with an ellipsis."""
    if width <= 1:
        return text[:width]
    return text if len(text) <= width else text[: width - 1] + "…"


def command_text(cmdline: list[str] | tuple[str, ...], width: int) -> str:
    """A process's command for a one-line header: the interpreter and the script by their names, then
    the arguments, cut at the end — ``python3 input_bound.py --steps 0 …`` (cut from the start, the
    header showed the interpreter's path and lost the script's name)."""
    import os

    parts = list(cmdline)
    if not parts:
        return ""
    parts[0] = os.path.basename(parts[0])
    for k in range(1, len(parts)):
        if not parts[k].startswith("-"):
            parts[k] = os.path.basename(parts[k]) if "/" in parts[k] else parts[k]
            break
    return shorten(" ".join(parts), width)


def update_static(widget: Static, text: Text) -> None:
    """Give ``widget`` new text only when it changed, and re-layout only when its shape changed.

    A dashboard refreshes every second; re-laying out the whole screen for a digit that changed is
    most of its CPU cost. Same lines, same longest line: repaint this widget only.
    """
    last: Text | None = getattr(widget, "_gd_last_text", None)
    if last is not None and last == text:
        return
    shape = (len(text.plain.splitlines()), max((len(line) for line in text.plain.splitlines()), default=0))
    same_shape = last is not None and getattr(widget, "_gd_last_shape", None) == shape
    widget._gd_last_text = text  # type: ignore[attr-defined]
    widget._gd_last_shape = shape  # type: ignore[attr-defined]
    widget.update(text, layout=not same_shape)
