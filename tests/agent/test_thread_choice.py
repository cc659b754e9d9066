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
