"""The in-process agent: step hooks, cheap per-step measurements, and the socket that serves them.

Runs *inside the training process* (started by ``gpudoctor run``'s sitecustomize, by injection, or
by ``gpudoctor.install_agent()``), so it imports only the standard library and — lazily, once the
program has imported it — the target's own torch. Every hook is wrapped so that nothing can raise
into user code, and every hook is a no-op in a forked child (DataLoader workers) or after detach.
What it must not do: import gpudoctor's client side, rich/textual, or anything from the network.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import sys
import threading
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudoctor.agent import hooks
from gpudoctor.agent.collectives import CollectiveTimer
from gpudoctor.agent.paths import ensure_private_dir, socket_name
from gpudoctor.agent.profiling import ProfileWindow
from gpudoctor.agent.protocol import (
    PROTOCOL_VERSION,
    REQUESTS,
    DetachReply,
    DetachRequest,
    HelloReply,
    HelloRequest,
    ProfileRequest,
    ProfileState,
    ProfileStatusRequest,
    Request,
    StatsReply,
    StatsRequest,
    StepSource,
    StepStats,
    UnloadRequest,
    to_wire,
)
from gpudoctor.agent.server import AgentServer, Peer
from gpudoctor.agent.syncs import SyncCounter

STEP_HISTORY = 1024
MEM_HISTORY = 256
SAMPLE_EVERY_STEPS = 20
AUTOCAST_SAMPLE_EVERY_STEPS = 50
FAST_TICK_S = 0.005
#: A named client whose connection the agent closed (evicted at the connection cap, timed out) still
#: counts for this long after its last request: it re-connects. One that closed its connection itself
#: no longer counts.
CLIENT_LEASE_S = 120.0
MAX_CLIENTS = 64

_EXPLICIT = StepSource.EXPLICIT      # Enum attribute lookups cost ~0.5 µs; the step path uses these
_EXTRA_FIELDS = frozenset(f.name for f in dataclasses.fields(StatsReply)) - {"stats"}
_lock = threading.Lock()
_agent: Agent | None = None
_detaching: Agent | None = None      # detached while a profile window records: ends on the next step
_fork_hook_registered = False
_in_forked_child = False


class Agent:
    """All of one process's agent state. Hot-path fields are plain attributes (a few µs per step)."""

    def __init__(self, source: str, directory: Path) -> None:
        self.pid = os.getpid()
        self.source = source
        self.started_at = time.time()
        self.directory = directory
        # Ring buffers of plain doubles: a step allocates no GC-tracked object. (One tuple per step
        # made Python's GC run more often and cost ~7 µs per optimizer.step() in a tight loop.)
        self.step_end_s = array("d", bytes(8 * STEP_HISTORY))
        self.step_dt_s = array("d", bytes(8 * STEP_HISTORY))
        self.step_wait_s = array("d", bytes(8 * STEP_HISTORY))
        self.step_wait_kind = array("b", bytes(STEP_HISTORY))   # hooks.WAIT_*: what the step's data wait was
        self.steps_recorded = 0
        self.steps_total = 0
        self.last_step_t = 0.0
        self.data_wait_acc_s = 0.0
        self.data_wait_kind = hooks.WAIT_NONE
        self.step_source = StepSource.NONE
        self.settings_flags = -1            # bit 0 tf32 matmul, 1 tf32 cuDNN, 2 cudnn.benchmark; -1 unknown
        self.autocast_seen: dict[str, Any] = {}
        self.mem_step = array("q", bytes(8 * MEM_HISTORY))
        self.mem_bytes = array("q", bytes(8 * MEM_HISTORY))
        self.mem_recorded = 0
        self.cuda_device: int | None = None
        self.profile = ProfileWindow(directory)
        self.detaching = False
        self.collectives = CollectiveTimer()
        self.syncs = SyncCounter()
        self.torch_hooks = hooks.TorchHooks(self)
        self.clients: dict[str, float] = {}   # client token -> when it last sent a request (monotonic)
        # one handler per request type of the protocol, ``_on_<op>`` (a missing one fails at start)
        self._handlers: dict[type, Callable[[Any, Peer], dict[str, Any]]] = {
            cls: getattr(self, f"_on_{cls.OP}") for cls in REQUESTS}  # type: ignore[attr-defined]
        self.server = AgentServer(directory / socket_name(self.pid), self.handle, self.tick, self.on_close)

    # -- training thread (hot path) ----------------------------------------------------------

    def on_step(self, source: StepSource) -> None:
        """A step boundary from ``source``; a weaker source than the one in use is ignored, a stronger
        one takes over and starts the step history afresh (its steps are not the old source's)."""
        if source is not self.step_source:
            if source.strength < self.step_source.strength:
                return
            if self.steps_total and self.step_source is not StepSource.NONE:
                # the weaker source's last boundary (this step's backward) and this one end one step
                self.steps_total -= 1
            self.step_source = source
            self.steps_recorded = 0
            self.last_step_t = 0.0
            self.syncs.reset()
        t = time.perf_counter()
        if self.last_step_t:
            i = self.steps_recorded % STEP_HISTORY
            self.step_end_s[i] = t
            self.step_dt_s[i] = t - self.last_step_t
            self.step_wait_s[i] = self.data_wait_acc_s
            self.step_wait_kind[i] = self.data_wait_kind
            self.steps_recorded += 1
        self.last_step_t = t
        self.data_wait_acc_s = 0.0
        self.data_wait_kind = 0
        self.steps_total += 1
        self.collectives.on_step()
        if self.syncs.armed or t >= self.syncs.next_sample_t:
            self.syncs.on_step(t, allowed=not self.torch_hooks._compiled_graphs())
        if self.steps_total % SAMPLE_EVERY_STEPS == 1:
            self.torch_hooks.sample_settings_and_memory()
        if self.steps_total % AUTOCAST_SAMPLE_EVERY_STEPS == 1:
            self.torch_hooks.arm_autocast_probe()
        elif self.steps_total % AUTOCAST_SAMPLE_EVERY_STEPS == 2:
            self.torch_hooks.disarm_autocast_probe()
        if self.profile.active:
            self.profile.on_step()
        if self.detaching and not self.profile.busy:
            _finish_detach(self)

    # -- socket thread ---------------------------------------------------------------------

    def tick(self) -> float | None:
        """Socket-thread housekeeping; returns the next tick delay (short while torch is importing)."""
        self.torch_hooks.install_when_loaded()
        self.profile.tick(self._typical_step_s())
        return FAST_TICK_S if self.torch_hooks.waiting_for_torch() else None

    def handle(self, request: Request, peer: Peer) -> dict[str, Any]:
        """One typed request (the server decoded and checked it) to its reply, dispatched on its type."""
        if isinstance(request, HelloRequest) and request.client is not None:
            peer.client, peer.named = request.client, True
        if peer.named:  # a client without a token counts only while its connection is open
            self.clients[peer.client] = time.monotonic()
            if len(self.clients) > MAX_CLIENTS:  # bounded, whatever tokens a client makes up
                del self.clients[min(self.clients, key=self.clients.__getitem__)]
        return self._handlers[type(request)](request, peer)

    def _on_hello(self, request: HelloRequest, peer: Peer) -> dict[str, Any]:
        return to_wire(self.hello())

    def _on_stats(self, request: StatsRequest, peer: Peer) -> dict[str, Any]:
        return to_wire(self.stats(request.window_s))

    def _on_profile(self, request: ProfileRequest, peer: Peer) -> dict[str, Any]:
        refusal = self.profile.request(request.steps, request.timeout_s)
        if refusal:
            return {**to_wire(self.profile.snapshot()), "ok": False, "error": refusal}
        return to_wire(self.profile.snapshot())

    def _on_profile_status(self, request: ProfileStatusRequest, peer: Peer) -> dict[str, Any]:
        return to_wire(self.profile.snapshot())

    def _on_detach(self, request: DetachRequest, peer: Peer) -> dict[str, Any]:
        others = self.release(peer.client, peer)
        if not others:
            threading.Thread(target=detach, name="gpudoctor-agent-detach", daemon=True).start()
        return to_wire(DetachReply(unloaded=not others, clients=len(others)))

    def _on_unload(self, request: UnloadRequest, peer: Peer) -> dict[str, Any]:
        threading.Thread(target=detach, name="gpudoctor-agent-detach", daemon=True).start()
        return to_wire(DetachReply(unloaded=True, clients=0))

    def on_close(self, peer: Peer, evicted: bool) -> None:
        """A connection closed: a client that closed its own is gone (unless connected again)."""
        if not evicted and not any(p.client == peer.client for p in self.server.peers()):
            self.clients.pop(peer.client, None)

    def release(self, client: str, peer: Peer | None = None) -> set[str]:
        """Forget ``client``; the other clients that still keep the agent loaded: those with a
        connection open, and those that sent a request within ``CLIENT_LEASE_S``."""
        self.clients.pop(client, None)
        now = time.monotonic()
        connected = {p.client for p in self.server.peers() if p is not peer}
        for token, seen in list(self.clients.items()):
            if token not in connected and now - seen > CLIENT_LEASE_S:
                del self.clients[token]
        return (set(self.clients) | connected) - {client}

    def hello(self) -> HelloReply:
        torch = sys.modules.get("torch")
        return HelloReply(
            protocol=PROTOCOL_VERSION, pid=self.pid, python=sys.version.split()[0],
            torch=getattr(torch, "__version__", None) if torch else None,
            source=self.source, step_source=self.step_source, started_at=self.started_at,
            rank=_dist_value("get_rank", "RANK"), local_rank=_env_int("LOCAL_RANK"),
            world_size=_dist_value("get_world_size", "WORLD_SIZE"),
            requests=tuple(cls.OP for cls in REQUESTS))  # type: ignore[attr-defined]

    def _typical_step_s(self) -> float | None:
        """The 90th-percentile of the last steps (how long 'no step for a while' must be), or None."""
        times = sorted(s[1] for s in self.step_history()[-16:])
        return _quantile(times, 0.9) if times else None

    def stats(self, window_s: float) -> StatsReply:
        """The ``stats`` reply: step statistics over the last ``window_s`` seconds."""
        values = self._stats_values(window_s)
        # this runs in the agent's own thread: its CPU time since it started, as a share of one core — the
        # most it can take from a Python-bound training thread through the GIL (issue 36)
        alive_s = time.time() - self.started_at
        if alive_s > 1.0 and threading.current_thread().name == "gpudoctor-agent":
            values["agent_cpu_pct"] = 100.0 * time.thread_time() / alive_s
        extra = {k: values.pop(k) for k in _EXTRA_FIELDS if k in values}
        extra["recent_step_times_ms"] = tuple(extra.get("recent_step_times_ms", ()))
        values["graph_break_reasons"] = tuple(tuple(r) for r in values.get("graph_break_reasons", ()))
        # Built directly: a measurement that is not a StepStats field is a TypeError (an error reply
        # and a failing test), never dropped in silence.
        return StatsReply(stats=StepStats(**values), **extra)

    def _stats_values(self, window_s: float) -> dict[str, Any]:
        now = time.perf_counter()
        history = self.step_history()
        recent = [s for s in history if s[0] >= now - window_s]
        if len(recent) < 3:
            recent = history[-8:]
        out: dict[str, Any] = {"timestamp": time.time(), "steps_total": self.steps_total,
                               "window_steps": len(recent), "step_source": self.step_source,
                               "recent_step_times_ms": [round(s[1] * 1e3, 3) for s in history[-64:]]}
        if recent:
            times = sorted(s[1] for s in recent)
            waits = sorted(s[2] for s in recent)
            total = sum(times)
            out["step_time_p50_ms"] = _quantile(times, 0.5) * 1e3
            out["step_time_p90_ms"] = _quantile(times, 0.9) * 1e3
            out["steps_per_s"] = len(recent) / total if total > 0 else None
            out["data_wait_pct"] = 100.0 * sum(waits) / total if total > 0 else None
            out["data_wait_p50_ms"] = _quantile(waits, 0.5) * 1e3 if self.torch_hooks.dataloader_hooked else None
            if not self.torch_hooks.dataloader_hooked:
                out["data_wait_pct"] = None
        flags = self.settings_flags
        if flags >= 0:
            out.update(tf32_matmul=bool(flags & 1), tf32_cudnn=bool(flags & 2), cudnn_benchmark=bool(flags & 4))
        out.update(self.autocast_seen)
        out.update(self._collective_wait(window_s))
        th = self.torch_hooks
        if th.dataloader_hooked:
            out.update(_worker_starts(th.loader_starts, th.loader_stops, now - window_s, recent,
                                      out.get("data_wait_p50_ms")))
            out.update(wait_split(recent))
        if th.loader_batch_bytes is not None:
            out.update(loader_batch_mib=th.loader_batch_bytes / 2**20, loader_workers=th.loader_workers,
                       loader_prefetch_factor=th.loader_prefetch_factor, loader_dataset=th.loader_dataset,
                       loader_made_at=th.loader_made_at)
        if th.unaligned_weights is not None:
            out["unaligned_weight_shapes"] = th.unaligned_weights
        out.update(self.torch_hooks.compile_counters(window_s))
        out.update(self.torch_hooks.cuda_memory())
        out.update(self.syncs.stats())
        out["mem_allocated_trend_mib_per_100_steps"] = _trend_mib_per_100_steps(self.mem_history())
        return out

    def _collective_wait(self, window_s: float) -> dict[str, Any]:
        """Exposed all-reduce wait per step (ms; mean and median) over the window, and how it was measured."""
        waits = sorted(self.collectives.waits_since(time.perf_counter() - window_s))
        out: dict[str, Any] = {"collective_timing": self.collectives.status}
        if waits:
            out["collective_wait_ms_per_step"] = sum(waits) / len(waits)
            out["collective_wait_p50_ms"] = _quantile(waits, 0.5)
            out["collective_wait_steps"] = len(waits)
        return out

    def step_history(self) -> list[tuple[float, float, float, int]]:
        """(t_end, dt_s, wait_s, wait kind) of the recorded steps, oldest first (read from the socket thread)."""
        n = self.steps_recorded
        count = min(n, STEP_HISTORY)
        idx = [(n - count + k) % STEP_HISTORY for k in range(count)]
        return [(self.step_end_s[i], self.step_dt_s[i], self.step_wait_s[i], self.step_wait_kind[i]) for i in idx]

    def mem_history(self) -> list[tuple[int, int]]:
        n = self.mem_recorded
        count = min(n, MEM_HISTORY)
        return [(self.mem_step[i], self.mem_bytes[i]) for i in ((n - count + k) % MEM_HISTORY for k in range(count))]


def _dist_value(getter: str, env_name: str) -> int | None:
    """The process group's rank/world size once it is initialized, else the launcher's variable.

    ``mp.spawn`` ranks with an ``init_method="tcp://…"`` (pytorch/examples' ImageNet) carry no RANK or
    WORLD_SIZE in their environment; ``torch.distributed`` knows them after ``init_process_group``.
    """
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(getattr(dist, getter)())
    except Exception:
        pass
    return _env_int(env_name)


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _quantile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def wait_split(recent: list[tuple[float, float, float, int]]) -> dict[str, Any]:
    """The window's data wait per step, split by what the loop waited for (each part goes to the rule
    whose fix removes it; issue 36):

    - ``restart``: the first batch after the workers were forked again and the old ones' shutdown at
      the epoch's end, beyond a usual wait (GD106: persistent workers);
    - ``first``: the next batches of an epoch while the workers refill their queues, beyond a usual wait
      (no worker count removes it: each worker's first batch takes one batch's production time);
    - ``main``: batches loaded in the training process (``num_workers=0``; GD102: workers);
    - ``steady``: the rest — workers producing slower than the loop consumes (GD102: more workers, if
      the CPUs have room).

    A usual wait is the median wait of the steady steps. Also the steady steps' mean step and wait and
    the main-loading steps' mean step and wait, from which the facts work out the time one batch takes
    to produce (live/facts.py ``input_values``).
    """
    n = len(recent)
    if n < 3:
        return {}
    by_kind: dict[int, list[tuple[float, float]]] = {}
    for _, dt, wait, kind in recent:
        by_kind.setdefault(kind, []).append((dt, wait))
    steady = by_kind.get(hooks.WAIT_STEADY, [])
    usual = _quantile(sorted(w for _, w in steady), 0.5) if steady else 0.0
    restart = sum(max(0.0, w - usual) for _, w in by_kind.get(hooks.WAIT_RESTART, []))
    first = sum(max(0.0, w - usual) for _, w in by_kind.get(hooks.WAIT_FIRST, []))
    main = sum(w for _, w in by_kind.get(hooks.WAIT_MAIN, []))
    total = sum(w for _, _, w, _ in recent)
    out: dict[str, Any] = {
        "data_wait_restart_ms_per_step": restart * 1e3 / n,
        "data_wait_first_ms_per_step": first * 1e3 / n,
        "data_wait_main_ms_per_step": main * 1e3 / n,
        "data_wait_steady_ms_per_step": max(0.0, total - restart - first - main) * 1e3 / n,
    }
    for name, rows in (("steady", steady), ("main", by_kind.get(hooks.WAIT_MAIN, []))):
        if len(rows) >= 3:
            out[f"loader_{name}_steps"] = len(rows)
            out[f"loader_{name}_step_ms"] = 1e3 * sum(dt for dt, _ in rows) / len(rows)
            out[f"loader_{name}_wait_ms"] = 1e3 * sum(w for _, w in rows) / len(rows)
    return out


def _worker_starts(starts: Any, stops: Any, since: float, recent: list[tuple[float, float, float, int]],
                   wait_p50_ms: float | None) -> dict[str, Any]:
    """DataLoader worker starts in the window, and what starting and stopping them costs per step of it:
    the iterator's ``__init__`` (forking the workers), the first batch's wait beyond a usual one, and
    the epoch's last ``__next__`` (which shuts the workers down)."""
    window = [s for s in list(starts) if s[0] >= since]
    steps = sum(1 for s in recent if s[0] >= since)
    out: dict[str, Any] = {"loader_worker_starts": len(window)}
    if steps >= 3:
        usual_s = (wait_p50_ms or 0.0) / 1e3
        fork_s = sum(init for _, init, _ in window)
        first_s = sum(max(0.0, wait - usual_s) for _, _, wait in window)
        stop_s = sum(seconds for t, seconds in list(stops) if t >= since)
        out["loader_start_ms_per_step"] = (fork_s + first_s + stop_s) * 1e3 / steps
        out["loader_start_fork_ms_per_step"] = fork_s * 1e3 / steps
    return out


def _trend_mib_per_100_steps(points: list[tuple[int, int]]) -> float | None:
    """Least-squares slope of allocated memory over the later half of the recorded steps, or None.

    Only the later half: warm-up (cuDNN workspaces, torch.compile's first graphs, optimizer state made
    on the first step, caches filling) raises memory once at the start and then stops, which a slope
    over the whole history reads as a leak (nanoGPT compiled and a Hugging Face Trainer on the H200: a
    false GD503 in 30 s windows). A leak grows in both halves alike, so it still shows.
    """
    if len(points) < 2:
        return None
    middle = (points[0][0] + points[-1][0]) / 2
    late = [p for p in points if p[0] >= middle]
    if len(late) < 5 or late[-1][0] - late[0][0] < 20:
        return None
    n = len(late)
    mean_x = sum(p[0] for p in late) / n
    mean_y = sum(p[1] for p in late) / n
    var_x = sum((p[0] - mean_x) ** 2 for p in late)
    if var_x == 0:
        return None
    cov = sum((p[0] - mean_x) * (p[1] - mean_y) for p in late)
    return cov / var_x * 100 / (1024 * 1024)


def _is_worker_process(source: str = "import") -> bool:
    """DataLoader/multiprocessing children and torch.compile workers never get an agent.

    Injected (``source="inject"``), or started by ``gpudoctor run``'s bootstrap when a multiprocessing
    child calls ``init_process_group`` (``source="spawn-rank"``), only DataLoader and compile workers
    are refused: gpudoctor chose this process from outside as a rank, or it joined a process group (``torch.multiprocessing.spawn`` children and the ranks a plain
    parent starts are multiprocessing children too, and they are what a DDP job trains in).
    """
    argv = " ".join(getattr(sys, "orig_argv", sys.argv))
    worker = sys.modules.get("torch.utils.data._utils.worker")
    if "compile_worker" in argv or getattr(worker, "_worker_info", None) is not None:
        return True
    if source in ("inject", "spawn-rank"):
        return False
    if _in_forked_child:
        return True
    if "--multiprocessing-fork" in argv:
        return True
    if "multiprocessing.process" in sys.modules:
        import multiprocessing
        if multiprocessing.parent_process() is not None:
            return True
    return False


def _after_fork_in_child() -> None:
    global _agent, _in_forked_child
    _in_forked_child = True
    agent, _agent = _agent, None
    if agent is not None:
        agent.server.close_in_child()


def install(source: str = "import") -> str | None:
    """Start the agent in this process; returns the socket path, or None when it must not run here.

    Idempotent. Refuses (None) in DataLoader workers and other multiprocessing children.
    """
    global _agent, _fork_hook_registered
    with _lock:
        if _agent is not None:
            return str(_agent.server.path)
        if _is_worker_process(source):
            return None
        directory = ensure_private_dir()
        _sweep_stale_sockets(directory)
        agent = Agent(source, directory)
        agent.server.start()
        _agent = agent
        if not _fork_hook_registered:
            os.register_at_fork(after_in_child=_after_fork_in_child)
            atexit.register(_at_exit)
            _fork_hook_registered = True
    agent.torch_hooks.install_when_loaded()
    return str(agent.server.path)


def _sweep_stale_sockets(directory: Path) -> None:
    """Remove sockets left by agents whose process died without cleaning up (``kill -9``)."""
    try:
        for entry in os.scandir(directory):
            name = entry.name
            if name.startswith("agent-") and name.endswith(".sock"):
                pid = name[len("agent-"):-len(".sock")]
                if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                    os.unlink(entry.path)
    except OSError:
        pass


def mark_step() -> None:
    """An explicit step boundary (``gpudoctor.step()``). Never raises."""
    agent = _agent or _detaching
    if agent is None or agent.pid != os.getpid():
        return
    try:
        agent.on_step(_EXPLICIT)
    except Exception:
        pass


def current() -> Agent | None:
    """The running agent of this process, if any (for tests and the explicit API)."""
    return _agent


def detach() -> None:
    """Remove the hooks, thread and socket; the program carries on as before.

    A recording profile window must end on the training thread, so when one records, the step hook
    stays live until the next step, which writes the trace and then finishes the detach.
    """
    global _agent, _detaching
    with _lock:
        agent, _agent = _agent, None
    if agent is None or agent.pid != os.getpid():
        return
    try:
        agent.profile.abort("detach")
        agent.syncs.reset()
        if agent.profile.status is ProfileState.RECORDING and not agent.profile.timed:
            agent.detaching = True
            _detaching = agent
            agent.torch_hooks.uninstall(keep_step_hook=True)
        else:
            agent.torch_hooks.uninstall()
    finally:
        agent.server.stop()


def _finish_detach(agent: Agent) -> None:
    global _detaching
    agent.detaching = False
    agent.torch_hooks.uninstall()
    if _detaching is agent:
        _detaching = None


def _at_exit() -> None:
    for agent in (_agent, _detaching):
        if agent is None or agent.pid != os.getpid():
            continue
        try:
            agent.profile.stop_at_exit()
        except Exception:
            pass
    detach()
