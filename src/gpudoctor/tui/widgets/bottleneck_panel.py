"""The top panel: what bounds the step, and the step-time bar — the three-second answer.

Why it exists: before any list of findings, a tired engineer needs one line that says whether the
GPU, the input pipeline, the host or communication bounds the step, and a picture of where the step
goes. It draws the verdict it is given (live: agent + NVML, then the profile window's trace;
``analyze --tui``: the slowest rank's) and never computes one.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gpudoctor.bottleneck import Bottleneck
from gpudoctor.report.render import rich_bar, rich_legend
from gpudoctor.tui.format import update_static

_BOUND_STYLE = {"gpu-compute": "bold green", "input": "bold red", "host-overhead": "bold yellow",
                "communication": "bold magenta", "memory": "bold red"}


#: Where the verdict's numbers come from, in the panel's words.
_BASIS_WORDS = {"trace": "from the trace", "live": "agent + NVML", "trace+live": "trace's GPU work, agent's step"}


class BottleneckPanel(Static):
    """Verdict line, stacked bar and legend (three lines); a hint while no verdict exists yet."""

    DEFAULT_CSS = "BottleneckPanel { height: auto; max-height: 5; padding: 0 1; }"

    def show(self, bottleneck: Bottleneck | None, waiting: str = "waiting for step times…") -> None:
        self.display = bottleneck is not None  # no line until there is a verdict (a CPU-only job never has one)
        if bottleneck is None:
            update_static(self, Text(f"Bottleneck: {waiting}", style="dim"))
            return
        head = Text("Bottleneck ", style="bold")
        head.append(bottleneck.bound, style=_BOUND_STYLE.get(bottleneck.bound, "bold"))
        head.append(f" ({_BASIS_WORDS.get(bottleneck.basis, bottleneck.basis)}): ", style="dim")
        head.append(bottleneck.line)
        width = max(20, (self.size.width or 80) - 2)
        text = head + Text("\n") + rich_bar(bottleneck, width) + Text("\n") + rich_legend(bottleneck)
        update_static(self, text)
