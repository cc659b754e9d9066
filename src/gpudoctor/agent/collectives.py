"""The agent's collective-wait measurement: how long each step's gradients wait for the other ranks.

Why this exists: in synchronous data-parallel training every rank's step time is the same — the fast
ranks wait in the all-reduce for the slow one. Only the time a rank spends *outside* that wait tells
which rank is slow, and only a measured wait separates a rank with extra compute from its peers
(step time and DataLoader wait alone can name input stragglers, not compute ones).

How: when the program's outermost module is a ``DistributedDataParallel`` without a communication hook,
the agent registers one — torch's own ``allreduce_hook`` (the documented equivalent of DDP's built-in
all-reduce: divide by the group size, all-reduce, return the bucket) wrapped with two time stamps on the
*last* bucket of each backward: when it became ready (this rank's backward compute is done) and when its
all-reduce completed (every rank has contributed). The difference is the step's exposed collective wait:
large on ranks that finished early, small on the rank everyone waited for. On CUDA both stamps are CUDA
events (the ready one on the backward stream, the completion one in the future's callback, which runs on
a stream that waits for NCCL), read without blocking at a later step boundary; on the CPU (gloo) they are
host clocks. Registration happens on the training thread, in a module forward pre-hook, before DDP's
forward — never from the socket thread while a backward might be running.

What it must not do: change the gradients (it calls torch's own hook), register over the program's own
comm hook (DDP allows one; the agent then reports why it measures nothing), or raise into the backward
pass. A comm hook cannot be removed: after detach the hook stays and does only the all-reduce.
Set ``GPUDOCTOR_COMM_HOOK=0`` in the job's environment to keep the agent from registering it.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections import deque
from time import perf_counter as _perf
from typing import Any

#: Waits kept for the stats reply: (host time the wait was read, wait in ms).
WAIT_HISTORY = 1024
#: CUDA event pairs not yet complete; older ones are dropped (a stalled stream must not grow memory).
MAX_PENDING = 16

# The registered hook outlives any one agent (DDP cannot unregister a comm hook); it reports to
# whatever timer is current, or to none after detach.
_current: CollectiveTimer | None = None
_hooked: weakref.WeakSet[Any] = weakref.WeakSet()
_allreduce_hook: Any = None   # torch's default_hooks.allreduce_hook, looked up once at registration


def _timed_allreduce_hook(state, bucket):  # unannotated: DDP checks the real annotations
    """DDP comm hook: torch's ``allreduce_hook`` plus ready/completion stamps on the last bucket."""
    timer = _current
    if timer is None or not timer.active or os.getpid() != timer.pid:
        return _allreduce_hook(state, bucket)
    try:
        last = bool(bucket.is_last())
    except Exception:
        last = False
    if not last:
        return _allreduce_hook(state, bucket)
    ready = timer.stamp_ready(bucket)
    fut = _allreduce_hook(state, bucket)
    if ready is None:
        return fut

    def completed(f):
        value = f.value()
        try:
            timer.stamp_done(ready)
        except Exception:
            pass
        return value

    return fut.then(completed)


class CollectiveTimer:
    """Registers the timed hook on the program's DDP model and turns the stamps into waits per step."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.active = True
        self.status = "no DistributedDataParallel model seen yet"
        self._lock = threading.Lock()
        self._pending: deque[tuple[Any, Any]] = deque()          # CUDA (ready, done) event pairs
        self._waits: deque[tuple[float, float]] = deque(maxlen=WAIT_HISTORY)
        self._events: list[Any] = []                               # reusable CUDA events

    # -- registration (training thread, DDP forward pre-hook) -------------------------------

    def consider(self, module: Any) -> None:
        """Register the timed hook on ``module`` if it is a DDP model the agent may time."""
        global _current
        if os.environ.get("GPUDOCTOR_COMM_HOOK", "1") == "0":
            self.status = "disabled by GPUDOCTOR_COMM_HOOK=0"
            return
        ddp_mod = sys.modules.get("torch.nn.parallel.distributed")
        ddp_cls = getattr(ddp_mod, "DistributedDataParallel", None)
        if ddp_cls is None or not isinstance(module, ddp_cls):
            return
        _current = self
        if module in _hooked:
            self.status = "timing the last bucket's all-reduce (DDP comm hook)"
            return
        if getattr(module, "_comm_hooks", None) or getattr(module, "_use_python_reducer", False):
            self.status = "the program registered its own DDP comm hook (or uses compiled autograd); not timed"
            return
        global _allreduce_hook
        try:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            _allreduce_hook = default_hooks.allreduce_hook
            module.register_comm_hook(getattr(module, "process_group", None), _timed_allreduce_hook)
        except Exception as exc:
            self.status = f"could not register a DDP comm hook: {str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}"
            return
        _hooked.add(module)
        self.status = "timing the last bucket's all-reduce (DDP comm hook)"

    def detach(self) -> None:
        global _current
        self.active = False
        if _current is self:
            _current = None

    # -- stamps (autograd / comm threads) --------------------------------------------------------

    def stamp_ready(self, bucket: Any) -> Any:
        """A ready stamp: a recorded CUDA event, or the host clock for CPU buckets."""
        buffer = bucket.buffer()
        if not getattr(buffer, "is_cuda", False):
            return _perf()
        event = self._event()
        if event is None:
            return None
        event.record()
        return event

    def stamp_done(self, ready: Any) -> None:
        if isinstance(ready, float):
            now = _perf()
            self._waits.append((now, (now - ready) * 1000.0))
            return
        done = self._event()
        if done is None:
            return
        done.record()
        with self._lock:
            self._pending.append((ready, done))
            while len(self._pending) > MAX_PENDING:
                self._recycle(*self._pending.popleft())

    def _event(self) -> Any:
        with self._lock:
            if self._events:
                return self._events.pop()
        torch = sys.modules.get("torch")
        try:
            return torch.cuda.Event(enable_timing=True) if torch is not None else None
        except Exception:
            return None

    def _recycle(self, *events: Any) -> None:
        if len(self._events) < 4 * MAX_PENDING:
            self._events.extend(events)

    # -- readers ----------------------------------------------------------------------------

    def on_step(self) -> None:
        """Turn completed CUDA event pairs into waits (training thread; never blocks)."""
        if not self._pending:
            return
        try:
            with self._lock:
                while self._pending:
                    ready, done = self._pending[0]
                    if not (done.query() and ready.query()):
                        break
                    self._pending.popleft()
                    self._waits.append((_perf(), float(ready.elapsed_time(done))))
                    self._recycle(ready, done)
        except Exception:
            pass

    def waits_since(self, since_s: float) -> list[float]:
        """Waits (ms) read after ``since_s`` on the host clock; the latest 8 when none are that recent."""
        waits = list(self._waits)
        recent = [w for t, w in waits if t >= since_s]
        return recent if len(recent) >= 3 else [w for _, w in waits[-8:]]
