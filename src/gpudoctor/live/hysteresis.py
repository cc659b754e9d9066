"""Keeps live findings steady: a finding shows once it held in N of the last N + 1 windows, and
goes away only after M consecutive windows without it — so a dashboard never flaps.

N of N + 1, not N in a row: a bursty problem (DataLoader workers that deliver in bursts, a wait that
hovers around its threshold) holds in every other window and would never show with N in a row,
although it costs the job time in half of them (seen on the H200: pytorch/examples ImageNet's input
wait crossed 10% in alternate windows and GD102 did not hold).

Pure bookkeeping over :class:`~gpudoctor.model.Finding` keys (rule code + place); no threads.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpudoctor.model import Finding, sort_findings


class Hysteresis:
    """Feed each window's raw findings to :meth:`update`; it returns the findings to show."""

    def __init__(self, on_windows: int = 2, off_windows: int = 2) -> None:
        self.on_windows = max(1, on_windows)
        self.off_windows = max(1, off_windows)
        self._recent: dict[tuple[str, str], list[bool]] = {}   # key → held? in the last N + 1 windows
        self._misses: dict[tuple[str, str], int] = {}
        self._latest: dict[tuple[str, str], Finding] = {}
        self._active: set[tuple[str, str]] = set()
        self.first_seen: dict[tuple[str, str], float] = {}   # key → time it became active

    def update(self, raw: Iterable[Finding], now: float) -> list[Finding]:
        seen = set()
        for finding in raw:
            key = finding.key
            seen.add(key)
            recent = self._recent.setdefault(key, [])
            recent.append(True)
            del recent[:-(self.on_windows + 1)]
            self._misses[key] = 0
            self._latest[key] = finding
            if key not in self._active and sum(recent) >= self.on_windows:
                self._active.add(key)
                self.first_seen.setdefault(key, now)
        for key in list(self._recent):   # every key with a hit in the last N + 1 windows
            if key in seen:
                continue
            recent = self._recent[key]
            recent.append(False)
            del recent[:-(self.on_windows + 1)]
            self._misses[key] = self._misses.get(key, 0) + 1
            if key in self._active and self._misses[key] >= self.off_windows:
                self._active.discard(key)
            if key not in self._active:
                self._latest.pop(key, None)
                if not any(recent):
                    del self._recent[key]
        return sort_findings([self._latest[k] for k in self._active])
