"""The agent's hooks into the target's torch: step boundaries, DataLoader waits, compile counters.

Runs inside the training process: standard library plus the target's own torch, which is never
imported here — the hooks are installed only once the program has finished importing the torch
module each one needs (checked from the socket thread's tick). Every hook body is wrapped so that
it cannot raise into user code, is a no-op in forked children (DataLoader workers) and after
detach, and costs a few µs. torch._dynamo internals are private API: when they change, the compile
counters fall back to ``torch._dynamo.utils.counters`` (reasons without file:line).
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections import deque
from time import perf_counter as _perf
from typing import TYPE_CHECKING, Any

from gpudoctor.agent.protocol import StepSource

if TYPE_CHECKING:
    from gpudoctor.agent.runtime import Agent

MAX_REASONS = 20
MAX_RECOMPILE_TIMES = 64   # recompile timestamps kept for the windowed count
# Enum attribute lookups cost ~0.5 µs each; the per-step hooks compare against these.
_EXPLICIT, _OPTIMIZER, _BACKWARD, _NONE = (StepSource.EXPLICIT, StepSource.OPTIMIZER, StepSource.BACKWARD,
                                           StepSource.NONE)
BATCH_SAMPLE_EVERY = 64
#: What a step's data wait was spent on, by the batch it fetched (the highest kind of the step's batches
#: wins): a steady batch of a loader with workers, a batch loaded in the main process (num_workers=0),
#: one of the first ``num_workers`` batches of an epoch (workers refilling their queue), and the first
#: batch after the workers were forked again (with the shutdown of the old ones at the epoch's end).
WAIT_NONE, WAIT_STEADY, WAIT_MAIN, WAIT_FIRST, WAIT_RESTART = 0, 1, 2, 3, 4
MAX_LOADER_STARTS = 256  # DataLoader worker starts kept for the windowed count

# torch iterates its global optimizer-hook dict while it calls the hooks; adding or removing an entry
# from another thread at that moment raises "dictionary changed size during iteration" inside the
# program's optimizer.step(). So the agent registers ONE hook per process, the first time it needs
# it, and never removes it: detach makes it inert (``_step_target = None``), a later attach reuses it.
_step_hook_registered = False
_step_target: TorchHooks | None = None


def _global_optimizer_step_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
    target = _step_target
    if target is not None:
        target._on_optimizer_step(optimizer, args, kwargs)


def _loaded(name: str) -> Any:
    """The module ``name`` if it is imported and finished initialising, else None."""
    module = sys.modules.get(name)
    if module is None:
        return None
    spec = getattr(module, "__spec__", None)
    if spec is not None and getattr(spec, "_initializing", False):
        return None
    return module


class TorchHooks:
    """Installs and removes the agent's torch hooks; all state needed to undo them lives here."""

    def __init__(self, agent: Agent) -> None:
        self._agent_ref = weakref.ref(agent)
        self._pid = agent.pid
        self._lock = threading.Lock()
        self._active = True
        self._step_hooked = False
        self._uninstalling = False
        self._fast_tick_until_s = _perf() + 120.0
        self._primary_optimizer: Any = None          # weakref to the optimizer that defines a step
        self._backward_patch: tuple[Any, Any, Any] | None = None   # (torch.autograd, original, wrapper)
        self._backward_depth = 0
        self._dataloader_cls: Any = None
        self._dataloader_orig: Any = None
        self._dataloader_wrapper: Any = None
        self._loader_init_patch: tuple[Any, Any, Any] | None = None  # (_MultiProcessingDataLoaderIter, original, wrapper)
        #: each start of a DataLoader's worker processes: (perf_counter when its first batch came, seconds in
        #: the iterator's __init__ — forking the workers —, seconds waiting for that first batch)
        self.loader_starts: deque[tuple[float, float, float]] = deque(maxlen=MAX_LOADER_STARTS)
        #: each shutdown of those workers at an epoch's end: (perf_counter, seconds in that last __next__)
        self.loader_stops: deque[tuple[float, float]] = deque(maxlen=MAX_LOADER_STARTS)
        self._dynamo_patches: list[tuple[Any, str, Any, Any]] = []  # (owner, attr, original, wrapper)
        self._compile_patch: tuple[Any, Any, Any] | None = None      # (torch, original, wrapper)
        self._autocast_handle: Any = None
        self.dataloader_hooked = False
        self._batches_seen = 0
        self.loader_batch_bytes: int | None = None   # size of one batch as the loader returns it
        self.loader_workers: int | None = None
        self.loader_prefetch_factor: int | None = None
        self.unaligned_weights: tuple[str, ...] | None = None  # shapes, read once from the step's optimizer
        self.graph_break_reasons: dict[str, int] = {}
        self.recompiles = 0
        self.recompile_times: list[float] = []   # perf_counter of the last recompiles (bounded)
        self.recompiles_hooked = False

    # -- install / uninstall -----------------------------------------------------------------

    def install_when_loaded(self) -> None:
        if not self._active or self._uninstalling or "torch" not in sys.modules:
            return
        with self._lock:
            try:
                if not self._step_hooked:
                    self._hook_optimizer()
                if self._backward_patch is None:
                    self._hook_backward()
                if self._dataloader_cls is None:
                    self._hook_dataloader()
                if self._compile_patch is None:
                    self._hook_torch_compile()
                if not self._dynamo_patches:
                    self._hook_dynamo()
            except Exception:
                pass

    def _hook_optimizer(self) -> None:
        global _step_hook_registered, _step_target
        optim = _loaded("torch.optim.optimizer")
        if optim is None or not hasattr(optim, "register_optimizer_step_post_hook"):
            return
        if not _step_hook_registered:
            optim.register_optimizer_step_post_hook(_global_optimizer_step_hook)
            _step_hook_registered = True
        _step_target = self
        self._step_hooked = True

    def _hook_backward(self) -> None:
        """Wrap ``torch.autograd.backward`` (``loss.backward()`` calls it): the end of a backward pass
        marks a step in loops that have no ``torch.optim`` optimizer step to hook."""
        autograd = _loaded("torch.autograd")
        original = getattr(autograd, "backward", None) if autograd is not None else None
        if original is None or getattr(original, "__gpudoctor_wrapper__", False):
            return
        hooks_ref = weakref.ref(self)

        def backward(*args: Any, **kwargs: Any) -> Any:
            hooks = hooks_ref()
            if hooks is None:
                return original(*args, **kwargs)
            hooks._backward_depth += 1     # a backward inside a backward (reentrant checkpoint) is one pass
            try:
                return original(*args, **kwargs)
            finally:
                hooks._backward_depth -= 1
                if hooks._backward_depth == 0:
                    hooks._on_backward()

        backward.__wrapped__ = original  # type: ignore[attr-defined]
        backward.__doc__ = original.__doc__
        backward.__gpudoctor_wrapper__ = True  # type: ignore[attr-defined]
        autograd.backward = backward
        self._backward_patch = (autograd, original, backward)

    def _hook_dataloader(self) -> None:
        dl = _loaded("torch.utils.data.dataloader")
        cls = getattr(dl, "_BaseDataLoaderIter", None) if dl is not None else None
        if cls is None:
            return
        original = cls.__next__
        hooks_ref = weakref.ref(self)

        def __next__(it: Any) -> Any:
            started_s = getattr(it, "_gpudoctor_started_s", None)  # the first batch of freshly started workers
            start = _perf()
            kind = WAIT_RESTART if started_s is not None else WAIT_NONE
            try:
                batch = original(it)
            except StopIteration:  # the epoch's end: a loader without persistent workers shuts them down here
                hooks = hooks_ref()
                if hooks is not None and getattr(it, "_gpudoctor_forked", False):
                    hooks._loader_stopped(_perf() - start)
                    kind = WAIT_RESTART
                raise
            finally:
                hooks = hooks_ref()
                if hooks is not None:
                    hooks._add_data_wait(_perf() - start, it, kind)
                    if started_s is not None:
                        hooks._loader_started(it, started_s, _perf() - start)
            if hooks is not None:
                hooks._count_batch(it, batch)
            return batch

        __next__.__gpudoctor_wrapper__ = True  # type: ignore[attr-defined]
        cls.__next__ = __next__
        self._dataloader_cls, self._dataloader_orig, self._dataloader_wrapper = cls, original, __next__
        self.dataloader_hooked = True
        self._hook_worker_starts(dl)

    def _hook_worker_starts(self, dl: Any) -> None:
        """Time each ``_MultiProcessingDataLoaderIter.__init__``: it forks the workers, which a loader
        without ``persistent_workers`` does again at every ``iter(loader)`` — every epoch."""
        cls = getattr(dl, "_MultiProcessingDataLoaderIter", None)
        original = cls.__dict__.get("__init__") if cls is not None else None
        if original is None or getattr(original, "__gpudoctor_wrapper__", False):
            return
        hooks_ref = weakref.ref(self)

        def __init__(it: Any, *args: Any, **kwargs: Any) -> None:
            start = _perf()
            original(it, *args, **kwargs)
            try:
                hooks = hooks_ref()
                if hooks is not None and hooks._live_agent() is not None:
                    it._gpudoctor_started_s = _perf() - start
                    it._gpudoctor_forked = not getattr(it, "_persistent_workers", False)
            except Exception:
                pass

        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        __init__.__gpudoctor_wrapper__ = True  # type: ignore[attr-defined]
        setattr(cls, "__init__", __init__)  # noqa: B010 (mypy: assigning __init__ on a class object)
        self._loader_init_patch = (cls, original, __init__)

    def _loader_stopped(self, seconds: float) -> None:
        try:
            if self._live_agent() is not None:
                self.loader_stops.append((_perf(), seconds))
        except Exception:
            pass

    def _loader_started(self, it: Any, init_s: float, first_wait_s: float) -> None:
        try:
            it._gpudoctor_started_s = None
            if self._live_agent() is not None:
                self.loader_starts.append((_perf(), init_s, first_wait_s))
        except Exception:
            pass

    def waiting_for_torch(self) -> bool:
        """True while torch is being imported and the step hook is not in yet (tick fast then)."""
        if not self._active or self._step_hooked or "torch" not in sys.modules:
            return False
        return _perf() < self._fast_tick_until_s      # bounded: an old torch without the hook API

    def _hook_torch_compile(self) -> None:
        """Wrap ``torch.compile`` so dynamo's hooks go in before the first compiled call traces."""
        torch = _loaded("torch")
        original = getattr(torch, "compile", None) if torch is not None else None
        if original is None:
            return
        hooks_ref = weakref.ref(self)

        def compile(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            hooks = hooks_ref()
            if hooks is not None:
                _quiet(hooks.install_when_loaded)
            return result

        compile.__wrapped__ = original  # type: ignore[attr-defined]
        compile.__doc__ = original.__doc__
        torch.compile = compile
        self._compile_patch = (torch, original, compile)

    def _hook_dynamo(self) -> None:
        sc = _loaded("torch._dynamo.symbolic_convert")
        cf = _loaded("torch._dynamo.convert_frame")
        if sc is None or cf is None:
            return
        base = getattr(sc, "InstructionTranslatorBase", None)
        if base is not None and hasattr(base, "log_graph_break"):
            self._patch(base, "log_graph_break", self._wrap_log_graph_break(base.log_graph_break))
        if hasattr(cf, "get_and_maybe_log_recompilation_reasons"):
            self._patch(cf, "get_and_maybe_log_recompilation_reasons",
                        self._wrap_recompile(cf.get_and_maybe_log_recompilation_reasons))
            self.recompiles_hooked = True

    def _patch(self, owner: Any, attr: str, wrapper: Any) -> None:
        original = getattr(owner, attr)
        setattr(owner, attr, wrapper)
        self._dynamo_patches.append((owner, attr, original, wrapper))

    def uninstall(self, keep_step_hook: bool = False) -> None:
        """Undo every hook. ``keep_step_hook``: leave the step hook live (a profile window must still
        end on the training thread); call again without it from there to finish."""
        global _step_target
        with self._lock:
            self._uninstalling = True
            if not keep_step_hook:
                self._active = False
                if _step_target is self:
                    _step_target = None
                agent = self._agent_ref()
                if agent is not None:
                    _quiet(agent.collectives.detach)
            if self._dataloader_cls is not None and self._dataloader_cls.__dict__.get("__next__") is self._dataloader_wrapper:
                self._dataloader_cls.__next__ = self._dataloader_orig
            self._dataloader_cls = None
            if self._loader_init_patch is not None:
                cls, original, wrapper = self._loader_init_patch
                if cls.__dict__.get("__init__") is wrapper:
                    setattr(cls, "__init__", original)  # noqa: B010
                self._loader_init_patch = None
            if self._backward_patch is not None and not keep_step_hook:  # backward may be the step hook
                autograd, original, wrapper = self._backward_patch
                if getattr(autograd, "backward", None) is wrapper:
                    autograd.backward = original
                self._backward_patch = None
            for owner, attr, original, wrapper in reversed(self._dynamo_patches):
                if owner.__dict__.get(attr) is wrapper:
                    setattr(owner, attr, original)
            self._dynamo_patches.clear()
            if self._compile_patch is not None:
                torch, original, wrapper = self._compile_patch
                if getattr(torch, "compile", None) is wrapper:
                    torch.compile = original
                self._compile_patch = None
            self.disarm_autocast_probe()

    # -- hook bodies (training thread) ------------------------------------------------------

    def _live_agent(self) -> Agent | None:
        if not self._active or os.getpid() != self._pid:
            return None
        return self._agent_ref()

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            agent = self._live_agent()
            if agent is None or agent.step_source is _EXPLICIT:
                return
            primary = self._primary_optimizer() if self._primary_optimizer is not None else None
            if primary is None:
                self._primary_optimizer = weakref.ref(optimizer)
                self.unaligned_weights = _unaligned_weights(optimizer)
            elif primary is not optimizer:
                return                                   # a second optimizer in the same step
            agent.on_step(_OPTIMIZER)
        except Exception:
            pass

    def _on_backward(self) -> None:
        """The end of a backward pass: a step only while nothing stronger marks steps (gradient
        accumulation still counts one step per optimizer step once one is seen)."""
        try:
            agent = self._live_agent()
            source = agent.step_source if agent is not None else None
            if agent is not None and (source is _BACKWARD or source is _NONE):
                agent.on_step(_BACKWARD)
        except Exception:
            pass

    def _add_data_wait(self, seconds: float, it: Any = None, kind: int = WAIT_NONE) -> None:
        agent = self._live_agent()
        if agent is not None:
            agent.data_wait_acc_s += seconds
            if kind == WAIT_NONE:
                try:   # torch's own counters: _num_workers (0: loading in this process), _num_yielded
                    workers = it._num_workers
                    kind = (WAIT_MAIN if not workers else WAIT_FIRST if it._num_yielded <= workers
                            else WAIT_STEADY)
                except Exception:
                    kind = WAIT_STEADY
            if kind > agent.data_wait_kind:
                agent.data_wait_kind = kind

    def _count_batch(self, it: Any, batch: Any) -> None:
        """Every 64th batch: its size and the loader's workers/prefetch (for the /dev/shm estimate)."""
        self._batches_seen += 1
        if self._batches_seen % BATCH_SAMPLE_EVERY != 1 or self._live_agent() is None:
            return
        try:
            torch = sys.modules.get("torch")
            if torch is None:
                return
            self.loader_batch_bytes = _tensor_bytes(batch, torch.Tensor, 0)
            workers = getattr(it, "_num_workers", None)
            prefetch = getattr(it, "_prefetch_factor", None)
            self.loader_workers = int(workers) if isinstance(workers, int) else None
            self.loader_prefetch_factor = int(prefetch) if isinstance(prefetch, int) else None
        except Exception:
            pass

    def _wrap_log_graph_break(self, original: Any) -> Any:
        hooks_ref = weakref.ref(self)

        def log_graph_break(tracer: Any, code_options: Any, reason: str, exc: Any) -> Any:
            already = bool(getattr(exc, "logged", False))
            result = original(tracer, code_options, reason, exc)
            hooks = hooks_ref()
            if hooks is not None and not already:
                _quiet(hooks._record_graph_break, code_options, reason, exc)
            return result

        return log_graph_break

    def _record_graph_break(self, code_options: Any, reason: str, exc: Any) -> None:
        if self._live_agent() is None:
            return
        location = ""
        stack = getattr(exc, "real_stack", None)
        if not stack:
            guards = sys.modules.get("torch._guards")
            stack = guards.TracingContext.extract_stack() if guards is not None else None
        if stack:
            location = f"{stack[-1].filename}:{stack[-1].lineno}"
        elif isinstance(code_options, dict) and "co_filename" in code_options:
            location = f"{code_options['co_filename']}:{code_options.get('co_firstlineno', 0)}"
        key = f"{_graph_break_headline(reason, exc)} at {location}" if location else _graph_break_headline(reason, exc)
        if key in self.graph_break_reasons or len(self.graph_break_reasons) < MAX_REASONS:
            self.graph_break_reasons[key] = self.graph_break_reasons.get(key, 0) + 1

    def _wrap_recompile(self, original: Any) -> Any:
        hooks_ref = weakref.ref(self)

        def get_and_maybe_log_recompilation_reasons(*args: Any, **kwargs: Any) -> Any:
            hooks = hooks_ref()
            if hooks is not None and hooks._live_agent() is not None:
                hooks.recompiles += 1
                hooks.recompile_times = [*hooks.recompile_times[-(MAX_RECOMPILE_TIMES - 1):], _perf()]
            return original(*args, **kwargs)

        return get_and_maybe_log_recompilation_reasons

    # -- periodic samples (training thread, every few steps) -------------------------------

    def sample_settings_and_memory(self) -> None:
        agent = self._live_agent()
        torch = sys.modules.get("torch")
        if agent is None or torch is None:
            return
        try:
            agent.settings_flags = (bool(torch.backends.cuda.matmul.allow_tf32)
                                    | bool(torch.backends.cudnn.allow_tf32) << 1
                                    | bool(torch.backends.cudnn.benchmark) << 2)
            if torch.cuda.is_initialized():
                device = torch.cuda.current_device()
                agent.cuda_device = device
                i = agent.mem_recorded % len(agent.mem_step)
                agent.mem_step[i] = agent.steps_total
                agent.mem_bytes[i] = int(torch.cuda.memory_allocated(device))
                agent.mem_recorded += 1
        except Exception:
            pass

    def arm_autocast_probe(self) -> None:
        """For one step, look at the autocast state from inside the forward of the outermost module."""
        torch = sys.modules.get("torch")
        if torch is None or self._autocast_handle is not None or self._compiled_graphs():
            return                 # global module hooks would make compiled code re-guard; skip then
        try:
            hooks_ref = weakref.ref(self)

            def probe(module: Any, args: Any) -> None:
                hooks = hooks_ref()
                if hooks is not None:
                    _quiet(hooks._probe_collectives, module)
                    _quiet(hooks._probe_autocast)

            self._autocast_handle = torch.nn.modules.module.register_module_forward_pre_hook(probe)
        except Exception:
            self._autocast_handle = None

    def disarm_autocast_probe(self) -> None:
        handle, self._autocast_handle = self._autocast_handle, None
        if handle is not None:
            _quiet(handle.remove)

    def _probe_collectives(self, module: Any) -> None:
        agent = self._live_agent()
        if agent is not None:
            agent.collectives.consider(module)

    def _probe_autocast(self) -> None:
        agent = self._live_agent()
        torch = sys.modules.get("torch")
        if agent is None or torch is None:
            return
        device = "cuda" if torch.cuda.is_initialized() else "cpu"
        enabled = bool(torch.is_autocast_enabled(device))
        seen = {"autocast_enabled": enabled,
                "autocast_dtype": str(torch.get_autocast_dtype(device)).replace("torch.", "") if enabled else None}
        if enabled or not agent.autocast_seen.get("autocast_enabled"):
            agent.autocast_seen = seen
        self.disarm_autocast_probe()  # one look per armed step is enough

    # -- socket thread -----------------------------------------------------------------------

    def _compiled_graphs(self) -> int | None:
        utils = sys.modules.get("torch._dynamo.utils")
        counters = getattr(utils, "counters", None)
        if counters is None:
            return None
        try:
            return int(counters["stats"].get("unique_graphs", 0))
        except Exception:
            return None

    def compile_counters(self, window_s: float | None = None) -> dict[str, Any]:
        utils = sys.modules.get("torch._dynamo.utils")
        counters = getattr(utils, "counters", None)
        if counters is None:
            return {}
        try:
            breaks = dict(counters.get("graph_break", {}))
            reasons = dict(self.graph_break_reasons) or {
                (str(k).strip().splitlines() or ["graph break"])[0]: int(v) for k, v in list(breaks.items())[:MAX_REASONS]}
            return {
                "graph_breaks": int(sum(breaks.values())),
                "graph_break_reasons": sorted(reasons.items(), key=lambda kv: -kv[1]),
                "recompiles": self.recompiles if self.recompiles_hooked else None,
                "recompiles_in_window": (sum(1 for t in self.recompile_times if t >= _perf() - window_s)
                                         if self.recompiles_hooked and window_s is not None else None),
                "unique_graphs": self._compiled_graphs(),
            }
        except Exception:
            return {}

    def cuda_memory(self) -> dict[str, Any]:
        agent = self._agent_ref()
        torch = sys.modules.get("torch")
        if agent is None or torch is None or agent.cuda_device is None:
            return {}
        try:
            device = agent.cuda_device
            st = torch.cuda.memory_stats(device)
            mib = 1024.0 * 1024.0
            return {
                "cuda_mem_allocated_mib": st.get("allocated_bytes.all.current", 0) / mib,
                "cuda_mem_reserved_mib": st.get("reserved_bytes.all.current", 0) / mib,
                "cuda_mem_peak_mib": st.get("allocated_bytes.all.peak", 0) / mib,
                "cuda_mem_total_mib": torch.cuda.get_device_properties(device).total_memory / mib,
                "cuda_alloc_retries": int(st.get("num_alloc_retries", 0)),
                "cuda_ooms": int(st.get("num_ooms", 0)),
            }
        except Exception:
            return {}


def _graph_break_headline(reason: str, exc: Any) -> str:
    """``"<graph-break type>: <explanation>"`` from dynamo's exception, else the reason's first line."""
    text = str(exc) if exc is not None else ""
    kind = str(getattr(exc, "gb_type", "") or "").strip()
    explanation = next((ln.strip()[len("Explanation:"):].strip() for ln in text.splitlines()
                        if ln.strip().startswith("Explanation:")), "")
    if kind and explanation:
        return f"{kind}: {explanation}"[:240]
    lines = [ln.strip() for ln in (text or str(reason)).splitlines() if ln.strip()]
    return (lines[0] if lines else "graph break")[:240]


#: A weight dimension this large or larger that is not a multiple of 8 keeps 16-bit GEMMs on it off the
#: aligned tensor-core kernels (GPT-2's 50257-token vocabulary: `..._align1` kernels, 1.29x slower step).
UNALIGNED_MIN_DIM = 1000
UNALIGNED_MAX_SHAPES = 8


def _unaligned_weights(optimizer: Any) -> tuple[str, ...]:
    """Shapes (``50257x768``) of the optimizer's 2-D floating-point weights with a large dimension that
    is not a multiple of 8. Read once, at the first step: O(parameters), no tensor data touched."""
    out: list[str] = []
    try:
        for group in optimizer.param_groups:
            for p in group.get("params", ()):
                shape = tuple(int(d) for d in getattr(p, "shape", ()))
                if (len(shape) == 2 and any(d >= UNALIGNED_MIN_DIM and d % 8 for d in shape)
                        and p.is_floating_point()):
                    out.append("x".join(map(str, shape)))
                    if len(out) >= UNALIGNED_MAX_SHAPES:
                        return tuple(out)
    except Exception:
        return tuple(out)
    return tuple(out)


def _tensor_bytes(obj: Any, tensor_type: type, depth: int) -> int:
    """Bytes of the tensors in a batch (tensors, lists/tuples/dicts of them; bounded walk)."""
    if isinstance(obj, tensor_type):
        return int(obj.element_size() * obj.numel())  # type: ignore[attr-defined]
    if depth >= 4:
        return 0
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    return sum(_tensor_bytes(x, tensor_type, depth + 1) for x in list(items)[:256])


def _quiet(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        pass
