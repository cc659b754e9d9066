"""When a training loop has warmed up enough for the automatic profile window.

Why this exists: the window profiles a few steps and every trace rule judges them, so steps that
are still compiling make the step look slow for reasons that go away by themselves.

Not enough on its own: on the H200, pytorch/examples DCGAN under ``torch.compile(mode="reduce-overhead")``
still had CUDA graphs recorded in the window's first two steps with this gate (191.6 and 55.4 ms against
11.0–13.2 ms after; no Dynamo compile in the window: tests/data/gpu_runs/h200-dcgan/warmup_gate/), perhaps
because starting the profiler makes the graphs record again (not tested). The trace side therefore
leaves leading recording steps out (:func:`gpudoctor.trace.timeline.graph_recording_steps`).

The rule here: a loop without torch.compile is ready after :data:`MIN_STEPS` steps (as before). With
compiled graphs (the agent's ``unique_graphs`` > 0) it is ready :data:`STEPS_AFTER_COMPILE` steps
after the graph count last changed (the backward graph and CUDA-graph warm-up take the first few
calls after each compile), or, when it keeps compiling, :data:`MAX_WAIT_S` after the
window was first due, so that a loop with changing shapes still gets one.

What it must not do: talk to the agent or read the clock itself (the caller passes ``now``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Steps in the agent's window before a loop without compiled graphs is profiled.
MIN_STEPS = 3
#: Steps after the compiled-graph count last changed before a compiled loop is profiled.
STEPS_AFTER_COMPILE = 8
#: How long a loop that keeps compiling is waited for (s) once the window was first due.
MAX_WAIT_S = 60.0


@dataclass
class WarmUpGate:
    """Fed the agent's step stats at every poll; says when the profile window may start."""

    graphs: int | None = None            # compiled graphs at the last change seen
    graphs_changed_at: int = 0           # the agent's steps_total then
    due_since: float | None = None       # when the window was first due (MIN_STEPS seen)
    reason: str = ""                     # why it is still waiting (empty when ready)

    def ready(self, steps_total: int, window_steps: int, unique_graphs: int | None, now: float) -> bool:
        if unique_graphs != self.graphs:
            self.graphs, self.graphs_changed_at = unique_graphs, steps_total
        if window_steps < MIN_STEPS:
            self.reason = f"{window_steps} of {MIN_STEPS} steps seen"
            return False
        if self.due_since is None:
            self.due_since = now
        if not unique_graphs:
            self.reason = ""
            return True
        after = steps_total - self.graphs_changed_at
        if after >= STEPS_AFTER_COMPILE:
            self.reason = ""
            return True
        if now - self.due_since >= MAX_WAIT_S:
            self.reason = f"still compiling after {MAX_WAIT_S:.0f} s: profiled anyway"
            return True
        self.reason = f"{after} of {STEPS_AFTER_COMPILE} steps since torch.compile last made a graph"
        return False
