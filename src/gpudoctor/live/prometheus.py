"""Prometheus exporter for a live session: per-rank step metrics, GPU readings, active findings.

Why this exists: ``gpudoctor attach <pid> --headless --prometheus PORT`` lets a cluster's own
monitoring (Prometheus + Alertmanager/Grafana) scrape what gpudoctor sees — including *which rank*
is the straggler and *why* — instead of a person watching a terminal. Metric names and labels are
documented in ``docs/prometheus.md``; keep the two in step.

Every scrape renders the latest :class:`~gpudoctor.live.samples.Snapshot` atomically (a custom
collector, not gauges mutated between scrapes), so a scrape never sees half an update and a finding
that cleared disappears from the next scrape. Binds to 127.0.0.1 unless told otherwise.

What it must not do: compute metrics or findings (it only renders a snapshot), import rich/textual,
or let a failure here reach the session (an error while rendering yields the metrics so far).
``prometheus_client`` is an optional dependency (extra ``prometheus``); without it
:func:`start_exporter` raises a :class:`~gpudoctor.exitcodes.UserError` that says how to install it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.live.samples import AgentStatus, Snapshot

log = logging.getLogger("gpudoctor.live.prometheus")

PREFIX = "gpudoctor"


class _SnapshotSource(Protocol):
    def snapshot(self) -> Snapshot: ...


def _ratio(pct: Any) -> float | None:
    return None if pct is None else float(pct) / 100.0


def _seconds(ms: Any) -> float | None:
    return None if ms is None else float(ms) / 1000.0


def rank_rows(snap: Snapshot) -> list[dict[str, Any]]:
    """Per-rank rows: ``Snapshot.rank_table`` when several ranks are watched, else the one process."""
    if snap.rank_table:
        return [dict(row) for row in snap.rank_table]
    if snap.steps is None:
        return []
    st = snap.steps
    rank = snap.process.rank if snap.process is not None and snap.process.rank is not None else 0
    return [{
        "rank": rank, "pid": snap.target_pid, "steps_total": st.steps_total, "step_time_ms": st.step_time_p50_ms,
        "steps_per_s": st.steps_per_s, "data_wait_pct": st.data_wait_pct, "h2d_ms": st.h2d_ms_per_step,
    }]


def metric_families(snap: Snapshot | None) -> Iterator[Any]:
    """The Prometheus metric families for one snapshot (``prometheus_client`` objects)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    def gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels)

    up = gauge("up", "1 while the watched training process is alive.", ["pid"])
    if snap is None:
        yield up
        return
    up.add_metric([str(snap.target_pid)], 1.0 if snap.process is None or snap.process.alive else 0.0)
    yield up
    agent = gauge("agent_connected", "1 when the in-process agent answers.", ["pid", "status"])
    agent.add_metric([str(snap.target_pid), snap.agent.status], 1.0 if snap.agent.status is AgentStatus.CONNECTED else 0.0)
    yield agent
    ts = gauge("snapshot_timestamp_seconds", "Unix time of the snapshot these metrics come from.", [])
    ts.add_metric([], snap.timestamp)
    yield ts
    yield from _rank_families(snap, gauge, CounterMetricFamily)
    yield from _gpu_families(snap, gauge)
    yield from _finding_families(snap, gauge)


def _rank_families(snap: Snapshot, gauge: Any, counter: Any) -> Iterator[Any]:
    per_rank: list[tuple[str, str, str, Callable[[Any], float | None]]] = [
        ("step_time_seconds", "Median step time over the last window.", "step_time_ms", _seconds),
        ("steps_per_second", "Training steps per second over the last window.", "steps_per_s", float),
        ("data_wait_ratio", "Share of the step spent waiting for the next batch.", "data_wait_pct", _ratio),
        ("collective_wait_ratio", "Share of the step spent waiting in collectives.", "collective_wait_pct", _ratio),
        ("h2d_seconds_per_step", "Host-to-device copy time per step.", "h2d_ms", _seconds),
        ("outside_collective_seconds", "Step time outside collective waits (the rank's own work).",
         "outside_collective_ms", _seconds),
        ("straggler_score", "Median outside-collective time of the fastest ranks / this rank's (<0.75: straggler).",
         "straggler_score", float),
        ("rank_gpu_utilization_ratio", "NVML utilization of the rank's GPU.", "gpu_util_pct", _ratio),
    ]
    rows = rank_rows(snap)
    for name, doc, key, conv in per_rank:
        fam = gauge(name, doc, ["rank", "pid"])
        for row in rows:
            if row.get(key) is not None:
                fam.add_metric([str(row["rank"]), str(row.get("pid") or "")], conv(row[key]))
        yield fam
    steps = counter(f"{PREFIX}_steps", "Training steps completed by the rank.", labels=["rank", "pid"])
    for row in rows:
        if row.get("steps_total") is not None:
            steps.add_metric([str(row["rank"]), str(row.get("pid") or "")], float(row["steps_total"]))
    yield steps
    from gpudoctor.live.stragglers import RankStatus

    status = gauge("rank_status", f"1 for the rank's current status ({', '.join(s.value for s in RankStatus)}).",
                   ["rank", "status", "cause"])
    for row in rows:
        if row.get("status"):
            status.add_metric([str(row["rank"]), str(row["status"]), str(row.get("cause") or "")], 1.0)
    yield status


def _gpu_families(snap: Snapshot, gauge: Any) -> Iterator[Any]:
    per_gpu: list[tuple[str, str, str, Callable[[Any], float | None]]] = [
        ("gpu_utilization_ratio", "NVML GPU utilization (share of time a kernel ran).", "util_pct", _ratio),
        ("gpu_memory_used_bytes", "GPU memory in use.", "mem_used_mib", lambda v: float(v) * 2**20),
        ("gpu_memory_total_bytes", "GPU memory in total.", "mem_total_mib", lambda v: float(v) * 2**20),
        ("gpu_power_watts", "GPU power draw.", "power_w", float),
        ("gpu_temperature_celsius", "GPU temperature.", "temperature_c", float),
        ("gpu_sm_clock_hertz", "GPU SM clock.", "sm_clock_mhz", lambda v: float(v) * 1e6),
        ("gpu_tensor_utilization_ratio", "GPM tensor-core utilization (Hopper and later).", "gpm_tensor_util_pct",
         _ratio),
    ]
    for name, doc, attr, conv in per_gpu:
        fam = gauge(name, doc, ["gpu", "name"])
        for g in snap.gpus:
            value = getattr(g, attr, None)
            if value is not None:
                fam.add_metric([str(g.index), g.name], conv(value))
        yield fam
    throttle = gauge("gpu_throttle_reason", "1 for each active clock-event (throttle) reason.", ["gpu", "reason"])
    for g in snap.gpus:
        for reason in g.throttle_reasons:
            throttle.add_metric([str(g.index), reason], 1.0)
    yield throttle


def _finding_families(snap: Snapshot, gauge: Any) -> Iterator[Any]:
    active = gauge("finding_active", "1 for each active finding (code, rule name, severity, rank, GPU).",
                   ["code", "name", "severity", "rank", "gpu"])
    seen: set[tuple[str, ...]] = set()
    counts: dict[str, int] = {"info": 0, "warning": 0, "critical": 0}
    for f in snap.findings:
        labels = (f.code, f.name, f.severity.value,
                  "" if f.location.rank is None else str(f.location.rank),
                  "" if f.location.gpu is None else str(f.location.gpu))
        counts[f.severity.value] = counts.get(f.severity.value, 0) + 1
        if labels not in seen:
            seen.add(labels)
            active.add_metric(list(labels), 1.0)
    yield active
    by_sev = gauge("findings", "Active findings by severity.", ["severity"])
    for sev, n in counts.items():
        by_sev.add_metric([sev], float(n))
    yield by_sev


class _Collector:
    def __init__(self, handle: ExporterHandle) -> None:
        self._handle = handle

    def collect(self) -> Iterator[Any]:
        try:
            yield from metric_families(self._handle.current())
        except Exception:  # a rendering bug must not break the scrape endpoint or the session
            log.debug("prometheus collect failed", exc_info=True)


class ExporterHandle:
    """A running exporter. :meth:`update` after each session window; :meth:`close` at the end."""

    def __init__(self, session: _SnapshotSource | None, addr: str, port: int) -> None:
        self.session = session
        self.addr = addr
        self.port = port
        self._latest: Snapshot | None = None
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def update(self, snapshot: Snapshot) -> None:
        """Publish ``snapshot``: the next scrape renders it."""
        with self._lock:
            self._latest = snapshot

    def current(self) -> Snapshot | None:
        """The latest pushed snapshot; without one, the session's current snapshot."""
        with self._lock:
            latest = self._latest
        if latest is not None or self.session is None:
            return latest
        try:
            return self.session.snapshot()
        except Exception:
            log.debug("session.snapshot() failed during a scrape", exc_info=True)
            return None

    def close(self) -> None:
        """Stop serving (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def start_exporter(session: _SnapshotSource | None, port: int, addr: str = "127.0.0.1") -> ExporterHandle:
    """Serve ``/metrics`` on ``addr:port`` in a daemon thread.

    Args:
        session: Anything with ``snapshot() -> Snapshot`` (the live session), read at scrape time
            until :meth:`ExporterHandle.update` pushes snapshots; may be ``None``.
        port: TCP port; 0 picks a free one (see ``handle.port``).
        addr: Address to bind; 127.0.0.1 by default, so nothing is exposed beyond this machine.

    Raises:
        UserError: prometheus-client is not installed, or the address/port cannot be bound.
    """
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise UserError("--prometheus needs the prometheus-client package: "
                        "pip install 'gpudoctor[prometheus]'.", ExitCode.USAGE) from None
    handle = ExporterHandle(session, addr, port)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(handle))
    try:
        server, thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise UserError(f"cannot serve Prometheus metrics on {addr}:{port}: {exc.strerror or exc}; "
                        "pick another --prometheus port.", ExitCode.USAGE) from None
    handle._server, handle._thread = server, thread
    handle.port = int(server.server_address[1])
    return handle
