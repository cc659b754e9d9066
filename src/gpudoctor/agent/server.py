"""The agent's Unix-socket server: one daemon thread, a fixed set of JSON requests, peer uid checked.

Runs inside the training process, so it imports only the standard library. It never executes
anything received over the socket: each line is decoded once into one of the typed requests of
:mod:`gpudoctor.agent.protocol`, and the handler (in :mod:`gpudoctor.agent.runtime`) dispatches on
its type to a reply.

It must survive any bytes a client sends (tests/fuzz/corpus/agent/wire.toml holds the hostile cases):

- a line longer than ``MAX_REQUEST_BYTES`` is answered with an error and the connection closed;
- a line that does not decode (not UTF-8, not JSON, nested too deeply, ``NaN``/``Infinity``, not an
  object) is answered with an error and the connection closed;
- an object that is no request (unknown ``op``, an argument of the wrong type or out of its bounds) is
  answered with an error (:class:`~gpudoctor.agent.protocol.BadRequest`); the connection stays;
- a handler exception, or a reply that cannot be encoded, is answered with an error; nothing a
  connection does can end the loop (each event is handled in its own ``try``);
- a connection that starts a line and does not finish it within ``READ_TIMEOUT_S``, or says nothing
  for ``IDLE_TIMEOUT_S``, is closed; at ``MAX_CONNECTIONS`` a new client evicts the connection idle
  longest, so a new client is always served (a client re-connects once when evicted).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudoctor.agent.protocol import BadRequest, Request, request_from_wire

MAX_REQUEST_BYTES = 4096
MAX_CONNECTIONS = 8
BACKLOG = 32
TICK_S = 0.1
#: A started request line must be finished within this time.
READ_TIMEOUT_S = 5.0
#: A connection that sends nothing for this long is closed (live sessions poll about once a second).
IDLE_TIMEOUT_S = 300.0
#: How long a reply may wait on a client that does not read.
SEND_TIMEOUT_S = 0.5


class Peer:
    """One connection: its unfinished line, when it last sent something, and whose client it is."""

    _ids = itertools.count(1)

    def __init__(self, conn: socket.socket, now: float) -> None:
        self.conn = conn
        self.buf = b""
        self.opened_s = now
        self.last_s = now
        self.partial_since: float | None = None
        self.client = f"conn-{next(self._ids)}"   # replaced by the token of the client's hello
        self.named = False                          # True once the client gave a token


Handler = Callable[[Request, Peer], dict[str, Any]]
#: Told of each closed connection: the peer, and True when the agent closed it (evicted, timed out,
#: undecodable) rather than the client (end of file).
OnClose = Callable[[Peer, bool], None]


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process on the other end of a Unix socket (SO_PEERCRED), None if unknown."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", raw)[1])
    except (OSError, AttributeError):
        return None


def _name_native_thread(name: bytes) -> None:
    """Give this thread a kernel-visible name (``top -H``, /proc/<pid>/task/*/comm). Best effort."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name[:15]), 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass


class _NotANumber(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotANumber(name)


def decode_request(line: bytes) -> dict[str, Any]:
    """One request line as a JSON object; ``ValueError`` with one sentence for anything else."""
    if len(line) > MAX_REQUEST_BYTES:
        raise ValueError(f"request too large (over {MAX_REQUEST_BYTES} bytes).")
    try:
        request = json.loads(line.decode("utf-8"), parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("malformed request (nested too deeply).") from None
    except _NotANumber as exc:
        raise ValueError(f"malformed request ({exc} is not a number this protocol accepts).") from None
    except Exception:  # UnicodeDecodeError, JSONDecodeError, the int-digits limit, NaN/Infinity
        raise ValueError("malformed request (expected one JSON object per line).") from None
    if not isinstance(request, dict):
        raise ValueError("malformed request (expected one JSON object per line).")
    return request


class AgentServer:
    """Accepts clients on ``path`` and answers their requests from a daemon thread."""

    def __init__(self, path: Path, handler: Handler, tick: Callable[[], float | None],
                 on_close: OnClose | None = None) -> None:
        self.path = path
        self._handler = handler
        self._on_close = on_close
        self._tick = tick
        self._owner_pid = os.getpid()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._wake_r, self._wake_w = os.pipe()
        self._stop = threading.Event()
        self._peers: dict[socket.socket, Peer] = {}
        self._thread = threading.Thread(target=self._loop, name="gpudoctor-agent", daemon=True)

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)           # a stale socket of an earlier process with this pid
        self._listener.bind(str(self.path))
        os.chmod(self.path, 0o600)        # the directory is 0700 already; this is belt and braces
        self._listener.listen(BACKLOG)
        self._listener.setblocking(False)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to close everything; safe from any thread, including the server's own."""
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(timeout=2.0)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def peers(self) -> list[Peer]:
        """The open connections (read from the server thread, or as a snapshot from another)."""
        return list(self._peers.values())

    def close_in_child(self) -> None:
        """After fork: drop the inherited descriptors without touching the parent's socket file."""
        self._stop.set()
        for fd_owner in (self._listener, *self._peers):
            with contextlib.suppress(OSError):
                fd_owner.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._peers.clear()

    # -- the thread ------------------------------------------------------------------------

    def _loop(self) -> None:
        _name_native_thread(b"gpudoctor-agent")
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._listener, selectors.EVENT_READ, "listen")
            sel.register(self._wake_r, selectors.EVENT_READ, "wake")
            timeout_s: float | None = TICK_S
            failures = 0
            while not self._stop.is_set():
                try:
                    events = sel.select(timeout=timeout_s or TICK_S)
                    failures = 0
                except Exception:  # the selector itself broke (a closed descriptor): retry, then give up
                    failures += 1
                    if failures > 50:
                        return
                    time.sleep(TICK_S)
                    continue
                for key, _ in events:
                    self._event(sel, key)
                with contextlib.suppress(Exception):
                    self._expire(sel, time.monotonic())
                try:
                    timeout_s = self._tick()      # the agent may ask for a faster tick for a while
                except Exception:
                    timeout_s = TICK_S
        except Exception:  # the agent must never take the target down
            pass
        finally:
            self._shutdown(sel)

    def _event(self, sel: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
        """One readable descriptor; whatever goes wrong closes at most that connection."""
        try:
            if key.data == "listen":
                self._accept(sel)
            elif key.data == "wake":
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 64)
            else:
                self._serve(sel, key.fileobj)  # type: ignore[arg-type]
        except Exception:
            if key.data not in ("listen", "wake"):
                self._drop(sel, key.fileobj)  # type: ignore[arg-type]

    def _accept(self, sel: selectors.BaseSelector) -> None:
        for _ in range(BACKLOG):  # every pending connection, so that a burst cannot fill the backlog
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with contextlib.suppress(Exception):
                self._admit(sel, conn)

    def _admit(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        uid = peer_uid(conn)
        if uid is None or (uid != os.geteuid() and uid != 0):
            conn.close()
            return
        now = time.monotonic()
        while len(self._peers) >= MAX_CONNECTIONS:  # the new client is served; the one idle longest goes
            idle = min(self._peers.values(), key=lambda p: p.last_s)
            self._drop(sel, idle.conn, evicted=True)
        conn.settimeout(SEND_TIMEOUT_S)
        self._peers[conn] = Peer(conn, now)
        sel.register(conn, selectors.EVENT_READ, "conn")

    def _expire(self, sel: selectors.BaseSelector, now: float) -> None:
        for peer in list(self._peers.values()):
            stalled = peer.partial_since is not None and now - peer.partial_since > READ_TIMEOUT_S
            if stalled or now - peer.last_s > IDLE_TIMEOUT_S:
                self._drop(sel, peer.conn, evicted=True)

    def _drop(self, sel: selectors.BaseSelector, conn: socket.socket, evicted: bool = True,
              notify: bool = True) -> None:
        with contextlib.suppress(Exception):
            sel.unregister(conn)
        peer = self._peers.pop(conn, None)
        with contextlib.suppress(OSError):
            conn.close()
        if peer is not None and notify and self._on_close is not None:
            with contextlib.suppress(Exception):
                self._on_close(peer, evicted)

    def _serve(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        peer = self._peers.get(conn)
        if peer is None:
            self._drop(sel, conn)
            return
        try:
            chunk = conn.recv(MAX_REQUEST_BYTES)
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(sel, conn, evicted=False)   # the client closed it
            return
        peer.last_s = time.monotonic()
        buf = peer.buf + chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not self._answer(peer, line):
                self._drop(sel, conn)
                return
        if len(buf) > MAX_REQUEST_BYTES:
            self._send(conn, {"ok": False, "error": f"request too large (over {MAX_REQUEST_BYTES} bytes)."})
            self._drop(sel, conn)
            return
        peer.buf = buf
        peer.partial_since = (peer.partial_since or peer.last_s) if buf else None

    def _answer(self, peer: Peer, line: bytes) -> bool:
        """Answer one line; False when the connection must close (it sent something undecodable)."""
        try:
            obj = decode_request(line)
        except ValueError as exc:
            self._send(peer.conn, {"ok": False, "error": str(exc)})
            return False
        try:
            reply = self._handler(request_from_wire(obj), peer)
        except BadRequest as exc:  # well-formed, but no request this agent serves: refused, the connection stays
            reply = {"ok": False, "error": str(exc)}
        except Exception as exc:  # a bug in the agent: answer it, never raise into the target
            reply = {"ok": False, "error": f"agent error: {type(exc).__name__}: {str(exc)[:200]}"}
        return self._send(peer.conn, reply)

    @staticmethod
    def _send(conn: socket.socket, reply: dict[str, Any]) -> bool:
        try:
            data = json.dumps(reply, default=str).encode() + b"\n"
        except Exception as exc:  # a reply that cannot be JSON (a cycle, a key that is not a string): say so
            data = json.dumps({"ok": False, "error": f"agent error: reply not encodable ({type(exc).__name__})."
                               }).encode() + b"\n"
        try:
            conn.sendall(data)
            return True
        except OSError:
            return False

    def _shutdown(self, sel: selectors.BaseSelector) -> None:
        for conn in list(self._peers):
            self._drop(sel, conn, notify=False)
        with contextlib.suppress(Exception):
            sel.close()
        with contextlib.suppress(OSError):
            self._listener.close()
        if os.getpid() == self._owner_pid:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
