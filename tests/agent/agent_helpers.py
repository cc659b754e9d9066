"""Helpers for the agent tests: real CPU torch training loops as subprocesses, watched from outside."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LOOP = HERE / "train_loop.py"
GPUDOCTOR = Path(sys.executable).parent / "gpudoctor"


class Target:
    """A training subprocess whose ``tick <t> <steps>`` lines give its step rate from outside."""

    def __init__(self, *loop_args: str, cmd: list[str] | None = None, env: dict[str, str] | None = None,
                 user: str | None = None) -> None:
        argv = cmd if cmd is not None else [sys.executable, str(LOOP), *loop_args]
        if user is not None:
            argv = ["runuser", "-u", user, "--", *argv]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env or dict(os.environ), cwd=str(REPO))
        self.lines: list[str] = []
        self.ticks: list[tuple[float, int]] = []
        self.ready = threading.Event()
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("ready"):
                self.ready.set()
            elif line.startswith("tick "):
                _, t, n = line.split()
                self.ticks.append((float(t), int(n)))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr += line

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float = 60.0) -> Target:
        if not self.ready.wait(timeout_s):
            raise AssertionError(f"training loop not ready in {timeout_s} s: {self.stderr[-2000:]}")
        self.wait_steps(5)
        return self

    def wait_steps(self, count: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        start = self.steps
        while self.steps < start + count:
            assert self.proc.poll() is None, f"training loop exited: {self.stderr[-2000:]}"
            assert time.monotonic() < deadline, "training loop made no progress"
            time.sleep(0.05)

    @property
    def steps(self) -> int:
        return self.ticks[-1][1] if self.ticks else 0

    def diagnosis(self, seconds: float = 2.0) -> str:
        """What a failed test should show of the loop: whether it still steps, and its threads' stacks."""
        before = self.steps
        time.sleep(seconds)
        lines = [f"loop alive: {self.proc.poll() is None}; steps in the last {seconds:.0f} s: {self.steps - before}"]
        threads = []  # state letter and the system call each thread sleeps in (202 = futex on x86_64)
        for task in sorted(Path(f"/proc/{self.pid}/task").glob("*")):
            try:
                state = task.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0]
                call = task.joinpath("syscall").read_text().split()[:5]
            except (OSError, IndexError):
                continue
            threads.append(f"{task.name}:{state}:{' '.join(call)}")
        lines.append("threads: " + "; ".join(threads))
        try:
            dump = subprocess.run([str(Path(sys.executable).parent / "py-spy"), "dump", "--pid", str(self.pid)],
                                  capture_output=True, text=True, timeout=20)
            lines.append(dump.stdout[-4000:] or dump.stderr[-1000:])
        except (OSError, subprocess.TimeoutExpired) as exc:
            lines.append(f"py-spy dump failed: {exc}")
        return "\n".join(lines)

    def rate(self, seconds: float) -> float:
        """Steps per second measured from the loop's own ticks over the next ``seconds``."""
        time.sleep(0.3)
        t0, n0 = self.ticks[-1]
        time.sleep(seconds)
        t1, n1 = self.ticks[-1]
        assert t1 > t0, "no tick arrived"
        return (n1 - n0) / (t1 - t0)

    def rate_over(self, start: float, end: float) -> float:
        """Steps per second from the loop's own ticks between the unix times ``start`` and ``end`` —
        the interval an agent stats window covers, so that both count the same steps (under CI's load
        the rate of the seconds after a window is not the rate in it)."""
        time.sleep(0.35)  # the ticks up to ``end`` (one per 0.25 s) arrive
        inside = [(t, n) for t, n in list(self.ticks) if start <= t <= end]
        assert len(inside) >= 2, f"fewer than two ticks between {start:.2f} and {end:.2f}: {self.ticks[-6:]}"
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / (t1 - t0)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def target_factory() -> Iterator[type[Target]]:
    started: list[Target] = []

    class _Tracked(Target):
        def __init__(self, *a: str, **kw: object) -> None:
            super().__init__(*a, **kw)  # type: ignore[arg-type]
            started.append(self)

    yield _Tracked
    for t in started:
        t.stop()


def agent_threads(pid: int) -> list[str]:
    """Names of the target's threads that belong to the agent (Linux thread names, 15 chars)."""
    names = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        if name.startswith("gpudoctor"):
            names.append(name)
    return names
