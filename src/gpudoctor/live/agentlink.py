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
import time
from typing import Any

from gpudoctor.agent.protocol import AgentStatus, ProfileState, StatsReply
from gpudoctor.live.samples import AgentState, StepStats

log = logging.getLogger("gpudoctor.live.agentlink")

#: How often (once per poll, i.e. per second) a lost agent is looked for again before giving up.
MAX_RECONNECTS = 30


class AgentLink:
    """Holds at most one agent client for one PID."""

    def __init__(self, pid: int, mode: str = "inject") -> None:
        """``mode``: ``inject`` (find, else inject), ``find`` (only an agent already running), ``off``."""
        self.pid = pid
        self.mode = mode
        self._want_inject = mode == "inject"
        #: While the agent we inject starts up, the target runs its set-up code: stack windows that
        #: overlap [injecting_since, ready_at + 1 s] are not representative of the training loop.
        self.injecting_since: float | None = None
        self.ready_at: float | None = None
        self._lock = threading.Lock()
        self._client: Any = None
        self._injected = False
        self._state = AgentState(status=AgentStatus.INJECTING if mode == "inject" else AgentStatus.UNAVAILABLE,
                                 detail="connecting to the agent…")
        self.steps: StepStats | None = None
        self.last_stats: StatsReply | None = None  # the whole reply: recent_step_times_ms, steps_total
        self._profile_label: str | None = None
        self._profile_state: ProfileState | None = None
        self._profile_detail = ""
        self._trace_path: str | None = None
        self._trace_taken = True
        self._module: Any = None
        self._reconnects = 0
        self._closed = False
        if mode == "off":
            self._state = AgentState(status=AgentStatus.UNAVAILABLE,
                                     detail="the agent is off (--no-agent): no step timings or CUDA memory stats.")

    def disable(self, detail: str) -> None:
        """Use no agent in this process (e.g. a launcher whose ranks hold the agents); ``detail`` says why."""
        self.mode, self._want_inject = "off", False
        self._set(AgentState(status=AgentStatus.UNAVAILABLE, detail=detail))

    def connect(self) -> None:
        """Find a running agent, else inject one (when allowed). Sets the state either way."""
        if self.mode == "off":
            return
        try:
            from gpudoctor.agent import client as agent_client  # type: ignore[attr-defined,unused-ignore]
            from gpudoctor.agent.inject import inject
        except ImportError:
            self._set(AgentState(status=AgentStatus.UNAVAILABLE,
                                 detail="the agent client is not part of this gpudoctor build; step facts are skipped."))
            return
        try:
            client = agent_client.find_agent(self.pid)
            if client is None and self._want_inject:
                self._set(AgentState(status=AgentStatus.INJECTING, detail="injecting the agent…"))
                self.injecting_since = time.time()
                result = inject(self.pid)
                self.ready_at = time.time()
                if not result.ok:
                    self._set(AgentState(status=AgentStatus.UNAVAILABLE, detail=result.reason or "injection failed."))
                    return
                client, self._injected = result.client, result.method != "already-running"
            elif client is None:
                self._set(AgentState(status=AgentStatus.UNAVAILABLE, detail="no gpudoctor agent runs in the process and "
                                     "--once does not inject one: use --duration for step timings."))
                return
        except Exception as exc:  # the agent is optional: one sentence, carry on
            self._set(AgentState(status=AgentStatus.UNAVAILABLE, detail=f"the agent could not be reached: {exc}"))
            return
        self._module = agent_client
        with self._lock:
            closed = self._closed
            if not closed:
                self._client = client
        if closed:  # the session closed while we injected: take the agent out again, leave nothing behind
            self._drop(client)
            return
        self._refresh_state(AgentStatus.CONNECTED, "")
        self.poll()

    def _reconnect(self) -> None:
        """After a lost connection (e.g. the agent was busy writing a trace), find the agent again."""
        if self._module is None or self._reconnects >= MAX_RECONNECTS:
            return
        self._reconnects += 1
        try:
            client = self._module.find_agent(self.pid)
        except Exception:
            client = None
        if client is not None:
            with self._lock:
                self._client = client
            self._refresh_state(AgentStatus.CONNECTED, "")

    @property
    def settled(self) -> bool:
        """True once connecting/injecting is over (whatever the outcome)."""
        return self.mode == "off" or self._state.status is not AgentStatus.INJECTING

    def disturbs(self, window_start: float) -> bool:
        """True when a stack window starting at ``window_start`` overlapped the agent's start-up."""
        if self.injecting_since is None:
            return False
        return self.ready_at is None or window_start < self.ready_at + 1.0

    def _set(self, state: AgentState) -> None:
        with self._lock:
            self._state = state

    def _refresh_state(self, status: AgentStatus, detail: str) -> None:
        with self._lock:
            client = self._client
        socket_path = str(getattr(client, "socket_path", "")) or None if client else None
        self._set(AgentState(status=status, detail=detail, socket_path=socket_path,
                             profile_status=self._profile_label, profile_trace_path=self._trace_path,
                             profile_state=self._profile_state, profile_detail=self._profile_detail))

    def poll(self) -> None:
        """Fetch step statistics and profile progress (bounded by the client's socket timeout)."""
        with self._lock:
            client = self._client
        if client is None:
            if self._state.status is AgentStatus.LOST:
                self._reconnect()
            return
        try:
            self.steps = client.stats(window_s=10.0)
            self.last_stats = client.last_stats
            if self._profile_state is not None and self._profile_state.busy:
                status = client.profile_status()
                self._profile_label, self._profile_state = status.label(), status.status
                self._profile_detail = status.detail
                if status.status is ProfileState.DONE and status.trace_path:
                    # "done" only once the session has analysed the trace (mark_analysed).
                    self._profile_label, self._profile_state = "analysing", ProfileState.ANALYSING
                    if status.trace_path != self._trace_path:
                        self._trace_path, self._trace_taken = status.trace_path, False
                elif status.status is ProfileState.DONE:
                    self._profile_state = ProfileState.FAILED
                    self._profile_label = "failed"
            self._refresh_state(AgentStatus.CONNECTED, "")
        except Exception as exc:
            with self._lock:
                self._client = None
            self._set(AgentState(status=AgentStatus.LOST, detail=f"lost the agent: {exc}",
                                 profile_status=self._profile_label, profile_state=self._profile_state))

    def request_profile(self, steps: int, timeout_s: float = 120.0) -> str:
        """Ask for a window of ``steps`` steps that the agent ends after ``timeout_s`` at the latest."""
        with self._lock:
            client = self._client
        if client is None:
            return f"cannot profile: {self._state.detail}"
        try:
            status = client.profile(steps=steps, timeout_s=max(1.0, timeout_s))
        except Exception as exc:
            return f"profile refused: {exc}"
        self._profile_label, self._profile_state, self._profile_detail = status.label(), status.status, status.detail
        self._refresh_state(AgentStatus.CONNECTED, "")
        return f"profiling {steps} steps: {self._profile_label}"

    def take_finished_trace(self) -> str | None:
        """The path of a newly finished profile trace, once."""
        if self._trace_path and not self._trace_taken:
            self._trace_taken = True
            return self._trace_path
        return None

    def mark_analysed(self) -> None:
        self._profile_label, self._profile_state = "done", ProfileState.DONE
        with self._lock:
            status = AgentStatus.CONNECTED if self._client is not None else self._state.status
            detail = self._state.detail
        self._refresh_state(status, detail)

    def _drop(self, client: Any) -> None:
        """Detach an agent we injected (one that was there before stays), and close the connection."""
        try:
            if self._injected:
                client.detach()
            client.close()
        except Exception as exc:
            log.info("agent detach: %s", exc)

    def state(self) -> AgentState:
        with self._lock:
            return self._state

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            self._closed = True
        if client is None:
            return
        self._drop(client)
        self._set(AgentState(status=AgentStatus.DETACHED, detail="detached; the process keeps running.",
                             profile_status=self._profile_label, profile_state=self._profile_state,
                             profile_detail=self._profile_detail, profile_trace_path=self._trace_path))
