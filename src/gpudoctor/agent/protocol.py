"""The agent's wire format: typed, versioned requests and replies shared by the agent and its client.

What crosses the process boundary between the in-process agent (inside the training job) and
gpudoctor (``agent.client``, the live session) is declared here once, as frozen dataclasses with
one documented field each, plus the states both ends compare (agent status, profile window state,
where step boundaries come from).

- Requests: one class per operation (its ``OP``), each argument with its default and bounds. The
  client builds them (:func:`clamped` pulls a number into the bounds) and sends
  :func:`request_to_wire`; the agent's server decodes each line once (:func:`request_from_wire`: an
  unknown ``op``, a wrong type or a value out of bounds is :class:`BadRequest`) and the agent
  dispatches on the type.
- Replies: the agent builds them and sends :func:`to_wire`; the client decodes them
  (:func:`from_wire`), and a field this version does not know is logged once, never dropped silently.

PROTOCOL.md's tables are generated from these classes (:func:`field_tables`; a test keeps them equal).

Standard library only: the agent imports this module inside a process whose environment is not
gpudoctor's. It must never import torch, the rest of gpudoctor, or anything third-party.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import types
import typing
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, TypeVar

#: Bumped when the set of requests or a reply changes incompatibly; a new optional reply field does not
#: bump it. 3: typed requests, listed in the hello reply (``requests``); detach/unload answer a
#: ``DetachReply``. A client takes an agent of an older version with a warning (an agent injected by an
#: earlier gpudoctor lives as long as its job) and reads the fields that version sent.
PROTOCOL_VERSION = 3
#: The requests every protocol-2 agent serves (its hello reply does not list them).
V2_REQUESTS = ("hello", "stats", "profile", "profile_status", "detach", "unload")

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


def _doc(text: str, unit: str = "", fact: bool = True) -> Any:
    return field(default=None, metadata={"doc": text, "unit": unit, "fact": fact})


# -- requests ------------------------------------------------------------------------------------


class BadRequest(ValueError):
    """A well-formed request line the agent refuses (one sentence, sent back as the error; the
    connection stays open)."""


def _arg(default: Any, text: str, unit: str = "", bounds: tuple[float, float] | None = None,
         max_len: int | None = None) -> Any:
    """A request argument: its default when absent, and the bounds the agent enforces (numbers:
    finite and within ``bounds``; texts: 1 to ``max_len`` characters)."""
    return field(default=default, metadata={"doc": text, "unit": unit, "bounds": bounds, "max_len": max_len})


@dataclass(frozen=True)
class HelloRequest:
    """Who the agent is (a ``HelloReply``); ``client`` names the client for reference-counted detach.
    A client that gives none counts only while its connection is open."""

    OP: ClassVar[str] = "hello"
    #: Sent again, once, on a fresh connection when the agent closed the old one.
    IDEMPOTENT: ClassVar[bool] = True

    client: str | None = _arg(None, "the client's token", max_len=64)


@dataclass(frozen=True)
class StatsRequest:
    """Step statistics over the last ``window_s`` seconds (a ``StatsReply``: every field of
    ``StepStats``, flat, plus the raw extras)."""

    OP: ClassVar[str] = "stats"
    IDEMPOTENT: ClassVar[bool] = True

    window_s: float = _arg(10.0, "how far back the statistics reach", "s", bounds=(0.5, 3600.0))


@dataclass(frozen=True)
class ProfileRequest:
    """Arm a torch.profiler window of ``steps`` steps (a ``ProfileReply``). Refused (``ok: false``,
    plus the ``ProfileReply`` fields) when a window is already armed or recording, or when a
    torch.profiler session the user started is active (left alone)."""

    OP: ClassVar[str] = "profile"
    IDEMPOTENT: ClassVar[bool] = False

    steps: int = _arg(3, "steps to record (an integer)", bounds=(1, 100))
    timeout_s: float = _arg(120.0, "how long an armed window waits for a step before it fails", "s",
                            bounds=(1.0, 3600.0))


@dataclass(frozen=True)
class ProfileStatusRequest:
    """Where the profile window stands (a ``ProfileReply``)."""

    OP: ClassVar[str] = "profile_status"
    IDEMPOTENT: ClassVar[bool] = True


@dataclass(frozen=True)
class DetachRequest:
    """This client is done (a ``DetachReply``). Only when no other client is attached (a connection
    open, or a named client seen in the last 120 s) does the agent unload: the hooks, the thread and
    the socket go. A recording profile window is finished at the next step (on the training thread)
    and its trace still written; only then do its hooks go."""

    OP: ClassVar[str] = "detach"
    IDEMPOTENT: ClassVar[bool] = True


@dataclass(frozen=True)
class UnloadRequest:
    """Unload as ``detach`` does, whoever else is attached (a ``DetachReply``)."""

    OP: ClassVar[str] = "unload"
    IDEMPOTENT: ClassVar[bool] = True


Request = HelloRequest | StatsRequest | ProfileRequest | ProfileStatusRequest | DetachRequest | UnloadRequest
#: Every request type, in PROTOCOL.md's order; the agent has one handler for each (a test checks).
REQUESTS: tuple[type, ...] = typing.get_args(Request)
REQUEST_BY_OP: dict[str, type] = {cls.OP: cls for cls in REQUESTS}  # type: ignore[attr-defined]


def bounds(cls: type, name: str) -> tuple[float, float]:
    """The bounds the agent enforces on the number ``name`` of request ``cls``."""
    found = next(f for f in dataclasses.fields(cls) if f.name == name).metadata["bounds"]
    return (found[0], found[1])


def _is_integer(cls: type, f: dataclasses.Field[Any]) -> bool:
    return typing.get_type_hints(cls)[f.name] is int


def request_to_wire(request: Request) -> dict[str, Any]:
    """A request as the JSON object the client sends (arguments left at None are not sent)."""
    out: dict[str, Any] = {"op": request.OP}
    for f in dataclasses.fields(request):
        value = getattr(request, f.name)
        if value is not None:
            out[f.name] = value
    return out


def request_from_wire(obj: dict[str, Any]) -> Request:
    """The typed request of one decoded line; :class:`BadRequest` (one sentence) for an unknown ``op``,
    an argument of the wrong type or out of its bounds. Keys the request does not know are ignored (a
    newer client's optional arguments)."""
    op = obj.get("op")
    cls = REQUEST_BY_OP.get(op) if isinstance(op, str) else None
    if cls is None:
        raise BadRequest(f"unknown request {str(op)[:40]!r}.")
    values = {f.name: _checked_arg(cls, f, obj[f.name]) for f in dataclasses.fields(cls) if f.name in obj}
    return cls(**values)


def _checked_arg(cls: type, f: dataclasses.Field[Any], value: Any) -> Any:
    low_high, max_len = f.metadata.get("bounds"), f.metadata.get("max_len")
    if low_high is not None:
        low, high = low_high
        integer = _is_integer(cls, f)
        kind = "an integer" if integer else "a number"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
            raise BadRequest(f"{f.name} must be {kind} from {low:g} to {high:g}.")
        if not math.isfinite(value) or not low <= value <= high:
            raise BadRequest(f"{f.name} must be {kind} from {low:g} to {high:g}, not {str(value)[:20]}.")
        return int(value) if integer else float(value)
    if max_len is not None and value is not None and (not isinstance(value, str) or not value
                                                       or len(value) > max_len):
        raise BadRequest(f"{f.name} must be a string of 1 to {max_len} characters.")
    return value


_R = TypeVar("_R")


def clamped(cls: type[_R], **values: Any) -> _R:
    """Request ``cls`` with each bounded number pulled into its bounds (the client's side of the bounds
    the agent enforces); NaN is the argument's default."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    out: dict[str, Any] = {}
    for name, value in values.items():
        f = fields[name]
        low_high = f.metadata.get("bounds")
        if low_high is not None:
            number = float(value)
            number = float(typing.cast(float, f.default)) if math.isnan(number) else min(max(number, low_high[0]), low_high[1])
            value = int(number) if _is_integer(cls, f) else number
        out[name] = value
    return cls(**out)


# -- replies -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HelloReply:
    """The answer to ``hello``: who the agent is."""

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
    requests: tuple[str, ...] = field(default=(), metadata={"doc": "the requests (op) this agent serves; "
                                                                   "empty from a protocol-2 agent"})

    def serves(self) -> tuple[str, ...]:
        """The requests this agent serves (a protocol-2 agent's hello does not list them)."""
        return self.requests or V2_REQUESTS


@dataclass(frozen=True)
class StepStats:
    """What the in-process agent measured over its last window of steps (the live ``steps`` sample)."""

    timestamp: float = field(metadata={"doc": "when the reply was made", "unit": "unix s", "fact": False})
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
        default=(), metadata={"doc": "[reason with user file:line, count] pairs, most frequent first", "fact": False})
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
    sync_sampled_steps: int | None = _doc("sampled steps behind the sync and copy counts", fact=False)
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
    loader_dataset: str | None = _doc("the loop's dataset: Class.__getitem__ (file:line), a torch wrapper followed "
                                      "to what it wraps (every 64th batch)")
    loader_made_at: str | None = _doc("the user's file:line that built that DataLoader (seen when the agent was in "
                                      "before it was built: gpudoctor run)")
    agent_cpu_pct: float | None = _doc("CPU time of the agent's thread since it started, as a share of one core: "
                                       "the most it can take from a Python-bound training thread through the GIL",
                                       "%", fact=False)
    unaligned_weight_shapes: tuple[str, ...] | None = _doc(
        "shapes (e.g. 50257x768) of the step optimizer's 2-D weights with a dimension >= 1000 that is not a "
        "multiple of 8 (read at the first optimizer step; at most 8)", fact=False)
    step_source: StepSource = field(default=StepSource.NONE, metadata={"doc": "what marks a step (StepSource)"})


@dataclass(frozen=True)
class StatsReply:
    """The answer to ``stats``: a :class:`StepStats` (flat on the wire) and raw extras."""

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
    """The answer to ``profile`` and ``profile_status``: where the profile window stands."""

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


@dataclass(frozen=True)
class DetachReply:
    """``detach`` and ``unload``: whether the agent unloads."""

    unloaded: bool = field(default=False, metadata={"doc": "true: the agent unloads (no other client is "
                                                           "attached, or unload)"})
    clients: int = field(default=0, metadata={"doc": "the other clients that keep it loaded"})


#: The agent's live facts: every StepStats field not marked ``fact: False`` is a rule fact of the same
#: name (live.facts passes them on; the fact registry's ``agent`` rows must be exactly these, a test
#: checks). A new agent metric is one field here, its hook, its registry row and its rule.
AGENT_FACTS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(StepStats) if f.metadata.get("fact", True))

#: Every reply type, for the PROTOCOL.md tables.
REPLIES: tuple[type, ...] = (HelloReply, StatsReply, StepStats, ProfileReply, DetachReply)


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


def _type_name(hint: Any) -> str:
    name = hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")
    return name.replace(" | ", " or ")


def request_table() -> str:
    """The Markdown table of the requests: each with its arguments, defaults and bounds."""
    rows = ["### Requests", "",
            "One JSON object per line; `op` picks the request. An argument left out takes its default; a key "
            "a request does not know is ignored. A value of the wrong type or out of its bounds, or an unknown "
            "`op`, is answered `ok: false` with one sentence and the connection stays open.", "",
            "| request | argument | type | default | bounds | meaning |", "|---|---|---|---|---|---|"]
    for cls in REQUESTS:
        example = json.dumps(request_to_wire(cls()))
        doc = " ".join((cls.__doc__ or "").split()).replace("``", "`")
        rows.append(f"| `{example}` | | | | | {doc} |")
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            low_high, max_len = f.metadata.get("bounds"), f.metadata.get("max_len")
            limit = (f"{low_high[0]:g}–{low_high[1]:g} {f.metadata.get('unit', '')}".strip() if low_high
                     else f"1–{max_len} characters" if max_len else "")
            rows.append(f"| | `{f.name}` | {_type_name(hints[f.name])} | {json.dumps(f.default)} | {limit} | "
                        f"{f.metadata.get('doc', '')} |")
    return "\n".join(rows)


def field_tables() -> str:
    """The Markdown tables of PROTOCOL.md: the requests, then one field table per reply type."""
    parts = [request_table()]
    for cls in REPLIES:
        hints = typing.get_type_hints(cls)
        rows = [f"### {cls.__name__}", "", (cls.__doc__ or "").strip().splitlines()[0], "",
                "| field | type | unit | meaning |", "|---|---|---|---|"]
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            type_name = _type_name(hint)
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
