"""Observer children run at the level set for them — not lower still when started from a niced thread."""

from __future__ import annotations

import os
import subprocess
import threading

from gpudoctor.live.priority import OBSERVER_NICE, SAMPLER_NICE, lower_thread_priority, observer_child_setup


def _child_nice(niced_thread: bool, level: int) -> int:
    found: list[int] = []

    def start() -> None:
        if niced_thread:
            lower_thread_priority()
        out = subprocess.run(["sh", "-c", "ps -o ni= -p $$"], capture_output=True, text=True, check=True,
                             preexec_fn=observer_child_setup(level))
        found.append(int(out.stdout.strip()))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    return found[0]


def test_the_analysis_child_of_a_collector_thread_runs_at_the_observer_level() -> None:
    # a collector thread is niced already; the child used to add OBSERVER_NICE on top (19), and the
    # profile analysis then starved behind CI's busy test workers
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert _child_nice(niced_thread=True, level=OBSERVER_NICE) == max(OBSERVER_NICE, own)
    assert _child_nice(niced_thread=False, level=OBSERVER_NICE) == max(OBSERVER_NICE, own)


def test_py_spy_runs_at_the_lowest_priority() -> None:
    assert _child_nice(niced_thread=True, level=SAMPLER_NICE) == 19
