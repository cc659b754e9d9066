"""Where each rank's main thread is right now, from one ``py-spy dump`` per rank (GD610/GD613 evidence).

Why this exists: a hang names no culprit by itself — every rank just stops. One stack per rank does:
the ranks waiting for a peer sit in ``all_reduce``/``barrier``, the culprit somewhere else (a read,
a lock, its own collective). This turns a dump into one short line per rank: the innermost frame of
the main thread and the first frame outside that frame's package that led there, e.g.
``all_reduce (distributed_c10d.py:2800) from main (train.py:62)``.

Check by hand: ``py-spy dump --pid <pid>``.

What it must not do: pause the ranks (``--nonblocking``), raise, or take more than a few seconds
per rank; a rank that cannot be read is left out. It is called only once a stall is suspected, not
every window.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Mapping

from gpudoctor.live.stacks import find_pyspy

log = logging.getLogger("gpudoctor.live.rankwhere")

_THREAD_RE = re.compile(r"^Thread (?:0x)?(?P<tid>[0-9a-fA-F]+)\b")
_FRAME_RE = re.compile(r"^\s+(?P<fn>\S.*?) \((?P<file>[^()]*):(?P<line>\d+)\)\s*$")
#: The standard library's directory, when py-spy shows a full path.
_STDLIB_RE = re.compile(r"/lib/python3[^/]*/")


def parse_dump(text: str, pid: int) -> str | None:
    """One line for the main thread of a ``py-spy dump``: innermost frame, then the user's frame.

    The main thread is the one whose id is the process id (Linux); else the first thread listed.
    """
    threads: list[tuple[int | None, list[tuple[str, str, int]]]] = []
    for line in text.splitlines():
        m = _THREAD_RE.match(line)
        if m:
            tid = m.group("tid")
            threads.append((int(tid) if tid.isdigit() else int(tid, 16), []))
            continue
        f = _FRAME_RE.match(line)
        if f and threads:
            threads[-1][1].append((f.group("fn"), f.group("file"), int(f.group("line"))))
    main = next((frames for tid, frames in threads if tid == pid), threads[0][1] if threads else [])
    if not main:
        return None
    inner = _frame(main[0])
    package = _package(main[0][1])
    caller = next((fr for fr in main[1:] if _package(fr[1]) != package), None)
    return f"{inner} from {_frame(caller)}" if caller is not None else inner


def _package(path: str) -> str:
    """The package a frame's file belongs to: its first path component as py-spy shows it (py-spy
    shortens paths under ``sys.path``: ``torch/distributed/distributed_c10d.py``)."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        stdlib = _STDLIB_RE.search(path)
        if stdlib:
            path = path[stdlib.end():]
    return path.lstrip("/").split("/", 1)[0]


def _frame(frame: tuple[str, str, int]) -> str:
    fn, path, line = frame
    return f"{fn} ({path.rsplit('/', 1)[-1]}:{line})"


def where_is(pid: int, binary: str | None = None, timeout_s: float = 5.0) -> str | None:
    """Where ``pid``'s main thread is now, or ``None`` (no py-spy, no permission, gone, timed out)."""
    binary = binary or find_pyspy()
    if binary is None:
        return None
    try:
        done = subprocess.run([binary, "dump", "--pid", str(pid), "--nonblocking"], capture_output=True,
                              text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("py-spy dump of %d failed: %s", pid, exc)
        return None
    if done.returncode != 0:
        log.debug("py-spy dump of %d: %s", pid, done.stderr.strip()[-200:])
        return None
    return parse_dump(done.stdout, pid)


def where_ranks(pids_by_rank: Mapping[int, int], timeout_s: float = 5.0) -> dict[int, str]:
    """rank → where its main thread is, for the ranks that could be read (one dump each)."""
    binary = find_pyspy()
    out = {}
    for rank, pid in sorted(pids_by_rank.items()):
        where = where_is(pid, binary, timeout_s)
        if where:
            out[rank] = where
    return out
