"""Talks to the in-process agent over its Unix socket (gpudoctor's side; see PROTOCOL.md).

Used by the live session, ``gpudoctor attach`` and ``gpudoctor run``. It never imports torch and
never raises for a user-caused condition without a one-sentence message: a missing or stale agent
is ``None`` from :func:`find_agent`; a lost or refusing agent is :class:`AgentError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor.agent.paths import find_socket
from gpudoctor.live.samples import AgentState, StepStats

DEFAULT_TIMEOUT_S = 2.0
_STEP_FIELDS = {f.name for f in dataclasses.fields(StepStats)}


class AgentError(Exception):
    """The agent refused a request or could not be reached (one-sentence message)."""


class AgentLost(AgentError):
    """The agent's connection closed: the target exited or detached."""


@dataclass(frozen=True)
class ProfileStatus:
    """Where an on-demand profile window stands."""

    status: str                      # idle | armed | recording | done | failed
    steps_requested: int = 0
    steps_done: int = 0
    trace_path: str | None = None
    detail: str = ""

    def label(self) -> str:
        """Short text for :attr:`AgentState.profile_status`, e.g. ``recording 2/3``."""
        if self.status == "recording":
            return f"recording {self.steps_done}/{self.steps_requested}"
        return self.status

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> ProfileStatus:
        return cls(status=str(reply.get("status", "idle")), steps_requested=int(reply.get("steps_requested") or 0),
                   steps_done=int(reply.get("steps_done") or 0), trace_path=reply.get("trace_path"),
                   detail=str(reply.get("detail") or ""))


def step_stats_from_reply(reply: dict[str, Any]) -> StepStats:
    """Build a :class:`StepStats` from a ``stats`` reply, ignoring fields this version does not know."""
    values = {k: v for k, v in reply.items() if k in _STEP_FIELDS}
    reasons = values.get("graph_break_reasons") or ()
    values["graph_break_reasons"] = tuple((str(r), int(n)) for r, n in reasons)
    values.setdefault("timestamp", time.time())
    values.setdefault("steps_total", 0)
    values.setdefault("window_steps", 0)
    return StepStats(**values)


class AgentClient:
    """One connection to one agent. Thread-safe: one request at a time."""

    def __init__(self, pid: int, socket_path: Path, sock: socket.socket, info: dict[str, Any]) -> None:
        self.pid = pid
        self.socket_path = socket_path
        self.info = info
        self._sock: socket.socket | None = sock
        self._file = sock.makefile("rb")
        self._lock = threading.Lock()
        self.last_stats_reply: dict[str, Any] = {}

    @classmethod
    def connect(cls, pid: int, socket_path: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> AgentClient:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(socket_path))
        except OSError:
            sock.close()
            raise
        client = cls(pid, socket_path, sock, {})
        try:
            client.info = client.request({"op": "hello"})
        except AgentError:
            client.close()
            raise
        return client

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return the reply; raises AgentError/AgentLost."""
        with self._lock:
            if self._sock is None:
                raise AgentLost(f"the connection to the agent in process {self.pid} is closed.")
            try:
                self._sock.sendall(json.dumps(payload).encode() + b"\n")
                line = self._file.readline()
            except (OSError, ValueError) as exc:
                self._close_locked()
                raise AgentLost(f"the agent in process {self.pid} stopped answering ({exc}).") from None
            if not line:
                self._close_locked()
                raise AgentLost(f"the agent in process {self.pid} is gone (the process exited or detached).")
        try:
            reply = json.loads(line)
        except ValueError:
            raise AgentError(f"the agent in process {self.pid} sent a malformed reply.") from None
        if not reply.get("ok"):
            raise AgentError(str(reply.get("error") or "the agent refused the request."))
        return dict(reply)

    def stats(self, window_s: float = 10.0) -> StepStats:
        reply = self.request({"op": "stats", "window_s": window_s})
        self.last_stats_reply = reply
        return step_stats_from_reply(reply)

    def profile(self, steps: int = 3, timeout_s: float = 120.0) -> ProfileStatus:
        return ProfileStatus.from_reply(self.request({"op": "profile", "steps": steps, "timeout_s": timeout_s}))

    def profile_status(self) -> ProfileStatus:
        return ProfileStatus.from_reply(self.request({"op": "profile_status"}))

    def wait_profile(self, timeout_s: float, poll_s: float = 0.1) -> ProfileStatus:
        """Poll until the profile window is done or failed (or ``timeout_s`` passes)."""
        deadline = time.monotonic() + timeout_s
        status = self.profile_status()
        while status.status in ("armed", "recording") and time.monotonic() < deadline:
            time.sleep(poll_s)
            status = self.profile_status()
        return status

    def detach(self) -> None:
        """Ask the agent to remove its hooks, thread and socket; then close this connection."""
        try:
            self.request({"op": "detach"})
        finally:
            self.close()

    def state(self) -> AgentState:
        """The agent part of a live :class:`~gpudoctor.live.samples.Snapshot`."""
        if self._sock is None:
            return AgentState(status="lost", detail=f"the agent in process {self.pid} is gone.")
        try:
            profile = self.profile_status()
        except AgentError as exc:
            return AgentState(status="lost", detail=str(exc), socket_path=str(self.socket_path))
        return AgentState(status="connected", socket_path=str(self.socket_path), profile_status=profile.label(),
                          profile_trace_path=profile.trace_path)

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def socket_path_for(pid: int) -> Path | None:
    """The agent socket of ``pid`` if one exists on disk (it may be stale)."""
    return find_socket(pid)


def find_agent(pid: int, timeout_s: float = 1.0) -> AgentClient | None:
    """A connected client for the live agent in ``pid``, or None (no agent, stale socket, no access)."""
    path = find_socket(pid)
    if path is None:
        return None
    try:
        client = AgentClient.connect(pid, path, timeout_s=timeout_s)
    except (OSError, AgentError):
        return None
    if client.info.get("pid") != pid:
        client.close()
        return None
    return client


def wait_for_agent(pid: int, timeout_s: float, poll_s: float = 0.05) -> AgentClient | None:
    """Poll :func:`find_agent` until it answers or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        client = find_agent(pid)
        if client is not None or time.monotonic() >= deadline:
            return client
        time.sleep(poll_s)


def inject(pid: int, timeout_s: float = 10.0) -> Any:
    """Start the agent inside running process ``pid``; see :func:`gpudoctor.agent.inject.inject`."""
    from gpudoctor.agent.inject import inject as _inject

    return _inject(pid, timeout_s)
