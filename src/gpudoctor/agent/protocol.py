"""The agent's wire format: typed, versioned replies shared by the agent and its client.

What crosses the process boundary between the in-process agent (inside the training job) and
gpudoctor (``agent.client``, the live session) is declared here once, as frozen dataclasses with
one documented field each, plus the states both ends compare (agent status, profile window state,
where step boundaries come from). The agent builds these objects and sends them as one JSON object
per line (:func:`to_wire`); the client decodes them (:func:`from_wire`), and a field this version
does not know is logged once, never dropped silently. PROTOCOL.md's field tables are generated
from these classes (:func:`field_tables`; a test keeps them equal).

Standard library only: the agent imports this module inside a process whose environment is not
gpudoctor's. It must never import torch, the rest of gpudoctor, or anything third-party.
"""

from __future__ import annotations

import dataclasses
import logging
import types
import typing
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

#: Bumped when a reply changes incompatibly; new optional fields do not bump it.
PROTOCOL_VERSION = 2

log = logging.getLogger("gpudoctor.agent.protocol")
_reported_unknown: set[tuple[str, str]] = set()


class _Text(str, Enum):
    """A state that is its own text on the wire and in messages (``str(x) == x.value``)."""

    def __str__(self) -> str:
        return str(self.value)


class AgentStatus(_Text):
    """Whether gpudoctor has an agent in the target (client side)."""

    CONNECTED = "connected"
    INJECTING = "injecting"
    UNAVAILABLE = "unavailable"
    LOST = "lost"
    DETACHED = "detached"


class ProfileState(_Text):
    """Where a profile window stands. ``analysing`` is the client's: the trace is written, the
    session is analysing it."""

    IDLE = "idle"
    ARMED = "armed"
    RECORDING = "recording"
    ANALYSING = "analysing"
    DONE = "done"
    FAILED = "failed"

    @property
    def busy(self) -> bool:
        """Armed or recording: the agent refuses a second window."""
        return self in (ProfileState.ARMED, ProfileState.RECORDING)

    @property
    def over(self) -> bool:
        """Nothing more will happen to this window (or there is none)."""
        return self in (ProfileState.IDLE, ProfileState.DONE, ProfileState.FAILED)


class StepSource(_Text):
    """What marks a training step's end, strongest first: ``gpudoctor.step()``, an optimizer step
    (``torch.optim.Optimizer`` and subclasses), the end of a backward pass (loops that update
    parameters by hand, custom optimizers), or nothing seen yet."""

    EXPLICIT = "explicit"
    OPTIMIZER = "optimizer"
    BACKWARD = "backward"
    NONE = "none"

    @property
    def strength(self) -> int:
        return {"explicit": 3, "optimizer": 2, "backward": 1, "none": 0}[self.value]


class WindowKind(_Text):
    """A profile window of N training steps, or — when no step boundary arrives — of a fixed time."""

    STEPS = "steps"
    TIME = "time"


def _doc(text: str, unit: str = "") -> Any:
    return field(default=None, metadata={"doc": text, "unit": unit})


@dataclass(frozen=True)
class HelloReply:
    """``{"op": "hello"}``: who the agent is."""

    protocol: int = field(default=PROTOCOL_VERSION, metadata={"doc": "protocol version of the agent"})
    pid: int = field(default=0, metadata={"doc": "the target's process id"})
    python: str = field(default="", metadata={"doc": "Python version of the target, e.g. 3.11.9"})
    torch: str | None = _doc("torch version, or null before the program imported torch")
    source: str = field(default="", metadata={"doc": "how the agent got in: run / inject / import"})
    step_source: StepSource = field(default=StepSource.NONE, metadata={"doc": "what marks a step (StepSource)"})
    started_at: float = field(default=0.0, metadata={"doc": "when the agent started", "unit": "unix s"})
    rank: int | None = _doc("RANK from the environment")
    local_rank: int | None = _doc("LOCAL_RANK from the environment")
    world_size: int | None = _doc("WORLD_SIZE from the environment")


@dataclass(frozen=True)
class StepStats:
    """What the in-process agent measured over its last window of steps (the live ``steps`` sample)."""

    timestamp: float = field(metadata={"doc": "when the reply was made", "unit": "unix s"})
    steps_total: int = field(metadata={"doc": "step boundaries seen since the agent started"})
    window_steps: int = field(metadata={"doc": "steps in the window the numbers below describe"})
    step_time_p50_ms: float | None = _doc("median step time", "ms")
    step_time_p90_ms: float | None = _doc("90th-percentile step time", "ms")
    steps_per_s: float | None = _doc("steps per second over the window")
    data_wait_pct: float | None = _doc("share of the step spent in DataLoader __next__", "%")
    data_wait_p50_ms: float | None = _doc("median DataLoader wait per step", "ms")
    h2d_ms_per_step: float | None = _doc("host time per step in host-to-device copies (.to/.cuda; sampled "
                                         "steps). Pageable copies block the host for the copy", "ms")
    graph_breaks: int | None = _doc("torch.compile graph breaks")
    graph_break_reasons: tuple[tuple[str, int], ...] = field(
        default=(), metadata={"doc": "[reason with user file:line, count] pairs, most frequent first"})
    recompiles: int | None = _doc("torch.compile recompilations")
    recompiles_in_window: int | None = _doc("recompilations inside the stats window (a warm-up recompile, e.g. the "
                                            "first switch to eval mode, falls out of it)")
    unique_graphs: int | None = _doc("torch.compile graphs")
    autocast_enabled: bool | None = _doc("autocast on in the outermost forward (probed every 50 steps)")
    autocast_dtype: str | None = _doc("autocast dtype, e.g. bfloat16")
    tf32_matmul: bool | None = _doc("torch.backends.cuda.matmul.allow_tf32")
    tf32_cudnn: bool | None = _doc("torch.backends.cudnn.allow_tf32")
    cudnn_benchmark: bool | None = _doc("torch.backends.cudnn.benchmark")
    cuda_mem_allocated_mib: float | None = _doc("CUDA memory allocated", "MiB")
    cuda_mem_reserved_mib: float | None = _doc("CUDA memory reserved by the caching allocator", "MiB")
    cuda_mem_peak_mib: float | None = _doc("peak CUDA memory allocated", "MiB")
    cuda_mem_total_mib: float | None = _doc("the device's memory", "MiB")
    cuda_alloc_retries: int | None = _doc("caching-allocator retries (cudaMalloc after freeing the cache)")
    cuda_ooms: int | None = _doc("CUDA out-of-memory errors")
    mem_allocated_trend_mib_per_100_steps: float | None = _doc("slope of allocated memory", "MiB/100 steps")
    host_syncs_per_step: float | None = _doc("calls per step that make the host wait for the device: .item(), "
                                             "float()/int()/bool() of a tensor, .tolist(), .cpu(), blocking "
                                             ".to('cpu'), torch.cuda/Stream/Event synchronize (sampled steps)")
    host_sync_ms_per_step: float | None = _doc("host time per step blocked in those calls (sampled steps)", "ms")
    h2d_mib_per_step: float | None = _doc("host-to-device bytes copied per step (sampled steps)", "MiB")
    h2d_pinned_pct: float | None = _doc("share of those bytes copied from pinned memory", "%")
    sync_sampled_steps: int | None = _doc("sampled steps behind the sync and copy counts")
    loader_batch_mib: float | None = _doc("one batch as the DataLoader returns it (every 64th batch)", "MiB")
    loader_workers: int | None = _doc("DataLoader workers")
    loader_prefetch_factor: int | None = _doc("batches each worker keeps ready")
    loader_worker_starts: int | None = _doc("times DataLoader workers were started in the window (each iter() of "
                                            "a loader without persistent_workers: every epoch)")
    loader_start_ms_per_step: float | None = _doc("what starting and stopping them cost per step: forking the "
                                                  "workers, the first batch's wait beyond the median wait, and "
                                                  "the epoch's last __next__ (shutting them down)", "ms")
    loader_start_fork_ms_per_step: float | None = _doc("of it, forking the workers (the iterator's __init__)", "ms")
    data_wait_restart_ms_per_step: float | None = _doc(
        "of the data wait per step: the first batch after the workers were forked again and the old ones' "
        "shutdown at the epoch's end, beyond the steady steps' median wait (persistent workers remove it)", "ms")
    data_wait_first_ms_per_step: float | None = _doc(
        "of it: the next batches of an epoch while the workers refill their queues, beyond that median", "ms")
    data_wait_main_ms_per_step: float | None = _doc("of it: batches loaded in the training process "
                                                    "(num_workers=0)", "ms")
    data_wait_steady_ms_per_step: float | None = _doc("of it: the rest, workers producing slower than the "
                                                      "loop consumes", "ms")
    loader_steady_steps: int | None = _doc("steps of the window whose batch came from workers in steady state")
    loader_steady_step_ms: float | None = _doc("their mean step time", "ms")
    loader_steady_wait_ms: float | None = _doc("their mean data wait", "ms")
    loader_main_steps: int | None = _doc("steps of the window whose batch was loaded in the training process")
    loader_main_step_ms: float | None = _doc("their mean step time", "ms")
    loader_main_wait_ms: float | None = _doc("their mean data wait: the time to load one step's batches there",
                                             "ms")
    unaligned_weight_shapes: tuple[str, ...] | None = _doc(
        "shapes (e.g. 50257x768) of the step optimizer's 2-D weights with a dimension >= 1000 that is not a "
        "multiple of 8 (read at the first optimizer step; at most 8)")
    step_source: StepSource = field(default=StepSource.NONE, metadata={"doc": "what marks a step (StepSource)"})


@dataclass(frozen=True)
class StatsReply:
    """``{"op": "stats", "window_s": 10}``: a :class:`StepStats` (flat on the wire) and raw extras."""

    stats: StepStats
    recent_step_times_ms: tuple[float, ...] = field(default=(), metadata={"doc": "≤ 64 most recent step times",
                                                                          "unit": "ms"})
    collective_timing: str = field(default="", metadata={"doc": "one sentence: how the collective wait is "
                                                                "measured, or why it is not"})
    collective_wait_ms_per_step: float | None = _doc("DDP: mean exposed all-reduce wait per step", "ms")
    collective_wait_p50_ms: float | None = _doc("DDP: median exposed all-reduce wait per step", "ms")
    collective_wait_steps: int | None = _doc("DDP: steps behind the collective wait")


@dataclass(frozen=True)
class ProfileReply:
    """``{"op": "profile", ...}`` and ``{"op": "profile_status"}``: where the profile window stands."""

    status: ProfileState = field(default=ProfileState.IDLE, metadata={"doc": "ProfileState"})
    steps_requested: int = field(default=0, metadata={"doc": "steps asked for"})
    steps_done: int = field(default=0, metadata={"doc": "steps recorded so far"})
    trace_path: str | None = _doc("the trace file, once written")
    detail: str = field(default="", metadata={"doc": "one sentence: why it failed, stopped early or fell "
                                                     "back to a time window"})
    window: WindowKind = field(default=WindowKind.STEPS, metadata={"doc": "WindowKind: steps, or time when "
                                                                          "no step boundary arrived"})
    window_s: float | None = _doc("length of a time window", "s")

    def label(self) -> str:
        """Short text for views, e.g. ``recording 2/3`` or ``recording 3 s window``."""
        if self.status == ProfileState.RECORDING:
            if self.window == WindowKind.TIME:
                return f"recording {self.window_s or 0:.0f} s window"
            return f"recording {self.steps_done}/{self.steps_requested}"
        return str(self.status)


#: Every reply type, for the PROTOCOL.md tables.
REPLIES: tuple[type, ...] = (HelloReply, StatsReply, StepStats, ProfileReply)


def to_wire(reply: Any) -> dict[str, Any]:
    """A reply as the JSON object the agent sends (``StatsReply.stats`` is flattened)."""
    out: dict[str, Any] = {"ok": True}
    for f in dataclasses.fields(reply):
        value = getattr(reply, f.name)
        if dataclasses.is_dataclass(value):
            out.update(to_wire(value))
        else:
            out[f.name] = value.value if isinstance(value, Enum) else value
    out.pop("ok", None)
    return {"ok": True, **out}


_T = TypeVar("_T")


def from_wire(cls: type[_T], reply: dict[str, Any]) -> _T:
    """Decode ``reply`` into ``cls``; a field this version does not know is logged once."""
    return _decode(cls, reply, consumed=set(), top=True)


def _decode(cls: type[_T], reply: dict[str, Any], consumed: set[str], top: bool) -> Any:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            values[f.name] = _decode(hint, reply, consumed, top=False)  # type: ignore[arg-type]
            continue
        consumed.add(f.name)
        if f.name in reply:
            values[f.name] = _coerce(cls.__name__, f.name, hint, reply[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = 0.0 if f.name == "timestamp" else 0
    if top:
        unknown = set(reply) - consumed - {"ok", "error"}
        report_unknown(cls.__name__, unknown)
    return cls(**values)


def _coerce(owner: str, name: str, hint: Any, value: Any) -> Any:
    if isinstance(hint, type) and issubclass(hint, Enum):
        try:
            return hint(value)
        except ValueError:
            report_unknown(owner, {f"{name}={value!r}"})
            return next(iter(hint))
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):  # ``tuple[...] | None``: the tuple's own rule below
        tuples = [a for a in typing.get_args(hint) if typing.get_origin(a) is tuple]
        if tuples and isinstance(value, (list, tuple)):
            hint, origin = tuples[0], tuple
    if origin is tuple and isinstance(value, (list, tuple)):
        inner = typing.get_args(hint)[0]
        if typing.get_origin(inner) is tuple:
            return tuple(tuple(x) if isinstance(x, (list, tuple)) else x for x in value)
        return tuple(value)
    if origin in (typing.Union, types.UnionType) and float in typing.get_args(hint) \
            and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def report_unknown(owner: str, names: set[str]) -> None:
    """Log, once per (reply type, field), a field this version of gpudoctor does not know."""
    for name in sorted(names):
        if (owner, name) not in _reported_unknown:
            _reported_unknown.add((owner, name))
            log.warning("the agent sent %s field %r, which this gpudoctor does not know (a newer agent?); "
                        "it is ignored.", owner, name)


def field_tables() -> str:
    """The Markdown field tables of PROTOCOL.md, one per reply type."""
    parts = []
    for cls in REPLIES:
        hints = typing.get_type_hints(cls)
        rows = [f"### {cls.__name__}", "", (cls.__doc__ or "").strip().splitlines()[0], "",
                "| field | type | unit | meaning |", "|---|---|---|---|"]
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            type_name = hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")
            type_name = type_name.replace(" | ", " or ")
            if dataclasses.is_dataclass(hint):
                rows.append(f"| *(every field of {type_name}, flat)* | | | |")
                continue
            rows.append(f"| `{f.name}` | {type_name} | {f.metadata.get('unit', '')} | {f.metadata.get('doc', '')} |")
        parts.append("\n".join(rows))
    enums = [f"- `{e.__name__}`: " + ", ".join(f"`{m.value}`" for m in e) for e in
             (AgentStatus, ProfileState, StepSource, WindowKind)]
    return "\n\n".join(parts) + "\n\nStates:\n" + "\n".join(enums) + "\n"


DOC_BEGIN = "<!-- generated: protocol.field_tables() -->\n"
DOC_END = "<!-- end generated -->"


def protocol_doc(current: str) -> str:
    """PROTOCOL.md's text with its generated field tables brought up to date."""
    head, rest = current.split(DOC_BEGIN, 1)
    _, tail = rest.split(DOC_END, 1)
    return head + DOC_BEGIN + "\n" + field_tables() + "\n" + DOC_END + tail


if __name__ == "__main__":  # python -m gpudoctor.agent.protocol: rewrite PROTOCOL.md's field tables
    from pathlib import Path

    doc = Path(__file__).with_name("PROTOCOL.md")
    doc.write_text(protocol_doc(doc.read_text()))
