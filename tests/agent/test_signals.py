"""Ctrl-C, SIGTERM and SIGHUP through ``gpudoctor run`` reach the job once, as the shell would deliver
them, so a job that saves in ``except KeyboardInterrupt`` saves (issue 39 item 1); ``attach`` ended by a
signal detaches its agent and writes its report.

The job (``saving_job.py``) notes every signal it gets and writes its checkpoint slowly (0.5 s): a
second signal during the save interrupts it and the checkpoint is missing. Without a terminal the
signal goes to gpudoctor's process group or to its PID; with one (a pty that is gpudoctor's controlling
terminal) Ctrl-C is the byte 0x03 typed at it, which the terminal sends to its foreground group.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import psutil
import pytest
from agent_helpers import GPUDOCTOR, REPO, Target

from gpudoctor.agent.client import find_agent
from gpudoctor.exitcodes import ExitCode

JOB = Path(__file__).resolve().parent / "saving_job.py"


class Run:
    """``gpudoctor run -- python saving_job.py LOG CKPT``, with or without a terminal."""

    def __init__(self, tmp: Path, *extra: str, terminal: bool = False) -> None:
        self.log, self.ckpt = tmp / "signals.log", tmp / "ckpt.txt"
        argv = [str(GPUDOCTOR), "run", "--no-stacks", *extra, "--", sys.executable, str(JOB),
                str(self.log), str(self.ckpt)]
        self.output = b""
        self.master: int | None = None
        if terminal:
            self.master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=str(REPO),
                                         start_new_session=True, env={**os.environ, "TERM": "xterm-256color"},
                                         preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
            os.close(slave)
            threading.Thread(target=self._drain, daemon=True).start()
        else:   # its own session: no controlling terminal; its PID is its process group
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, cwd=str(REPO), start_new_session=True)

    def _drain(self) -> None:
        assert self.master is not None
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk

    def job_pid(self, timeout_s: float = 90.0) -> int:
        """The job's PID once it trains and its agent answers (and the session had a moment to start)."""
        deadline = time.monotonic() + timeout_s
        ready = Path(str(self.ckpt) + ".ready")
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.finish()
            if not ready.exists():
                time.sleep(0.2)
                continue
            for kid in psutil.Process(self.proc.pid).children():
                client = find_agent(kid.pid, timeout_s=0.5)
                if client is not None:
                    client.close()
                    time.sleep(2.0)
                    return int(kid.pid)
            time.sleep(0.2)
        raise AssertionError(f"the job's agent never answered: {self.finish()}")

    def type(self, data: bytes) -> None:
        assert self.master is not None
        os.write(self.master, data)

    def finish(self, timeout_s: float = 60.0) -> str:
        try:
            if self.master is None:
                out, err = self.proc.communicate(timeout=timeout_s)
                self.output = out + err
            else:
                self.proc.wait(timeout=timeout_s)
                time.sleep(0.2)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.master is not None:
                os.close(self.master)
                self.master = None
        return self.output.decode("utf-8", "replace")[-4000:]

    def signals_seen(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def assert_saved_once(self, name: str, said: str) -> None:
        assert self.signals_seen() == [name], said
        assert self.ckpt.exists(), f"the checkpoint was lost: {said}"
        assert self.ckpt.read_text().splitlines()[-1].startswith("END"), said
        assert self.proc.returncode == ExitCode.INTERRUPTED, said


@pytest.mark.parametrize(("to", "signum"), [("group", signal.SIGINT), ("pid", signal.SIGINT),
                                            ("pid", signal.SIGTERM), ("group", signal.SIGHUP)])
def test_run_without_terminal_delivers_once(tmp_path: Path, to: str, signum: signal.Signals) -> None:
    run = Run(tmp_path, "--format", "json", "-o", str(tmp_path / "report.json"))
    run.job_pid()
    os.killpg(run.proc.pid, signum) if to == "group" else os.kill(run.proc.pid, signum)
    said = run.finish()
    run.assert_saved_once(signum.name, said)
    assert "passed to the command once" in said
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["command"] == "run"
    assert any(f"got {signum.name}" in note for note in report["notes"]), report["notes"]


def test_ctrl_c_on_a_terminal_is_not_sent_again(tmp_path: Path) -> None:
    run = Run(tmp_path, "--no-dashboard", "--format", "json", "-o", str(tmp_path / "report.json"), terminal=True)
    run.job_pid()
    run.type(b"\x03")            # the terminal sends SIGINT to gpudoctor and the job: gpudoctor must not add one
    said = run.finish()
    run.assert_saved_once("SIGINT", said)
    assert json.loads((tmp_path / "report.json").read_text())["command"] == "run"


def test_ctrl_c_in_the_dashboard_reaches_the_job_once(tmp_path: Path) -> None:
    run = Run(tmp_path, terminal=True)
    run.job_pid()
    deadline = time.monotonic() + 30
    while b"quit" not in run.output and time.monotonic() < deadline:   # the footer is drawn
        time.sleep(0.2)
    assert b"quit" in run.output, run.output[-2000:]
    run.type(b"\x03")            # raw mode: a key, not a signal; the dashboard passes SIGINT on
    said = run.finish()
    run.assert_saved_once("SIGINT", said)


def test_sigint_sent_to_gpudoctor_in_the_dashboard_reaches_the_job_once(tmp_path: Path) -> None:
    """The terminal is raw in the dashboard: a SIGINT gpudoctor gets there came from ``kill``, not the
    terminal, so the job has not had it and gets it from gpudoctor."""
    run = Run(tmp_path, terminal=True)
    run.job_pid()
    deadline = time.monotonic() + 30
    while b"quit" not in run.output and time.monotonic() < deadline:
        time.sleep(0.2)
    assert b"quit" in run.output, run.output[-2000:]
    os.kill(run.proc.pid, signal.SIGINT)
    said = run.finish()
    run.assert_saved_once("SIGINT", said)


def test_ctrl_c_after_leaving_the_dashboard_is_not_a_second_one(tmp_path: Path) -> None:
    """Before: after ``q``, the first Ctrl-C was taken as a second one and the job got SIGTERM 0.33 s later."""
    run = Run(tmp_path, terminal=True)
    job = run.job_pid()
    deadline = time.monotonic() + 30
    while b"quit" not in run.output and time.monotonic() < deadline:
        time.sleep(0.2)
    run.type(b"q")
    deadline = time.monotonic() + 15     # the dashboard detaches and gives the terminal back (cooked)
    while time.monotonic() < deadline:
        fd = os.open(f"/proc/{run.proc.pid}/fd/0", os.O_RDONLY | os.O_NOCTTY)
        try:
            if termios.tcgetattr(fd)[3] & termios.ISIG:
                break
        finally:
            os.close(fd)
        time.sleep(0.2)
    time.sleep(0.5)
    assert psutil.pid_exists(job)
    run.type(b"\x03")
    said = run.finish()
    run.assert_saved_once("SIGINT", said)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_attach_ended_by_a_signal_detaches_and_reports(tmp_path: Path, signum: signal.Signals) -> None:
    target = Target("--load-ms", "1", "--compute-ms", "5", "--seconds", "120").wait_ready()
    report = tmp_path / "report.json"
    try:
        proc = subprocess.Popen([str(GPUDOCTOR), "attach", str(target.pid), "--headless", "--no-stacks",
                                 "--format", "json", "-o", str(report)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO),
                                start_new_session=True)
        deadline = time.monotonic() + 90
        client = None
        while client is None and time.monotonic() < deadline and proc.poll() is None:
            client = find_agent(target.pid, timeout_s=0.5)
            time.sleep(0.3)
        assert client is not None, proc.communicate(timeout=30)
        socket_path = client.socket_path
        client.close()
        time.sleep(2.0)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == ExitCode.INTERRUPTED, err
        notes = json.loads(report.read_text())["notes"]
        assert any(f"got {signum.name}" in note and "detached" in note for note in notes), notes
        deadline = time.monotonic() + 10          # the injected agent is gone: its socket removed
        while socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not socket_path.exists()
        assert target.alive()
    finally:
        target.stop()
