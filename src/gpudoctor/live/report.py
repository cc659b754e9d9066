"""Turns a live :class:`~gpudoctor.live.samples.Snapshot` into a :class:`~gpudoctor.report.model.Report`.

Used by ``gpudoctor attach --once/--duration`` (and available to the dashboard's export): the
findings, the rules that could not be judged, and small tables of the numbers behind them (GPUs,
process and workers, steps, where the main thread spends its time). Only formats numbers that the
session measured; computes nothing new. No rich/textual imports.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from gpudoctor.agent.protocol import AgentStatus
from gpudoctor.live.samples import Snapshot
from gpudoctor.report.model import MetricTable, Report


def _r(value: float | None, digits: int = 1) -> float | None:
    return round(value, digits) if value is not None else None


def build_report(snap: Snapshot, elapsed_s: float | None = None, windows: int | None = None,
                 first_finding_s: dict[str, float] | None = None) -> Report:
    """One report from the session's latest snapshot.

    ``first_finding_s`` maps a rule code to the seconds after attaching when it first showed.
    """
    tables: list[MetricTable] = []
    if snap.gpus:
        rows = [{
            "gpu": g.index, "name": g.name, "util_pct": _r(g.util_pct, 0),
            "mem_used_mib": _r(g.mem_used_mib, 0), "mem_total_mib": _r(g.mem_total_mib, 0),
            "power_w": _r(g.power_w, 0), "sm_clock_mhz": _r(g.sm_clock_mhz, 0),
            "tensor_util_pct": _r(g.gpm_tensor_util_pct), "sm_util_pct": _r(g.gpm_sm_util_pct),
            "throttle": ",".join(g.throttle_reasons) or "-",
            "target_pids": ",".join(map(str, g.target_pids)) or "-",
        } for g in snap.gpus]
        tables.append(MetricTable("GPUs used by the process", list(rows[0]), rows, key="gpus"))
    proc = snap.process
    if proc is not None:
        rows = [{"pid": proc.pid, "role": "main", "cpu_pct": _r(proc.cpu_pct, 0), "rss_mib": _r(proc.rss_mib, 0),
                 "threads": proc.num_threads}]
        rows += [{"pid": w.pid, "role": w.role, "cpu_pct": _r(w.cpu_pct, 0), "rss_mib": _r(w.rss_mib, 0),
                  "threads": None} for w in proc.workers]
        tables.append(MetricTable("Process and workers", ["pid", "role", "cpu_pct", "rss_mib", "threads"], rows,
                                  key="processes"))
    if snap.stacks is not None and snap.stacks.samples:
        rows = [{"activity": k, "share_pct": v} for k, v in sorted(snap.stacks.share_pct.items(),
                                                                     key=lambda kv: -kv[1]) if v > 0]
        tables.append(MetricTable(f"Main thread (py-spy, {snap.stacks.samples} samples over "
                                  f"{snap.stacks.window_s:.0f} s)", ["activity", "share_pct"], rows, key="stacks"))
    if snap.steps is not None:
        s = snap.steps
        row = {"steps_total": s.steps_total, "steps_per_s": _r(s.steps_per_s, 2),
               "step_time_p50_ms": _r(s.step_time_p50_ms), "step_time_p90_ms": _r(s.step_time_p90_ms),
               "data_wait_pct": _r(s.data_wait_pct), "host_syncs_per_step": _r(s.host_syncs_per_step),
               "graph_breaks": s.graph_breaks, "recompiles": s.recompiles, "step_source": str(s.step_source)}
        tables.append(MetricTable("Training steps (agent)", list(row), [row], key="steps"))
    if snap.rank_table:  # several local ranks: the per-rank numbers behind GD601/GD610/GD613
        cols = ["rank", "pid", "steps_total", "since_last_step_s", "step_time_ms", "data_wait_pct",
                "collective_wait_pct", "compute_ms", "gpu_util_pct", "straggler_score", "status", "cause", "note"]
        rows = [{c: _r(r.get(c), 2 if c == "straggler_score" else 1) if isinstance(r.get(c), float) else r.get(c)
                 for c in cols} for r in snap.rank_table]
        tables.append(MetricTable("Ranks", cols, rows, key="ranks"))
    if snap.rank_profile:  # one profile window on every rank, analysed as a set (HTA's figures)
        cols = ["rank", "step_count", "step_time_p50_ms", "idle_pct", "comm_pct", "overlap_pct",
                "comm_kernel_share_pct", "collective_wait_ms_p50", "outside_collective_ms_p50"]
        rows = [{c: _r(r.get(c)) if isinstance(r.get(c), float) else r.get(c) for c in cols} for r in snap.rank_profile]
        tables.append(MetricTable("Profile window, every rank", cols, rows, key="rank_profile"))
    notes = list(snap.notes)
    notes.append(agent_note(str(snap.agent.status), snap.agent.detail))
    # a finished target may be this process's waited-for child (gpudoctor run): its CPU would count as ours
    own = watcher_cost_note(snap.steps.agent_cpu_pct if snap.steps is not None else None,
                            elapsed_s if proc is not None and proc.alive else None)
    if own:
        notes.append(own)
    if snap.shm is not None and snap.shm.total_mib is not None:
        notes.append(f"/dev/shm: {snap.shm.total_mib:.0f} MiB, {snap.shm.free_mib or 0:.0f} MiB free, "
                     f"{snap.shm.target_segments or 0} torch segments held ({snap.shm.target_segments_mib or 0:.1f} MiB)")
    data: dict[str, Any] = {
        "target_pid": snap.target_pid,
        "alive": proc.alive if proc is not None else None,
        "agent": dataclasses.asdict(snap.agent),
        "windows": windows,
        "first_finding_s": {k: round(v, 2) for k, v in (first_finding_s or {}).items()},
        "process": _process_dict(snap),
        "shm": dataclasses.asdict(snap.shm) if snap.shm else None,
        "stacks": dataclasses.asdict(snap.stacks) if snap.stacks else None,
        "steps": _steps_data(snap),
        "gpus": [dataclasses.asdict(g) for g in snap.gpus],
        "rank_profile": ({"status": snap.rank_profile_status, "ranks": list(snap.rank_profile)}
                         if snap.rank_profile_status else None),
    }
    return Report(command="attach", inputs=[f"pid {snap.target_pid}"], findings=list(snap.findings),
                  not_evaluated=list(snap.not_evaluated), tables=tables, notes=notes, data=data,
                  elapsed_s=elapsed_s, bottlenecks=[snap.bottleneck] if snap.bottleneck is not None else [],
                  headline=_stopped_headline(snap) or _no_step_headline(snap))


def _stopped_headline(snap: Snapshot) -> str | None:
    """A process stopped by a signal (state T) does no work: its threads look busy to py-spy and it
    takes no steps, so whatever the rules say is no diagnosis — say that instead of a clean bill."""
    if snap.process is None or not snap.process.alive or not snap.process.stopped:
        return None
    pid = snap.target_pid
    return (f"PID {pid} is stopped (state T: SIGSTOP or Ctrl-Z) and does no work, so nothing here is a diagnosis; "
            f"`kill -CONT {pid}` resumes it, then attach again.")


def watcher_cost_note(agent_cpu_pct: float | None, elapsed_s: float | None) -> str | None:
    """gpudoctor's own CPU: the agent's thread in the target (an upper bound on what it takes from a
    Python-bound loop through the GIL) and this process with its py-spy children, as a share of the
    machine's CPUs over the watch. The target's slowdown itself is measured by bench/watcher_overhead.py
    (attached vs detached windows on one process); it is not visible from inside one watch."""
    parts = []
    if agent_cpu_pct is not None:
        parts.append(f"the agent's thread {agent_cpu_pct:.2f}% of one core in the target")
    if elapsed_s and elapsed_s > 1.0:
        import resource

        used = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for f in ("ru_utime", "ru_stime"))
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        parts.append(f"this watcher with py-spy {100.0 * used / elapsed_s / cpus:.1f}% of the {cpus} CPUs "
                     f"({used / elapsed_s:.2f} cores)")
    return "gpudoctor's own cost: " + "; ".join(parts) if parts else None


def agent_note(status: str, detail: str) -> str:
    """``agent: connected``, or ``agent: lost — <why>``; a detail that already says the status word
    stands alone (it read "agent: lost — lost the agent")."""
    if not detail:
        return f"agent: {status}"
    if status.lower() in detail.lower():
        return f"agent: {detail}"
    return f"agent: {status} — {detail}"


def _no_step_headline(snap: Snapshot) -> str | None:
    """With no finding and an agent that counted no step, the report must not read as a clean bill:
    the step-based rules had nothing to judge (a launcher watched instead of its trainer, a loop not
    yet started or paused)."""
    if snap.findings or snap.rank_table or snap.agent.status not in (AgentStatus.CONNECTED, AgentStatus.DETACHED):
        return None
    if snap.steps is not None and snap.steps.steps_total:
        return None
    pid = snap.target_pid
    text = (f"Nothing judged from training steps: the agent in PID {pid} counted none (the loop has not "
            "started, is paused, or this is not the process that trains).")
    programs = [w for w in snap.process.workers if w.role == "program"] if snap.process is not None else []
    if programs:
        text += (f" Its child PID {programs[0].pid} runs a program of its own: if that one trains, "
                 f"`gpudoctor attach {programs[0].pid}`.")
    return text


def _process_dict(snap: Snapshot) -> dict[str, Any] | None:
    if snap.process is None:
        return None
    out = dataclasses.asdict(snap.process)
    out["workers"] = [dataclasses.asdict(w) for w in snap.process.workers]
    return out


def _steps_data(snap: Snapshot) -> dict[str, Any] | None:
    """The agent's step summary plus ``step_ms``: the raw step times seen during the session, which
    ``gpudoctor compare`` needs for a noise estimate (docs/recording-format.md)."""
    if snap.steps is None and not snap.step_samples_ms:
        return None
    out: dict[str, Any] = dataclasses.asdict(snap.steps) if snap.steps else {}
    out.update(source="agent", unit="ms", step_ms=list(snap.step_samples_ms))
    return out
