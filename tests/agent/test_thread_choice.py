"""Which sleeping thread the injector borrows: the system call it sleeps in comes first. A thread in a
timed futex wait may be a GIL waiter that wakes every 5 ms to take the GIL's mutex; stopped then, the
injected code's own GIL request in that thread deadlocks the process (issue 39: never harm the job)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from gpudoctor.agent.inject import _wait_kind, choose_thread

TARGET = r"""
import threading, time, sys
cond = threading.Condition()
def untimed():
    with cond:
        cond.wait()
def timed():
    with cond:
        cond.wait(timeout=600)
def asleep():
    time.sleep(600)
names = {}
for fn in (untimed, timed, asleep):
    t = threading.Thread(target=fn, name=fn.__name__, daemon=True)
    t.start()
    names[fn.__name__] = t
time.sleep(0.3)
print(" ".join(f"{n}={t.native_id}" for n, t in names.items()), flush=True)
with cond:
    cond.wait(timeout=600)   # the main thread: a timed futex wait too
"""


@pytest.fixture
def target() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", TARGET], stdout=subprocess.PIPE, text=True)
    yield proc
    proc.kill()
    proc.wait()


def test_wait_kinds_and_the_thread_chosen(target: subprocess.Popen[str]) -> None:
    assert target.stdout is not None
    tids = dict(item.split("=") for item in target.stdout.readline().split())
    tid = {name: int(value) for name, value in tids.items()}
    time.sleep(0.2)
    assert _wait_kind(target.pid, tid["asleep"]) == 0
    assert _wait_kind(target.pid, tid["untimed"]) == 1
    assert _wait_kind(target.pid, tid["timed"]) == 2
    assert _wait_kind(target.pid, target.pid) == 2
    assert _wait_kind(target.pid, 999_999_999) == 2          # gone or unreadable: the least safe
    # All four sleep and are young; the one asleep outside a futex is borrowed first.
    assert choose_thread(target.pid, timeout_s=5) == tid["asleep"]


def test_a_futex_sleeper_is_taken_only_after_a_safer_thread_failed_to_appear(monkeypatch) -> None:
    """A DataLoader that forks workers every epoch leaves moments when only futex sleepers are idle;
    taking one at once froze that job in about 1 of 6 attaches. A thread asleep outside a futex that
    turns up within the hold-out wins; when none does, the futex sleeper is taken after it."""
    from gpudoctor.agent import inject as mod

    started = time.monotonic()
    states = {10: ("S", 5, "python", 0), 11: ("S", 7, "python", 0)}
    monkeypatch.setattr(mod, "_thread_states", lambda pid: dict(states))
    monkeypatch.setattr(mod, "_uptime_ticks", lambda: 1e9)
    # thread 11 sleeps in an untimed futex throughout; thread 10 is in a plain sleep from 0.2 s on
    monkeypatch.setattr(mod, "_wait_kind", lambda pid, tid: 1 if tid == 11 or time.monotonic() - started < 0.2 else 0)
    assert choose_thread(10, timeout_s=8.0) == 10
    monkeypatch.setattr(mod, "_wait_kind", lambda pid, tid: 1)
    began = time.monotonic()
    assert choose_thread(10, timeout_s=8.0) in (10, 11)
    assert mod.HOLD_OUT_FOR_NON_FUTEX_S - 0.1 <= time.monotonic() - began < mod.HOLD_OUT_FOR_NON_FUTEX_S + 1.0
