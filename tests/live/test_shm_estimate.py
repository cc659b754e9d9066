"""GD103's /dev/shm estimate: the agent measures the DataLoader's batch size, workers and prefetch in a
real training process; workers × prefetch × batch against the /dev/shm size decides the finding."""

from __future__ import annotations

import time

import pytest
from live_helpers import start_workload, stop

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.facts import build_factsets
from gpudoctor.live.samples import ProcessSample, ShmSample, StepStats, WorkerSample
from gpudoctor.model import Source

# workload.py "workers": batches of 8 images 3×32×32 float32 plus 8 int64 labels, 2 workers, prefetch 2.
BATCH_MIB = (8 * 3 * 32 * 32 * 4 + 8 * 8) / 2**20


def _gd103(steps: StepStats, shm_total_mib: float) -> list:
    proc = ProcessSample(timestamp=time.time(), pid=10, alive=True, cpu_pct=50.0, rss_mib=500.0, num_threads=4,
                         workers=(WorkerSample(pid=11, role="dataloader", cpu_pct=10.0, rss_mib=100.0),
                                  WorkerSample(pid=12, role="dataloader", cpu_pct=10.0, rss_mib=100.0)))
    shm = ShmSample(timestamp=time.time(), total_mib=shm_total_mib, free_mib=shm_total_mib * 0.9)
    factsets = build_factsets(10, [], proc, shm, None, steps, 10.0)
    return [f for f in evaluate(load_catalog(), factsets, [Source.LIVE]).findings if f.code == "GD103"]


@pytest.fixture(scope="module")
def loader_stats() -> StepStats:
    pytest.importorskip("hypno")
    from gpudoctor.agent.inject import inject

    target = start_workload("workers")
    try:
        result = inject(target.pid)
        assert result.ok, result.reason
        with result.client as agent:
            deadline = time.monotonic() + 60
            stats = agent.stats(5.0)
            while stats.loader_batch_mib is None and time.monotonic() < deadline:
                time.sleep(0.5)
                stats = agent.stats(5.0)
            agent.detach()
        return stats
    finally:
        stop(target)


def test_agent_measures_the_loaders_batch_workers_and_prefetch(loader_stats: StepStats) -> None:
    assert loader_stats.loader_workers == 2
    assert loader_stats.loader_prefetch_factor == 2
    assert loader_stats.loader_batch_mib == pytest.approx(BATCH_MIB, rel=1e-6)


def test_estimate_decides_gd103(loader_stats: StepStats) -> None:
    needed = 2 * 2 * BATCH_MIB                                 # ≈ 0.38 MiB in flight
    small = _gd103(loader_stats, shm_total_mib=0.5)            # more than half of 0.5 MiB taken
    assert len(small) == 1 and "the DataLoader keeps about" in small[0].message, small
    evidence = {e.name: e.value for e in small[0].evidence}
    assert evidence["shm_needed_mib"] == pytest.approx(needed, rel=1e-6)
    assert "2 workers × prefetch_factor 2" in small[0].message
    # 4 GiB: neither the estimate nor the 1 GiB minimum fires
    assert _gd103(loader_stats, shm_total_mib=4096.0) == []
