"""On-demand torch.profiler windows, started and stopped on the training thread.

A profiler started from a background thread misses the training thread's CPU ops (measured on an
H200, see DESIGN.md), so the socket thread only *arms* a window; the step hook starts it at the next
step boundary and stops it after N steps, whether or not a client is still connected. If steps stop
arriving, the socket thread's tick ends the window after its time limit. A profiler the user
already runs is detected and left alone. Standard library plus the target's torch only.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

MAX_STEPS = 100


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
                if self.status != "recording":
                    return
                self.steps_done += 1
                if self.steps_done >= self.steps_requested:
                    self._finish("")
                    return
            with contextlib.suppress(Exception):
                self._prof.step()

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
                self._prof = tp.profile(activities=activities, record_shapes=False, with_stack=False)
                self._prof.start()
                self.status = "recording"
            except Exception as exc:
                self._prof = None
                self.status, self.detail = "failed", f"torch.profiler did not start: {type(exc).__name__}: {exc}"

    # -- any thread ------------------------------------------------------------------------

    def _finish(self, detail: str) -> None:
        """Stop the profiler and write the trace (0600). Caller holds the lock."""
        prof, self._prof = self._prof, None
        try:
            prof.stop()
            path = self._dir / f"trace-{os.getpid()}-{int(time.time() * 1000)}.pt.trace.json"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            prof.export_chrome_trace(str(path))
            os.chmod(path, 0o600)
            self.trace_path, self.status, self.detail = str(path), "done", detail
        except Exception as exc:
            self.status, self.detail = "failed", f"writing the trace failed: {type(exc).__name__}: {exc}"

    def tick(self) -> None:
        """From the socket thread: end a window whose time limit has passed."""
        if not self.busy or time.monotonic() < self._deadline:
            return
        self.abort("the time limit passed")

    def abort(self, why: str) -> None:
        """End an armed or recording window now (time limit, detach, interpreter exit)."""
        with self._lock:
            if self.status == "armed":
                self.status, self.detail = "failed", f"no training step arrived before {why}; nothing recorded."
            elif self.status == "recording":
                self._finish(f"stopped early ({why}) after {self.steps_done} of {self.steps_requested} steps.")
