"""py-spy dies with gpudoctor (issue 15): after ``kill -9`` of the client its py-spy child used to keep
sampling the target for the rest of its window (~20 s), reparented to PID 1.

Real processes only: a sleeping Python target, a client process that records the target's stacks with
``gpudoctor.live.stacks.record_window`` (which starts ``py-spy record``), ``kill -9`` of the client.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudoctor.live.stacks import find_pyspy

REPO = Path(__file__).resolve().parents[2]
CLIENT = """
import sys
from gpudoctor.live.stacks import record_window
print("recording", flush=True)
record_window(int(sys.argv[1]), 30.0)
"""


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(find_pyspy() is None, reason="py-spy is not installed")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_pyspy_child_dies_within_2s_of_kill_9_of_the_client() -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(target.pid)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    spies: list[int] = []
    try:
        assert client.stdout is not None and client.stdout.readline().strip() == "recording"
        deadline = time.monotonic() + 30
        while not spies and time.monotonic() < deadline:
            spies = [p for p in _children(client.pid) if "py-spy" in Path(f"/proc/{p}/cmdline").read_text()]
            time.sleep(0.05)
        assert spies, "the client never started py-spy"
        time.sleep(0.5)  # py-spy is attached and sampling
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
        gone_by = time.monotonic() + 2.0
        while any(_alive(p) for p in spies) and time.monotonic() < gone_by:
            time.sleep(0.02)
        assert not any(_alive(p) for p in spies), "py-spy outlived the client by more than 2 s"
        assert target.poll() is None  # the training target is untouched
    finally:
        for pid in spies:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if client.poll() is None:
            client.kill()
        target.kill()
        target.wait()
