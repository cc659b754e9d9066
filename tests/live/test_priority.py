"""Observer children run at the observers' nice level — not lower still when started from a niced thread."""

from __future__ import annotations

import os
import subprocess
import threading

from gpudoctor.live.priority import OBSERVER_NICE, lower_thread_priority, observer_child_setup


def _child_nice(niced_thread: bool) -> int:
    found: list[int] = []

    def start() -> None:
        if niced_thread:
            lower_thread_priority()
        out = subprocess.run(["sh", "-c", "ps -o ni= -p $$"], capture_output=True, text=True, check=True,
                             preexec_fn=observer_child_setup())
        found.append(int(out.stdout.strip()))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    return found[0]


def test_child_of_a_collector_thread_runs_at_the_observer_level() -> None:
    # a collector thread is niced already; the child used to add OBSERVER_NICE on top (19)
    assert _child_nice(niced_thread=True) == max(OBSERVER_NICE, os.getpriority(os.PRIO_PROCESS, 0))


def test_child_of_an_unniced_thread_is_niced() -> None:
    assert _child_nice(niced_thread=False) == max(OBSERVER_NICE, os.getpriority(os.PRIO_PROCESS, 0))
