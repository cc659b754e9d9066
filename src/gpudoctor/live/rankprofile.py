"""One torch.profiler window on every rank of a job at once, analysed as one rank set.

Why this exists: communication/compute overlap, the communication share and a straggler by HTA's
definition (the rank whose collectives start last) need a trace from *every* rank over the same
steps. ``gpudoctor attach <launcher or rank> --profile N`` asks each rank's agent for an N-step
window at the same moment (the ranks step in lockstep, so the windows cover the same steps to within
one) and, once every rank has written its trace, runs the trace analyzer on the set.

What it must not do: inject, stop the ranks' windows from this side (the agents end them on their own
training threads), or block the session: :meth:`RankProfile.poll` only asks each agent for its status.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.live.rankwatch import RankWatch
from gpudoctor.live.samples import ProfileState

#: How long after the request the set is given up when some rank never finishes its window.
GIVE_UP_AFTER_S = 180.0


@dataclass
class RankProfile:
    """The state of one all-ranks profile request (see the module docstring)."""

    watch: RankWatch
    steps: int = 0
    requested_at: float = 0.0
    statuses: dict[int, str] = field(default_factory=dict)      # rank → status label
    traces: dict[int, str] = field(default_factory=dict)        # rank → trace path, once done
    taken: bool = False
    outcome: str | None = None                                  # "analysed …" / "failed: …", once over

    def request(self, steps: int) -> str:
        """Ask every rank's agent for a ``steps``-step window; one sentence on how it went."""
        self.steps, self.requested_at, self.taken, self.outcome = steps, time.monotonic(), False, None
        self.statuses.clear()
        self.traces.clear()
        refused = []
        for rank, pid in self._ranks():
            client = self.watch.client_for(pid)
            if client is None:
                refused.append(f"rank {rank}: no agent")
                continue
            try:
                status = client.profile(steps=steps)
            except Exception as exc:
                refused.append(f"rank {rank}: {exc}")
                continue
            self.statuses[rank] = status.label()
        if not self.statuses:
            self.outcome = "failed: no rank's agent took the request"
            return "cannot profile the ranks: " + "; ".join(refused)
        asked = f"profiling {steps} steps on {len(self.statuses)} rank(s)"
        return asked + (f" (not on {'; '.join(refused)})" if refused else "")

    def poll(self) -> list[str] | None:
        """The trace paths, once, when every asked rank has finished (or the wait is given up)."""
        if not self.statuses or self.taken:
            return None
        for rank, pid in self._ranks():
            if rank not in self.statuses or self.statuses[rank] in ("done", "failed") or rank in self.traces:
                continue
            client = self.watch.client_for(pid)
            try:
                status = client.profile_status() if client is not None else None
            except Exception:
                status = None
            if status is None:
                self.statuses[rank] = "failed"
                continue
            self.statuses[rank] = status.label()
            if status.status is ProfileState.DONE and status.trace_path:
                self.traces[rank] = status.trace_path
        finished = all(s in ("done", "failed") or s.startswith("failed") for s in self.statuses.values())
        if not finished and time.monotonic() - self.requested_at < GIVE_UP_AFTER_S:
            return None
        self.taken = True
        paths = [self.traces[r] for r in sorted(self.traces)]
        if not paths:
            self.outcome = f"failed: no rank wrote a trace ({self.label()})"
        return paths or None

    def label(self) -> str:
        """``rank 0: recording 2/5, rank 1: done`` while it runs; ``analysed …``/``failed: …`` once over."""
        if self.outcome is not None:
            return self.outcome
        return ", ".join(f"rank {r}: {s}" for r, s in sorted(self.statuses.items())) or "idle"

    def _ranks(self) -> list[tuple[int, int]]:
        return list(self.watch.group.numbered())


def rank_profile_rows(report: Any) -> tuple[dict[str, Any], ...]:
    """Per-rank overlap and communication numbers from an ``analyze`` report of the rank set."""
    keep = ("rank", "step_count", "step_time_p50_ms", "idle_pct", "compute_pct", "non_compute_pct", "comm_pct",
            "overlap_pct", "comm_kernel_share_pct", "collective_wait_ms_p50", "outside_collective_ms_p50", "path")
    rows = []
    for row in (getattr(report, "data", None) or {}).get("ranks", []) or []:
        rows.append({k: row[k] for k in keep if k in row})
    return tuple(rows)
