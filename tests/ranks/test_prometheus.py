"""The Prometheus endpoint, scraped over HTTP on 127.0.0.1.

The per-rank numbers and findings come from a real 2-rank DDP run (input-slowed rank 1) through
the straggler tracker and the rules engine; the GPU reading is a recorded-shape sample (no GPU here).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.exitcodes import UserError
from gpudoctor.live.samples import AgentState, GpuSample, ProcessSample, Snapshot
from gpudoctor.live.stragglers import StragglerTracker, rank_factsets, rank_table
from gpudoctor.model import Source

from .conftest import to_windows

prom_parser = pytest.importorskip("prometheus_client.parser")
from gpudoctor.live.prometheus import start_exporter  # noqa: E402

Runs = Callable[[str], dict[int, list[dict]]]


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    out = {}
    for fam in prom_parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(metrics: dict, metric: str, /, **labels: str) -> float | None:
    for (n, lab), v in metrics.items():
        if n == metric and all(dict(lab).get(k) == val for k, val in labels.items()):
            return v
    return None


def _snapshot_from_run(rows: dict[int, list[dict]]) -> Snapshot:
    tracker = StragglerTracker()
    report = None
    for i, w in enumerate(to_windows(rows)):
        report = tracker.update(w, now=float(i))
    assert report is not None
    findings = evaluate(load_catalog(), rank_factsets(report), [Source.LIVE]).findings
    gpu = GpuSample(timestamp=time.time(), index=0, name="NVIDIA H200", uuid="GPU-0", util_pct=37.0,
                    mem_used_mib=1024.0, mem_total_mib=143771.0, power_w=250.0, throttle_reasons=("sw_power_cap",))
    pid = rows[0][-1]["pid"]
    return Snapshot(timestamp=time.time(), started_at=time.time() - 30, target_pid=pid,
                    process=ProcessSample(timestamp=time.time(), pid=pid, alive=True), gpus=(gpu,), shm=None,
                    stacks=None, steps=None, agent=AgentState("connected"), findings=tuple(findings),
                    rank_table=rank_table(report))


def test_scrape_shows_ranks_gpus_and_findings(ddp_runs: Runs) -> None:
    snap = _snapshot_from_run(ddp_runs("input"))
    handle = start_exporter(None, 0)
    try:
        assert handle.addr == "127.0.0.1" and handle.port > 0
        metrics = _scrape(handle.url)
        assert _value(metrics, "gpudoctor_up") is None  # nothing published yet: no per-target series
        handle.update(snap)
        metrics = _scrape(handle.url)
    finally:
        handle.close()
    assert _value(metrics, "gpudoctor_up") == 1.0
    step0 = _value(metrics, "gpudoctor_step_time_seconds", rank="0")
    step1 = _value(metrics, "gpudoctor_step_time_seconds", rank="1")
    assert step0 and step1 and 0.5 < step0 / step1 < 2.0          # synchronous DDP: equal step times
    assert _value(metrics, "gpudoctor_data_wait_ratio", rank="1") > 0.5 > _value(
        metrics, "gpudoctor_data_wait_ratio", rank="0")
    assert _value(metrics, "gpudoctor_straggler_score", rank="1") < 0.75
    assert _value(metrics, "gpudoctor_rank_status", rank="1", status="straggler", cause="input") == 1.0
    assert _value(metrics, "gpudoctor_steps_total", rank="0") == float(snap.rank_table[0]["steps_total"])
    assert _value(metrics, "gpudoctor_gpu_utilization_ratio", gpu="0") == pytest.approx(0.37)
    assert _value(metrics, "gpudoctor_gpu_memory_used_bytes", gpu="0") == 1024.0 * 2**20
    assert _value(metrics, "gpudoctor_gpu_throttle_reason", gpu="0", reason="sw_power_cap") == 1.0
    assert _value(metrics, "gpudoctor_finding_active", code="GD601", name="straggler-rank",
                  severity="warning", rank="1") == 1.0
    assert _value(metrics, "gpudoctor_findings", severity="warning") >= 1.0


def test_cleared_finding_disappears_from_the_next_scrape(ddp_runs: Runs) -> None:
    snap = _snapshot_from_run(ddp_runs("input"))
    handle = start_exporter(None, 0)
    try:
        handle.update(snap)
        assert _value(_scrape(handle.url), "gpudoctor_finding_active", code="GD601") == 1.0
        handle.update(Snapshot(**{**snap.__dict__, "findings": ()}))
        assert _value(_scrape(handle.url), "gpudoctor_finding_active", code="GD601") is None
    finally:
        handle.close()


def test_busy_port_is_one_clear_user_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UserError, match="cannot serve Prometheus metrics on 127.0.0.1"):
            start_exporter(None, port)


@pytest.mark.slow
def test_scrape_pulls_from_a_live_session_on_a_real_process() -> None:
    """Pull mode: no update() calls; each scrape reads the live session's current snapshot."""
    from gpudoctor.live.session import LiveSession

    proc = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: sum(range(10000)); time.sleep(0.01)"])
    try:
        with LiveSession(proc.pid, load_catalog(), use_agent=False, use_stacks=False, interval_s=0.2) as session:
            handle = start_exporter(session, 0)
            try:
                deadline = time.time() + 20
                metrics = _scrape(handle.url)
                while _value(metrics, "gpudoctor_up", pid=str(proc.pid)) is None and time.time() < deadline:
                    time.sleep(0.3)
                    metrics = _scrape(handle.url)
                assert _value(metrics, "gpudoctor_up", pid=str(proc.pid)) == 1.0
                proc.kill()
                proc.wait()
                deadline = time.time() + 20
                while _value(metrics, "gpudoctor_up", pid=str(proc.pid)) != 0.0 and time.time() < deadline:
                    time.sleep(0.3)
                    metrics = _scrape(handle.url)
                assert _value(metrics, "gpudoctor_up", pid=str(proc.pid)) == 0.0
            finally:
                handle.close()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_attach_headless_prometheus_cli(tmp_path) -> None:
    """``gpudoctor attach PID --headless --prometheus 0``: serves, is scraped, reports on Ctrl-C."""
    import signal

    target = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: sum(range(10000)); time.sleep(0.01)"])
    gpudoctor = Path(sys.executable).parent / "gpudoctor"
    cli = subprocess.Popen([str(gpudoctor), "attach", str(target.pid), "--headless", "--prometheus", "0",
                            "--no-agent", "--no-stacks", "--format", "json", "--window", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert cli.stderr is not None
        line = cli.stderr.readline()
        assert "Prometheus metrics at http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].strip()
        deadline = time.time() + 30
        metrics = _scrape(url)
        while _value(metrics, "gpudoctor_up", pid=str(target.pid)) != 1.0 and time.time() < deadline:
            time.sleep(0.3)
            metrics = _scrape(url)
        assert _value(metrics, "gpudoctor_up", pid=str(target.pid)) == 1.0
        time.sleep(2.0)  # let the watch begin: a Ctrl-C during start-up ends without a report
        cli.send_signal(signal.SIGINT)
        stdout, _ = cli.communicate(timeout=30)
        assert cli.returncode == 130
        assert json.loads(stdout)["target_pid"] == target.pid
        assert target.poll() is None, "the watched process keeps running"
    finally:
        cli.kill()
        target.kill()
        target.wait()
