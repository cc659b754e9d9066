"""Child processes of the validation harness: each in its own process group, bounded, never left behind.

Why this exists: a third-party training script runs for hours by itself (90 epochs of ImageNet), and
``gpudoctor run`` waits for the command after its report is written. The harness therefore starts
``gpudoctor run`` in a new process group (same session, so the device machine's clean-up still
reaches it), waits for the report file, then ends the whole group — gpudoctor, the script and its
DataLoader or compile workers — with SIGTERM, then SIGKILL. Every group still alive when the harness
exits (normally, by an exception, or on SIGTERM/SIGINT) is killed; gpudoctor itself also gets
PR_SET_PDEATHSIG so it dies with the harness if the harness is killed outright.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LIVE_GROUPS: set[int] = set()
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the harness dies (Linux only; a no-op elsewhere)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def kill_group(pgid: int, grace_s: float = 5.0, leader: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the group, wait up to ``grace_s`` for all of it to end, then SIGKILL whatever is left.

    ``leader``: the group leader's Popen, reaped while waiting (a zombie leader keeps the group alive).
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if leader is not None:
            leader.poll()
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            break
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    _LIVE_GROUPS.discard(pgid)


def kill_all() -> None:
    for pgid in list(_LIVE_GROUPS):
        kill_group(pgid, grace_s=2.0)


def install_cleanup() -> None:
    """Kill every child group at exit and on SIGTERM/SIGINT (then exit 143/130)."""
    atexit.register(kill_all)

    def _on_signal(signum: int, _frame: Any) -> None:
        kill_all()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)


@dataclass
class ChildResult:
    """What one bounded child run left: exit status (None: ended by us), wall time, its log text."""

    returncode: int | None
    wall_s: float
    ended_by: str        # "exited", "report" (killed once the report was complete), "timeout"
    log: str


def _report_complete(path: Path) -> bool:
    try:
        json.loads(path.read_text())
        return True
    except (OSError, ValueError):
        return False


def run_until_report(cmd: list[str], cwd: Path, env: dict[str, str], report: Path, log: Path,
                     timeout_s: float) -> ChildResult:
    """Run ``cmd`` (a ``gpudoctor run … -o report -- script``) until ``report`` is complete JSON, the
    command exits, or ``timeout_s`` passes; then end its whole process group."""
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, process_group=0, preexec_fn=_die_with_parent)
        _LIVE_GROUPS.add(proc.pid)
        ended_by = "timeout"
        try:
            while time.monotonic() - started < timeout_s:
                if proc.poll() is not None:
                    ended_by = "exited"
                    break
                if report.exists() and _report_complete(report):
                    time.sleep(0.5)      # let the script print its last progress line
                    ended_by = "report"
                    break
                time.sleep(0.25)
        finally:
            kill_group(proc.pid, leader=proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
    text = log.read_text(errors="replace")
    return ChildResult(proc.returncode if ended_by == "exited" else None,
                       time.monotonic() - started, ended_by, text)


def run_bounded(cmd: list[str], timeout_s: float, cwd: Path | None = None,
                env: dict[str, str] | None = None) -> tuple[int, str]:
    """A bounded helper command (probe, ``gpudoctor attach``): (rc, output), rc 124 on timeout."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, process_group=0, preexec_fn=_die_with_parent)
    _LIVE_GROUPS.add(proc.pid)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:.0f} s"
    finally:
        kill_group(proc.pid, grace_s=1.0, leader=proc)


def run_attached(script: list[str], gd_attach: list[str], cwd: Path, env: dict[str, str], report: Path,
                 log: Path, ready: Any, wait_s: float, timeout_s: float) -> ChildResult:
    """Start ``script`` itself; once ``ready(log text)`` is true (its own progress lines: it is
    training) or ``wait_s`` passed, run ``gd_attach + [pid]`` (``gpudoctor attach --duration …``) on it;
    then end both process groups. The attach command's output is appended to the log."""
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(script, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, process_group=0, preexec_fn=_die_with_parent)
    _LIVE_GROUPS.add(proc.pid)
    ended_by = "timeout"
    gd_log = log.with_suffix(".attach.log")
    try:
        while time.monotonic() - started < wait_s and proc.poll() is None:
            if ready(log.read_text(errors="replace")):
                break
            time.sleep(0.5)
        if proc.poll() is not None:
            ended_by = "exited"
        else:
            left = max(10.0, timeout_s - (time.monotonic() - started))
            rc, text = run_bounded([*gd_attach, str(proc.pid)], timeout_s=left, cwd=cwd, env=env)
            gd_log.write_text(text)
            ended_by = "report" if report.exists() and _report_complete(report) else f"attach rc {rc}"
    finally:
        kill_group(proc.pid, leader=proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)
    text = log.read_text(errors="replace")
    if gd_log.exists():
        text += "\n--- gpudoctor attach ---\n" + gd_log.read_text(errors="replace")
    return ChildResult(proc.returncode if ended_by == "exited" else None,
                       time.monotonic() - started, ended_by, text)
