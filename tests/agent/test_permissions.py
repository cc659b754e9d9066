"""Injection refused for permission reasons: another user's process, and ptrace not permitted.

Both run gpudoctor's injector as an unprivileged user (``gdtest``, created when the tests run as
root) with the system Python 3.11, which can import gpudoctor and hypno from this checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import REPO

from gpudoctor.exitcodes import ExitCode

USER = "gdtest"
SYSTEM_PYTHON = Path("/usr/bin/python3")
SITE_PACKAGES = next(Path(sys.prefix).glob("lib/python3*/site-packages"), None)


@pytest.fixture(scope="module")
def unprivileged() -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root to create and switch to an unprivileged test user")
    if not shutil.which("runuser") or not SYSTEM_PYTHON.exists():
        pytest.skip("needs runuser and /usr/bin/python3")
    probe = subprocess.run([str(SYSTEM_PYTHON), "-c", "import sys; print(sys.version_info[:2])"],
                           capture_output=True, text=True)
    if probe.stdout.strip() != str(tuple(sys.version_info[:2])):
        pytest.skip("the system Python's version differs from the venv's (hypno's extension would not load)")
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", USER], check=True)
    return USER


def _as_user(user: str, code: str, *args: str, background: bool = False) -> Any:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO / 'src'}:{SITE_PACKAGES}", "HOME": "/tmp"}
    argv = ["runuser", "-u", user, "--", "env", *[f"{k}={v}" for k, v in env.items()],
            str(SYSTEM_PYTHON), "-c", code, *args]
    if background:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def _python_pid(pid: int) -> int:
    """runuser may fork: the Python process is ``pid`` itself or its descendant."""
    import psutil

    for proc in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        if proc.name().startswith("python"):
            return int(proc.pid)
    raise AssertionError("no python process under runuser")


INJECT = ("import sys\nfrom gpudoctor.agent.inject import inject\n"
          "r = inject(int(sys.argv[1]), timeout_s=10)\nprint(int(r.code)); print(r.reason)\n")


def test_another_users_process(unprivileged: str) -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out = _as_user(unprivileged, INJECT, str(target.pid))
        code, reason = out.stdout.splitlines()[:2]
        assert int(code) == ExitCode.NOT_PERMITTED, out.stderr
        assert reason == (f"process {target.pid} belongs to another user (uid 0); run gpudoctor as that user "
                          "or as root.")
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()


def test_ptrace_not_permitted(unprivileged: str) -> None:
    # Same user, but the target made itself non-dumpable: the kernel refuses ptrace without CAP_SYS_PTRACE.
    target = _as_user(unprivileged, "import ctypes, time\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n"
                      "print('ready', flush=True)\ntime.sleep(60)\n", background=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        pid = _python_pid(target.pid)
        out = _as_user(unprivileged, INJECT, str(pid))
        code, reason = out.stdout.splitlines()[:2]
        assert int(code) == ExitCode.NOT_PERMITTED, out.stdout + out.stderr
        assert reason.startswith(f"ptrace into process {pid} was refused;")
        time.sleep(0.2)
        assert target.poll() is None                    # the target carries on
    finally:
        target.kill()
        target.wait()
