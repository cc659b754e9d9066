"""The fork pool behind ``analyze --jobs``: every item once, in order; errors and dead workers said so."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from gpudoctor.forkpool import ForkPool, WorkerDied, can_fork

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork pool needs os.fork")


def _square_with_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def test_every_item_once_in_order_across_workers() -> None:
    items = [(i,) for i in range(50)]
    with ForkPool(_square_with_pid, items, workers=3) as pool:
        results = pool.results()
    assert [r[0] for r in results] == [i * i for i in range(50)]
    assert os.getpid() not in {pid for _, pid in results}
    for pid in {pid for _, pid in results}:  # leaving the block reaped every worker
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_more_task_records_than_a_pipe_holds() -> None:
    # 20 000 indices are 80 kB: more than the 64 kB a pipe holds, so part is fed while collecting
    items = [(i,) for i in range(20_000)]
    results = ForkPool(_square_with_pid, items, workers=2).results()
    assert [r[0] for r in results] == [i * i for i in range(20_000)]


def _big(x: int) -> bytes:
    return bytes([x % 256]) * 300_000  # larger than a pipe's buffer: written in pieces


def test_results_larger_than_a_pipe_buffer() -> None:
    results = ForkPool(_big, [(i,) for i in range(6)], workers=2).results()
    assert [len(r) for r in results] == [300_000] * 6 and results[5][0] == 5


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError(f"bad item {x}")
    return x


def test_an_exception_in_a_worker_is_raised_in_the_parent() -> None:
    with pytest.raises(ValueError, match="bad item 3"):
        ForkPool(_fail_on_three, [(i,) for i in range(8)], workers=2).results()


def _die_on_two(x: int) -> int:
    if x == 2:
        os._exit(9)
    return x


def test_a_worker_that_dies_is_worker_died() -> None:
    with pytest.raises(WorkerDied):
        ForkPool(_die_on_two, [(i,) for i in range(6)], workers=2).results()


def _sleep(x: int) -> int:
    time.sleep(30)
    return x


def test_close_ends_running_workers_at_once() -> None:
    pool = ForkPool(_sleep, [(i,) for i in range(4)], workers=2)
    pids = list(pool._workers.values())
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 10
    for pid in pids:  # reaped: no such child any more
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_killed_worker_while_collecting_is_worker_died() -> None:
    pool = ForkPool(_sleep, [(i,) for i in range(2)], workers=2)
    os.kill(next(iter(pool._workers.values())), signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(WorkerDied, match="signal 9"):
        pool.results()
    assert time.monotonic() - started < 10  # the other worker was ended, not waited for


def test_can_fork_only_without_other_threads() -> None:
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not can_fork()
    finally:
        stop.set()
        thread.join()


def test_a_cgroup_cpu_quota_caps_the_usable_cores(tmp_path: Path) -> None:
    from gpudoctor.forkpool import _cgroup_cpu_quota, usable_cores

    v2 = tmp_path / "v2"
    (v2 / "kubepods" / "pod1").mkdir(parents=True)
    (v2 / "kubepods" / "pod1" / "cpu.max").write_text("max 100000\n")  # no limit here ...
    (v2 / "kubepods" / "cpu.max").write_text("250000 100000\n")  # ... but 2.5 CPUs on the parent
    (tmp_path / "cg2").write_text("0::/kubepods/pod1\n")
    assert _cgroup_cpu_quota(v2, tmp_path / "cg2") == 3
    v1 = tmp_path / "v1" / "cpu,cpuacct" / "docker" / "abc"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("400000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cg1").write_text("5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n")
    assert _cgroup_cpu_quota(tmp_path / "v1", tmp_path / "cg1") == 4
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert _cgroup_cpu_quota(tmp_path / "v1", tmp_path / "cg1") is None
    assert _cgroup_cpu_quota(tmp_path / "v1", tmp_path / "absent") is None
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)


def _when(x: int) -> int:
    return time.monotonic_ns()


def test_items_are_taken_in_the_order_given() -> None:
    order = [3, 0, 4, 1, 2]
    taken = ForkPool(_when, [(i,) for i in range(5)], workers=1, order=order).results()
    assert sorted(range(5), key=lambda i: taken[i]) == order  # results in item order, run in `order`
    with pytest.raises(ValueError):
        ForkPool(_when, [(i,) for i in range(3)], workers=1, order=[0, 0, 1])


def test_workers_are_capped_by_the_open_file_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor import forkpool

    real_sysconf = os.sysconf
    monkeypatch.setattr(forkpool.os, "sysconf",
                        lambda name: 100 if name == "SC_OPEN_MAX" else real_sysconf(name))
    with ForkPool(_square_with_pid, [(i,) for i in range(40)], workers=40) as pool:
        assert len(pool._workers) == 18  # (100 - 64) // 2: a pipe end per worker stays open here
        assert [r[0] for r in pool.results()] == [i * i for i in range(40)]
