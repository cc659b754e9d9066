"""On-demand torch.profiler windows, started and stopped on the training thread.

A profiler started from a background thread misses the training thread's CPU ops (measured on an
H200, see DESIGN.md), so the socket thread only *arms* a window; the step hook starts it at the next
step boundary and stops it after N steps, whether or not a client is still connected. If steps stop
arriving, the socket thread's tick ends the window after its time limit. A profiler the user
already runs is detected and left alone. The window is one warm-up step plus N recorded steps,
each marked ``ProfilerStep#k`` in the trace, as torch.profiler's own schedule does. Standard library plus the target's torch only.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

MAX_STEPS = 100
#: Traces of one process kept in the agent's directory; older ones are deleted when a new one is written.
KEEP_TRACES_PER_PROCESS = 3
#: Traces of processes that have exited are deleted once they are this old.
DEAD_PROCESS_TRACE_MAX_AGE_S = 7 * 24 * 3600.0


def prune_traces(directory: Path, pid: int, keep: int = KEEP_TRACES_PER_PROCESS,
                 now: float | None = None) -> list[str]:
    """Delete ``pid``'s oldest traces beyond ``keep``, and week-old traces of exited processes.

    Traces are only ever this agent's own files (``trace-<pid>-<ms>.pt.trace.json`` in its private
    directory). Returns the names deleted. Never raises.
    """
    now = time.time() if now is None else now
    mine: list[tuple[int, str]] = []
    deleted: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return deleted
    for entry in entries:
        parts = entry.name.split("-")
        if len(parts) != 3 or parts[0] != "trace" or not entry.name.endswith(".pt.trace.json"):
            continue
        owner, stamp = parts[1], parts[2].split(".", 1)[0]
        if not (owner.isdigit() and stamp.isdigit()):
            continue
        if int(owner) == pid:
            mine.append((int(stamp), entry.path))
            continue
        try:
            stale = (not os.path.exists(f"/proc/{owner}")
                     and now - entry.stat().st_mtime > DEAD_PROCESS_TRACE_MAX_AGE_S)
            if stale:
                os.unlink(entry.path)
                deleted.append(entry.name)
        except OSError:
            pass
    for _, path in sorted(mine)[:max(0, len(mine) - keep)]:
        try:
            os.unlink(path)
            deleted.append(os.path.basename(path))
        except OSError:
            pass
    return deleted


def user_profiler_active() -> bool:
    """True when a torch (autograd/Kineto) profiler is already running in this process."""
    prof_mod = sys.modules.get("torch.autograd.profiler")
    if prof_mod is not None and getattr(prof_mod, "_is_profiler_enabled", False):
        return True
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch._C._autograd._profiler_enabled())
    except Exception:
        return False


def ask_cupti_teardown(torch: Any) -> bool:
    """Have Kineto tear CUPTI down when the window ends (``TEARDOWN_CUPTI=1``), unless told otherwise.

    Without it CUPTI stays subscribed after the profiler stops and every later kernel launch pays for
    it (pytorch#144455): measured on an H200, a launch-heavy loop stayed 19% slower after one 5-step
    window, and within drift with teardown (bench/gpu/cupti_residue.py). Before CUDA 12.6 re-initialising
    CUPTI after a teardown crashed with CUDA graphs, so teardown is asked for on 12.6 and later only. A
    value the user set, or ``GPUDOCTOR_CUPTI_TEARDOWN=0``, wins. Returns whether teardown is asked for.
    """
    if os.environ.get("GPUDOCTOR_CUPTI_TEARDOWN") == "0":
        return os.environ.get("TEARDOWN_CUPTI") == "1"
    if "TEARDOWN_CUPTI" in os.environ:
        return os.environ["TEARDOWN_CUPTI"] == "1"
    try:
        major, minor = (int(x) for x in str(torch.version.cuda).split(".")[:2])
    except (TypeError, ValueError):
        return False
    if (major, minor) < (12, 6):
        return False
    os.environ["TEARDOWN_CUPTI"] = "1"
    return True


class ProfileWindow:
    """State machine: idle → armed → recording → done | failed (and back to armed on a new request)."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._lock = threading.Lock()
        self.status = "idle"
        self.steps_requested = 0
        self.steps_done = 0
        self.trace_path: str | None = None
        self.detail = ""
        self._deadline = 0.0
        self._prof: Any = None
        self._trace_written = False
        self._stop_reason = ""
        self._thread_id = 0

    def snapshot(self) -> dict[str, Any]:
        return {"status": self.status, "steps_requested": self.steps_requested,
                "steps_done": self.steps_done, "trace_path": self.trace_path, "detail": self.detail}

    @property
    def busy(self) -> bool:
        return self.status in ("armed", "recording")

    def request(self, steps: int, timeout_s: float) -> str | None:
        """Arm a window of ``steps`` steps; returns a one-sentence refusal, or None when armed."""
        if "torch.profiler" not in sys.modules and "torch" not in sys.modules:
            return "torch is not loaded in the target (yet); nothing to profile."
        with self._lock:
            if self.busy:
                return f"a gpudoctor profile is already {self.status}; wait for it to finish."
            if user_profiler_active():
                return "a torch.profiler session the program started is running; gpudoctor leaves it alone."
            self.status, self.steps_requested, self.steps_done = "armed", steps, 0
            self.trace_path, self.detail = None, ""
            self._deadline = time.monotonic() + timeout_s
        return None

    # -- training thread -------------------------------------------------------------------

    def on_step(self) -> None:
        """Called from the step hook on the training thread."""
        if self.status == "armed":
            self._start()
        elif self.status == "recording":
            with self._lock:
                if self.status != "recording" or self._prof is None:
                    return
                try:
                    self._prof.step()      # one warm-up step, then N recorded ProfilerStep#k ranges
                    self.steps_done = min(self.steps_requested, max(0, self._prof.step_num - 1))
                except Exception as exc:
                    self._fail(f"torch.profiler failed during the window: {type(exc).__name__}: {exc}")
                    return
                if self._trace_written:
                    self._close("")
                elif self._stop_reason:
                    self._close(f"stopped early ({self._stop_reason}) after {self.steps_done} of "
                                f"{self.steps_requested} steps.")

    def _start(self) -> None:
        with self._lock:
            if self.status != "armed":
                return
            if user_profiler_active():
                self.status, self.detail = "failed", "the program started its own torch.profiler; left alone."
                return
            try:
                import torch.profiler as tp
                activities = [tp.ProfilerActivity.CPU]
                torch = sys.modules["torch"]
                if torch.cuda.is_available() and torch.cuda.is_initialized():
                    activities.append(tp.ProfilerActivity.CUDA)
                    ask_cupti_teardown(torch)
                self._trace_written, self._stop_reason = False, ""
                self._thread_id = threading.get_ident()
                self._prof = tp.profile(
                    activities=activities, record_shapes=False, with_stack=False,
                    schedule=tp.schedule(wait=0, warmup=1, active=self.steps_requested, repeat=1),
                    on_trace_ready=self._write_trace)
                self._prof.start()
                self.status = "recording"
            except Exception as exc:
                self._prof = None
                self.status, self.detail = "failed", f"torch.profiler did not start: {type(exc).__name__}: {exc}"

    # -- any thread ------------------------------------------------------------------------

    def _write_trace(self, prof: Any) -> None:
        """torch.profiler's on_trace_ready: export the window to a private file (0600)."""
        prune_traces(self._dir, os.getpid(), keep=KEEP_TRACES_PER_PROCESS - 1)
        path = self._dir / f"trace-{os.getpid()}-{int(time.time() * 1000)}.pt.trace.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        prof.export_chrome_trace(str(path))
        os.chmod(path, 0o600)
        self.trace_path, self._trace_written = str(path), True

    def _close(self, detail: str) -> None:
        """Stop the profiler (writing the trace if it is still recording). Caller holds the lock."""
        prof, self._prof = self._prof, None
        try:
            if prof is not None:
                prof.stop()
        except Exception as exc:
            self._fail(f"stopping torch.profiler failed: {type(exc).__name__}: {exc}")
            return
        if self._trace_written:
            self.status, self.detail = "done", detail
        else:
            self._fail(detail or "the window ended before a step was recorded; nothing written.")

    def _fail(self, detail: str) -> None:
        self.status, self.detail, self._prof = "failed", detail, None

    def tick(self) -> None:
        """From the socket thread: end a window whose time limit has passed."""
        if self.busy and time.monotonic() >= self._deadline:
            self.abort("the time limit passed")

    def abort(self, why: str) -> None:
        """End an armed window now; ask a recording one to end at the next step.

        torch.profiler must be stopped on the thread that started it: stopping it from the socket
        thread crashed the process (SIGSEGV, torch 2.13 CPU). So a recording window whose steps
        stopped keeps recording until the next step boundary (or :meth:`stop_at_exit`).
        """
        with self._lock:
            if self.status == "armed":
                self.status, self.detail = "failed", f"no training step arrived before {why}; nothing recorded."
            elif self.status == "recording" and not self._stop_reason:
                self._stop_reason = why
                self.detail = f"{why}; the window ends at the next training step."

    def stop_at_exit(self) -> None:
        """At interpreter exit: finish a recording window if this is the thread that started it."""
        with self._lock:
            if self.status == "recording" and threading.get_ident() == self._thread_id:
                self._close(f"stopped early (the program exited) after {self.steps_done} of "
                            f"{self.steps_requested} steps.")
            elif self.busy:
                self._fail("the program exited before the window ended; nothing written.")
