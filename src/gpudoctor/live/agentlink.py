"""The session's side of the in-process agent: find or inject it, poll its step statistics, run a
profile window, and always say in one sentence why it is not there.

Talks to the agent only through ``gpudoctor.agent.client`` (see ``agent/PROTOCOL.md``), imported
lazily so the live side still works — without step facts — where that module is missing. An agent
that was already running (``gpudoctor run``) is left in place on close; one we injected is detached.
Never raises to the caller.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from gpudoctor.live.samples import AgentState, StepStats

log = logging.getLogger("gpudoctor.live.agentlink")


class AgentLink:
    """Holds at most one agent client for one PID."""

    def __init__(self, pid: int, inject: bool = True) -> None:
        self.pid = pid
        self._want_inject = inject
        self._lock = threading.Lock()
        self._client: Any = None
        self._injected = False
        self._state = AgentState(status="unavailable", detail="not connected yet.")
        self.steps: StepStats | None = None
        self._profile_label: str | None = None
        self._trace_path: str | None = None
        self._trace_taken = True
        if not inject:
            self._state = AgentState(status="unavailable",
                                     detail="the agent is off (--no-agent): no step timings or CUDA memory stats.")

    def connect(self) -> None:
        """Find a running agent, else inject one (when allowed). Sets the state either way."""
        try:
            from gpudoctor.agent import client as agent_client  # type: ignore[attr-defined,unused-ignore]
        except ImportError:
            self._set(AgentState(status="unavailable",
                                 detail="the agent client is not part of this gpudoctor build; step facts are skipped."))
            return
        try:
            client = agent_client.find_agent(self.pid)
            if client is None and self._want_inject:
                self._set(AgentState(status="injecting", detail="injecting the agent…"))
                result = agent_client.inject(self.pid)
                if not result.ok:
                    self._set(AgentState(status="unavailable", detail=result.reason or "injection failed."))
                    return
                client, self._injected = result.client, result.method != "already-running"
            elif client is None:
                return
        except Exception as exc:  # the agent is optional: one sentence, carry on
            self._set(AgentState(status="unavailable", detail=f"the agent could not be reached: {exc}"))
            return
        with self._lock:
            self._client = client
        self._refresh_state("connected", "")
        self.poll()

    def _set(self, state: AgentState) -> None:
        with self._lock:
            self._state = state

    def _refresh_state(self, status: str, detail: str) -> None:
        with self._lock:
            client = self._client
        socket_path = str(getattr(client, "socket_path", "")) or None if client else None
        self._set(AgentState(status=status, detail=detail, socket_path=socket_path,
                             profile_status=self._profile_label, profile_trace_path=self._trace_path))

    def poll(self) -> None:
        """Fetch step statistics and profile progress (bounded by the client's socket timeout)."""
        with self._lock:
            client = self._client
        if client is None:
            return
        try:
            self.steps = client.stats(window_s=10.0)
            if self._profile_label is not None and not self._profile_label.startswith(("done", "failed")):
                status = client.profile_status()
                self._profile_label = status.label()
                if status.status == "done" and status.trace_path:
                    self._trace_path, self._trace_taken = status.trace_path, False
            self._refresh_state("connected", "")
        except Exception as exc:
            with self._lock:
                self._client = None
            self._set(AgentState(status="lost", detail=f"lost the agent: {exc}"))

    def request_profile(self, steps: int) -> str:
        with self._lock:
            client = self._client
        if client is None:
            return f"cannot profile: {self._state.detail}"
        try:
            status = client.profile(steps=steps)
        except Exception as exc:
            return f"profile refused: {exc}"
        self._profile_label = status.label()
        self._refresh_state("connected", "")
        return f"profiling {steps} steps: {self._profile_label}"

    def take_finished_trace(self) -> str | None:
        """The path of a newly finished profile trace, once."""
        if self._trace_path and not self._trace_taken:
            self._trace_taken = True
            self._profile_label = "analysing"
            return self._trace_path
        return None

    def state(self) -> AgentState:
        with self._lock:
            return self._state

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is None:
            return
        try:
            if self._injected:
                client.detach()
            client.close()
        except Exception as exc:
            log.info("agent detach: %s", exc)
        self._set(AgentState(status="detached", detail="detached; the process keeps running."))
