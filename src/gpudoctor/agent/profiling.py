"""On-demand torch.profiler windows, started and stopped on the training thread.

A profiler started from a background thread misses the training thread's CPU ops (measured on an
H200, see DESIGN.md), so the socket thread only *arms* a window; the step hook starts it at the next
step boundary and stops it after N steps, whether or not a client is still connected. If steps stop
arriving, the socket thread's tick ends the window after its time limit. A window that sees no
step boundary at all within a few seconds (a loop the agent cannot find steps in) records a
bounded time window from the agent's own thread instead, and says so in its ``detail``. A profiler the user
already runs is detected and left alone. The window is one warm-up step plus N recorded steps,
each marked ``ProfilerStep#k`` in the trace, as torch.profiler's own schedule does. Standard library plus the target's torch only.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gpudoctor.agent.protocol import PROFILE_STEPS, ProfileReply, ProfileState, WindowKind

MAX_STEPS = PROFILE_STEPS[1]
#: An armed window that sees no step boundary for this long (or 3 typical steps, at most
#: NO_STEP_FALLBACK_MAX_S) records a time window of TIME_WINDOW_S instead.
NO_STEP_FALLBACK_S = 3.0
NO_STEP_FALLBACK_MAX_S = 20.0
TIME_WINDOW_S = 3.0
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


def torch_import_in_progress() -> bool:
    """True while the program is importing a torch module (or torch.profiler is not imported yet).

    Importing from the agent's thread while the training thread imports torch._dynamo made the
    *program's* import fail ("partially initialized module torch._inductor.utils", seen on a loaded
    2-core machine), so the agent's own threads start nothing torch-related during an import.
    """
    if "torch.profiler" not in sys.modules:
        return True
    for name, module in list(sys.modules.items()):
        if name.startswith("torch"):
            spec = getattr(module, "__spec__", None)
            if spec is not None and getattr(spec, "_initializing", False):
                return True
    return False


def ask_cupti_teardown(torch: Any) -> bool:
    """Have Kineto tear CUPTI down when the window ends (``TEARDOWN_CUPTI=1``), unless told otherwise.

    Without it CUPTI stays subscribed after the profiler stops and every later kernel launch pays for
    it (pytorch#144455): measured on an H200, a launch-heavy loop stayed 19% slower after one 5-step
    window, and within drift with teardown (the cupti_residue.py probe (docs/bench-history.md)). Before CUDA 12.6 re-initialising
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
    """State machine (:class:`ProfileState`): idle → armed → recording → done | failed, and back to
    armed on a new request. A window is N training steps, or a bounded time window when no step
    boundary arrives (:data:`NO_STEP_FALLBACK_S`)."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._lock = threading.Lock()
        self._status = ProfileState.IDLE
        #: ``status.busy`` as a plain bool, for the per-step check (an Enum property costs ~1 µs there).
        self.active = False
        self.steps_requested = 0
        self.steps_done = 0
        self.trace_path: str | None = None
        self.detail = ""
        self.window = WindowKind.STEPS
        self.window_s: float | None = None
        self._armed_at = 0.0
        self._deadline = 0.0
        self._prof: Any = None
        self._trace_written = False
        self._stop_reason = ""
        self._thread_id = 0
        self._time_stop = threading.Event()
        self._time_thread: threading.Thread | None = None

    @property
    def status(self) -> ProfileState:
        return self._status

    @status.setter
    def status(self, value: ProfileState) -> None:
        self._status = value
        self.active = value.busy

    def snapshot(self) -> ProfileReply:
        return ProfileReply(status=self.status, steps_requested=self.steps_requested, steps_done=self.steps_done,
                            trace_path=self.trace_path, detail=self.detail, window=self.window,
                            window_s=self.window_s)

    @property
    def busy(self) -> bool:
        return self.active

    @property
    def timed(self) -> bool:
        """True for a time window (recorded from the agent's own thread, not at step boundaries)."""
        return self.window is WindowKind.TIME

    def request(self, steps: int, timeout_s: float) -> str | None:
        """Arm a window of ``steps`` steps; returns a one-sentence refusal, or None when armed."""
        if not (1 <= steps <= MAX_STEPS) or not (math.isfinite(timeout_s) and timeout_s > 0):
            return f"a profile window takes 1 to {MAX_STEPS} steps and a finite time limit."
        if "torch.profiler" not in sys.modules and "torch" not in sys.modules:
            return "torch is not loaded in the target (yet); nothing to profile."
        with self._lock:
            if self.busy:
                return f"a gpudoctor profile is already {self.status}; wait for it to finish."
            if user_profiler_active():
                return "a torch.profiler session the program started is running; gpudoctor leaves it alone."
            self.status, self.steps_requested, self.steps_done = ProfileState.ARMED, steps, 0
            self.trace_path, self.detail = None, ""
            self.window, self.window_s = WindowKind.STEPS, None
            self._armed_at = time.monotonic()
            self._deadline = self._armed_at + timeout_s
        return None

    # -- training thread -------------------------------------------------------------------

    def on_step(self) -> None:
        """Called from the step hook on the training thread."""
        if self.status is ProfileState.ARMED:
            self._start()
        elif self.status is ProfileState.RECORDING and not self.timed:
            with self._lock:
                if self.status is not ProfileState.RECORDING or self._prof is None or self.timed:
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
            if self.status is not ProfileState.ARMED:
                return
            if user_profiler_active():
                self.status, self.detail = ProfileState.FAILED, "the program started its own torch.profiler; left alone."
                return
            try:
                import torch.profiler as tp
                self._trace_written, self._stop_reason = False, ""
                self._thread_id = threading.get_ident()
                self._prof = tp.profile(
                    activities=_activities(tp), record_shapes=False, with_stack=False,
                    schedule=tp.schedule(wait=0, warmup=1, active=self.steps_requested, repeat=1),
                    on_trace_ready=self._write_trace)
                with quiet_kineto():
                    self._prof.start()
                self.status = ProfileState.RECORDING
            except Exception as exc:
                self._prof = None
                self._fail(f"torch.profiler did not start: {type(exc).__name__}: {exc}")

    # -- the agent's thread: a time window when no step boundary comes -------------------------

    def _start_time_window(self, waited_s: float) -> None:
        """Record ``TIME_WINDOW_S`` (or what the time limit leaves) from a thread of the agent's own:
        the profiler is started and stopped on that thread, so it sees the GPU's kernels but not the
        training thread's CPU ops. Caller holds the lock."""
        seconds = max(1.0, min(TIME_WINDOW_S, self._deadline - time.monotonic() - 0.5))
        self.window, self.window_s, self.status = WindowKind.TIME, seconds, ProfileState.RECORDING
        self.detail = (f"no training step boundary in {waited_s:.0f} s: recording a {seconds:.0f} s time window "
                       "instead (GPU kernels; the training thread's CPU ops are not in it).")
        self._trace_written, self._stop_reason = False, ""
        self._time_stop.clear()
        self._time_thread = threading.Thread(target=self._run_time_window, args=(seconds,),
                                             name="gpudoctor-profile", daemon=True)
        self._time_thread.start()

    def _run_time_window(self, seconds: float) -> None:
        try:
            tp = sys.modules["torch.profiler"]   # already imported: never import from this thread
            prof = tp.profile(activities=_activities(tp), record_shapes=False, with_stack=False)
            with quiet_kineto():
                prof.start()
            try:
                self._time_stop.wait(seconds)
            finally:
                prof.stop()
            self._write_trace(prof)
            with self._lock:
                self.steps_done = 0
                self.status = ProfileState.DONE
                self.detail = self.detail.replace("recording a", "recorded a", 1)
        except Exception as exc:
            with self._lock:
                self._fail(f"the time window failed: {type(exc).__name__}: {exc}")

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
            self.status, self.detail = ProfileState.DONE, detail
        else:
            self._fail(detail or "the window ended before a step was recorded; nothing written.")

    def _fail(self, detail: str) -> None:
        self.status, self.detail, self._prof = ProfileState.FAILED, detail, None

    def tick(self, typical_step_s: float | None = None) -> None:
        """From the socket thread: fall back to a time window when no step boundary arrives, and end
        a window whose time limit has passed."""
        if not self.busy:
            return
        now = time.monotonic()
        if self.status is ProfileState.ARMED:
            wait_s = min(NO_STEP_FALLBACK_MAX_S, max(NO_STEP_FALLBACK_S, 3.0 * (typical_step_s or 0.0)))
            with self._lock:
                if self.status is ProfileState.ARMED and now - self._armed_at >= wait_s \
                        and self._deadline - now >= 1.0 and not user_profiler_active() \
                        and not torch_import_in_progress():
                    self._start_time_window(now - self._armed_at)
                    return
        if now >= self._deadline:
            self.abort("the time limit passed")

    def abort(self, why: str) -> None:
        """End an armed window now; ask a recording one to end at the next step (a time window: now).

        torch.profiler must be stopped on the thread that started it: stopping it from the socket
        thread crashed the process (SIGSEGV, torch 2.13 CPU). So a recording step window whose steps
        stopped keeps recording until the next step boundary (or :meth:`stop_at_exit`).
        """
        with self._lock:
            if self.status is ProfileState.ARMED:
                self.status = ProfileState.FAILED
                self.detail = f"no training step arrived before {why}; nothing recorded."
            elif self.status is ProfileState.RECORDING and self.timed:
                self._time_stop.set()
            elif self.status is ProfileState.RECORDING and not self._stop_reason:
                self._stop_reason = why
                self.detail = f"{why}; the window ends at the next training step."

    def stop_at_exit(self) -> None:
        """At interpreter exit: finish a recording window if this is the thread that started it."""
        thread = self._time_thread
        if self.timed and thread is not None and thread.is_alive():
            self._time_stop.set()
            thread.join(timeout=5.0)
        with self._lock:
            if self.status is ProfileState.RECORDING and not self.timed and threading.get_ident() == self._thread_id:
                self._close(f"stopped early (the program exited) after {self.steps_done} of "
                            f"{self.steps_requested} steps.")
            elif self.busy:
                self._fail("the program exited before the window ended; nothing written.")


def _activities(tp: Any) -> list[Any]:
    """CPU, plus CUDA once the program uses CUDA (asking Kineto to tear CUPTI down afterwards)."""
    activities = [tp.ProfilerActivity.CPU]
    torch = sys.modules["torch"]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        activities.append(tp.ProfilerActivity.CUDA)
        ask_cupti_teardown(torch)
    return activities


#: Kineto's log level above its USDT level: without it, every profiler start and stop writes
#: "USDT:… profiler_start" / "profiler_stop" (and "STAGE:…" lines) to the target's own stderr.
_KINETO_SILENT_LEVEL = "6"


class quiet_kineto:
    """Start the profiler with Kineto's logging off, unless the program set ``KINETO_LOG_LEVEL`` itself.

    Kineto reads the variable once, when the first profiler of the process initialises it (torch 2.13,
    CPU: measured with a start/stop pair before and after setting it): set for that first start, the
    target's stderr stays clean for every later window too; the variable is put back right after, so
    the program's environment (and its children's) is as it was. A process that ran a profiler before
    the agent came keeps Kineto's log level as it was then.
    """

    def __enter__(self) -> None:
        self._previous = os.environ.get("KINETO_LOG_LEVEL")
        if self._previous is None:
            os.environ["KINETO_LOG_LEVEL"] = _KINETO_SILENT_LEVEL

    def __exit__(self, *exc: object) -> None:
        if self._previous is None:
            os.environ.pop("KINETO_LOG_LEVEL", None)
