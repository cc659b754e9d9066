"""The step-time picture: a horizontal stacked bar of where one training step goes.

Why this exists: a tired engineer should see at a glance whether the step is GPU work, input wait or
host overhead. Every view draws the same bar from the same segments: the terminal report and the
dashboard colour them (rich styles), Markdown and plain text tell them apart by fill character.

What it must not do: measure or judge anything; import rich (views style the segments themselves).
"""

from __future__ import annotations

from gpudoctor.bottleneck import LABELS, Bottleneck

#: Fill character and rich style of each part (GPU work solid, idle time light).
STYLE = {
    "gpu:busy": ("█", "green"),
    "gpu:gemm/conv": ("█", "green4"),
    "gpu:fusible": ("▓", "bright_green"),
    "gpu:other": ("▒", "cyan"),
    "gpu:communication": ("≡", "magenta"),
    "gpu:memcpy": ("=", "blue"),
    "idle:input wait": ("░", "red"),
    "idle:host sync": ("/", "yellow"),
    "idle:host/launch": ("·", "bright_black"),
}


def segments(bottleneck: Bottleneck, width: int) -> list[tuple[str, int]]:
    """``(part, cells)`` for a bar ``width`` cells wide; parts under half a cell are left out, the rest rounded
    so that the cells add up to ``width``."""
    shares = [(name, pct) for name, _, pct in bottleneck.parts if pct > 0]
    total = sum(p for _, p in shares) or 1.0
    raw = [(name, width * pct / total) for name, pct in shares]
    cells = [(name, int(w)) for name, w in raw]
    left = width - sum(c for _, c in cells)
    order = sorted(range(len(raw)), key=lambda i: raw[i][1] - int(raw[i][1]), reverse=True)
    for i in order[:left]:
        cells[i] = (cells[i][0], cells[i][1] + 1)
    return [(name, c) for name, c in cells if c > 0]


def plain_bar(bottleneck: Bottleneck, width: int = 60) -> str:
    """The bar in plain characters: ``|████▓▓▓░░░░|``."""
    return "|" + "".join(STYLE[name][0] * cells for name, cells in segments(bottleneck, width)) + "|"


def legend(bottleneck: Bottleneck, min_pct: float = 0.5) -> list[tuple[str, str, float, float]]:
    """``(part, label, ms per step, % of step)`` for each part worth naming."""
    return [(name, LABELS[name], ms, pct) for name, ms, pct in bottleneck.parts if pct >= min_pct]


def legend_text(bottleneck: Bottleneck) -> str:
    """``█ GEMM/conv 11.1 ms (51%) · ▓ fusible 5.2 ms (24%) …``."""
    return " · ".join(f"{STYLE[name][0]} {label} {ms:.1f} ms ({pct:.0f}%)" for name, label, ms, pct in legend(bottleneck))
