"""Watch every rank of a job: poll each rank's agent, judge stragglers and desync, per window.

Why this exists: the live session watches one process; a distributed job needs the same numbers
from every local rank, side by side. :class:`RankWatch` polls the agent already running in each
rank (``gpudoctor run`` puts one in every rank) plus ``/proc/<pid>/schedstat``;
:class:`RankMonitor` adds the straggler tracker and hands the session fact sets (scopes ``rank``
and ``ranks``, for GD601 and GD610) and the rows of ``Snapshot.rank_table``.

What it must not do: signal ranks or raise into the session — a rank that cannot be read is reported
without step facts, a rank that exited as ``alive=False``. It injects an agent into a rank only when
asked (:meth:`RankWatch.start_injection`, which ``attach`` uses unless ``--no-agent``/``--once``), and
detaches those agents again on close.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import psutil

from gpudoctor.exitcodes import UserError
from gpudoctor.live.ranks import RankGroup, discover_ranks
from gpudoctor.live.rankwhere import where_ranks
from gpudoctor.live.samples import GpuSample
from gpudoctor.live.stragglers import RanksReport, RankWindow, StragglerTracker, rank_factsets, rank_table
from gpudoctor.model import FactSet

log = logging.getLogger("gpudoctor.live.rankwatch")

#: Seconds without a step on any rank before each rank's stack is dumped for the desync/hang evidence.
WHERE_AFTER_STALL_S = 30.0


def read_schedstat_ms(pid: int) -> tuple[float, float] | None:
    """(CPU time, run delay) of ``pid``'s main thread so far, in ms, from ``/proc/<pid>/schedstat``.

    Run delay is the time the thread was runnable but waiting for a CPU. ``None`` where the kernel
    does not keep these counters. Check by hand: ``cat /proc/<pid>/schedstat`` (ns, ns, slices).
    """
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            fields = f.read().split()
        return int(fields[0]) / 1e6, int(fields[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return None


#: Reply fields (ms per step) the straggler score needs from each rank's agent, first found wins.


class RankWatch:
    """Polls the agent of every rank of a :class:`RankGroup` and turns each poll into rank windows.

    The session owns one per attached job (when the group has more than one rank) and calls
    :meth:`poll` once per evaluation window; the result feeds
    :meth:`gpudoctor.live.stragglers.StragglerTracker.update`. Uses the agents that already run in the
    ranks, and those :meth:`start_injection` started; never raises.
    """

    def __init__(self, group: RankGroup, window_s: float = 5.0, client_module: Any = None) -> None:
        self.group = group
        self.window_s = window_s
        self._clients: dict[int, Any] = {}
        self._delay: dict[int, tuple[float, float]] = {}  # pid → (CPU ms, run delay ms) at last poll
        self._mod = client_module
        self._injected: set[int] = set()                 # agents we started: detached on close
        self._closing = threading.Event()
        self.inject_errors: dict[int, str] = {}          # rank → why its agent could not be started
        self._injecting_done = True                      # False while start_injection's thread runs

    def agents_settled(self) -> bool:
        """True once every live rank has an agent or a reason why it has none."""
        return all(pid in self._clients or rank in self.inject_errors or not psutil.pid_exists(pid)
                   for rank, pid in self.group.numbered())

    def start_injection(self) -> None:
        """Start an agent in every rank that has none, one rank after the other, in the background
        (what ``attach`` does for its target, here for each rank; ``gpudoctor run`` needs none)."""
        self._injecting_done = False
        threading.Thread(target=self._inject_all, name="gpudoctor-rank-inject", daemon=True).start()

    def _inject_all(self) -> None:
        try:
            self._inject_each()
        finally:
            self._injecting_done = True

    def _inject_each(self) -> None:
        self._load_client_module()
        for rank, pid in self.group.numbered():
            if self._closing.is_set():
                return
            if not psutil.pid_exists(pid) or self._client(pid) is not None:
                continue
            try:
                result = self._mod.inject(pid) if self._mod is not None else None
            except Exception as exc:
                self.inject_errors[rank] = str(exc)
                continue
            if result is None or not result.ok:
                self.inject_errors[rank] = getattr(result, "reason", None) or "injection failed."
                continue
            if self._closing.is_set():                   # closed while injecting: take it out again
                _quiet_detach(result.client)
                return
            self._clients[pid] = result.client
            if result.method != "already-running":
                self._injected.add(pid)

    def client_for(self, pid: int) -> Any:
        """The connection to ``pid``'s agent (cached), or None when it has none."""
        return self._client(pid)

    def _client(self, pid: int) -> Any:
        if pid in self._clients:
            return self._clients[pid]
        self._load_client_module()
        if self._mod is None:
            return None
        try:
            client = self._mod.find_agent(pid, timeout_s=0.5)
        except Exception:
            client = None
        if client is not None:
            self._clients[pid] = client
        return client

    def _load_client_module(self) -> None:
        if self._mod is None:
            try:
                from gpudoctor.agent import inject as mod  # inject() and find_agent (agent.client's)
            except ImportError:
                return
            self._mod = mod

    def _run_delay_pct(self, pid: int) -> float | None:
        """Share of runnable time spent waiting for a CPU since the last poll."""
        now = read_schedstat_ms(pid)
        if now is None:
            return None
        last = self._delay.get(pid)
        self._delay[pid] = now
        if last is None:
            return None
        cpu, delay = now[0] - last[0], now[1] - last[1]
        return 100.0 * delay / (cpu + delay) if cpu + delay > 0 else None

    def poll(self, now: float, gpus: Sequence[GpuSample] = ()) -> list[RankWindow]:
        """One :class:`RankWindow` per rank (``alive=False`` for ranks that exited)."""
        out = []
        for rank, pid in self.group.numbered():
            if not psutil.pid_exists(pid):
                self._clients.pop(pid, None)
                out.append(RankWindow(rank, pid, alive=False))
                continue
            delay_pct = self._run_delay_pct(pid)
            gpu = next((g for g in gpus if pid in g.target_pids), None)
            gpu_fields: dict[str, Any] = {}
            if gpu is not None:
                gpu_fields = {"gpu_util_pct": gpu.util_pct,
                              "gpu_throttled": any(r in _GPU_SLOWING for r in gpu.throttle_reasons),
                              "gpu_shared": bool(set(gpu.other_pids) - set(self.group.pids))}
            client = self._client(pid)
            stats, reply = None, None
            if client is not None:
                try:
                    stats = client.stats(self.window_s)
                    reply = client.last_stats
                except Exception:
                    self._clients.pop(pid, None)
            if stats is None or reply is None:
                out.append(RankWindow(rank, pid, cpu_run_delay_pct=delay_pct, note=self.why_no_data(rank, client),
                                      **gpu_fields))
                continue
            # Means, not medians: a rank whose loader delivers in bursts alternates long and short
            # steps, and a median lands on either mode; the mean is the rank's real pace.
            step = 1000.0 / stats.steps_per_s if stats.steps_per_s else stats.step_time_p50_ms
            data = stats.data_wait_pct * step / 100.0 if stats.data_wait_pct is not None and step else None
            if data is None:
                data = stats.data_wait_p50_ms
            out.append(RankWindow(
                rank, pid, steps_total=stats.steps_total, window_steps=stats.window_steps,
                step_time_ms=step, data_wait_ms=data, h2d_ms=stats.h2d_ms_per_step,
                collective_wait_ms=_first(reply.collective_wait_ms_per_step, reply.collective_wait_p50_ms),
                cpu_run_delay_pct=delay_pct, **gpu_fields))
        return out

    def why_no_data(self, rank: int, client: Any) -> str:
        """One phrase for the rank table: why this rank's agent gave no numbers."""
        if rank in self.inject_errors:
            return f"no agent: {self.inject_errors[rank]}"
        if client is not None:
            return "its agent did not answer"
        return "no agent yet" if not self._injecting_done else "no agent (start the job with `gpudoctor run`)"

    def close(self) -> None:
        """Close the connections; agents we injected are detached, those that were there stay."""
        self._closing.set()
        for pid, client in list(self._clients.items()):
            if pid in self._injected:
                _quiet_detach(client)
            try:
                client.close()
            except Exception:
                pass
        self._clients.clear()
        self._injected.clear()


def _quiet_detach(client: Any) -> None:
    try:
        client.detach()
    except Exception:
        pass


#: Clock-event reasons that mean a GPU is worse off than its peers. Not the software power cap: every
#: H100/H200 at full load sits at it, and a rank given extra work reaches it first (measured on
#: 2×H200: the compute straggler's GPU was power-capped, its peer's not — extra work, not a bad GPU).
_GPU_SLOWING = ("hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal")


def _first(*values: float | None) -> float | None:
    """The first of ``values`` that is a number (the mean collective wait, else its median)."""
    for value in values:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


class RankMonitor:
    """What the session holds for a job of several local ranks: one call per evaluation window.

    Session use (see the module docstring)::

        self._ranks = RankMonitor.for_target(pid, window_s, options)   # None: not several ranks
        ...
        factsets += self._ranks.evaluate(now, latest_gpus)               # in evaluate_now
        Snapshot(..., ranks=self._ranks.pids, rank_table=self._ranks.table)
        self._ranks.close()                                              # in close()
    """

    def __init__(self, group: RankGroup, window_s: float = 5.0,
                 options: Mapping[str, Mapping[str, Any]] | None = None, client_module: Any = None) -> None:
        gd601 = {**(options or {}).get("GD601", {}), **(options or {}).get("straggler-rank", {})}
        self.group = group
        self.watch = RankWatch(group, window_s, client_module)
        self.tracker = StragglerTracker.from_options(gd601)
        self._lock = threading.Lock()
        self.last: RanksReport | None = None
        self._where: tuple[tuple[tuple[int, int | None], ...], dict[int, str]] | None = None  # (steps, where)

    @classmethod
    def for_target(cls, pid: int, window_s: float = 5.0,
                   options: Mapping[str, Mapping[str, Any]] | None = None) -> RankMonitor | None:
        """A monitor when ``pid`` is (or launches) a job of two or more local ranks, else ``None``."""
        try:
            group = discover_ranks(pid)
        except UserError:
            return None
        except Exception:
            log.debug("rank discovery failed", exc_info=True)
            return None
        return cls(group, window_s, options) if len(group.ranks) >= 2 else None

    @property
    def pids(self) -> tuple[int, ...]:
        return self.group.pids

    @property
    def table(self) -> tuple[dict[str, Any], ...]:
        with self._lock:
            return rank_table(self.last) if self.last is not None else ()

    def evaluate(self, now: float, gpus: Sequence[GpuSample] = ()) -> list[FactSet]:
        """Poll every rank and return this window's ``rank``/``ranks`` fact sets (never raises)."""
        try:
            windows = self.watch.poll(now, gpus)
            where = None
            if self.last is not None and self.last.desync.stalled_s >= WHERE_AFTER_STALL_S:
                # no step for a while: one py-spy dump per rank says where each one is stuck (GD610/GD613),
                # taken once per stall — the ranks do not move until it ends
                stall = tuple((w.rank, w.steps_total) for w in windows)
                if self._where is None or self._where[0] != stall:
                    self._where = (stall, where_ranks({w.rank: w.pid for w in windows if w.alive and w.pid}))
                where = self._where[1]
            report = self.tracker.update(windows, now, where=where)
        except Exception:
            log.debug("rank polling failed", exc_info=True)
            return []
        with self._lock:
            self.last = report
        return rank_factsets(report)

    def agents_settled(self) -> bool:
        """True once every live rank has an agent or a reason why it has none."""
        return self.watch.agents_settled()

    def close(self) -> None:
        self.watch.close()
