"""End to end in a real terminal: tmux runs ``gpudoctor attach`` on a real CPU training process
(and ``gpudoctor analyze --tui`` on a real H200 trace); keys go in with send-keys, the screen comes
back with capture-pane. Skips with a reason without tmux or torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GPUDOCTOR = Path(sys.executable).parent / "gpudoctor"
TRACE = REPO.parent / "shared" / "traces" / "h200" / "loader_bound.json.gz"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)"),
]


class Tmux:
    """One detached tmux server of our own (its own socket), one window."""

    def __init__(self, name: str) -> None:
        self.socket = f"gd-test-{os.getpid()}-{name}"

    def run(self, *args: str) -> str:
        # An explicit environment without COLUMNS/LINES: under pytest the process's C environment has
        # COLUMNS=80 (not in os.environ), the tmux server inherited it, and the app took 80×24 from it
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True,
                              text=True, timeout=20, env=env).stdout

    def start(self, command: str, width: int = 100, height: int = 30) -> None:
        self.run("new-session", "-d", "-x", str(width), "-y", str(height), "-s", "t", command)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "t")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "t", *keys)

    def wait_for(self, predicate: Callable[[str], bool], timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.25)
        raise AssertionError(f"screen never matched within {timeout_s:.0f} s; last screen:\n{text}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=20)


@pytest.fixture
def tmux(request: pytest.FixtureRequest) -> Iterator[Tmux]:
    session = Tmux(request.node.name[:20].replace("[", "_").replace("]", ""))
    yield session
    session.kill()


def _quit(tmux: Tmux, status: Path, timeout_s: float = 40.0) -> None:
    """Press q until the command has exited (its status file exists); a key read while the app is busy
    drawing on a loaded machine can be lost. Fails with the last screen."""
    deadline = time.monotonic() + timeout_s
    next_press = 0.0
    while not status.exists() and time.monotonic() < deadline:
        if time.monotonic() >= next_press:  # after the exit, a q goes to `sleep 30`: harmless
            tmux.keys("q")
            next_press = time.monotonic() + 8.0
        time.sleep(0.2)
    assert status.exists(), f"the dashboard did not exit within {timeout_s:.0f} s of q; screen:\n{tmux.screen()}"


@pytest.fixture
def training() -> Iterator[subprocess.Popen[bytes]]:
    pytest.importorskip("torch")
    proc = subprocess.Popen([sys.executable, str(REPO / "examples" / "input_bound.py"), "--steps", "0",
                             "--device", "cpu"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=REPO)
    time.sleep(4)  # imports + first steps
    assert proc.poll() is None, "the example training job did not start"
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def test_attach_dashboard_shows_finding_and_fix_and_q_leaves_target_running(
        tmux: Tmux, training: subprocess.Popen[bytes], tmp_path: Path) -> None:
    status = tmp_path / "exit"
    # 160×50, the wide layout: the detail shows the evidence table without scrolling (at 100×30, narrow,
    # the message and the gain line fill the detail and the evidence is below them)
    tmux.start(f"cd {tmp_path} && {GPUDOCTOR} attach --window 2 {training.pid}; echo $? > {status}; sleep 30",
               width=160, height=50)
    # the finding, the numbers behind the verdict, and the live panels, all on one screen
    wanted = ("GD102", "input-bound", "evidence", "data_wait_pct", "data wait", f"pid {training.pid}")
    tmux.wait_for(lambda s: all(w in s for w in wanted), 60)
    tmux.keys("Enter")  # open the highlighted finding's fix (GD102 is the only critical one: first)
    tmux.wait_for(lambda s: all(w in s for w in ("Before", "After", "os.sched_getaffinity(0)) - 2)")), 10)
    tmux.keys("Escape")
    # the full-size fix closed (the findings list is back) before q goes in: ESC and q in one read (a
    # loaded machine) are Alt+q, which quits nothing
    tmux.wait_for(lambda s: "─ Findings ─" in s, 10)
    _quit(tmux, status)
    assert status.read_text().strip() == "0"
    time.sleep(1)
    assert training.poll() is None, "quitting the dashboard must leave the training process running"


@pytest.mark.skipif(not TRACE.is_file(), reason=f"real H200 trace not found at {TRACE}")
def test_analyze_tui_on_a_real_trace(tmux: Tmux, tmp_path: Path) -> None:
    status = tmp_path / "exit"
    tmux.start(f"{GPUDOCTOR} analyze --tui {TRACE}; echo $? > {status}; sleep 30", width=80, height=24)
    # the verdict on top, the findings by estimated gain: GD102 (the input fix) first, then the info
    # findings (GD201 …; GD101, a symptom, last: info beside the verdict)
    tmux.wait_for(lambda s: all(w in s for w in ("Bottleneck", "input", "GD201", "GD102", "input-bound",
                                                   "DataLoader takes", "Gain")), 60)
    tmux.keys("Down")
    tmux.wait_for(lambda s: "GD201 missing-autocast" in s and "fp32" in s, 10)
    _quit(tmux, status)
    assert status.read_text().strip() in ("0", "1")  # 1 = findings, per --fail-on
