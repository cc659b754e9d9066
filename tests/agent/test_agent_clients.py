"""Several clients of one agent, and an agent that must outlive whatever one connection does.

The target is tests/agent/stdlib_target.py (the agent, no torch): detach is reference-counted per
client, ``unload`` removes the hooks, the thread and the socket, a client evicted by the connection
cap re-connects once, and a handler exception is an error reply, never the end of the server.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import REPO, agent_threads

from gpudoctor.agent import server as server_mod
from gpudoctor.agent.client import AgentClient, AgentError, AgentLost
from gpudoctor.agent.protocol import (
    V2_REQUESTS,
    DetachRequest,
    HelloRequest,
    ProfileStatusRequest,
    Request,
    StatsRequest,
)
from gpudoctor.agent.server import AgentServer, Peer

TARGET = Path(__file__).resolve().parent / "stdlib_target.py"


class StdlibTarget:
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        self.proc = subprocess.Popen([sys.executable, str(TARGET)], stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), line
        self.path = Path(line.split(" ", 1)[1].strip())

    def client(self) -> AgentClient:
        return AgentClient.connect(self.proc.pid, self.path)

    def wait_gone(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while (self.path.exists() or agent_threads(self.proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)


@pytest.fixture
def target() -> Iterator[StdlibTarget]:
    t = StdlibTarget()
    yield t
    t.proc.kill()
    t.proc.wait(timeout=10)


def test_first_clients_detach_leaves_the_second_its_agent(target: StdlibTarget) -> None:
    first, second = target.client(), target.client()
    assert agent_threads(target.proc.pid), "the agent's server thread is not named"
    assert first.detach() is False                    # another client is attached: nothing unloads
    time.sleep(0.3)
    for _ in range(3):
        assert second.stats(window_s=1.0).steps_total > 0
    assert target.path.exists() and second.reconnects == 0
    assert second.detach() is True                    # the last client: hooks, thread and socket go
    target.wait_gone()
    assert not target.path.exists()
    assert agent_threads(target.proc.pid) == []
    assert target.proc.poll() is None, "the target must carry on"


def test_a_client_that_closed_without_detach_does_not_keep_the_agent(target: StdlibTarget) -> None:
    first, second = target.client(), target.client()
    second.stats()
    second.close()                                    # gone for good (it did not detach)
    time.sleep(0.3)
    assert first.detach() is True
    target.wait_gone()
    assert not target.path.exists() and agent_threads(target.proc.pid) == []


def test_unload_removes_the_agent_whoever_is_attached(target: StdlibTarget) -> None:
    first, second = target.client(), target.client()
    first.unload()
    target.wait_gone()
    assert not target.path.exists() and agent_threads(target.proc.pid) == []
    with pytest.raises(AgentLost):
        second.stats()                                # the socket is gone: one re-connect, which fails


def test_a_client_evicted_by_the_connection_cap_reconnects_once(target: StdlibTarget) -> None:
    client = target.client()
    held = []
    for _ in range(server_mod.MAX_CONNECTIONS):      # newer idle connections push the client's out
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(target.path))
        held.append(sock)
        sock.sendall(b'{"op": "hello"}\n')
        sock.recv(4096)
    try:
        assert client.stats(window_s=1.0).steps_total > 0
        assert client.reconnects == 1
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)                                   # the agent sees those connections close
    assert client.detach() is True


def test_the_server_survives_a_handler_that_raises_and_a_reply_that_is_not_json() -> None:
    calls: list[str] = []

    def handler(request: Request, peer: Peer) -> dict[str, Any]:
        calls.append(request.OP)
        if isinstance(request, StatsRequest):
            raise RecursionError("deep")
        if isinstance(request, ProfileStatusRequest):
            loop: dict[str, Any] = {"ok": True}
            loop["self"] = loop
            return loop
        return {"ok": True, "client": peer.client}

    def tick() -> float | None:
        raise RuntimeError("tick")

    directory = Path(tempfile.mkdtemp(prefix="gd-srv-", dir="/tmp"))
    server = AgentServer(directory / "s.sock", handler, tick)
    server.start()
    try:
        client = AgentClient(os.getpid(), directory / "s.sock", _connect(directory / "s.sock"))
        for request in (StatsRequest(), ProfileStatusRequest()):
            with pytest.raises(AgentError, match="agent error"):
                client.request(request)
        assert client.request(HelloRequest())["client"].startswith("conn-")
        assert server.alive and calls == ["stats", "profile_status", "hello"]
    finally:
        server.stop()
    assert not (directory / "s.sock").exists()
    directory.rmdir()


def test_a_protocol_2_agent_is_used_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """An agent an earlier gpudoctor injected into a job that still runs: protocol 2, no ``requests`` in
    its hello, no v3 stats fields, a plain detach answer. The client warns once and still works."""
    def v2_agent(request: Request, peer: Peer) -> dict[str, Any]:
        if isinstance(request, HelloRequest):
            return {"ok": True, "protocol": 2, "pid": os.getpid(), "python": "3.11.9", "source": "inject",
                    "step_source": "optimizer", "started_at": 1.0}
        if isinstance(request, StatsRequest):
            return {"ok": True, "timestamp": 2.0, "steps_total": 40, "window_steps": 8, "step_time_p50_ms": 12.5,
                    "data_wait_pct": 3.0, "step_source": "optimizer", "recent_step_times_ms": [12.0, 13.0],
                    "collective_timing": "not DDP"}
        return {"ok": True, "unloaded": True, "clients": 0}

    directory = Path(tempfile.mkdtemp(prefix="gd-v2-", dir="/tmp"))
    server = AgentServer(directory / "s.sock", v2_agent, lambda: None)
    server.start()
    try:
        with caplog.at_level(logging.WARNING, logger="gpudoctor.agent.client"):
            client = AgentClient.connect(os.getpid(), directory / "s.sock")
        assert [r.getMessage() for r in caplog.records if "protocol 2" in r.getMessage()], caplog.text
        assert client.hello.protocol == 2 and client.hello.serves() == V2_REQUESTS
        stats = client.stats(window_s=5.0)
        assert stats.steps_total == 40 and stats.step_time_p50_ms == 12.5 and stats.h2d_mib_per_step is None
        assert client.last_stats is not None and client.last_stats.recent_step_times_ms == (12.0, 13.0)
        client.hello = dataclasses.replace(client.hello, requests=("hello", "stats"))  # an agent without detach
        with pytest.raises(AgentError, match="does not serve 'detach'"):
            client.request(DetachRequest())
        client.hello = dataclasses.replace(client.hello, requests=())
        assert client.detach() is True
    finally:
        server.stop()
    directory.rmdir()


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    sock.connect(str(path))
    return sock


def test_a_measurement_that_is_not_a_step_stats_field_is_an_error_not_a_silent_drop() -> None:
    from gpudoctor.agent import runtime

    directory = Path(tempfile.mkdtemp(prefix="gd-stats-", dir="/tmp"))
    agent = runtime.Agent("import", directory)
    try:
        values = agent._stats_values(10.0)
        assert agent.stats(10.0).stats.steps_total == 0        # every key the agent measures is a field
        agent._stats_values = lambda window_s: {**values, "brand_new_metric": 1.0}  # type: ignore[method-assign]
        with pytest.raises(TypeError, match="brand_new_metric"):
            agent.stats(10.0)
    finally:
        agent.server.close_in_child()
        directory.rmdir()
