"""The profile traces an agent writes into its private directory (/tmp/gpudoctor-<uid> and the like):
removed once analysed, renamed ``kept-…`` when the user keeps them, and swept when a session that would
have analysed them died first.

Why the sweep: a trace is removed by the session that asked for it; one whose session was killed
(or whose tool predates the removal) stayed forever. The sweep, run when a session starts, removes only
``trace-<pid>-<ms>.pt.trace.json`` files of this tool's own naming, in the private directories, older
than :data:`STALE_AFTER_S` and written by a process that is gone. Kept traces (``kept-…``) and
anything else stay.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

from gpudoctor.agent.paths import candidate_dirs

STALE_AFTER_S = 24 * 3600
KEPT_PREFIX = "kept-"
_AGENT_TRACE = re.compile(r"^trace-(\d+)-\d+(?:-[\w.-]+)?\.pt\.trace\.json(?:\.gz)?$")


def private_dirs(uids: Iterable[int]) -> set[Path]:
    """The resolved private directories of these users' agents."""
    return {d.resolve() for uid in set(uids) for d in candidate_dirs(uid)}


def dispose(paths: list[str], analysed: bool, keep: bool, dirs: set[Path]) -> str:
    """Remove (or with ``keep`` rename ``kept-…``) analysed traces inside ``dirs``; what the note should add.
    A trace that could not be analysed, or one outside those directories, stays as it is."""
    if not analysed:
        return ""
    done: list[Path] = []
    for path in paths:
        file = Path(path)
        if file.resolve().parent not in dirs or not file.name.startswith("trace-"):
            continue
        with contextlib.suppress(OSError):
            if keep:
                target = file.with_name(KEPT_PREFIX + file.name)
                file.rename(target)
                done.append(target)
            else:
                file.unlink()
                done.append(file)
    if keep:
        if not done:
            return "; kept"
        where = str(done[0]) if len(done) == 1 else f"{done[0].parent}/{KEPT_PREFIX}trace-* ({len(done)} files)"
        return f"; kept at {where}"
    return "; removed after the analysis (--keep-traces keeps it)" if done else ""


def sweep_stale(dirs: Iterable[Path], now: float | None = None, stale_after_s: float = STALE_AFTER_S) -> int:
    """Remove the agent traces in ``dirs`` older than ``stale_after_s`` whose writer is gone; how many."""
    now = time.time() if now is None else now
    removed = 0
    for directory in dirs:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            match = _AGENT_TRACE.match(entry.name)
            if match is None or psutil.pid_exists(int(match.group(1))):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if entry.is_file(follow_symlinks=False) and now - st.st_mtime > stale_after_s:
                    os.unlink(entry.path)
                    removed += 1
    return removed

