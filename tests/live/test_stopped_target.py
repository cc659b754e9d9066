"""A target stopped by a signal (state T: SIGSTOP, Ctrl-Z) is said to be stopped, never reported as
"every thread busy" and "No problems found" (issue 39)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpudoctor.agent.inject import inject
from gpudoctor.agent.paths import process_stopped

GPUDOCTOR = Path(sys.executable).parent / "gpudoctor"


@pytest.fixture()
def stopped() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"])
    try:
        time.sleep(1.0)
        assert not process_stopped(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while not process_stopped(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process_stopped(proc.pid)
        yield proc.pid
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.3)
        assert not process_stopped(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_injecting_into_a_stopped_process_says_it_is_stopped(stopped: int) -> None:
    result = inject(stopped, timeout_s=5.0)
    assert not result.ok and "is stopped (state T" in result.reason and "kill -CONT" in result.reason


def test_attach_says_the_process_is_stopped_not_a_clean_bill(stopped: int) -> None:
    done = subprocess.run([str(GPUDOCTOR), "attach", str(stopped), "--duration", "4", "--no-stacks", "--format",
                           "json"], capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    report = json.loads(done.stdout)
    assert "is stopped (state T" in report["summary"]["headline"], report["summary"]
    assert "No problems found" not in done.stdout
    assert any("is stopped (state T" in note for note in report["notes"]), report["notes"]
    assert report["process"]["stopped"] is True
