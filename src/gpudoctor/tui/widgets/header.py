"""The top line: which process is watched, its ranks, the agent's state and how long we have been attached.

Why it exists: the first thing an engineer on a shared node must know is *what* they are looking at and
whether the data is still live (target exited, agent lost). It must not poll anything itself: the app
hands it each snapshot. Time shown is snapshot time minus attach time — never the wall clock — so
recorded sessions render identically.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gpudoctor.live.samples import AgentStatus, ProfileState, Snapshot
from gpudoctor.report.model import Report
from gpudoctor.tui.format import command_text, duration, shorten, update_static

_AGENT_STYLE = {
    "connected": "green",
    "injecting": "yellow",
    "unavailable": "yellow",
    "lost": "bold red",
    "detached": "dim",
}


class StatusHeader(Static):
    """One or two lines of who/what/how-long; turns red when the target is gone."""

    DEFAULT_CSS = """
    StatusHeader { height: auto; max-height: 2; padding: 0 1; background: $panel; }
    StatusHeader.-gone { background: $error 40%; }
    """

    def show_snapshot(self, snapshot: Snapshot, rank: int | None = None) -> None:
        """Render the header for a live snapshot."""
        proc = snapshot.process
        alive = proc.alive if proc is not None else True
        agent_lost = False
        text = Text()
        if not alive:
            text.append("TARGET EXITED — last data kept ", style="bold red")
        elif agent_lost := snapshot.agent.status is AgentStatus.LOST:
            text.append("AGENT LOST — showing what needs no agent ", style="bold red")
        text.append("gpudoctor ", style="bold")
        text.append(f"pid {snapshot.target_pid}", style="bold")
        if proc is not None and proc.cmdline:
            text.append("  " + command_text(proc.cmdline, 48), style="dim")
        if len(snapshot.rank_table) > 1 or len(snapshot.ranks) > 1:
            shown = f"rank {rank}" if rank is not None else "all ranks"
            text.append(f"  {max(len(snapshot.ranks), len(snapshot.rank_table))} ranks ({shown}; r: switch)")
        elif proc is not None and proc.world_size:
            text.append(f"  rank {proc.rank}/{proc.world_size}")
        agent = snapshot.agent
        text.append("  agent: ")
        if alive:
            text.append(agent.status, style=_AGENT_STYLE.get(agent.status, ""))
        else:   # its last state ("connected", "profile: done") would read as live
            text.append("gone with the job", style="dim")
        if alive and agent.profile_status and agent.profile_state is not ProfileState.IDLE:
            text.append(f"  profile: {agent.profile_status}", style="magenta")
        text.append(f"  attached {duration(snapshot.timestamp - snapshot.started_at)}")
        self.set_class(not alive or agent_lost, "-gone")
        update_static(self, text)

    def show_report(self, report: Report) -> None:
        """Render the header for a finished analysis (``analyze --tui``)."""
        text = Text()
        text.append("gpudoctor ", style="bold")
        text.append(f"{report.command} ", style="bold")
        inputs = ", ".join(report.inputs)
        text.append(shorten(inputs, 60), style="dim")
        ranks = report.data.get("ranks") if isinstance(report.data, dict) else None
        if isinstance(ranks, (list, dict)):
            text.append(f"  {len(ranks)} rank(s)")
        text.append(f"  {len(report.findings)} finding(s)")
        if report.elapsed_s is not None:
            text.append(f"  analysed in {report.elapsed_s:.1f}s")
        self.update(text)
