"""Per-rank window statistics → straggler and desync verdicts, as facts for GD601 and GD610.

Why this exists: in synchronous data parallelism every rank's step time is the same — the fast
ranks wait inside the all-reduce for the slow one — so comparing step times finds nothing, and a
tool that compares them (or leaves the data wait out) blames the wrong rank. This module compares
the time each rank spends *outside* collective waits (step time − collective wait, or data wait +
H2D + compute when the collective wait itself is not measured): the slow rank's own work is long,
the fast ranks' is short and their waiting is not counted against them.

Score and cause come from :mod:`gpudoctor.straggler`, which the trace side uses too (median time
outside collectives of the faster half of the ranks / this rank's own; ``input`` / ``gpu`` / ``cpu`` /
``compute`` from the rank's own evidence against the fast ranks'), and GD601's thresholds from its rule
file. A rank whose score stays below ``min_straggler_score`` — or that the others wait for (see
:func:`waited_on`) — for ``min_slow_windows`` consecutive windows is a straggler.

Every rank of the table has a :class:`RankStatus`; a rank without numbers (no agent, or an agent that
has seen no step yet) is ``no data``, never ``ok``.

Desync (GD610): no rank made step progress for a while and the ranks sit at different step counts,
or one of them exited — the ranks that are behind (or dead) are named. Hang (GD613): every rank is
alive, has finished at least one step and sits at the same step, and none has moved for longer than
both ``hang_after_s`` and a multiple of the recent step time — a collective that never completes.
The thresholds are the rules' options; this module only measures the stall, each rank's seconds
since its last step and the recent step time (the last step time each rank's agent reported).

Pure logic: no I/O, no threads, no clocks read (callers pass ``now``); numbers in, facts out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from statistics import median
from typing import Any

from gpudoctor.model import FactSet, Location, Source
from gpudoctor.straggler import (
    CAUSES,
    RankEvidence,
    StragglerThresholds,
    faster_half_reference,
    likely_cause,
    score,
    thresholds,
)

__all__ = ["CAUSES", "RankStatus", "RankWindow", "StragglerTracker", "likely_cause", "rank_factsets",
           "rank_table", "score_ranks"]


class RankStatus(str, Enum):
    """A rank's state in the rank table (and the ``status`` label of ``gpudoctor_rank_status``)."""

    OK = "ok"                    # judged, not slow
    SLOW = "slow"                # slow in the latest windows, not yet for min_slow_windows
    STRAGGLER = "straggler"      # GD601's verdict
    BEHIND = "behind"            # fewer steps than the others while no rank moves (GD610)
    DEAD = "dead"                # the process exited
    NO_DATA = "no data"          # no agent, or no step seen yet: nothing to judge it by
    NOT_JUDGED = "not judged"    # its own numbers, but no score (too few steps, or its peers have none)

    def __str__(self) -> str:
        return self.value

#: How the time outside collectives was obtained (fact ``score_basis``).
BASIS_MEASURED = "measured collective wait"
BASIS_DATA_ONLY = "estimated from data wait alone, assuming equal compute on every rank"


@dataclass(frozen=True)
class RankWindow:
    """What one rank did over the last window; every time is a per-step median in ms.

    Attributes:
        rank: Global rank (or the local index when the rank is unknown).
        pid: The rank's process id.
        steps_total: Steps completed so far (for progress and desync).
        window_steps: Steps in this window.
        step_time_ms: Step time.
        data_wait_ms: Time waiting for the next batch (``next(loader)``).
        h2d_ms: Host-to-device copy time.
        collective_wait_ms: Time blocked in collectives (all-reduce waits, buffer broadcasts).
        compute_ms: Forward/backward/optimizer time outside collective waits.
        gpu_util_pct: NVML utilization of the rank's GPU.
        gpu_throttled: A hardware/power clock-event reason is active on its GPU.
        gpu_shared: Another job's process uses its GPU.
        cpu_run_delay_pct: Share of its main thread's runnable time spent waiting for a CPU rather
            than running: run delay / (run delay + CPU time), from ``/proc/<pid>/schedstat``. Unlike
            the delay itself it does not grow with the amount of work under uniform contention.
        alive: The process still exists.
        note: Why the rank has no numbers, when it has none (e.g. its agent could not be started).
    """

    rank: int
    pid: int | None = None
    steps_total: int | None = None
    window_steps: int = 0
    step_time_ms: float | None = None
    data_wait_ms: float | None = None
    h2d_ms: float | None = None
    collective_wait_ms: float | None = None
    compute_ms: float | None = None
    gpu_util_pct: float | None = None
    gpu_throttled: bool | None = None
    gpu_shared: bool | None = None
    cpu_run_delay_pct: float | None = None
    alive: bool = True
    note: str = ""

    def outside_collective_ms(self) -> float | None:
        """Time per step this rank spends on its own work, not waiting for its peers."""
        if self.step_time_ms is not None and self.collective_wait_ms is not None:
            return max(0.0, self.step_time_ms - self.collective_wait_ms)
        if self.compute_ms is not None and self.data_wait_ms is not None:
            return self.compute_ms + self.data_wait_ms + (self.h2d_ms or 0.0)
        return None


@dataclass(frozen=True)
class RankVerdict:
    """One rank judged in one window (``score`` is ``None`` when its evidence is missing)."""

    rank: int
    pid: int | None
    outside_ms: float | None
    reference_ms: float | None
    score: float | None
    slow_windows: int
    is_straggler: bool
    cause: str | None = None
    cause_detail: str = ""
    waited_on: bool = False                      # the other ranks wait for this one (see waited_on)
    peer_wait_ms: float | None = None            # their median collective wait per step
    peer_wait_pct: float | None = None           # … as a share of their step


def waited_on(w: RankWindow, judged: Sequence[RankWindow], min_peer_wait_pct: float,
              min_wait_ratio: float) -> tuple[bool, float | None, float | None]:
    """Whether the other ranks wait for ``w`` in the all-reduce: (verdict, their wait ms, their wait %).

    The second signal, beside the score: the others spend at least ``min_peer_wait_pct`` of their step
    in the all-reduce and ``min_wait_ratio`` × longer than ``w``. It catches compute stragglers the score
    understates on GPUs: while the fast ranks wait, their spinning NCCL kernels share the SMs and slow
    their own backward, so part of the wait hides inside their compute (measured on 2×H200: a +50%
    compute straggler scored 0.69–0.79 while its peer waited 22–32% of the step, 12–19× its own wait).
    """
    if w.collective_wait_ms is None:
        return False, None, None
    waits = [(x.collective_wait_ms, x.step_time_ms) for x in judged
             if x.rank != w.rank and x.collective_wait_ms is not None and x.step_time_ms]
    if not waits:
        return False, None, None
    peer_ms = median(wait for wait, _ in waits)
    peer_pct = median(100.0 * wait / step for wait, step in waits)
    return (peer_pct >= min_peer_wait_pct and peer_ms >= min_wait_ratio * max(w.collective_wait_ms, 0.1),
            peer_ms, peer_pct)


@dataclass(frozen=True)
class DesyncVerdict:
    """Progress of the ranks as a whole."""

    rank_count: int
    min_steps: int | None
    max_steps: int | None
    stalled_s: float
    lagging_ranks: tuple[int, ...]
    dead_ranks: tuple[int, ...]
    recent_step_time_ms: float | None = None  # median over ranks of the last step time each reported
    since_step_s: tuple[tuple[int, float], ...] = ()  # (rank, seconds since its step count last moved)
    where: tuple[tuple[int, str], ...] = ()  # (rank, where its main thread is), when the caller knows

    @property
    def step_spread(self) -> int:
        if self.min_steps is None or self.max_steps is None:
            return 0
        return self.max_steps - self.min_steps


@dataclass(frozen=True)
class RanksReport:
    """The tracker's output for one window."""

    timestamp: float
    verdicts: tuple[RankVerdict, ...]
    desync: DesyncVerdict
    windows: tuple[RankWindow, ...]
    missing: str = ""  # why no score could be computed, when none could
    basis: str = BASIS_MEASURED

    @property
    def stragglers(self) -> tuple[RankVerdict, ...]:
        return tuple(v for v in self.verdicts if v.is_straggler)


def estimate_outside_from_data_wait(windows: Sequence[RankWindow]) -> dict[int, float]:
    """Time outside collectives when only step time and data wait are known (no collective wait).

    In synchronous data parallelism the rank that waits longest for its data arrives last at the
    all-reduce and so waits there hardly at all; if every rank computes for the same time ``C``
    (same model, same batch size), ``C = step − input wait`` of that rank, and every rank's time
    outside collectives is its own input wait + ``C``. Only input stragglers can be seen this way;
    a rank with extra compute needs the measured collective wait.
    """
    usable = [w for w in windows if w.step_time_ms is not None and w.data_wait_ms is not None]
    if len(usable) < 2:
        return {}
    inputs = {w.rank: w.data_wait_ms + (w.h2d_ms or 0.0) for w in usable}  # type: ignore[operator]
    last = max(usable, key=lambda w: inputs[w.rank])
    compute = max(0.0, float(last.step_time_ms) - inputs[last.rank])  # type: ignore[arg-type]
    return {r: v + compute for r, v in inputs.items()}


def score_ranks(windows: Sequence[RankWindow]) -> dict[int, tuple[float, float, float]]:
    """rank → (own outside-collective ms, reference ms, score) for ranks with the evidence.

    Uses the measured collective wait when every rank has it, else
    :func:`estimate_outside_from_data_wait`; the score itself is :mod:`gpudoctor.straggler`'s.
    """
    live = [w for w in windows if w.alive and w.window_steps > 0]
    outside = {w.rank: w.outside_collective_ms() for w in live}
    known = {r: v for r, v in outside.items() if v is not None}
    if len(known) < len(live):
        known = estimate_outside_from_data_wait(live)
    if len(known) < 2:
        return {}
    reference = faster_half_reference(list(known.values()))
    return {r: (v, reference, score(reference, v)) for r, v in known.items()}


def evidence(w: RankWindow, outside_ms: float) -> RankEvidence:
    """A live window as the shared straggler module's evidence."""
    input_ms = None if w.data_wait_ms is None else w.data_wait_ms + (w.h2d_ms or 0.0)
    return RankEvidence(outside_ms, input_ms, w.gpu_throttled, w.gpu_shared, w.cpu_run_delay_pct)


@dataclass
class StragglerTracker:
    """Keeps per-rank state across windows; call :meth:`update` once per window.

    Attributes:
        limits: GD601's thresholds (from its rule file, with the user's overrides).
    """

    limits: StragglerThresholds = field(default_factory=thresholds)
    _slow: dict[int, int] = field(default_factory=dict)
    _last_steps: dict[int, int] = field(default_factory=dict)
    _last_progress: float | None = None
    _rank_moved: dict[int, tuple[int, float]] = field(default_factory=dict)  # rank → (steps, when it moved)
    _step_ms: dict[int, float] = field(default_factory=dict)  # rank → last step time it reported

    @classmethod
    def from_options(cls, gd601: Mapping[str, Any] | None = None) -> StragglerTracker:
        """Build from the user's GD601 option overrides (the rule file gives the rest)."""
        return cls(thresholds(gd601))

    def update(self, windows: Iterable[RankWindow], now: float,
               where: Mapping[int, str] | None = None) -> RanksReport:
        """Judge one window of every watched rank.

        Args:
            windows: One per rank (dead ranks with ``alive=False``).
            now: Unix time of this evaluation.
            where: Optional rank → where its main thread is now (e.g. the innermost frames of a
                ``py-spy dump``), shown as GD610/GD613 evidence.
        """
        wins = tuple(sorted(windows, key=lambda w: w.rank))
        lim = self.limits
        judged = [w for w in wins if w.alive and w.window_steps >= lim.min_window_steps]
        scores = score_ranks(judged)
        measured = all(w.outside_collective_ms() is not None for w in judged)
        missing = ""
        if len(judged) >= 2 and not scores:
            missing = "per-rank collective wait (or compute time) per step from the agent in every rank"
        verdicts = []
        for w in wins:
            if w.rank not in scores:
                if w.window_steps >= lim.min_window_steps or not w.alive:
                    self._slow[w.rank] = 0  # a judged window without evidence breaks the streak
                verdicts.append(RankVerdict(w.rank, w.pid, w.outside_collective_ms(), None, None,
                                            self._slow.get(w.rank, 0), False))
                continue
            own, ref, rank_score = scores[w.rank]
            waited, peer_ms, peer_pct = waited_on(w, judged, lim.min_peer_wait_pct, lim.min_wait_ratio)
            slow = (rank_score < lim.min_straggler_score or waited) and own - ref >= lim.min_excess_ms
            self._slow[w.rank] = self._slow.get(w.rank, 0) + 1 if slow else 0
            count = self._slow[w.rank]
            cause, detail = None, ""
            if slow:
                fast = [evidence(x, scores[x.rank][0]) for x in judged if x.rank in scores and x.rank != w.rank
                        and (scores[x.rank][2] >= lim.min_straggler_score or waited)]
                cause, detail = likely_cause(evidence(w, own), fast, ref, lim)
            verdicts.append(RankVerdict(w.rank, w.pid, own, ref, rank_score, count,
                                        slow and count >= lim.min_slow_windows, cause, detail,
                                        waited, peer_ms, peer_pct))
        return RanksReport(now, tuple(verdicts), self._progress(wins, now, where or {}), wins, missing,
                           BASIS_MEASURED if measured else BASIS_DATA_ONLY)

    def _progress(self, wins: Sequence[RankWindow], now: float, where: Mapping[int, str]) -> DesyncVerdict:
        steps = {w.rank: w.steps_total for w in wins if w.steps_total is not None}
        moved = any(self._last_steps.get(r) != s for r, s in steps.items())
        if moved or self._last_progress is None:
            self._last_progress = now
        self._last_steps.update({r: s for r, s in steps.items() if s is not None})
        for r, s in steps.items():
            if r not in self._rank_moved or self._rank_moved[r][0] != s:
                self._rank_moved[r] = (s, now)
        for w in wins:  # the agent reports the last steps' time even when none ended in this window
            if w.alive and w.window_steps > 0 and w.step_time_ms:
                self._step_ms[w.rank] = w.step_time_ms
        recent = [self._step_ms[r] for r in steps if r in self._step_ms]
        known = [s for s in steps.values() if s is not None]
        low = min(known) if known else None
        high = max(known) if known else None
        lagging = tuple(r for r, s in sorted(steps.items()) if low is not None and high != low and s == low)
        dead = tuple(w.rank for w in wins if not w.alive)
        since = tuple((r, now - self._rank_moved[r][1]) for r in sorted(steps))
        return DesyncVerdict(len(wins), low, high, now - self._last_progress, lagging, dead,
                             median(recent) if recent else None, since,
                             tuple((r, where[r]) for r in sorted(where)))


def rank_factsets(report: RanksReport) -> list[FactSet]:
    """Live facts: one ``rank`` fact set per rank (GD601) and one ``ranks`` fact set (GD610)."""
    out = []
    by_rank = {w.rank: w for w in report.windows}
    for v in report.verdicts:
        w = by_rank[v.rank]
        values: dict[str, Any] = {
            "rank_count": len(report.windows),
            "straggler_score": v.score,
            "score_basis": report.basis if v.score is not None else None,
            "slow_windows": v.slow_windows if v.score is not None else None,  # unjudged stays undecided
            "straggler_cause": v.cause,
            "cause_detail": v.cause_detail or None,
            "outside_collective_ms": v.outside_ms,
            "reference_outside_ms": v.reference_ms,
            "rank_step_time_ms": w.step_time_ms,
            "rank_data_wait_ms": w.data_wait_ms,
            "rank_collective_wait_ms": w.collective_wait_ms,
            "rank_compute_ms": w.compute_ms,
            "rank_steps_total": w.steps_total,
            "waited_on": v.waited_on if v.score is not None else None,
            "peer_collective_wait_ms": v.peer_wait_ms,
            "peer_collective_wait_pct": v.peer_wait_pct,
        }
        out.append(FactSet("rank", Source.LIVE, {k: x for k, x in values.items() if x is not None},
                           Location(rank=v.rank, pid=v.pid), report.timestamp))
    d = report.desync
    ranks_values: dict[str, Any] = {
        "rank_count": d.rank_count,
        "step_spread": d.step_spread,
        "stalled_s": d.stalled_s,
        "min_steps_total": d.min_steps,
        "max_steps_total": d.max_steps,
        "lagging_ranks": ", ".join(map(str, d.lagging_ranks)) or None,
        "dead_ranks": ", ".join(map(str, d.dead_ranks)) or "none",
        "dead_rank_count": len(d.dead_ranks),
        "ranks_with_steps": len(d.since_step_s),
        "recent_step_time_s": round(d.recent_step_time_ms / 1000.0, 3) if d.recent_step_time_ms else None,
        "steps_by_rank": "; ".join(f"rank {r}: step {_steps_of(report, r)}, last step {s:.0f} s ago"
                                   for r, s in d.since_step_s) or None,
        "where_by_rank": "; ".join(f"rank {r}: {w}" for r, w in d.where) or None,
    }
    lag = d.lagging_ranks[0] if len(d.lagging_ranks) == 1 else None
    label = f"step {d.min_steps} vs {d.max_steps}" if d.step_spread else None
    out.append(FactSet("ranks", Source.LIVE, {k: x for k, x in ranks_values.items() if x is not None},
                       Location(rank=lag, label=label), report.timestamp))
    return out


def _steps_of(report: RanksReport, rank: int) -> int | None:
    return next((w.steps_total for w in report.windows if w.rank == rank), None)


def rank_table(report: RanksReport) -> tuple[dict[str, Any], ...]:
    """Rows for ``Snapshot.rank_table`` (the dashboard's rank table and the Prometheus exporter)."""
    since = dict(report.desync.since_step_s)
    rows = []
    for v, w in zip(report.verdicts, report.windows):
        step = w.step_time_ms
        rows.append({
            "rank": w.rank, "pid": w.pid, "steps_total": w.steps_total,
            "since_last_step_s": since.get(w.rank), "step_time_ms": step,
            "data_wait_pct": _pct(w.data_wait_ms, step), "collective_wait_pct": _pct(w.collective_wait_ms, step),
            "h2d_ms": w.h2d_ms, "compute_ms": w.compute_ms, "outside_collective_ms": v.outside_ms,
            "straggler_score": v.score, "gpu_util_pct": w.gpu_util_pct, "status": rank_status(report, v, w),
            "cause": v.cause, "note": w.note or None,
        })
    return tuple(rows)


def rank_status(report: RanksReport, v: RankVerdict, w: RankWindow) -> RankStatus:
    """The rank's state: dead and behind first, then the verdict; ``no data`` when nothing was measured."""
    if not w.alive:
        return RankStatus.DEAD
    if w.rank in report.desync.lagging_ranks and report.desync.stalled_s > 0:
        return RankStatus.BEHIND
    if v.is_straggler:
        return RankStatus.STRAGGLER
    if v.slow_windows:
        return RankStatus.SLOW
    if not w.steps_total and w.step_time_ms is None:
        return RankStatus.NO_DATA
    return RankStatus.OK if v.score is not None else RankStatus.NOT_JUDGED


def _pct(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole
