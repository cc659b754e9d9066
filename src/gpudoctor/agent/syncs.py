"""Host syncs and host-to-device copies per step, counted on sampled steps (inside the target).

Why: GD301's live block needs ``host_syncs_per_step`` (``.item()``, ``float(t)``, ``.tolist()``,
``.cpu()``, ``torch.cuda.synchronize()`` … each makes the host wait for the device and drains its
queue), and the input-bound rules need what host-to-device copies cost per step. torch's own
``set_sync_debug_mode`` warns but cannot count, and a profiler is far too heavy to leave on.

How: on one step every :data:`SAMPLE_INTERVAL_S` (at most) the agent puts thin wrappers on those ``torch.Tensor``
methods and ``torch.cuda`` functions at the step boundary (training thread), counts and times the
calls during that step, and takes the wrappers off again at the next boundary. Between sampled
steps nothing of the program's calls is touched; a wrapper costs ~0.5 µs per call while it is on.
A call on a CPU tensor is not a sync and is not counted — unless ``GPUDOCTOR_COUNT_CPU_SYNCS=1``,
which exists to check the counter on a machine without a GPU. Skipped while torch.compile has
compiled graphs (dynamo would trace the wrappers). Standard library plus the target's torch only;
nothing here may raise into user code.
"""

from __future__ import annotations

import os
import sys
from array import array
from time import perf_counter as _perf
from typing import Any

#: The next step that starts this long after the last sampled one is counted. Putting the wrappers on
#: and off costs ~20 µs (torch.Tensor's attribute cache is rebuilt), so a time-based rate bounds the
#: cost at ~0.01 % of any loop, however short its steps; the phase drifts against a loop that logs
#: every N steps, so periodic syncs are sampled fairly over a window.
SAMPLE_INTERVAL_S = 0.2
HISTORY = 64
_TENSOR_SYNC_METHODS = ("item", "tolist", "__float__", "__int__", "__bool__")


class SyncCounter:
    """Counts host syncs and H2D copies during sampled steps; keeps the last ``HISTORY`` of them."""

    def __init__(self) -> None:
        self.count_cpu = os.environ.get("GPUDOCTOR_COUNT_CPU_SYNCS") == "1"
        self.armed = False
        self._patches: list[tuple[Any, str, Any, bool]] = []  # (owner, name, original, owner had its own)
        self.syncs = 0
        self.sync_s = 0.0
        self.h2d_bytes = 0
        self.h2d_pinned_bytes = 0
        self.h2d_s = 0.0
        self.sampled = 0
        self.next_sample_t = 0.0                              # perf_counter time of the next sampled step
        self.hist_syncs = array("d", bytes(8 * HISTORY))
        self.hist_sync_s = array("d", bytes(8 * HISTORY))
        self.hist_h2d_bytes = array("d", bytes(8 * HISTORY))
        self.hist_pinned = array("d", bytes(8 * HISTORY))
        self.hist_h2d_s = array("d", bytes(8 * HISTORY))

    # -- step boundaries (training thread) ----------------------------------------------------

    def on_step(self, now: float, allowed: bool) -> None:
        """At a step boundary (``now``: perf_counter): close a sampled step; open one when it is time."""
        if self.armed:
            self._disarm()
            i = self.sampled % HISTORY
            self.hist_syncs[i], self.hist_sync_s[i] = self.syncs, self.sync_s
            self.hist_h2d_bytes[i], self.hist_pinned[i], self.hist_h2d_s[i] = (
                self.h2d_bytes, self.h2d_pinned_bytes, self.h2d_s)
            self.sampled += 1
            self.next_sample_t = now + SAMPLE_INTERVAL_S
        elif allowed and now >= self.next_sample_t:
            self.syncs, self.sync_s, self.h2d_bytes, self.h2d_pinned_bytes, self.h2d_s = 0, 0.0, 0, 0, 0.0
            self._arm()
        else:
            self.next_sample_t = now + SAMPLE_INTERVAL_S

    def reset(self) -> None:
        """Forget the samples (the step source changed: old samples describe other 'steps')."""
        self._disarm()
        self.sampled = 0

    def stats(self) -> dict[str, Any]:
        """Per-step means over the sampled steps kept (the ``stats`` reply's sync and copy fields)."""
        n = min(self.sampled, HISTORY)
        if n == 0:
            return {}
        h2d = sum(self.hist_h2d_bytes[:n])
        out: dict[str, Any] = {
            "host_syncs_per_step": sum(self.hist_syncs[:n]) / n,
            "host_sync_ms_per_step": 1e3 * sum(self.hist_sync_s[:n]) / n,
            "sync_sampled_steps": n,
        }
        torch = sys.modules.get("torch")
        if torch is not None and _cuda_in_use(torch):
            out["h2d_mib_per_step"] = h2d / n / 2**20
            out["h2d_ms_per_step"] = 1e3 * sum(self.hist_h2d_s[:n]) / n
            out["h2d_pinned_pct"] = 100.0 * sum(self.hist_pinned[:n]) / h2d if h2d else None
        return out

    # -- wrappers ----------------------------------------------------------------------------

    def _arm(self) -> None:
        torch = sys.modules.get("torch")
        if torch is None:
            return
        try:
            tensor = torch.Tensor
            for name in _TENSOR_SYNC_METHODS:
                self._patch(tensor, name, self._sync_method(getattr(tensor, name)))
            self._patch(tensor, "cpu", self._cpu_method(tensor.cpu))
            self._patch(tensor, "to", self._to_method(tensor.to))
            self._patch(tensor, "cuda", self._to_method(tensor.cuda))
            cuda = sys.modules.get("torch.cuda")
            if cuda is not None and _cuda_in_use(torch):
                self._patch(cuda, "synchronize", self._sync_function(cuda.synchronize))
                for cls_name in ("Stream", "Event"):
                    cls = getattr(cuda, cls_name, None)
                    if cls is not None:
                        self._patch(cls, "synchronize", self._sync_function(cls.synchronize))
            self.armed = True
        except Exception:
            self._disarm()

    def _disarm(self) -> None:
        self.armed = False
        patches, self._patches = self._patches, []
        for owner, name, original, had_own in reversed(patches):
            try:
                if had_own:
                    setattr(owner, name, original)
                else:
                    delattr(owner, name)
            except Exception:
                pass

    def _patch(self, owner: Any, name: str, wrapper: Any) -> None:
        had_own = name in owner.__dict__
        original = owner.__dict__[name] if had_own else None
        setattr(owner, name, wrapper)
        self._patches.append((owner, name, original, had_own))

    def _sync_method(self, original: Any) -> Any:
        counter = self

        def wrapper(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if tensor.is_cpu and not counter.count_cpu:
                return original(tensor, *args, **kwargs)
            start = _perf()
            try:
                return original(tensor, *args, **kwargs)
            finally:
                counter.syncs += 1
                counter.sync_s += _perf() - start

        return _named(wrapper, original)

    def _sync_function(self, original: Any) -> Any:
        counter = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = _perf()
            try:
                return original(*args, **kwargs)
            finally:
                counter.syncs += 1
                counter.sync_s += _perf() - start

        return _named(wrapper, original)

    def _cpu_method(self, original: Any) -> Any:
        counter = self

        def cpu(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if tensor.is_cpu:
                return original(tensor, *args, **kwargs)
            start = _perf()
            try:
                return original(tensor, *args, **kwargs)
            finally:
                counter.syncs += 1
                counter.sync_s += _perf() - start

        return _named(cpu, original)

    def _to_method(self, original: Any) -> Any:
        counter = self

        def to(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            start = _perf()
            out = original(tensor, *args, **kwargs)
            try:
                if out is not tensor:
                    if tensor.is_cpu and not out.is_cpu and not out.is_meta:
                        counter.h2d_s += _perf() - start
                        nbytes = tensor.element_size() * tensor.numel()
                        counter.h2d_bytes += nbytes
                        if tensor.is_pinned():
                            counter.h2d_pinned_bytes += nbytes
                    elif out.is_cpu and not tensor.is_cpu and not kwargs.get("non_blocking"):
                        counter.syncs += 1                 # a blocking device-to-host copy
                        counter.sync_s += _perf() - start
            except Exception:
                pass
            return out

        return _named(to, original)


def _named(wrapper: Any, original: Any) -> Any:
    for attr in ("__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(original, attr))
        except (AttributeError, TypeError):
            pass
    wrapper.__wrapped__ = original
    wrapper.__gpudoctor_wrapper__ = True
    return wrapper


def _cuda_in_use(torch: Any) -> bool:
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False
