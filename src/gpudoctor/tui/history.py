"""A bounded history of live snapshots, and the series the sparklines draw from it.

Why it exists: the dashboard shows trends (utilisation, tensor-core activity, memory, step time)
and the live session may or may not keep a history itself. When the session offers one
(``session.history()``), the app uses it; otherwise the app feeds snapshots here.
It must not compute metrics: it only picks values the collectors measured, in time order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from gpudoctor.live.samples import Snapshot

#: Samples kept per series: two minutes at a 1 s refresh is what fits a wide terminal.
DEFAULT_LENGTH = 120


class SnapshotHistory:
    """The last ``length`` snapshots, oldest first."""

    def __init__(self, length: int = DEFAULT_LENGTH) -> None:
        self._snapshots: deque[Snapshot] = deque(maxlen=length)

    def add(self, snapshot: Snapshot) -> None:
        """Append ``snapshot`` unless it is the same moment as the last one."""
        if self._snapshots and self._snapshots[-1].timestamp == snapshot.timestamp:
            return
        self._snapshots.append(snapshot)

    def extend(self, snapshots: Iterable[Snapshot]) -> None:
        for snapshot in snapshots:
            self.add(snapshot)

    def __len__(self) -> int:
        return len(self._snapshots)

    def gpu_series(self, index: int, field_name: str) -> list[float]:
        """Values of ``GpuSample.<field_name>`` for GPU ``index``; unknown readings are skipped."""
        out: list[float] = []
        for snapshot in self._snapshots:
            for gpu in snapshot.gpus:
                if gpu.index == index:
                    value = getattr(gpu, field_name, None)
                    if value is not None:
                        out.append(float(value))
                    break
        return out

    def step_series(self, field_name: str) -> list[float]:
        """Values of ``StepStats.<field_name>`` over time; unknown readings are skipped."""
        out: list[float] = []
        for snapshot in self._snapshots:
            if snapshot.steps is not None:
                value = getattr(snapshot.steps, field_name, None)
                if value is not None:
                    out.append(float(value))
        return out
