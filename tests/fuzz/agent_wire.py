"""Hostile bytes sent to a live agent (tests/fuzz/corpus/agent/wire.toml), and what each one gets.

One target process (tests/agent/stdlib_target.py: the agent, no torch) takes every case in turn on a
fresh connection; after each, a new client must be served by the same agent (same ``started_at``),
with no profile window left armed. ``expect`` per case:

- ``error-closed``: an error reply, then the agent closes the connection (it could not decode the line);
- ``error``: an error reply and the connection stays open (a well-formed request it refuses);
- ``closed``: no reply; the agent closes the connection (a line started and never finished);
- ``served``: the case holds connections open (``idle_connections``) and a new client is still served.

Used by ``test_agent_wire.py`` (asserts) and ``make_table.py`` (the agent section of docs/bad-inputs.md).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
WIRE = Path(__file__).resolve().parent / "corpus" / "agent" / "wire.toml"
TARGET = REPO / "tests" / "agent" / "stdlib_target.py"


@dataclass
class WireCase:
    name: str
    what: str
    expect: str
    payload: bytes
    idle_connections: int = 0
    wait_s: float = 0.0


@dataclass
class WireOutcome:
    case: WireCase
    reply: str           # the agent's error text, or "(no reply)"
    closed: bool         # the agent closed the connection
    served_after: bool   # a new client was served by the same agent afterwards
    detail: str = ""

    @property
    def got(self) -> str:
        if self.case.expect == "served":
            return "served" if self.served_after else "not served"
        if self.reply == "(no reply)":
            return "closed" if self.closed else "no reply, still open"
        return "error-closed" if self.closed else "error"

    @property
    def ok(self) -> bool:
        return self.got == self.case.expect and self.served_after


def load_wire_cases(path: Path = WIRE) -> list[WireCase]:
    out = []
    for spec in tomllib.loads(path.read_text(encoding="utf-8"))["case"]:
        if "hex" in spec:
            payload = bytes.fromhex(spec["hex"])
        else:
            payload = (str(spec.get("send", "")) + str(spec.get("repeat", "")) * int(spec.get("times", 0))
                       + str(spec.get("end", ""))).encode()
        out.append(WireCase(name=spec["name"], what=spec["what"], expect=spec["expect"], payload=payload,
                            idle_connections=int(spec.get("idle_connections", 0)),
                            wait_s=float(spec.get("wait_s", 0.0))))
    return out


class WireTarget:
    """The target subprocess and raw connections to its agent."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        self.proc = subprocess.Popen([sys.executable, str(TARGET)], stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), f"target did not start: {line!r}"
        self.path = line.split(" ", 1)[1].strip()
        self.started_at = self.hello()["started_at"]

    def connect(self) -> socket.socket:
        for _ in range(100):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10.0)
            try:
                sock.connect(self.path)
                return sock
            except BlockingIOError:  # the backlog is full for a moment: the agent accepts in bursts
                sock.close()
                time.sleep(0.02)
        raise TimeoutError("the agent accepts no connection")

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.connect() as sock:
            sock.sendall(json.dumps(request).encode() + b"\n")
            return dict(json.loads(_read_line(sock)))

    def hello(self) -> dict[str, Any]:
        return self.ask({"op": "hello"})

    def run(self, case: WireCase) -> WireOutcome:
        held = [self.connect() for _ in range(case.idle_connections)]
        try:
            with self.connect() as sock:
                reply, closed = "(no reply)", False
                if case.payload:
                    try:
                        sock.sendall(case.payload)
                    except OSError:   # the agent closed before it read everything
                        pass
                time.sleep(case.wait_s)
                try:
                    line = _read_line(sock)
                    if line:
                        reply = str(json.loads(line).get("error") or "ok")
                        sock.settimeout(1.0)   # an agent that closes does so right after its reply
                        closed = _read_line(sock) == b""
                    else:
                        closed = True
                except TimeoutError:
                    pass
                except OSError:
                    closed = True
            detail = ""
            try:
                hello = self.hello()
                status = self.ask({"op": "profile_status"})
                served = hello.get("started_at") == self.started_at and status.get("status") in ("idle", "done", "failed")
                detail = f"profile {status.get('status')}"
            except (OSError, ValueError) as exc:
                served, detail = False, f"{type(exc).__name__}: {exc}"
            return WireOutcome(case, reply, closed, served, detail)
        finally:
            for sock in held:
                sock.close()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    return data


def run_all(cases: list[WireCase] | None = None) -> list[WireOutcome]:
    target = WireTarget()
    try:
        return [target.run(case) for case in (cases if cases is not None else load_wire_cases())]
    finally:
        target.stop()
