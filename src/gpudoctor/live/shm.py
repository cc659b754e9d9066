"""/dev/shm as the training process sees it, and what its DataLoader workers keep there.

DataLoader workers hand batches to the main process through shared-memory segments: torch creates
``/dev/shm/torch_*`` files (or ``/dev/shm/__KMP_*``), maps them, and usually unlinks them at once,
so they only show up as open descriptors or mappings (``/dev/shm/torch_… (deleted)``). We read the
size of the target's own ``/dev/shm`` through ``/proc/<pid>/root`` (so a container's or a private
mount namespace's tmpfs is measured, not ours), the segments the process tree holds, and — when the
job writes its output to a file — whether that output contains the well-known error text of a full
``/dev/shm``.

Check by hand: ``df -h /dev/shm`` (inside the container) and ``ls -l /proc/<pid>/fd | grep shm``.

Read-only; never raises: unreadable parts are ``None``.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterable

from gpudoctor.live.samples import ShmSample

log = logging.getLogger("gpudoctor.live.shm")

#: Text a job prints when /dev/shm is too small (PyTorch DataLoader, glibc, NCCL).
SHM_ERROR_TEXTS = (
    "is killed by signal: Bus error",
    "No space left on device (28)",
    "unable to write to file </torch_",
    "insufficient shared memory (shm)",
    "Error while creating shared memory segment",
)
_TAIL_BYTES = 256 * 1024


def shm_usage(pid: int | None) -> tuple[float | None, float | None]:
    """(total MiB, free MiB) of /dev/shm in the mount namespace of ``pid`` (ours when None)."""
    for path in ([f"/proc/{pid}/root/dev/shm"] if pid else []) + ["/dev/shm"]:
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        return st.f_blocks * st.f_frsize / 2**20, st.f_bavail * st.f_frsize / 2**20
    return None, None


def tree_segments(pids: Iterable[int]) -> tuple[int, float]:
    """Number and total MiB of distinct /dev/shm files the processes hold open or mapped."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
                if not target.startswith("/dev/shm/"):
                    continue
                st = os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_size
        _add_mapped(pid, seen)
    return len(seen), sum(seen.values()) / 2**20


def _add_mapped(pid: int, seen: dict[tuple[int, int], int]) -> None:
    """Segments that are mapped but whose descriptor was closed (file_system sharing strategy)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            lines = [ln for ln in fh if "/dev/shm/" in ln]
    except OSError:
        return
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        start, _, end = fields[0].partition("-")
        dev_major, _, dev_minor = fields[3].partition(":")
        try:
            key = (os.makedev(int(dev_major, 16), int(dev_minor, 16)), int(fields[4]))
            size = int(end, 16) - int(start, 16)
        except ValueError:
            continue
        if key not in seen and key[1] != 0:
            seen[key] = size


def output_error_text(pid: int) -> str | None:
    """The shm error line from the job's stdout/stderr, when they go to a regular file."""
    for fd in (2, 1):
        path = f"/proc/{pid}/fd/{fd}"
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        try:
            with open(path, "rb") as fh:
                fh.seek(max(0, st.st_size - _TAIL_BYTES))
                tail = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        for line in reversed(tail.splitlines()):
            if any(text in line for text in SHM_ERROR_TEXTS):
                return line.strip()[:200]
    return None


class ShmCollector:
    """Samples /dev/shm for the target; :meth:`sample` takes the target tree's PIDs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def sample(self, tree_pids: Iterable[int] = ()) -> ShmSample:
        total, free = shm_usage(self.pid)
        pids = [self.pid, *[p for p in tree_pids if p != self.pid]]
        count, size_mib = tree_segments(pids)
        return ShmSample(timestamp=time.time(), total_mib=total, free_mib=free,
                         target_segments_mib=size_mib, target_segments=count,
                         error_text_seen=output_error_text(self.pid))
