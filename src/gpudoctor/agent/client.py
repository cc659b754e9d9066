"""Talks to the in-process agent over its Unix socket (gpudoctor's side; see PROTOCOL.md).

Used by the live session, ``gpudoctor attach`` and ``gpudoctor run``. It never imports torch and
never raises for a user-caused condition without a one-sentence message: a missing or stale agent
is ``None`` from :func:`find_agent`; a lost or refusing agent is :class:`AgentError`.

Every reply is untrusted input (gpudoctor may run as root; the agent runs as the target's user, who
may answer anything): a reply line is at most :data:`MAX_REPLY_BYTES`; every known field must have its
declared type (checked with msgspec) and a possible value (finite numbers within
:data:`MAX_NUMBER`, strings of at most :data:`MAX_TEXT` characters, at most :data:`MAX_ITEMS` items),
else :class:`AgentError` with one sentence; and a ``trace_path`` is used only when it names a regular
file owned by the target's user directly inside the socket's verified directory
(:func:`gpudoctor.agent.paths.find_socket`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import os
import secrets
import socket
import stat
import threading
import time
import typing
from enum import Enum
from pathlib import Path
from typing import Any

import msgspec

from gpudoctor.agent.paths import find_socket, process_uid
from gpudoctor.agent.protocol import (
    PROTOCOL_VERSION,
    DetachReply,
    DetachRequest,
    HelloReply,
    HelloRequest,
    ProfileReply,
    ProfileRequest,
    ProfileStatusRequest,
    Request,
    StatsReply,
    StatsRequest,
    StepStats,
    UnloadRequest,
    clamped,
    from_wire,
    request_to_wire,
)

log = logging.getLogger("gpudoctor.agent.client")

DEFAULT_TIMEOUT_S = 2.0
#: The longest reply line read from an agent.
MAX_REPLY_BYTES = 1 << 20
#: Bounds on what a reply's fields may hold.
MAX_TEXT = 4096
MAX_ITEMS = 1024
MAX_NUMBER = 1e15
#: The profile window's reply (older name).
ProfileStatus = ProfileReply


class AgentError(Exception):
    """The agent refused a request or could not be reached (one-sentence message)."""


class AgentLost(AgentError):
    """The agent's connection closed: the target exited or detached."""


@functools.cache
def _wire_fields(cls: type) -> tuple[tuple[str, Any], ...]:
    """(name, type) of every field of ``cls`` as it is on the wire (nested replies flat)."""
    hints = typing.get_type_hints(cls)
    out: list[tuple[str, Any]] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            out.extend(_wire_fields(hint))  # type: ignore[arg-type]
        else:
            out.append((f.name, hint))
    return tuple(out)


def _impossible(value: Any) -> str | None:
    """Why ``value`` cannot be a true reading (None: it can)."""
    if isinstance(value, float):
        return None if math.isfinite(value) and abs(value) <= MAX_NUMBER else f"{value!r} is out of range"
    if isinstance(value, int) and not isinstance(value, bool):
        return None if abs(value) <= 2**53 else "an integer out of range"
    if isinstance(value, str):
        return None if len(value) <= MAX_TEXT else f"a text of {len(value)} characters"
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_ITEMS:
            return f"{len(value)} items"
        return next((why for why in map(_impossible, value) if why), None)
    return None


def checked_reply(cls: type, reply: dict[str, Any], pid: int) -> dict[str, Any]:
    """``reply`` when every field ``cls`` knows has its type and a possible value; else AgentError."""
    for name, hint in _wire_fields(cls):
        value = reply.get(name)
        if isinstance(value, float) and not math.isfinite(value) and type(None) in typing.get_args(hint):
            reply[name] = value = None       # NaN/inf where "no reading" may stand: no reading
        if value is None:
            continue
        if isinstance(hint, type) and issubclass(hint, Enum):
            why = None if isinstance(value, str) and len(value) <= 64 else "not a short text"
        else:
            try:
                msgspec.convert(value, type=hint)
                why = _impossible(value)
            except (msgspec.ValidationError, TypeError) as exc:
                why = str(exc)
        if why:
            raise AgentError(f"the agent in process {pid} sent a malformed reply ({name}: {why[:200]}); "
                             "its data is not used.")
    return reply


class AgentClient:
    """One connection to one agent. Thread-safe: one request at a time.

    The client names itself to the agent with a random token (``hello``'s ``client``): the agent
    unloads only when its last client detaches. When the agent closes the connection (it evicts the
    connection idle longest when full), the client re-connects once and sends the request again if
    its type is ``IDEMPOTENT``. An agent of an older protocol (injected by an earlier gpudoctor into a
    job that still runs) is used with a warning: a field it does not send stays at its default, and a
    request it does not serve is an :class:`AgentError`.
    """

    def __init__(self, pid: int, socket_path: Path, sock: socket.socket, hello: HelloReply | None = None,
                 token: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.pid = pid
        self.uid = process_uid(pid)                   # the target's user: who must own its files
        self.socket_path = socket_path
        self.token = token or secrets.token_hex(8)
        self.timeout_s = timeout_s
        self.hello = hello or HelloReply()
        self.last_stats: StatsReply | None = None
        self.reconnects = 0
        self._sock: socket.socket | None = sock
        self._file = sock.makefile("rb")
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, pid: int, socket_path: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> AgentClient:
        client = cls(pid, socket_path, _open(socket_path, timeout_s), timeout_s=timeout_s)
        try:
            client.hello = from_wire(HelloReply, checked_reply(
                HelloReply, client.request(HelloRequest(client=client.token)), pid))
        except AgentError:
            client.close()
            raise
        if client.hello.protocol < PROTOCOL_VERSION:
            log.warning("the agent in process %d speaks protocol %s (an earlier gpudoctor started it), this "
                        "gpudoctor %s: it is used, and what was added since is missing.",
                        pid, client.hello.protocol, PROTOCOL_VERSION)
        elif client.hello.protocol > PROTOCOL_VERSION:
            log.warning("the agent in process %d speaks protocol %s, newer than this gpudoctor's %s; fields "
                        "this gpudoctor does not know are ignored.", pid, client.hello.protocol, PROTOCOL_VERSION)
        return client

    def request(self, request: Request) -> dict[str, Any]:
        """Send one typed request and return the reply object; raises AgentError/AgentLost."""
        if not isinstance(request, HelloRequest) and request.OP not in self.hello.serves():
            raise AgentError(f"the agent in process {self.pid} (protocol {self.hello.protocol}) does not serve "
                             f"{request.OP!r}; restart the job with this gpudoctor to get it.")
        payload = request_to_wire(request)
        with self._lock:
            try:
                line = self._exchange_locked(payload)
            except AgentLost:
                if not self._reconnect_locked():
                    raise
                if not request.IDEMPOTENT:
                    raise AgentLost(f"the connection to the agent in process {self.pid} was lost during "
                                    f"{request.OP!r}; it is re-connected, ask again.") from None
                line = self._exchange_locked(payload)
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            raise AgentError(f"the agent in process {self.pid} sent a malformed reply.") from None
        if not isinstance(reply, dict):
            raise AgentError(f"the agent in process {self.pid} sent a malformed reply (not an object).")
        if reply.get("ok") is not True:
            error = reply.get("error")
            raise AgentError(error[:300] if isinstance(error, str) and error else "the agent refused the request.")
        return dict(reply)

    def _exchange_locked(self, payload: dict[str, Any]) -> bytes:
        if self._sock is None:
            raise AgentLost(f"the connection to the agent in process {self.pid} is closed.")
        try:
            self._sock.sendall(json.dumps(payload).encode() + b"\n")
            line = self._file.readline(MAX_REPLY_BYTES + 1)
        except (OSError, ValueError) as exc:
            self._close_locked()
            raise AgentLost(f"the agent in process {self.pid} stopped answering ({exc}).") from None
        if not line:
            self._close_locked()
            raise AgentLost(f"the agent in process {self.pid} is gone (the process exited or detached).")
        if len(line) > MAX_REPLY_BYTES:
            self._close_locked()
            raise AgentError(f"the agent in process {self.pid} sent a reply over {MAX_REPLY_BYTES >> 20} MiB; "
                             "the connection is closed.")
        return line

    def _reconnect_locked(self) -> bool:
        """One new connection to the same socket, introduced with the same token; False if none."""
        if self._detached:
            return False
        try:
            sock = _open(self.socket_path, self.timeout_s)
        except OSError:
            return False
        self._sock, self._file = sock, sock.makefile("rb")
        try:
            self._exchange_locked(request_to_wire(HelloRequest(client=self.token)))
        except (AgentLost, AgentError):
            return False
        self.reconnects += 1
        return True

    _detached = False

    def stats(self, window_s: float = 10.0) -> StepStats:
        """Step statistics over the last ``window_s`` seconds (pulled into the request's bounds); the
        whole reply is :attr:`last_stats`."""
        reply = self.request(clamped(StatsRequest, window_s=window_s))
        self.last_stats = from_wire(StatsReply, checked_reply(StatsReply, reply, self.pid))
        return self.last_stats.stats

    def profile(self, steps: int = 3, timeout_s: float = 120.0) -> ProfileReply:
        """Arm a profile window (``steps`` and ``timeout_s`` pulled into the request's bounds)."""
        return self._profile_reply(self.request(clamped(ProfileRequest, steps=steps, timeout_s=timeout_s)))

    def profile_status(self) -> ProfileReply:
        return self._profile_reply(self.request(ProfileStatusRequest()))

    def _profile_reply(self, reply: dict[str, Any]) -> ProfileReply:
        status = from_wire(ProfileReply, checked_reply(ProfileReply, reply, self.pid))
        if status.trace_path is None:
            return status
        why = self.untrusted_trace(status.trace_path)
        if why is None:
            return status
        return dataclasses.replace(status, trace_path=None,
                                   detail=f"the agent named a trace that gpudoctor does not read: {why}.")

    def untrusted_trace(self, path: str) -> str | None:
        """Why the trace file ``path`` named by the agent is not trusted (None: it is): it must be a
        regular file of the target's user directly inside the agent socket's verified directory."""
        where = self.socket_path.parent
        candidate = Path(os.path.normpath(path))
        if not candidate.is_absolute() or candidate.parent != Path(os.path.normpath(where)):
            return f"{path[:200]} is not in the agent's directory {where}"
        try:
            st = os.lstat(candidate)
        except OSError as exc:
            return f"{candidate} cannot be read ({exc.strerror})"
        if not stat.S_ISREG(st.st_mode):
            return f"{candidate} is not a regular file"
        if self.uid is None or st.st_uid != self.uid:
            return f"{candidate} belongs to uid {st.st_uid}, not the process's uid {self.uid}"
        return None

    def wait_profile(self, timeout_s: float, poll_s: float = 0.1) -> ProfileReply:
        """Poll until the profile window is done or failed (or ``timeout_s`` passes)."""
        deadline = time.monotonic() + timeout_s
        status = self.profile_status()
        while status.status.busy and time.monotonic() < deadline:
            time.sleep(poll_s)
            status = self.profile_status()
        return status

    def detach(self) -> bool:
        """Tell the agent this client is done, then close this connection. The agent removes its
        hooks, thread and socket only when no other client is attached; True when it did."""
        try:
            reply = self.request(DetachRequest())
            return from_wire(DetachReply, checked_reply(DetachReply, reply, self.pid)).unloaded
        finally:
            self._detached = True
            self.close()

    def unload(self) -> None:
        """Ask the agent to remove its hooks, thread and socket now, whoever else is attached."""
        try:
            self.request(UnloadRequest())
        finally:
            self._detached = True
            self.close()

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


def _open(socket_path: Path, timeout_s: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(str(socket_path))
    except OSError:
        sock.close()
        raise
    return sock


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
    if client.hello.pid != pid:
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
