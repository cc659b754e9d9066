"""Starting the agent inside an already-running Python process, bounded in time.

Python ≥ 3.14 targets: ``sys.remote_exec`` run by the target's own interpreter. Python 3.10–3.13:
the ptrace injector ``hypno`` (optional extra ``gpudoctor[inject]``), run in a child process so a hung
injection can be killed without hanging gpudoctor, and pointed at a thread that sleeps in the kernel
(see :func:`choose_thread`) — never at a busy one. Every failure a user can cause (no such PID,
another user's process, not Python, ptrace refused, injector missing) comes back as one sentence
and an :class:`~gpudoctor.exitcodes.ExitCode`; the target keeps running either way.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gpudoctor
from gpudoctor.agent.client import AgentClient, find_agent, wait_for_agent
from gpudoctor.agent.paths import find_socket, process_stopped, process_uid
from gpudoctor.exitcodes import ExitCode
from gpudoctor.isolated import python_c

#: The directory that holds the ``gpudoctor`` package: put on the target's sys.path while importing.
PACKAGE_PARENT = str(Path(gpudoctor.__file__).resolve().parent.parent)

# The injected code only starts a thread and returns. hypno runs it from a library constructor, i.e.
# while the target holds the dynamic loader's lock and the injector is attached: importing an
# extension module (dlopen) from any thread during that time would deadlock, so the real start waits
# until the injector has returned. Nor may the injected code wait for the new thread:
# ``threading.Thread.start()`` blocks until the thread runs, and once here it did not for 40 s: the
# snippet waited in ``Thread.start`` on a DataLoader ``QueueFeederThread`` while the loop
# stood still (a full test run, tests/agent/test_inject.py). ``_thread.start_new_thread`` returns
# as soon as the thread exists.
_SNIPPET = """\
import sys as _gd_sys, _thread as _gd_thread, time as _gd_time
def _gd_start(path={path!r}, sys=_gd_sys, time=_gd_time):
    time.sleep({delay_s!r})
    added = path not in sys.path
    if added:
        sys.path.insert(0, path)
    try:
        from gpudoctor.agent import runtime
        runtime.install("inject")
    except Exception as exc:
        sys.stderr.write("gpudoctor: the agent did not start: %s: %s\\n" % (type(exc).__name__, exc))
    finally:
        if added and path in sys.path:
            sys.path.remove(path)
_gd_thread.start_new_thread(_gd_start, ())
del _gd_sys, _gd_thread, _gd_time, _gd_start
"""
INJECT_START_DELAY_S = 0.05
#: What a watch without the agent still has, for the sentence that says why the agent is not there.
WITHOUT_AGENT = ("gpudoctor carries on without the agent — NVML, the process tree, /dev/shm and py-spy still "
                 "judge the job, but step times, DataLoader waits and profile windows need the agent;")


@dataclass(frozen=True)
class InjectResult:
    """The outcome of :func:`inject`."""

    ok: bool
    reason: str = ""                    # one sentence: why not, and what to do
    code: ExitCode = ExitCode.OK
    client: AgentClient | None = None
    method: str = ""                    # already-running | remote_exec | hypno
    elapsed_ms: float = 0.0


def injection_code() -> str:
    """The Python source run inside the target: import the agent from gpudoctor's install and start it."""
    return _SNIPPET.format(path=PACKAGE_PARENT, delay_s=INJECT_START_DELAY_S)


def python_version_of(pid: int) -> tuple[int, int] | None | bool:
    """(major, minor) of the Python in ``pid``; None when unknown (Python of unknown version, or its
    /proc entries are not readable, e.g. a non-dumpable process); False when it is not Python."""
    names: list[str] = []
    denied = False
    try:
        names.append(os.path.basename(os.readlink(f"/proc/{pid}/exe")))
    except PermissionError:
        denied = True
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/maps", encoding="ascii", errors="replace") as fh:
            names.extend(line.rsplit("/", 1)[-1].strip() for line in fh if "python" in line)
    except PermissionError:
        denied = True
    except OSError:
        pass
    for name in names:
        match = re.match(r"(?:lib)?python(\d)\.(\d+)", name)
        if match:
            return int(match.group(1)), int(match.group(2))
    if any(re.match(r"python\d?$", n) for n in names) or denied:
        return None
    return False


def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _ptrace_hint() -> str:
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = ""
    if scope in ("1", "2"):
        return (f"kernel.yama.ptrace_scope is {scope}; run gpudoctor as root, or set it to 0 "
                "(sudo sysctl kernel.yama.ptrace_scope=0), or start the job with `gpudoctor run`")
    if scope == "3":
        return "kernel.yama.ptrace_scope is 3 (attach disabled); start the job with `gpudoctor run` instead"
    return ("in a container, add CAP_SYS_PTRACE (docker run --cap-add=SYS_PTRACE), or start the job "
            "with `gpudoctor run` instead")


def _precheck(pid: int) -> InjectResult | None:
    if pid <= 0 or not os.path.exists(f"/proc/{pid}"):
        return InjectResult(False, f"process {pid} does not exist (it may have exited).", ExitCode.NO_SUCH_PROCESS)
    uid = process_uid(pid)
    if uid is None:
        return InjectResult(False, f"process {pid} does not exist (it may have exited).", ExitCode.NO_SUCH_PROCESS)
    if process_stopped(pid):
        return InjectResult(False, f"process {pid} is stopped (state T: SIGSTOP or Ctrl-Z), so no agent can start "
                                   f"in it; `kill -CONT {pid}` resumes it.", ExitCode.OK)
    if os.geteuid() != 0 and uid != os.geteuid():
        return InjectResult(False, f"process {pid} belongs to another user (uid {uid}); run gpudoctor as that "
                                   "user or as root.", ExitCode.NOT_PERMITTED)
    version = python_version_of(pid)
    if version is False:
        return InjectResult(False, f"process {pid} ({_process_name(pid)}) is not a Python process; point gpudoctor "
                                   "at the Python training process.", ExitCode.NOT_PYTHON)
    return None


def _run_bounded(cmd: list[str], pid: int, timeout_s: float) -> tuple[int | None, str]:
    """Run an injector; on timeout kill it and SIGCONT the target in case ptrace left it stopped."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
        return proc.returncode, (proc.stderr or proc.stdout or "").strip()
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)
        return None, "timed out"
    except OSError as exc:
        return 127, str(exc)


def _thread_states(pid: int) -> dict[int, tuple[str, int, str, int]]:
    """tid → (state letter, user+system CPU ticks, thread name, start time in clock ticks) from /proc."""
    states: dict[int, tuple[str, int, str, int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                raw = Path(f"/proc/{pid}/task/{entry}/stat").read_text()
                name = raw[raw.index("(") + 1:raw.rindex(")")]
                fields = raw[raw.rindex(")") + 2:].split()
                states[int(entry)] = (fields[0], int(fields[11]) + int(fields[12]), name, int(fields[19]))
    return states


#: A helper thread younger than this (seconds) may be one that a DataLoader starts and ends every epoch
#: (its queue-feeder and pin-memory threads): borrowed only when no older thread sleeps.
SETTLED_THREAD_AGE_S = 2.0
#: How often one injection tries another thread when the one it chose exits during the attach.
MAX_ATTACH_TRIES = 12


def _uptime_ticks() -> float | None:
    try:
        return float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def choose_thread(pid: int, timeout_s: float, window_s: float = 0.05) -> int | None:
    """A thread of ``pid`` that is blocked in the kernel and stays so: the safe one to borrow.

    The ptrace injector makes the thread it stops call ``dlopen`` and then Python. A thread stopped
    while running may hold an allocator or loader lock that this needs — a CPU-bound training loop
    deadlocked that way (measured). A thread asleep in a system call holds none — least of all one
    asleep outside a futex wait (see :func:`_wait_kind`) — so prefer those, then an idle
    helper thread (same name as the main thread: Python and torch pool threads) that has lived a while,
    then the main thread when it sleeps, then any idle thread — a young one last: a loader without
    persistent workers starts its feeder threads every epoch and ends them at its end, and one chosen
    then is gone before the attach (``PTRACE_ATTACH: No such process`` in 3 of 3 tries on a loop of
    8-step epochs). None when every thread stays busy until ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    ticks_per_s = float(os.sysconf("SC_CLK_TCK"))
    while True:
        before = _thread_states(pid)
        time.sleep(window_s)
        after = _thread_states(pid)
        now_ticks = _uptime_ticks()
        idle = [tid for tid, (state, cpu, _, _) in after.items()
                if state == "S" and before.get(tid, ("", -1, "", 0))[:2] == (state, cpu)]
        ranked = sorted(idle, key=lambda tid: _thread_rank(pid, tid, after, now_ticks, ticks_per_s))
        if ranked:
            return ranked[0]
        if time.monotonic() >= deadline or not after:
            return None
        time.sleep(0.05)


#: The futex system call's number, by machine: a thread asleep in it waits on a lock or condition.
_FUTEX_SYSCALL = {"x86_64": 202, "aarch64": 98}.get(os.uname().machine)


def _wait_kind(pid: int, tid: int) -> int:
    """How safe the system call a thread sleeps in is to borrow it for the injector, 0 safest.

    0: a sleep, poll, read or wait outside the futex call (``time.sleep``, a DataLoader's queue get,
    ``waitpid``): the thread holds no interpreter lock there. 1: a futex wait without a deadline (a
    pool thread parked, ``Condition.wait()``). 2: a futex wait with a deadline, or unknown. CPython's
    GIL waiters sleep in timed futex waits (5 ms at a time) and wake to take the GIL's mutex; a
    thread stopped just then holds that mutex, and the injected code's own GIL request in the same
    thread would deadlock the whole process. Those are borrowed only when nothing else sleeps.
    """
    try:
        fields = Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()
        number = int(fields[0])
    except (OSError, ValueError, IndexError):
        return 2
    if number != _FUTEX_SYSCALL:
        return 0 if number >= 0 else 2
    try:
        return 1 if int(fields[4], 16) == 0 else 2  # the fourth argument: the timeout pointer
    except (ValueError, IndexError):
        return 2


def _thread_rank(pid: int, tid: int, states: dict[int, tuple[str, int, str, int]], now_ticks: float | None,
                 ticks_per_s: float) -> tuple[int, int, int, int]:
    """Sort key of an idle thread for :func:`choose_thread`: the call it sleeps in (:func:`_wait_kind`),
    then settled before young, then helper, main, other."""
    age_s = (now_ticks - states[tid][3]) / ticks_per_s if now_ticks is not None else SETTLED_THREAD_AGE_S
    young = int(tid != pid and age_s < SETTLED_THREAD_AGE_S)
    main_name = states.get(pid, ("", 0, "", 0))[2]
    kind = 0 if tid != pid and states[tid][2] == main_name else 1 if tid == pid else 2
    return _wait_kind(pid, tid), young, kind, tid


def _thread_gone(text: str) -> bool:
    """The injector's error when the thread it stopped (or was about to) no longer exists."""
    lowered = text.lower()
    return "no such process" in lowered or "esrch" in lowered


def _interrupted_by_signal(text: str) -> bool:
    """The injector's error when the stopped thread got another signal first (a SIGCHLD from a
    DataLoader worker that exited): the injector restored the thread and let it go; trying again is safe."""
    return "unexpectedly stopped by signal" in text.lower()


def hypno_runner(pid: int, code: str, timeout_s: float) -> int:
    """The injector's own process (``python -c``): choose a thread and inject, again while threads exit.

    Run in a child so a hung attach can be killed. The thread is chosen here, after hypno is imported,
    so that a few ms — not the child's start-up — pass between choosing it and stopping it; when it has
    exited by then (a DataLoader's feeder threads come and go every epoch), another one is chosen, up to
    :data:`MAX_ATTACH_TRIES` times. Prints ``tries N`` and returns 0 when injected; 4 when every thread
    stayed busy, 5 when threads kept exiting under it, 3 on any other injector error (its text on stderr).
    """
    import hypno

    deadline = time.monotonic() + timeout_s
    for tries in range(1, MAX_ATTACH_TRIES + 1):
        tid = choose_thread(pid, max(0.2, min(5.0, deadline - time.monotonic())))
        if tid is None:
            print("every thread busy", file=sys.stderr)
            return 4
        try:
            hypno.inject_py(tid, code)
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            if _interrupted_by_signal(text) and os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
                time.sleep(INJECT_START_DELAY_S * 4)
                if find_socket(pid) is not None:     # the snippet ran before the signal came: injected
                    print(f"tries {tries}")
                    return 0
                continue
            if _thread_gone(text) and os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
                continue
            print(text, file=sys.stderr)
            return 5 if _thread_gone(text) and os.path.exists(f"/proc/{pid}") else 3
        print(f"tries {tries}")
        return 0
    print(f"the thread chosen exited during the attach {MAX_ATTACH_TRIES} times", file=sys.stderr)
    return 5


def _inject_hypno(pid: int, timeout_s: float) -> tuple[int | None, str]:
    try:
        import hypno  # noqa: F401  (only to learn whether the optional extra is installed)
    except ImportError:
        return -1, "hypno missing"
    runner = (f"import sys; sys.path.insert(0, {PACKAGE_PARENT!r})\n"
              "from gpudoctor.agent.inject import hypno_runner\n"
              "sys.exit(hypno_runner(int(sys.argv[1]), sys.argv[2], float(sys.argv[3])))\n")
    budget = max(1.0, timeout_s - 1.0)     # the child's own deadline, inside the kill timeout
    rc, text = _run_bounded([*python_c(runner), str(pid), injection_code(), f"{budget:.1f}"],
                            pid, timeout_s)
    if rc == 4:
        return -2, "every thread busy"
    if rc == 5:
        return -3, text
    return rc, text


def _inject_remote_exec(pid: int, timeout_s: float) -> tuple[int | None, str]:
    """Python ≥ 3.14: the target's own interpreter runs ``sys.remote_exec`` with a private script."""
    from gpudoctor.agent.paths import ensure_private_dir

    exe = os.readlink(f"/proc/{pid}/exe")
    script = ensure_private_dir() / f"inject-{pid}-{int(time.time() * 1000)}.py"
    fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(injection_code())
    try:
        return _run_bounded([*python_c("sys.remote_exec(int(sys.argv[1]), sys.argv[2])", exe),
                             str(pid), str(script)], pid, timeout_s)
    finally:
        # remote_exec reads the file when the target reaches a safe point: give it the time budget.
        _unlink_later(script, timeout_s)


def _unlink_later(path: Path, delay_s: float) -> None:
    import threading

    def _unlink() -> None:
        time.sleep(delay_s)
        with contextlib.suppress(OSError):
            path.unlink()

    threading.Thread(target=_unlink, daemon=True).start()


def _failure(pid: int, rc: int | None, text: str, timeout_s: float) -> InjectResult:
    lowered = text.lower()
    if rc == -1:
        return InjectResult(False, "the agent cannot be injected: the optional injector is not installed; "
                                   "run `pip install 'gpudoctor[inject]'` or start the job with `gpudoctor run`.",
                            ExitCode.USAGE)
    if not os.path.exists(f"/proc/{pid}"):
        return InjectResult(False, f"process {pid} exited during injection.", ExitCode.NO_SUCH_PROCESS)
    if rc == -2:
        return InjectResult(False, f"every thread of process {pid} stayed busy, and stopping a busy thread to load "
                                   f"the agent can deadlock it; {WITHOUT_AGENT} try again, or start the job with "
                                   "`gpudoctor run`.", ExitCode.INTERNAL)
    if rc == -3:
        return InjectResult(False, f"the threads of process {pid} kept exiting while the injector stopped them "
                                   f"({MAX_ATTACH_TRIES} tries); {WITHOUT_AGENT} start the job with `gpudoctor run` "
                                   "for them.", ExitCode.INTERNAL)
    if "permission" in lowered or "not permitted" in lowered or "eperm" in lowered or "errno 1" in lowered:
        return InjectResult(False, f"ptrace into process {pid} was refused; {_ptrace_hint()}.", ExitCode.NOT_PERMITTED)
    if "remote debugging" in lowered or "python_disable_remote_debug" in lowered:
        return InjectResult(False, f"process {pid} disabled remote debugging (PYTHON_DISABLE_REMOTE_DEBUG or -X "
                                   "disable_remote_debug); start the job with `gpudoctor run`.", ExitCode.NOT_PERMITTED)
    if rc is None:
        return InjectResult(False, f"injecting into process {pid} did not finish within {timeout_s:.0f} s; the "
                                   "process keeps running — start it with `gpudoctor run` instead.", ExitCode.INTERNAL)
    first = text.splitlines()[-1] if text else f"exit status {rc}"
    return InjectResult(False, f"injecting into process {pid} failed ({first[:160]}); the process keeps running "
                               f"and {WITHOUT_AGENT} start it with `gpudoctor run` for them.", ExitCode.INTERNAL)


def inject(pid: int, timeout_s: float = 10.0) -> InjectResult:
    """Start the agent in ``pid`` (or find it already there) and connect to it. Never raises."""
    started = time.monotonic()

    def done(result: InjectResult, **changes: Any) -> InjectResult:
        from dataclasses import replace

        return replace(result, elapsed_ms=(time.monotonic() - started) * 1e3, **changes)

    refusal = _precheck(pid)
    if refusal is not None:
        return done(refusal)
    existing = find_agent(pid)
    if existing is not None:
        return done(InjectResult(True, client=existing, method="already-running"))
    version = python_version_of(pid)
    use_remote_exec = isinstance(version, tuple) and version >= (3, 14)
    method = "remote_exec" if use_remote_exec else "hypno"
    try:
        runner = _inject_remote_exec if use_remote_exec else _inject_hypno
        rc, text = runner(pid, timeout_s)
    except OSError as exc:
        rc, text = 127, str(exc)
    if rc != 0:
        return done(_failure(pid, rc, text, timeout_s), method=method)
    remaining = max(0.5, timeout_s - (time.monotonic() - started))
    client = wait_for_agent(pid, remaining)
    if client is None:
        if not os.path.exists(f"/proc/{pid}"):
            return done(InjectResult(False, f"process {pid} exited during injection.", ExitCode.NO_SUCH_PROCESS),
                        method=method)
        return done(InjectResult(False, f"the agent did not answer within {timeout_s:.0f} s after injection into "
                                        f"process {pid} (its main thread may be blocked outside Python); it keeps "
                                        "running — try again, or start it with `gpudoctor run`.", ExitCode.INTERNAL),
                    method=method)
    return done(InjectResult(True, client=client, method=method))
