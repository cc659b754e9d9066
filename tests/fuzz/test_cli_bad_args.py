"""Bad arguments and unwritable output through the real CLI in a subprocess (issue 15).

``attach -5`` was an internal error (exit 70); ``attach`` of a non-Python parent whose only Python
descendant is gpudoctor itself suggested attaching to gpudoctor's own PID; ``-o /dev/full`` and stdout
on a full disk were tracebacks or a warning at interpreter exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GPUDOCTOR = [sys.executable, "-m", "gpudoctor"]


def _run(*argv: str, stdout: int | None = subprocess.PIPE, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([*GPUDOCTOR, *argv], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          env=env, cwd=str(REPO))


@pytest.mark.parametrize("pid", ["-5", "0", "99999999999"])
def test_attach_to_an_impossible_pid_is_a_usage_error(pid: str) -> None:
    proc = _run("attach", pid, "--once")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"gpudoctor: PID must be a positive process id, not {int(pid)}.\n"


def test_attach_never_suggests_its_own_pid() -> None:
    # A shell (not Python) whose only Python descendant is the gpudoctor that attaches to the shell.
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    script = f'{sys.executable} -m gpudoctor attach $$ --once; echo "rc=$?"'
    proc = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert "rc=5" in proc.stdout, proc.stderr
    assert proc.stderr.count("\n") == 1 and "is not a Python process" in proc.stderr
    assert "Python child" not in proc.stderr


def test_attach_suggests_a_real_python_child() -> None:
    parent = subprocess.Popen(["/bin/sh", "-c", f"{sys.executable} -c 'import time; time.sleep(60)'; :"])
    try:
        time.sleep(0.5)
        proc = _run("attach", str(parent.pid), "--once")
        assert proc.returncode == 5
        assert "its Python child is PID" in proc.stderr and f"PID {os.getpid()}" not in proc.stderr
    finally:
        for child in _children(parent.pid):
            os.kill(child, 9)
        parent.kill()
        parent.wait()


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.parametrize("argv", [("check", "examples/check", "-o", "/dev/full"), ("rules", "-o", "/dev/full")])
def test_output_to_a_full_device_is_one_sentence(argv: tuple[str, ...]) -> None:
    if argv[0] == "rules" and "-o" in argv:
        argv = ("rules",)  # `rules` writes to stdout only: redirect it below
        with open("/dev/full", "w") as full:
            proc = _run(*argv, stdout=full.fileno())
    else:
        proc = _run(*argv)
    assert proc.returncode == 2, proc.stderr
    where = "/dev/full" if "-o" in argv else "the output"  # -o names the file it could not write
    assert proc.stderr == f"gpudoctor: cannot write {where}: No space left on device.\n"


def test_stdout_on_a_full_disk_is_one_sentence() -> None:
    with open("/dev/full", "w") as full:
        proc = _run("check", "examples/check", "--format", "sarif", stdout=full.fileno())
    assert proc.returncode == 2
    assert proc.stderr == "gpudoctor: cannot write the output: No space left on device.\n"


def test_closed_stdout_is_one_sentence() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(["/bin/sh", "-c", f"{sys.executable} -m gpudoctor check examples/check >&-"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=str(REPO))
    assert proc.returncode == 2
    assert proc.stderr == "gpudoctor: standard output is closed: redirect it to a file or /dev/null.\n"


@pytest.mark.parametrize("argv", [
    ("attach", "1", "--duration", "nan"),      # exited 0 with "No problems found" and no watch
    ("attach", "1", "--duration", "inf"),
    ("attach", "1", "--interval", "1e-9"),     # accepted: 7x the CPU
    ("attach", "1", "--window", "0.5"),
    ("attach", "1", "--profile", "1000"),
    ("attach", "1", "--prometheus", "70000"),
    ("run", "--duration", "nan", "--", "true"),
    ("demo", "--duration", "1e300"),
    ("analyze", "--jobs", "0", "x.json"),
    ("check", "--jobs", "100000", "."),
    ("compare", "--threshold", "nan", "a", "b"),
])
def test_numeric_options_out_of_range_are_one_sentence(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    """Every numeric option is checked in one place (cli.NUMERIC_OPTIONS), before anything runs."""
    from gpudoctor.cli import main

    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    flag = next(a for a in argv if a.startswith("--"))
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"gpudoctor: {flag} takes a number from ") and err.endswith(".\n"), err


def test_numeric_options_in_range_pass() -> None:
    import argparse

    from gpudoctor.cli import NUMERIC_OPTIONS, numeric_option_problem

    for _flag, low, high, _unit in NUMERIC_OPTIONS.values():
        assert low < high
    args = argparse.Namespace(duration=60.0, interval=1.0, window=5.0, profile=0, jobs=1, prometheus=None,
                              threshold=5.0)
    assert numeric_option_problem(args) is None
    args.interval = 0.01
    assert numeric_option_problem(args) == "--interval takes a number from 0.1 to 3600 seconds, not 0.01."
