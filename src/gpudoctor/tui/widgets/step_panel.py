"""The step panel: step time p50/p90, data-wait share, throughput and its trend.

Why it exists: step time is what the user pays for, and the data-wait share says at a glance whether
the input pipeline is the bottleneck. Values come from the in-process agent's ``StepStats``; without
an agent the panel says so instead of showing zeros. It computes nothing.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from gpudoctor.live.samples import AgentState, StepStats
from gpudoctor.tui.format import num, pct, update_static
from gpudoctor.tui.history import SnapshotHistory


def step_text(steps: StepStats | None, agent: AgentState) -> Text:
    """The panel's lines for one ``StepStats`` (or why there are none)."""
    if steps is None:
        reason = agent.detail or f"agent {agent.status}"
        return Text(f"no step timings: {reason}", style="dim")
    text = Text()
    text.append("step p50 ")
    text.append(num(steps.step_time_p50_ms, 1, " ms"), style="bold")
    text.append(f"  p90 {num(steps.step_time_p90_ms, 1, ' ms')}\n")
    text.append(f"{num(steps.steps_per_s, 1, ' steps/s')}  data wait ")
    wait_style = "bold red" if (steps.data_wait_pct or 0) >= 30 else "bold"
    text.append(pct(steps.data_wait_pct), style=wait_style)
    extras = []
    if steps.autocast_enabled is not None:
        extras.append(f"autocast {steps.autocast_dtype or 'on'}" if steps.autocast_enabled else "autocast off")
    if steps.tf32_matmul is not None:
        extras.append("tf32 on" if steps.tf32_matmul else "tf32 off")
    if steps.graph_breaks:
        extras.append(f"{steps.graph_breaks} graph breaks")
    if extras:
        text.append("\n" + "  ".join(extras), style="dim")
    return text


class StepPanel(Vertical):
    """Text plus a throughput sparkline."""

    DEFAULT_CSS = """
    StepPanel { height: auto; }
    StepPanel #step-text { height: auto; }
    StepPanel Sparkline { height: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="step-text")
        yield Sparkline([], id="spark-steps")

    def show(self, steps: StepStats | None, agent: AgentState, history: SnapshotHistory) -> None:
        update_static(self.query_one("#step-text", Static), step_text(steps, agent))
        self.query_one("#spark-steps", Sparkline).data = history.step_series("steps_per_s")
