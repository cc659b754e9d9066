"""The agent's Unix-socket server: one daemon thread, a fixed set of JSON requests, peer uid checked.

Runs inside the training process, so it imports only the standard library. It never executes
anything received over the socket: each request names one of a few operations, and the handler
(in :mod:`gpudoctor.agent.runtime`) maps it to a reply. Requests larger than
``MAX_REQUEST_BYTES`` close the connection.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_REQUEST_BYTES = 4096
MAX_CONNECTIONS = 8
TICK_S = 0.1

Handler = Callable[[dict[str, Any]], dict[str, Any]]


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


class AgentServer:
    """Accepts clients on ``path`` and answers their requests from a daemon thread."""

    def __init__(self, path: Path, handler: Handler, tick: Callable[[], float | None]) -> None:
        self.path = path
        self._handler = handler
        self._tick = tick
        self._owner_pid = os.getpid()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._wake_r, self._wake_w = os.pipe()
        self._stop = threading.Event()
        self._buffers: dict[socket.socket, bytes] = {}
        self._thread = threading.Thread(target=self._loop, name="gpudoctor-agent", daemon=True)

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)           # a stale socket of an earlier process with this pid
        self._listener.bind(str(self.path))
        os.chmod(self.path, 0o600)        # the directory is 0700 already; this is belt and braces
        self._listener.listen(MAX_CONNECTIONS)
        self._listener.setblocking(False)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to close everything; safe from any thread, including the server's own."""
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def close_in_child(self) -> None:
        """After fork: drop the inherited descriptors without touching the parent's socket file."""
        self._stop.set()
        for fd_owner in (self._listener, *self._buffers):
            with contextlib.suppress(OSError):
                fd_owner.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._buffers.clear()

    # -- the thread ------------------------------------------------------------------------

    def _loop(self) -> None:
        _name_native_thread(b"gpudoctor-agent")
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            timeout_s: float | None = TICK_S
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=timeout_s or TICK_S):
                    if key.data == "listen":
                        self._accept(sel)
                    elif key.data == "conn":
                        self._serve(sel, key.fileobj)  # type: ignore[arg-type]
                try:
                    timeout_s = self._tick()      # the agent may ask for a faster tick for a while
                except Exception:
                    timeout_s = TICK_S
        except Exception:  # the agent must never take the target down
            pass
        finally:
            self._shutdown(sel)

    def _accept(self, sel: selectors.BaseSelector) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        uid = peer_uid(conn)
        if uid is None or (uid != os.geteuid() and uid != 0) or len(self._buffers) >= MAX_CONNECTIONS:
            conn.close()
            return
        conn.settimeout(1.0)
        self._buffers[conn] = b""
        sel.register(conn, selectors.EVENT_READ, "conn")

    def _drop(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        with contextlib.suppress(Exception):
            sel.unregister(conn)
        self._buffers.pop(conn, None)
        with contextlib.suppress(OSError):
            conn.close()

    def _serve(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        try:
            chunk = conn.recv(MAX_REQUEST_BYTES)
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(sel, conn)
            return
        buf = self._buffers.get(conn, b"") + chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not self._answer(conn, line):
                self._drop(sel, conn)
                return
        if len(buf) > MAX_REQUEST_BYTES:
            self._send(conn, {"ok": False, "error": "request too large."})
            self._drop(sel, conn)
            return
        self._buffers[conn] = buf

    def _answer(self, conn: socket.socket, line: bytes) -> bool:
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError:
            return self._send(conn, {"ok": False, "error": "malformed request (expected one JSON object per line)."})
        try:
            reply = self._handler(request)
        except Exception as exc:  # a bug in the agent: answer it, never raise into the target
            reply = {"ok": False, "error": f"agent error: {type(exc).__name__}: {exc}"}
        return self._send(conn, reply)

    @staticmethod
    def _send(conn: socket.socket, reply: dict[str, Any]) -> bool:
        try:
            conn.sendall(json.dumps(reply, default=str).encode() + b"\n")
            return True
        except OSError:
            return False

    def _shutdown(self, sel: selectors.BaseSelector) -> None:
        for conn in list(self._buffers):
            self._drop(sel, conn)
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
