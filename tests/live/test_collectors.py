"""Collectors on real processes of this machine (no fakes): /proc, /dev/shm, job output."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gpudoctor.live.process import ProcessCollector, cgroup_cpu_quota, python_version, read_environ
from gpudoctor.live.shm import ShmCollector, output_error_text, shm_usage, tree_segments


def test_process_sample_of_a_real_child_with_env_and_affinity() -> None:
    env = {**os.environ, "NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "3", "RANK": "1", "SECRET_TOKEN": "x"}
    child = subprocess.Popen([sys.executable, "-c", "print('up', flush=True)\nwhile True: sum(range(10000))"],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        # sample once the child runs its own program: between fork and exec its environ is still ours
        assert child.stdout is not None and child.stdout.readline().strip() == "up"
        collector = ProcessCollector(child.pid)
        first = collector.sample()
        time.sleep(0.5)
        second = collector.sample()
        assert first.cpu_pct is None and second.cpu_pct is not None and second.cpu_pct > 5
        assert second.python_version == f"{sys.version_info[0]}.{sys.version_info[1]}"
        assert second.env["NCCL_DEBUG"] == "INFO" and second.rank == 1
        assert "SECRET_TOKEN" not in second.env, "only performance-relevant variables are read"
        assert set(second.cpu_affinity or ()) == os.sched_getaffinity(child.pid)
        assert second.rss_mib and second.rss_mib > 1
        assert second.started_at is not None and 0 <= second.timestamp - second.started_at < 60  # just started
    finally:
        child.kill()
        child.wait()
    gone = collector.sample()
    assert gone.alive is False


def test_environ_and_cgroup_readers_do_not_raise_on_odd_pids() -> None:
    assert read_environ(2**22 + 7) == {}
    quota = cgroup_cpu_quota(os.getpid())
    assert quota is None or quota > 0
    assert python_version.__doc__


def test_shm_usage_matches_statvfs_and_segments_are_counted(tmp_path: Path) -> None:
    total, free = shm_usage(os.getpid())
    st = os.statvfs("/dev/shm")
    assert total == st.f_blocks * st.f_frsize / 2**20
    assert free is not None and 0 <= free <= total
    path = Path("/dev/shm") / f"torch_gdtest_{os.getpid()}"
    with open(path, "wb") as fh:
        fh.write(b"\0" * 2**20)
        count, mib = tree_segments([os.getpid()])
    path.unlink()
    assert count >= 1 and mib >= 1.0


def test_shm_error_text_in_the_jobs_log_file(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    line = ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
            "the workers are out of shared memory.")
    with open(log, "w") as fh:
        job = subprocess.Popen(["sh", "-c", f"echo '{line}' >&2; exec sleep 30"], stdout=fh, stderr=fh)
    try:
        deadline = time.monotonic() + 5
        while log.stat().st_size == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "killed by signal: Bus error" in (output_error_text(job.pid) or "")
        sample = ShmCollector(job.pid).sample([])
        assert sample.error_text_seen is not None
    finally:
        job.kill()
        job.wait()


def test_worker_roles_tell_a_forked_copy_from_a_program_the_parent_ran() -> None:
    # a parent with a forked child (a DataLoader worker's kind) and a `subprocess` program of its own
    code = ("import os, subprocess, sys, time\n"
            "prog = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "if os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\n"
            "print('up', flush=True)\ntime.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "up"
        time.sleep(0.3)          # the program has exec'd its own command line
        roles = sorted(w.role for w in ProcessCollector(parent.pid).sample().workers)
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()
    assert roles == ["dataloader", "program"]
