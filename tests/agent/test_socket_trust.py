"""Socket trust (issue 39 item 2): gpudoctor (perhaps root) talks to an agent socket only in a directory
owned by the TARGET's uid with no access for others, and a socket owned by that uid; the agent passes
over a directory it does not own; every reply is untrusted input (typed, bounded, one sentence); and a
``trace_path`` is read only inside the verified directory and owned by the target's uid.

The per-user directories are made under this test's tmp folder (``paths.TMP``) for a uid no process
here has, so the real /tmp/gpudoctor-<uid> of the machine is never touched; one end-to-end case plants
the directory of ``nobody`` (uid 65534) and runs ``gpudoctor attach`` on a process of that user.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import GPUDOCTOR, REPO

from gpudoctor.agent import client as client_mod
from gpudoctor.agent import paths
from gpudoctor.agent.client import AgentClient, AgentError, find_agent
from gpudoctor.agent.protocol import ProfileState
from gpudoctor.exitcodes import ExitCode

UID = 4242424          # the target's uid (no such user)
OTHER = 65534          # who planted the directory

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create files owned by other uids")


class FakeAgent:
    """Answers each request line with ``replies[op]`` (a dict, or raw bytes sent as they are)."""

    def __init__(self, path: Path, replies: dict[str, Any]) -> None:
        self.path, self.replies = path, replies
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as fh:
            for line in fh:
                reply = self.replies.get(json.loads(line)["op"], {"ok": False, "error": "no"})
                fh.write(reply if isinstance(reply, bytes) else json.dumps(reply).encode() + b"\n")
                fh.flush()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The target is this test's own PID, as uid UID; the per-user directories live under tmp_path."""
    monkeypatch.setattr(paths, "TMP", tmp_path)
    monkeypatch.setattr(paths, "RUN_USER", tmp_path / "run-user")
    monkeypatch.setattr(paths, "_home_of", lambda uid: None)
    monkeypatch.setattr(paths, "process_uid", lambda pid: UID)
    monkeypatch.setattr(client_mod, "process_uid", lambda pid: UID)
    directory = tmp_path / f"gpudoctor-{UID}"
    directory.mkdir(mode=0o700)
    pid = os.getpid()
    agents: list[FakeAgent] = []

    def serve(replies: dict[str, Any], owner: int = UID, dir_owner: int = UID) -> Path:
        sock_path = directory / paths.socket_name(pid)
        agents.append(FakeAgent(sock_path, replies))
        os.chown(sock_path, owner, owner)
        os.chown(directory, dir_owner, dir_owner)
        return sock_path

    yield {"pid": pid, "dir": directory, "serve": serve}
    for agent in agents:
        agent.close()


def _hello(pid: int) -> dict[str, Any]:
    return {"ok": True, "protocol": 2, "pid": pid, "python": "3.11.7", "source": "run", "step_source": "optimizer"}


def _stats(**fields: Any) -> dict[str, Any]:
    return {"ok": True, "timestamp": time.time(), "steps_total": 100, "window_steps": 50, **fields}


def test_a_planted_directory_is_refused(world: dict[str, Any]) -> None:
    world["serve"]({"hello": _hello(world["pid"])}, owner=OTHER, dir_owner=OTHER)
    assert paths.find_socket(world["pid"]) is None
    assert find_agent(world["pid"]) is None
    why = paths.untrusted_socket(world["pid"])
    assert why is not None and f"belongs to uid {OTHER}, not {UID}" in why


def test_a_directory_open_to_others_or_a_foreign_socket_is_refused(world: dict[str, Any]) -> None:
    world["serve"]({"hello": _hello(world["pid"])}, owner=OTHER)      # the directory is the target's
    assert paths.find_socket(world["pid"]) is None                   # but the socket is not
    os.chown(world["dir"] / paths.socket_name(world["pid"]), UID, UID)
    assert paths.find_socket(world["pid"]) is not None               # both the target's: trusted
    world["dir"].chmod(0o755)
    assert paths.find_socket(world["pid"]) is None
    assert "open to other users" in (paths.untrusted_socket(world["pid"]) or "")


def test_a_trusted_agent_is_used(world: dict[str, Any]) -> None:
    world["serve"]({"hello": _hello(world["pid"]), "stats": _stats(steps_per_s=12.5)})
    client = find_agent(world["pid"])
    assert client is not None
    assert client.stats().steps_per_s == 12.5
    client.close()


@pytest.mark.parametrize(("field", "value"), [
    ("steps_per_s", "fast"), ("steps_total", True), ("step_time_p50_ms", 1e300), ("recent_step_times_ms", "x"),
    ("graph_break_reasons", [[1, 2, 3]]), ("autocast_dtype", "a" * 100_000), ("recent_step_times_ms", [1.0] * 5000),
    ("steps_total", 10**30),
])
def test_garbage_in_a_reply_is_one_sentence(world: dict[str, Any], field: str, value: Any) -> None:
    world["serve"]({"hello": _hello(world["pid"]), "stats": _stats(**{field: value})})
    client = find_agent(world["pid"])
    assert client is not None
    with pytest.raises(AgentError, match=f"malformed reply \\({field}"):
        client.stats()
    client.close()


@pytest.mark.parametrize("raw", [b"[1, 2]\n", b'"ok"\n', b"{\n", b"[" * 100_000 + b"\n", b'{"ok": 1}\n',
                                 b'{"ok": false, "error": 5}\n', b"x" * (client_mod.MAX_REPLY_BYTES + 10) + b"\n"])
def test_a_reply_that_is_not_a_reply_is_one_sentence(world: dict[str, Any], raw: bytes) -> None:
    world["serve"]({"hello": _hello(world["pid"]), "stats": raw})
    client = find_agent(world["pid"])
    assert client is not None
    with pytest.raises(AgentError) as caught:
        client.stats()
    assert str(caught.value).endswith(".") and "\n" not in str(caught.value)
    client.close()


def test_nan_where_no_reading_may_stand_is_no_reading(world: dict[str, Any]) -> None:
    world["serve"]({"hello": _hello(world["pid"]), "stats": b'{"ok": true, "timestamp": 1.0, "steps_total": 3, '
                                                            b'"window_steps": 2, "steps_per_s": NaN}\n'})
    client = find_agent(world["pid"])
    assert client is not None and client.stats().steps_per_s is None
    client.close()


def _profile(path: str) -> dict[str, Any]:
    return {"ok": True, "status": "done", "steps_requested": 3, "steps_done": 3, "trace_path": path}


def test_a_trace_path_outside_the_directory_or_not_the_targets_is_not_read(world: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"       # a root-only file elsewhere
    secret.write_text("{}")
    secret.chmod(0o600)
    inside_root = world["dir"] / "trace-1-1.pt.trace.json"   # in the directory but root's
    inside_root.write_text("{}")
    good = world["dir"] / "trace-1-2.pt.trace.json"
    good.write_text("{}")
    os.chown(good, UID, UID)
    link = world["dir"] / "trace-1-3.pt.trace.json"
    link.symlink_to(secret)
    cases = {str(secret): "not in the agent's directory", str(world["dir"] / ".." / "secret.json"): "not in the agent",
             str(inside_root): "belongs to uid 0", str(link): "not a regular file", "relative.json": "not in the agent",
             str(good): None}
    replies: dict[str, Any] = {"hello": _hello(world["pid"])}
    world["serve"](replies)
    client = find_agent(world["pid"])
    assert isinstance(client, AgentClient)
    for path, why in cases.items():
        replies["profile_status"] = _profile(path)
        status = client.profile_status()
        if why is None:
            assert status.trace_path == str(good)
        else:
            assert status.trace_path is None and status.status is ProfileState.DONE, path
            assert why in status.detail, (path, status.detail)
    client.close()


def test_the_agent_passes_over_a_directory_it_does_not_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(paths, "TMP", tmp_path)
    monkeypatch.setattr(paths, "RUN_USER", tmp_path / "run-user")
    monkeypatch.setattr(paths, "_home_of", lambda uid: home)
    planted = tmp_path / f"gpudoctor-{os.geteuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    os.chown(planted, OTHER, OTHER)
    chosen = paths.ensure_private_dir()
    assert chosen == home / paths.HOME_DIR_NAME
    assert (chosen.stat().st_mode & 0o777) == 0o700 and chosen.stat().st_uid == os.geteuid()
    assert planted.stat().st_uid == OTHER and (planted.stat().st_mode & 0o777) == 0o777   # never changed
    os.chown(planted, os.geteuid(), os.geteuid())      # ours but open: tightened and used
    assert paths.ensure_private_dir() == planted and (planted.stat().st_mode & 0o777) == 0o700
    planted.rmdir()
    planted.symlink_to(home)                             # a symlink is never followed
    assert paths.ensure_private_dir() == home / paths.HOME_DIR_NAME
    monkeypatch.setattr(paths, "_home_of", lambda uid: None)
    with pytest.raises(paths.PrivateDirError, match="symbolic link"):
        paths.ensure_private_dir()


def test_attach_refuses_a_planted_agent_of_another_user() -> None:
    """Root attaching to a process of ``nobody`` whose /tmp/gpudoctor-65534 someone else (uid 65533)
    created and serves an agent socket in: one sentence, exit 8, nothing said in the agent's name."""
    if not shutil.which("runuser") or not Path("/usr/bin/python3").exists():
        pytest.skip("needs runuser and /usr/bin/python3")
    planted = Path(f"/tmp/gpudoctor-{OTHER}")
    if planted.exists() or planted.is_symlink():
        pytest.skip(f"{planted} exists on this machine")
    target = subprocess.Popen(["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", "import time; time.sleep(60)"])
    fake = None
    try:
        deadline = time.monotonic() + 10
        pid = None
        while pid is None and time.monotonic() < deadline:
            import psutil
            procs = [psutil.Process(target.pid), *psutil.Process(target.pid).children(recursive=True)]
            pid = next((p.pid for p in procs if p.name().startswith("python") and p.uids().effective == OTHER), None)
            time.sleep(0.1)
        assert pid is not None
        planted.mkdir(mode=0o700)
        fake = FakeAgent(planted / paths.socket_name(pid), {"hello": _hello(pid), "stats": _stats(steps_per_s=100.0)})
        os.chown(planted, OTHER - 1, OTHER - 1)
        done = subprocess.run([str(GPUDOCTOR), "attach", str(pid), "--once", "--no-stacks", "--format", "json"],
                              capture_output=True, text=True, timeout=60, cwd=str(REPO), stdin=subprocess.DEVNULL)
        assert done.returncode == ExitCode.UNTRUSTED_AGENT, done.stderr
        assert f"belongs to uid {OTHER - 1}, not {OTHER}" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout
    finally:
        target.kill()
        target.wait()
        if fake is not None:
            fake.close()
        shutil.rmtree(planted, ignore_errors=True)
