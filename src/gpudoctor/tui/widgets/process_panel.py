"""The process panel: the target's CPU and memory, its DataLoader workers, and /dev/shm.

Why it exists: most slow jobs wait on the host — a saturated worker pool, a CPU quota smaller than
the thread count, a tiny /dev/shm. It shows the process and shm collectors' samples as given; it
computes nothing.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gpudoctor.live.samples import ProcessSample, ShmSample
from gpudoctor.tui.format import mib, num, pct, update_static


def process_text(process: ProcessSample | None, shm: ShmSample | None) -> Text:
    """The panel's lines."""
    text = Text()
    if process is None:
        text.append("no process readings", style="dim")
    else:
        text.append("cpu ")
        text.append(pct(process.cpu_pct), style="bold")
        text.append(f"  rss {mib(process.rss_mib)}  thr {num(process.num_threads)}")
        if process.cgroup_cpu_quota is not None:
            text.append(f"\ncgroup quota {process.cgroup_cpu_quota:g} CPUs")
        loaders = [w for w in process.workers if w.role == "dataloader"]
        text.append(f"\nloader workers {len(loaders)}")
        if loaders:
            busy = [w.cpu_pct for w in loaders if w.cpu_pct is not None]
            if busy:
                text.append(f"  cpu {min(busy):.0f}–{max(busy):.0f}% each")
        elif process.alive:
            text.append(" (in main process)", style="yellow")
    text.append("\n/dev/shm ")
    if shm is None or shm.total_mib is None:
        text.append("unknown", style="dim")
    else:
        text.append(f"{mib(shm.free_mib)} free of {mib(shm.total_mib)}")
        if shm.target_segments_mib:
            text.append(f"  job holds {mib(shm.target_segments_mib)}")
        if shm.error_text_seen:
            text.append(f"\n{shm.error_text_seen}", style="bold red")
    return text


class ProcessPanel(Static):
    """Shows :func:`process_text`."""

    DEFAULT_CSS = "ProcessPanel { height: auto; }"

    def show(self, process: ProcessSample | None, shm: ShmSample | None) -> None:
        update_static(self, process_text(process, shm))
